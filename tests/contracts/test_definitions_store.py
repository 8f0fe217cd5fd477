"""Contract of the definitions store (``DefinitionsStore`` + ``WorkflowSource``): the DynamoDB
adapter on moto and the in-memory fake — immutable versions, no-op re-registration, lookups."""

from __future__ import annotations

from typing import Any

import pytest

from langorch.adapters.dynamodb.definitions import DefinitionsRepository
from langorch.domain.definitions import BlockDefinition, PlanStep, TaskPlan
from tests.fakes import InMemoryDefinitions

Store = DefinitionsRepository | InMemoryDefinitions


@pytest.fixture(params=["fake", "dynamodb"])
def store(request: pytest.FixtureRequest) -> Store:
    if request.param == "fake":
        return InMemoryDefinitions()
    repository = DefinitionsRepository(request.getfixturevalue("dynamodb"), "definitions")
    repository.create_table()
    return repository


def _block(block_id: str = "summarize", **changes: Any) -> BlockDefinition:
    fields: dict[str, Any] = {
        "block_id": block_id,
        "input_keys": ["text"],
        "output_keys": ["summary"],
        "prompt_template": "Summarize: {{ text }}",
        **changes,
    }
    return BlockDefinition(**fields)


def _plan(plan_id: str = "digest", **changes: Any) -> TaskPlan:
    fields: dict[str, Any] = {
        "plan_id": plan_id,
        "steps": [PlanStep(step_id="summarize", block_id="summarize")],
        **changes,
    }
    return TaskPlan(**fields)


def test_the_first_put_is_version_1_and_new(store: Store) -> None:
    stored, new = store.put_workflow(_plan())
    assert (stored.version, new) == (1, True)
    assert store.get_workflow("digest") == stored


def test_identical_content_again_is_the_same_version_and_not_new(store: Store) -> None:
    first, _ = store.put_block(_block())
    again, new = store.put_block(_block())
    assert (again.version, new) == (first.version, False)


def test_changed_content_adds_a_version_and_keeps_the_old_one(store: Store) -> None:
    store.put_workflow(_plan(description="one"))
    second, new = store.put_workflow(_plan(description="two"))
    assert (second.version, new) == (2, True)
    old = store.get_workflow("digest", 1)
    assert old is not None and old.description == "one"
    latest = store.get_workflow("digest")
    assert latest is not None and latest.description == "two"


def test_absent_definitions_read_as_none(store: Store) -> None:
    store.put_workflow(_plan())
    assert store.get_workflow("nope") is None
    assert store.get_workflow("digest", 9) is None
    assert store.get_block("nope") is None


def test_listing_gives_the_latest_version_of_each_workflow_by_id(store: Store) -> None:
    store.put_workflow(_plan("b"))
    store.put_workflow(_plan("a", description="one"))
    store.put_workflow(_plan("a", description="two"))
    assert [(p.plan_id, p.version) for p in store.list_workflows()] == [("a", 2), ("b", 1)]
