"""``blocks list`` and ``workflows list`` rows, read from stored JSON without the definition
models (issue 26), say what the parsed definitions say."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from langorch.cli.commands._definitions import block_row, workflow_row
from langorch.domain.builtins import builtin_blocks
from langorch.domain.definitions import BlockDefinition, PlanStep, ScheduleSpec, TaskPlan, Trigger
from langorch.domain.loading import load_file
from langorch.domain.stored import StoredBody

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*/definitions.*"))
CREATED_AT = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
TUESDAYS = ScheduleSpec(cron_expression="0 11 * * 2")


def _stored(definition: BlockDefinition | TaskPlan, body: dict[str, Any]) -> StoredBody:
    is_block = isinstance(definition, BlockDefinition)
    return StoredBody(
        kind="block" if is_block else "workflow",
        id=definition.block_id if isinstance(definition, BlockDefinition) else definition.plan_id,
        version=3,
        content_hash=definition.content_hash(),
        created_at=CREATED_AT,
        body=body,
        active_version=2,
    )


def _every_lists_columns(definition: BlockDefinition | TaskPlan) -> dict[str, Any]:
    """The columns ``blocks list`` and ``workflows list`` both have, for ``_stored``'s version."""
    return {
        "id": definition.block_id
        if isinstance(definition, BlockDefinition)
        else definition.plan_id,
        "version": 3,
        "name": definition.name,
        "content_hash": definition.content_hash(),
        "created_at": CREATED_AT,
    }


def _blocks() -> list[BlockDefinition]:
    return [b for path in EXAMPLES for b in load_file(path).blocks] + builtin_blocks()


def _workflows() -> list[TaskPlan]:
    step = PlanStep(step_id="order", kind="wait", wait={"seconds": 1})
    shorthand = TaskPlan(plan_id="lunch", steps=[step], schedule=TUESDAYS)
    both = shorthand.model_copy(
        update={"triggers": [Trigger(type="manual"), Trigger(type="schedule", schedule=TUESDAYS)]}
    )
    return [w for path in EXAMPLES for w in load_file(path).workflows] + [shorthand, both]


@pytest.mark.parametrize("block", _blocks(), ids=lambda b: b.block_id)
def test_a_block_row_from_its_stored_json_is_the_row_of_the_block(block: BlockDefinition) -> None:
    # Given a block stored as its JSON
    stored = _stored(block, block.model_dump(mode="json"))
    # When its `blocks list` row is read from that JSON
    row = block_row(stored)
    # Then it says what the parsed block says
    assert row == {
        **_every_lists_columns(block),
        "type": block.block_type.value,
        "category": block.category,
        "tags": block.tags,
    }


@pytest.mark.parametrize("plan", _workflows(), ids=lambda p: f"{p.plan_id}-{len(p.triggers)}")
def test_a_workflow_row_from_its_stored_json_is_the_row_of_the_workflow(plan: TaskPlan) -> None:
    # Given a workflow stored as its JSON (the examples, and the seed-000 schedule shorthand
    # alone and beside a schedule trigger)
    stored = _stored(plan, plan.model_dump(mode="json"))
    # When its `workflows list` row is read from that JSON
    row = workflow_row(stored)
    # Then it says what the parsed workflow says: its steps, every trigger (the shorthand's too)
    assert row == {
        **_every_lists_columns(plan),
        "active_version": 2,
        "steps": len(plan.steps),
        "triggers": [t.type for t in plan.all_triggers()],
    }


def test_fields_an_older_stored_version_lacks_read_as_the_models_defaults() -> None:
    # Given a block and a workflow stored before their listed fields existed (only the required)
    block = BlockDefinition(block_id="summarize")
    plan = TaskPlan(plan_id="digest", steps=[PlanStep(step_id="s", block_id="summarize")])
    old_block = _stored(block, {"block_id": "summarize"})
    old_plan = _stored(plan, {"plan_id": "digest", "steps": [{"step_id": "s"}]})
    # When their rows are read
    # Then the absent fields read as the models' defaults, as parsing the JSON would give them
    parsed_block = BlockDefinition.model_validate(old_block.body)
    parsed_plan = TaskPlan.model_validate(old_plan.body)
    assert block_row(old_block)["type"] == parsed_block.block_type.value == "action"
    assert (block_row(old_block)["category"], block_row(old_block)["tags"]) == ("", [])
    assert block_row(old_block)["name"] == parsed_block.name
    assert workflow_row(old_plan)["triggers"] == [t.type for t in parsed_plan.all_triggers()]
    assert workflow_row(old_plan)["name"] == parsed_plan.name == ""
