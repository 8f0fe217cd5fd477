"""Registration use-cases against an in-memory store: validation, batches, pinning, built-ins."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from langorch.app.definitions import (
    register_block,
    register_files,
    register_workflow,
    seed_builtins,
    validate_files,
)
from langorch.domain.builtins import builtin_blocks
from langorch.domain.definitions import BlockDefinition, TaskPlan
from langorch.domain.errors import DefinitionError
from tests.fakes import InMemoryDefinitions

InMemoryStore = InMemoryDefinitions


def _block(block_id: str = "shorten", **changes: Any) -> dict[str, Any]:
    return {
        "block_id": block_id,
        "input_keys": ["text"],
        "output_keys": ["summary"],
        "prompt_template": "Shorten: {{ text }}",
        **changes,
    }


def _workflow(plan_id: str = "digest", *steps: dict[str, Any]) -> dict[str, Any]:
    return {
        "plan_id": plan_id,
        "inputs_schema": {"properties": {"text": {"type": "string"}}},
        "steps": list(steps) or [{"step_id": "shorten", "block_id": "shorten"}],
    }


def _write(path: Path, document: Any) -> str:
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return str(path)


def test_register_block_stores_a_valid_block() -> None:
    # Given an empty store
    store = InMemoryStore()
    # When a block is registered
    result = register_block(store, BlockDefinition.model_validate(_block()))
    # Then it is stored as version 1
    assert (result.kind, result.id, result.version, result.created) == ("block", "shorten", 1, True)
    assert store.get_block("shorten") is not None


def test_an_invalid_block_is_not_stored() -> None:
    # Given a block naming an LLM provider that does not exist
    block = BlockDefinition.model_validate(_block(llm_provider="no_such_provider"))
    store = InMemoryStore()
    # When it is registered
    with pytest.raises(DefinitionError) as raised:
        register_block(store, block)
    # Then the problem names the provider and nothing is stored
    assert any("no_such_provider" in p.message for p in raised.value.problems)
    assert store.get_block("shorten") is None


def test_a_block_needing_an_unbound_tool_is_stored() -> None:
    # Given a block needing a tool no registry binds yet (seed 000's `browser`)
    block = BlockDefinition.model_validate(_block(tools_required=["browser"]))
    store = InMemoryStore()
    # When it is registered
    result = register_block(store, block)
    # Then it is stored: the tool is a warning at validation, not an error
    assert (result.id, result.created) == ("shorten", True)


def test_validate_files_returns_warnings_apart_and_strict_refuses_them(tmp_path: Path) -> None:
    # Given a file whose block needs an unbound tool and whose workflow reads an input
    # nothing provides
    file = _write(
        tmp_path / "both.yaml",
        {
            "blocks": [_block(tools_required=["browser"])],
            "workflows": [_workflow() | {"inputs_schema": None}],
        },
    )
    # When it is validated, Then it is valid with both warnings, each located in its file
    batch = validate_files([file])
    assert [w.path for w in batch.warnings] == [
        f"{file}: block shorten: tools_required[0]",
        f"{file}: workflow digest: steps[0].block_id",  # reads `text`
        f"{file}: workflow digest: steps[0].block_id",  # needs `browser`
    ]
    # And with strict, the same findings are the errors that refuse it
    with pytest.raises(DefinitionError) as raised:
        validate_files([file], strict=True)
    assert raised.value.problems == batch.warnings
    # And with `browser` bound by the caller (a tool registry), only the input is left
    bound = validate_files([file], tools=frozenset({"browser"}))
    assert [w.message for w in bound.warnings] == [
        "block 'shorten' needs input 'text', which no input or earlier step provides"
    ]


def test_register_files_strict_stores_nothing_when_there_are_warnings(tmp_path: Path) -> None:
    # Given a block needing an unbound tool
    file = _write(tmp_path / "block.yaml", _block(tools_required=["browser"]))
    store = InMemoryStore()
    # When it is registered strictly, Then nothing is stored
    with pytest.raises(DefinitionError):
        register_files(store, [file], strict=True)
    assert store.get_block("shorten") is None
    # And without strict it is stored
    assert [r.id for r in register_files(store, [file])] == ["shorten"]


def test_register_workflow_pins_the_latest_block_version() -> None:
    # Given a block at version 2
    store = InMemoryStore()
    register_block(store, BlockDefinition.model_validate(_block()))
    register_block(store, BlockDefinition.model_validate(_block(description="v2")))
    # When a workflow naming no version is registered
    result = register_workflow(store, TaskPlan.model_validate(_workflow()))
    # Then the stored workflow names version 2
    stored = store.get_workflow("digest", result.version)
    assert stored is not None
    assert stored.steps[0].block_version == 2


def test_a_built_in_block_is_stored_when_a_workflow_uses_it() -> None:
    # Given an empty store and a workflow using the built-in `summarize`
    store = InMemoryStore()
    plan = TaskPlan.model_validate(
        _workflow("digest", {"step_id": "summarize", "block_id": "summarize"})
    )
    # When the workflow is registered
    register_workflow(store, plan)
    # Then the built-in is stored too, and the workflow pinned to it
    assert store.get_block("summarize") is not None
    stored = store.get_workflow("digest")
    assert stored is not None and stored.steps[0].block_version == 1


def test_seeding_built_ins_twice_stores_nothing_new() -> None:
    # Given a store seeded with the built-in blocks
    store = InMemoryStore()
    first = seed_builtins(store)
    # When seeded again
    second = seed_builtins(store)
    # Then every built-in was created once and found unchanged the second time
    assert [r.id for r in first] == [b.block_id for b in builtin_blocks()]
    assert all(r.created for r in first)
    assert not any(r.created for r in second)


def test_a_batch_may_pin_the_version_it_creates(tmp_path: Path) -> None:
    # Given a block at version 1, and a batch changing it with a workflow pinned to version 2
    store = InMemoryStore()
    register_block(store, BlockDefinition.model_validate(_block()))
    file = _write(
        tmp_path / "batch.yaml",
        {
            "blocks": [_block(description="v2")],
            "workflows": [
                _workflow(
                    "digest", {"step_id": "shorten", "block_id": "shorten", "block_version": 2}
                )
            ],
        },
    )
    # When the batch is registered
    results = register_files(store, [file])
    # Then the block becomes version 2 and the workflow keeps its pin
    assert [(r.kind, r.version) for r in results] == [("block", 2), ("workflow", 1)]
    stored = store.get_workflow("digest")
    assert stored is not None and stored.steps[0].block_version == 2


def test_the_same_id_in_two_files_is_a_problem(tmp_path: Path) -> None:
    # Given two files defining the same block differently
    first = _write(tmp_path / "a.yaml", _block())
    second = _write(tmp_path / "b.yaml", _block(description="other"))
    store = InMemoryStore()
    # When both are registered
    with pytest.raises(DefinitionError) as raised:
        register_files(store, [first, second])
    # Then the duplicate is reported against the second file and nothing is stored
    [problem] = raised.value.problems
    assert problem.path == f"{second}: block shorten"
    assert store.get_block("shorten") is None


def test_a_subflow_in_the_same_batch_is_stored_first_and_pinned(tmp_path: Path) -> None:
    # Given a parent listed before the child workflow it runs as a subflow
    parent = _workflow(
        "parent",
        {"step_id": "child", "kind": "subflow", "subflow": {"workflow_id": "child"}},
    )
    file = _write(
        tmp_path / "flows.yaml",
        {"blocks": [_block()], "workflows": [parent, _workflow("child")]},
    )
    store = InMemoryStore()
    # When the batch is registered
    results = register_files(store, [file])
    # Then the child is stored before the parent, and the parent names the child's version
    assert [r.id for r in results] == ["shorten", "child", "parent"]
    stored = store.get_workflow("parent")
    assert stored is not None
    assert stored.steps[0].subflow is not None and stored.steps[0].subflow.version == 1


def test_a_draft_batch_pins_its_subflow_to_the_draft_stored_with_it(tmp_path: Path) -> None:
    # Given a parent and its child subflow stored (active), and changed copies of both
    parent = _workflow(
        "parent",
        {"step_id": "child", "kind": "subflow", "subflow": {"workflow_id": "child"}},
    )
    store = InMemoryStore()
    register_files(
        store,
        [
            _write(
                tmp_path / "v1.yaml",
                {"blocks": [_block()], "workflows": [parent, _workflow("child")]},
            )
        ],
    )
    changed = {**_workflow("child"), "description": "changed"}
    draft = _write(tmp_path / "v2.yaml", {"workflows": [{**parent, "description": "v2"}, changed]})
    # When the changed batch is stored as drafts
    register_files(store, [draft], activate=False)
    # Then the parent's draft runs the child's draft, while the active parent still runs child 1
    parent_draft = store.get_workflow("parent", 2)
    active = store.get_workflow("parent")
    assert parent_draft is not None and parent_draft.steps[0].subflow is not None
    assert parent_draft.steps[0].subflow.version == 2
    assert active is not None and active.steps[0].subflow is not None
    assert (active.version, active.steps[0].subflow.version) == (1, 1)


def test_a_pin_to_the_version_a_batch_creates_counts_drafts(tmp_path: Path) -> None:
    # Given a child workflow at version 1 (active) and version 2 (a draft)
    store = InMemoryStore()
    register_files(
        store,
        [_write(tmp_path / "v1.yaml", {"blocks": [_block()], "workflows": [_workflow("child")]})],
    )
    draft = {**_workflow("child"), "description": "two"}
    register_files(store, [_write(tmp_path / "v2.yaml", {"workflows": [draft]})], activate=False)
    # When a batch changes the child again and pins a parent to the version that makes (3)
    parent = _workflow(
        "parent",
        {"step_id": "child", "kind": "subflow", "subflow": {"workflow_id": "child", "version": 3}},
    )
    third = {**_workflow("child"), "description": "three"}
    results = register_files(store, [_write(tmp_path / "v3.yaml", {"workflows": [parent, third]})])
    # Then the pin validates: the child's next version follows its draft, not its active one
    assert [(r.id, r.version) for r in results] == [("child", 3), ("parent", 1)]


def test_validate_files_offline_resolves_built_ins(tmp_path: Path) -> None:
    # Given a workflow using a built-in block and no store at all
    file = _write(
        tmp_path / "wf.yaml", _workflow("digest", {"step_id": "s", "block_id": "summarize"})
    )
    # When the file is validated offline
    batch = validate_files([file])
    # Then it is valid, with the built-in counted among the batch's blocks
    assert [b.block_id for b in batch.blocks] == ["summarize"]
    assert [w.plan_id for w in batch.workflows] == ["digest"]


def test_register_and_sync_returns_the_warnings_and_takes_the_bound_tools(tmp_path: Path) -> None:
    # Given a block needing `browser` and a workflow using it
    from langorch.app.trigger_sync import register_and_sync
    from tests.unit.triggers_support import make_deps

    file = _write(
        tmp_path / "both.yaml",
        {"blocks": [_block(tools_required=["browser"])], "workflows": [_workflow()]},
    )
    # When it is registered as `workflows put` does, with the built-in tools only
    plain = register_and_sync([file], make_deps())
    # Then it is stored, and both places needing the unbound tool are warned about
    assert [r.id for r in plain.results] == ["shorten", "digest"]
    assert [w.path.rsplit(": ", 1)[1] for w in plain.warnings] == [
        "tools_required[0]",
        "steps[0].block_id",
    ]
    # And when a tool registry binds `browser`, there is nothing to warn about
    bound = register_and_sync([file], make_deps(), tools=frozenset({"browser"}))
    assert bound.warnings == []
    # And strictly, the warnings refuse the files
    with pytest.raises(DefinitionError):
        register_and_sync([file], make_deps(), strict=True)
