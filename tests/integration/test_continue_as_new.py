"""Continue-as-new on the local stack: moto's Step Functions runs the shipped state machine.

With a small simulated history limit (60 events where AWS's is 25,000), a run of many segments
or approval rounds crosses into a second and third execution and ends with the right outputs;
its timeline says where it continued, and approvals parked in any execution still resolve.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from langorch.domain.runs import TimelineEventType, current_execution, execution_name
from tests.support.pipeline import Pipeline, pipelines

pytestmark = pytest.mark.slow  # three runs of 12 segments on moto: about a minute each

LIMIT = 60
"""The simulated history limit: four plain rounds fit in one execution, three approval rounds."""

CHAIN = "workflows:\n  - plan_id: chain\n    memory: false\n    steps:\n" + "\n".join(
    f"      - {{step_id: s{i}, kind: transform, "
    + (f"depends_on: [s{i - 1}], " if i else "")
    + f'transform: {{n{i}: "{i}"}}}}'
    for i in range(12)
)
"""Twelve steps in a line: with a segment budget shorter than any step, one segment each."""

APPROVALS = 6
GATES = (
    "workflows:\n  - plan_id: gates\n    memory: false\n    approvers: [boss@example.com]\n"
    "    steps:\n      - {step_id: start, kind: transform, transform: {total: '0'}}\n"
    + "".join(
        f"      - step_id: gate{i}\n        kind: approval\n"
        f"        depends_on: [{'start' if i == 0 else f'add{i - 1}'}]\n"
        f"        approval: {{title: 'Add {i}?', timeout_seconds: 300}}\n"
        f"        branches: {{approved: add{i}, rejected: add{i}, timed_out: add{i}}}\n"
        f"      - {{step_id: add{i}, kind: transform, transform: {{total: 'total + {i}'}}}}\n"
        for i in range(APPROVALS)
    )
)
"""Six approvals in a line, each adding its number to ``total`` once decided."""


@pytest.fixture
def pipeline(tmp_path: Path) -> Iterator[Pipeline]:
    with pipelines(tmp_path) as make:
        yield make(execution_history_limit=LIMIT, segment_budget_seconds=0.000_001)


def _executions(pipeline: Pipeline, run_id: str) -> list[dict[str, object]]:
    run = pipeline.run(run_id)
    return [pipeline.execution(execution_name(run_id, 0, n)) for n in range(run.continued + 1)]


def _ended(pipeline: Pipeline, run_id: str) -> Callable[[], bool]:
    return lambda: (
        pipeline.run(run_id).is_terminal
        and all(e["status"] != "RUNNING" for e in _executions(pipeline, run_id))
    )


def test_a_long_run_continues_in_fresh_executions_and_ends_with_its_outputs(pipeline: Pipeline):
    # Given a 12-segment run and a history limit that four rounds fill
    pipeline.register(CHAIN)

    # When it is launched
    run_id = pipeline.launch("chain")
    pipeline.wait_for(_ended(pipeline, run_id), timeout=300)

    # Then it went on in a third execution at least, and every step ran once
    run = pipeline.run(run_id)
    assert run.status.value == "succeeded"
    assert run.continued >= 2
    assert run.outputs == {f"n{i}": i for i in range(12)}
    # And each execution's history stayed within the limit, the earlier ones handed over
    executions = _executions(pipeline, run_id)
    assert [e["status"] for e in executions] == ["SUCCEEDED"] * len(executions)
    for n in range(run.continued + 1):
        history = pipeline.history(execution_name(run_id, 0, n))
        assert len(history) <= LIMIT
        last_state = [e for e in history if e["type"] == "SucceedStateEntered"][-1]
        expected = "Succeeded" if n == run.continued else "ContinuedAsNew"
        assert last_state["stateEnteredEventDetails"]["name"] == expected
    # And the record names the execution it ended in
    assert current_execution(run) == execution_name(run_id, 0, run.continued)


def test_the_timeline_says_where_the_run_continued(pipeline: Pipeline):
    # Given a long run that ended
    pipeline.register(CHAIN)
    run_id = pipeline.launch("chain")
    pipeline.wait_for(_ended(pipeline, run_id), timeout=300)

    # When its timeline is read
    continued = [
        e
        for e in pipeline.container.runs.get_timeline(run_id)
        if e.type is TimelineEventType.run_continued
    ]

    # Then each hand-over names the execution it left and the one it went on in
    run = pipeline.run(run_id)
    assert [(e.detail["from"], e.detail["to"]) for e in continued] == [
        (execution_name(run_id, 0, n), execution_name(run_id, 0, n + 1))
        for n in range(run.continued)
    ]
    assert all(0 < e.detail["events"] <= LIMIT for e in continued)


def _latest_token(pipeline: Pipeline, execution: str) -> str | None:
    try:
        history = pipeline.history(execution)
    except ClientError as exc:
        # The record names its next execution before starting it (under the run's lease): a
        # look between the two finds none yet, as an operator's would.
        if exc.response["Error"]["Code"] != "ExecutionDoesNotExist":
            raise
        return None
    tokens = [
        json.loads(e["taskScheduledEventDetails"]["parameters"])["Payload"]["task_token"]
        for e in history
        if "waitForTaskToken" in e.get("taskScheduledEventDetails", {}).get("resource", "")
    ]
    return tokens[-1] if tokens else None


def test_approvals_parked_in_any_execution_resolve_and_the_run_ends(pipeline: Pipeline):
    # Given six approval rounds, three of which fill an execution's history
    pipeline.register(GATES)
    run_id = pipeline.launch("gates")
    answered: set[str] = set()

    # When each approval is answered in whichever execution parked it
    def answer_next() -> bool:
        run = pipeline.run(run_id)
        if run.is_terminal:
            return True
        token = _latest_token(pipeline, current_execution(run))
        if run.status.value == "waiting_approval" and token and token not in answered:
            answered.add(token)
            pipeline.container.stepfunctions.send_success(
                token, {"decision": "approved", "approver": "boss@example.com"}
            )
        return False

    pipeline.wait_for(answer_next, timeout=300)
    pipeline.wait_for(_ended(pipeline, run_id), timeout=300)

    # Then every decision reached the run: the total adds all six, across three executions
    run = pipeline.run(run_id)
    assert run.status.value == "succeeded"
    assert run.outputs["total"] == sum(range(APPROVALS))
    assert len(answered) == APPROVALS
    assert run.continued >= 2
