"""The definitions store: immutable versions, no-op re-registration, lookups, races."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from langorch.adapters.dynamodb.definitions import DefinitionsRepository
from langorch.domain.definitions import BlockDefinition, PlanStep, TaskPlan
from langorch.domain.errors import StorageError

TABLE = "test-definitions"


def _block(block_id: str = "summarize", **changes: Any) -> BlockDefinition:
    fields: dict[str, Any] = {
        "block_id": block_id,
        "name": "Summarize",
        "input_keys": ["text"],
        "output_keys": ["summary"],
        "prompt_template": "Summarize: {{ text }}",
    }
    fields.update(changes)
    return BlockDefinition(**fields)


def _plan(plan_id: str = "digest", **changes: Any) -> TaskPlan:
    fields: dict[str, Any] = {
        "plan_id": plan_id,
        "steps": [PlanStep(step_id="summarize", block_id="summarize")],
    }
    fields.update(changes)
    return TaskPlan(**fields)


@pytest.fixture
def repo(dynamodb: Any) -> DefinitionsRepository:
    repository = DefinitionsRepository(
        dynamodb, TABLE, clock=lambda: datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    )
    repository.create_table()
    return repository


class _LosesFirstRace:
    """A DynamoDB client that lets a competitor store a version just before our first write.

    moto applies a transaction without a lock, so real threads could corrupt its state; this
    interleaves the competitor deterministically at the one moment that matters.
    """

    def __init__(self, client: Any, competitor: Any) -> None:
        self._client = client
        self._competitor = competitor

    def transact_write_items(self, **request: Any) -> Any:
        if self._competitor is not None:
            competitor, self._competitor = self._competitor, None
            competitor()
        return self._client.transact_write_items(**request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_first_put_stores_version_1(repo: DefinitionsRepository) -> None:
    # Given an empty store
    # When a block is put
    stored, created = repo.put_block(_block())
    # Then it is stored as version 1
    assert (stored.version, created) == (1, True)
    assert repo.get_block("summarize") == stored


def test_identical_content_twice_is_one_version(repo: DefinitionsRepository) -> None:
    # Given a stored block
    repo.put_block(_block())
    # When the same content is put again
    stored, created = repo.put_block(_block())
    # Then nothing new is written
    assert (stored.version, created) == (1, False)
    assert [v.version for v in repo.versions("block", "summarize")] == [1]


def test_changed_content_is_version_2_and_version_1_is_unchanged(
    repo: DefinitionsRepository,
) -> None:
    # Given a stored block
    first, _ = repo.put_block(_block())
    # When changed content is put
    second, created = repo.put_block(_block(prompt_template="Shorter: {{ text }}"))
    # Then it becomes version 2 and version 1 still holds the old content
    assert (second.version, created) == (2, True)
    assert repo.get_block("summarize", 1) == first
    assert repo.get_block("summarize", 2) == second
    assert repo.get_block("summarize") == second


def test_a_specific_version_is_shown_with_its_metadata(repo: DefinitionsRepository) -> None:
    # Given two versions of a workflow
    repo.put_workflow(_plan())
    repo.put_workflow(_plan(description="second"))
    # When version 1 is read with its metadata
    stored = repo.get_stored("workflow", "digest", 1)
    # Then it carries the version's own hash and creation time
    assert stored is not None
    assert stored.version == 1
    assert stored.content_hash == _plan().content_hash()
    assert stored.created_at == datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_absent_definitions_read_as_none(repo: DefinitionsRepository) -> None:
    # Given a stored block with one version
    repo.put_block(_block())
    # When an unknown id or version is read
    # Then the answer is None, not an error
    assert repo.get_block("nope") is None
    assert repo.get_block("summarize", 2) is None
    assert repo.get_workflow("summarize") is None


def test_list_returns_the_latest_of_each(repo: DefinitionsRepository) -> None:
    # Given two blocks, one of them changed, and a workflow
    repo.put_block(_block("a"))
    repo.put_block(_block("b"))
    repo.put_block(_block("b", description="changed"))
    repo.put_workflow(_plan())
    # When blocks and workflows are listed
    blocks = repo.list_blocks()
    workflows = repo.list_workflows()
    # Then each appears once, at its latest version
    assert [(b.block_id, b.version) for b in blocks] == [("a", 1), ("b", 2)]
    assert [(w.plan_id, w.version) for w in workflows] == [("digest", 1)]


def test_concurrent_puts_of_different_content_lose_no_version(dynamodb: Any) -> None:
    # Given a stored block, and a competitor that stores other content while we write
    DefinitionsRepository(dynamodb, TABLE).create_table()
    DefinitionsRepository(dynamodb, TABLE).put_block(_block())
    competitor = DefinitionsRepository(dynamodb, TABLE)
    ours = DefinitionsRepository(
        _LosesFirstRace(dynamodb, lambda: competitor.put_block(_block(description="theirs"))),
        TABLE,
    )
    # When we put different content and lose the first race
    stored, created = ours.put_block(_block(description="ours"))
    # Then the competitor got version 2, we got version 3, and both are kept
    assert (stored.version, created) == (3, True)
    versions = {v.version: v.definition.description for v in ours.versions("block", "summarize")}
    assert versions == {1: "", 2: "theirs", 3: "ours"}


def test_concurrent_put_of_the_same_content_is_a_no_op(dynamodb: Any) -> None:
    # Given a competitor that stores exactly our content while we write
    DefinitionsRepository(dynamodb, TABLE).create_table()
    competitor = DefinitionsRepository(dynamodb, TABLE)
    ours = DefinitionsRepository(
        _LosesFirstRace(dynamodb, lambda: competitor.put_block(_block())), TABLE
    )
    # When we put the same content
    stored, created = ours.put_block(_block())
    # Then we get the competitor's version 1 and write nothing
    assert (stored.version, created) == (1, False)


def test_missing_table_is_a_storage_error(dynamodb: Any) -> None:
    # Given no table
    repository = DefinitionsRepository(dynamodb, "missing")
    # When reading
    # Then a named StorageError says which table is missing
    with pytest.raises(StorageError, match="missing"):
        repository.get_block("summarize")
