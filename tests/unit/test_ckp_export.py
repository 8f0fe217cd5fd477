"""``workflows export --ckp``: a CKP procedure comes back as written, and any workflow of
langorch's own format becomes a procedure that compiles back to the same plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from langorch.app.definitions import register_workflow
from langorch.domain.builtins import builtin_blocks
from langorch.domain.ckp.export import export_ckp
from langorch.domain.definitions import TaskPlan
from langorch.domain.loading import load_file, parse_definitions
from langorch.domain.lookup import InMemoryLookup
from tests.ckp_support import Runner, compiled
from tests.fakes import InMemoryDefinitions

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PROCEDURE = EXAMPLES / "ckp_invoices" / "invoices.ckp.json"
OWN_FORMAT = [*sorted(EXAMPLES.glob("*/definitions.yaml")), EXAMPLES / "recovery" / "report.yaml"]


def test_a_procedure_is_exported_as_written_and_stored_again_as_the_same_version() -> None:
    # Given the example procedure stored
    written = json.loads(PROCEDURE.read_text())
    store = InMemoryDefinitions()
    stored = register_workflow(store, compiled(written))
    # When it is exported, Then the document is the author's, key order included
    exported = export_ckp(store.get_workflow("ckp_invoices"), store)
    assert json.dumps(exported) == json.dumps(written)
    # And putting the export back changes nothing: the same version
    again = register_workflow(store, parse_definitions(exported, source="export").workflows[0])
    assert (again.version, again.created) == (stored.version, False)


@pytest.mark.parametrize("path", OWN_FORMAT, ids=lambda p: p.parent.name)
def test_a_workflow_of_langorchs_format_round_trips_through_ckp(path: Path) -> None:
    # Given every workflow of an example in langorch's own format
    # (with every example's blocks: slack_review's are the blog review's, as in `langorch dev`)
    loaded = load_file(path)
    blocks = {b.block_id: b for p in OWN_FORMAT for b in load_file(p).blocks}
    lookup = InMemoryLookup([*blocks.values(), *builtin_blocks()], loaded.workflows)
    for plan in loaded.workflows:
        # When it is exported as CKP and the procedure is loaded back
        document = export_ckp(plan, lookup)
        back = parse_definitions(json.loads(json.dumps(document)), source="export").workflows[0]
        # Then it is the same plan (the document kept beside it)
        assert _plan(back) == _plan(plan)
        assert back.ckp is not None


def _plan(plan: TaskPlan) -> dict[str, object]:
    return plan.model_dump(mode="json", exclude={"version", "ckp"})


def test_steps_that_fork_and_join_go_through_a_parallel_node() -> None:
    # Given a workflow whose step `a` starts `b` and `c`, which `d` joins
    plan = TaskPlan.model_validate(
        {
            "plan_id": "fan",
            "memory": False,
            "steps": [
                {"step_id": "a", "kind": "transform", "transform": {"x": "1"}},
                {
                    "step_id": "b",
                    "kind": "transform",
                    "depends_on": ["a"],
                    "transform": {"y": "x + 1"},
                },
                {
                    "step_id": "c",
                    "kind": "transform",
                    "depends_on": ["a"],
                    "transform": {"z": "x + 2"},
                },
                {
                    "step_id": "d",
                    "kind": "transform",
                    "depends_on": ["b", "c"],
                    "transform": {"total": "y + z"},
                },
            ],
        }
    )
    # When it is exported
    document = export_ckp(plan, InMemoryLookup())
    nodes = document["workflow_graph"]["nodes"]
    # Then `a` goes to a parallel node of the two branches, joined at `d`
    assert nodes["a"]["next_node"] == "a_parallel"
    assert nodes["a_parallel"]["type"] == "parallel"
    assert [b["start_node"] for b in nodes["a_parallel"]["branches"]] == ["b", "c"]
    assert nodes["a_parallel"]["next_node"] == "d"
    # And the procedure runs as the workflow did: d once, after both, with both results
    run = Runner(document)
    run.start()
    assert run.shared["total"] == 5
    assert run.path.count("d") == 1
