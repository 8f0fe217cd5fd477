"""Recovery on the real pipeline: the package's ASL executed by moto, segments run by the real
``run_segment`` function, the runs and checkpoints in moto's DynamoDB (issue 10)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from langorch.app.approvals.decisions import decide_approval, view_approval
from langorch.app.definitions import register_block
from langorch.app.recovery.forks import fork
from langorch.app.recovery.redrive import redrive
from langorch.composition.bootstrap import build_container
from langorch.domain.approvals.outcomes import DecisionHeld, Shown
from langorch.domain.loading import load_text
from langorch.domain.runs import TimelineEventType, execution_name
from tests.integration.test_state_machine import APPROVAL
from tests.support.pipeline import Pipeline, pipelines
from tests.support.threads import at_once
from tests.unit.approvals_support import decide_command, view_command

V1 = """
blocks:
  - block_id: gather_notes
    input_keys: [topic]
    output_keys: [notes]
    prompt_template: "Notes on {{ topic }}"
workflows:
  - plan_id: report
    memory: false
    inputs_schema: {properties: {topic: {type: string}, count: {type: integer}}}
    steps:
      - {step_id: gather, block_id: gather_notes}
      - step_id: ratio
        kind: transform
        depends_on: [gather]
        max_retries: 0
        transform: {per_item: "10 / count"}
"""

V2 = V1[V1.index("workflows:") :].replace('"10 / count"', '"10 / (count or 1)"')
"""Version 2 of the workflow (its block is stored already): a count of 0 no longer fails."""
assert V2 != V1


@pytest.fixture
def pipeline(tmp_path: Path) -> Iterator[Pipeline]:
    """The emulator executing the state machine, its Lambda tasks routed to the handlers."""
    with pipelines(tmp_path) as make:
        yield make()


def _register(pipeline: Pipeline, text: str) -> None:
    loaded = load_text(text, source="test.yaml", fmt="yaml")
    for block in loaded.blocks:
        register_block(pipeline.container.definitions, block)
    pipeline.register(text)


def _failed_run(pipeline: Pipeline) -> str:
    _register(pipeline, V1)
    run_id = pipeline.launch("report", {"topic": "otters", "count": 0})
    assert pipeline.finished(run_id)["status"] == "FAILED"
    assert pipeline.run(run_id).status.value == "failed"
    return run_id


def _finished(pipeline: Pipeline, name: str) -> dict[str, Any]:
    steps = pipeline.container.stepfunctions
    pipeline.wait_for(lambda: steps.describe(name)["status"] != "RUNNING")
    return steps.describe(name)


def _ran(pipeline: Pipeline, run_id: str, step_id: str) -> int:
    timeline = pipeline.container.runs.get_timeline(run_id)
    return sum(
        1 for e in timeline if e.type is TimelineEventType.step_finished and e.step_id == step_id
    )


def test_a_failed_run_redriven_on_a_fixed_version_succeeds_in_a_new_execution(
    pipeline: Pipeline,
) -> None:
    # Given a run whose transform failed past its retries after its LLM step ran
    run_id = _failed_run(pipeline)
    assert _ran(pipeline, run_id, "gather") == 1
    # When the transform is fixed in version 2 and the run redriven onto it
    _register(pipeline, V2)
    done = redrive(pipeline.container, run_id, version="latest", reason="fixed", actor="ops")
    # Then a new execution, named by the attempt, ran it to success on version 2
    assert done.started and done.execution_name == execution_name(run_id, 1)
    assert _finished(pipeline, done.execution_name)["status"] == "SUCCEEDED"
    run = pipeline.run(run_id)
    assert (run.status.value, run.workflow_version, run.attempt) == ("succeeded", 2, 1)
    assert run.outputs["per_item"] == 10
    # ... and the LLM step before the redrive point was not run again
    assert _ran(pipeline, run_id, "gather") == 1
    assert _ran(pipeline, run_id, "ratio") == 1


def test_two_concurrent_redrives_start_one_execution(pipeline: Pipeline) -> None:
    run_id = _failed_run(pipeline)
    _register(pipeline, V2)
    settings = pipeline.container.settings
    # Each operator is its own process (its own container); both redrive at once
    operators = [build_container(settings) for _ in range(2)]
    results = at_once(
        [partial(redrive, c, run_id, version="latest", reason="race") for c in operators]
    )
    assert sorted(r.started for r in results) == [False, True]
    client = pipeline.container.client("stepfunctions")
    names = [
        e["name"]
        for e in client.list_executions(stateMachineArn=settings.state_machine_arn)["executions"]
    ]
    assert sorted(names) == sorted([run_id, execution_name(run_id, 1)])
    assert _finished(pipeline, execution_name(run_id, 1))["status"] == "SUCCEEDED"
    assert pipeline.run(run_id).attempt == 1


def test_a_fork_with_an_edited_key_runs_in_its_own_execution(pipeline: Pipeline) -> None:
    # Given a failed run
    run_id = _failed_run(pipeline)
    # When it is forked at the failing step with the bad key corrected
    forked = fork(pipeline.container, run_id, at_step="ratio", edits={"count": 5}, actor="ops")
    # Then the fork succeeds in its own execution, without running the LLM step again
    assert _finished(pipeline, forked.run_id)["status"] == "SUCCEEDED"
    child = pipeline.run(forked.run_id)
    assert child.outputs["per_item"] == 2
    assert _ran(pipeline, forked.run_id, "gather") == 0
    assert child.forked_from is not None and child.forked_from.run_id == run_id
    assert [f.run_id for f in pipeline.run(run_id).forks] == [forked.run_id]


@pytest.fixture
def quick_pages(tmp_path: Path) -> Iterator[Pipeline]:
    """The pipeline, its approval pages without the form's dwell (the test presses at once)."""
    with pipelines(tmp_path) as make:
        yield make(approval_form_dwell_seconds=0)


def _emails(pipeline: Pipeline) -> list[dict[str, Any]]:
    outbox = pipeline.container.settings.outbox_dir
    assert outbox is not None
    return [json.loads(p.read_text()) for p in sorted(Path(outbox).glob("*.json"))]


def test_a_decision_on_a_stopped_run_is_delivered_by_its_redrive(quick_pages: Pipeline) -> None:
    pipeline = quick_pages
    pipeline.register(APPROVAL)
    # Given a run parked on its approval (its email sent), whose execution was then stopped
    run_id = pipeline.launch("gated", {"amount": 21})
    pipeline.wait_for(lambda: len(_emails(pipeline)) == 1)
    pipeline.container.stepfunctions.stop(run_id, "stopped from the console")
    assert _finished(pipeline, run_id)["status"] == "ABORTED"
    assert pipeline.run(run_id).status.value == "waiting_approval"
    # When the approver approves through the emailed link
    [mail] = _emails(pipeline)
    shown = view_approval(view_command(mail["link"]), pipeline.container)
    assert isinstance(shown, Shown)
    form = {"nonce": shown.nonce, "decision": "approved"}
    answer = decide_approval(decide_command(mail["link"], form), pipeline.container)
    # Then the answer says the decision is kept while the run is not running
    assert isinstance(answer, DecisionHeld)
    # And when the run is redriven, its new execution gets that decision and the run finishes
    done = redrive(pipeline.container, run_id, reason="stopped by mistake", actor="ops")
    assert done.decision_kept == "approved"
    assert _finished(pipeline, done.execution_name)["status"] == "SUCCEEDED"
    run = pipeline.run(run_id)
    assert run.status.value == "succeeded" and run.outputs["paid"] == 42
    # ... with the one email of the first park, and no other
    assert [m["to"] for m in _emails(pipeline)] == ["boss@example.com"]
