"""The run state machine for real: the package's ASL executed by moto, Lambda tasks routed to
``functions/run_segment`` (and ``request_approval``) in this process by the local dispatcher.

Executions run on moto's background threads, so every test polls. Each test ends by checking
that the run's status in the runs table agrees with its execution's status.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from langorch.app.runs import StartRun, cancel_run, start_run
from langorch.domain.runs import TimelineEventType
from langorch.local.statemachine import definition_with
from tests.support.definitions import workflow
from tests.support.pipeline import Pipeline, pipelines
from tests.workflows import GATED_APPROVAL, LINEAR


@pytest.fixture
def pipeline_factory(tmp_path: Path) -> Iterator[Callable[..., Pipeline]]:
    """Pipelines in one in-process emulator that executes state machines, handlers routed."""
    with pipelines(tmp_path) as make:
        yield make


@pytest.fixture
def pipeline(pipeline_factory: Callable[..., Pipeline]) -> Pipeline:
    return pipeline_factory()


def test_a_linear_run_succeeds_and_so_does_its_execution(pipeline: Pipeline):
    # Given a linear workflow
    pipeline.register(LINEAR)

    # When a run is launched (run record + StartExecution)
    run_id = pipeline.launch("linear", {"x": 2})

    # Then the state machine runs its segment and the run and execution both succeed
    assert pipeline.finished(run_id)["status"] == "SUCCEEDED"
    run = pipeline.run(run_id)
    assert run.status.value == "succeeded"
    assert run.outputs["w"] == 6
    pipeline.assert_consistent(run_id)


def test_a_segment_writes_its_log_lines_to_the_functions_log_group(pipeline: Pipeline):
    # Given a finished run
    pipeline.register(LINEAR)
    run_id = pipeline.launch("linear", {"x": 1})
    pipeline.finished(run_id)

    # When its lines are read back from CloudWatch Logs
    groups = pipeline.logs.groups("/aws/lambda/")
    lines = pipeline.logs.lines_for_run(run_id, groups)

    # Then the segment's Powertools lines are there, with the run's keys on them
    fields = [line.fields() or {} for line in lines]
    assert {line.group for line in lines} == {"/aws/lambda/langorch-run-segment"}
    answered = [f for f in fields if f.get("message") == "segment answered"]
    assert answered and answered[0]["workflow_id"] == "linear"
    assert answered[0]["segment"] == 1
    assert all(f["run_id"] == run_id for f in fields)
    pipeline.assert_consistent(run_id)


WAIT = workflow("napper").steps("""
      - {step_id: before, kind: transform, transform: {a: "1"}}
      - {step_id: nap, kind: wait, depends_on: [before], wait: {seconds: 2}}
      - {step_id: after, kind: transform, depends_on: [nap], transform: {b: "a + 1"}}
""")


def test_a_wait_sleeps_in_the_state_machine_with_no_lambda_running(pipeline: Pipeline):
    # Given a workflow with a 2 s wait
    pipeline.register(WAIT)
    run_id = pipeline.launch("napper")

    # When the execution enters its Wait state
    def in_wait() -> bool:
        return any(e["type"] == "WaitStateEntered" for e in pipeline.history(run_id))

    pipeline.wait_for(in_wait)

    # Then the run is sleeping and every Lambda task that started has finished
    events = pipeline.history(run_id)
    assert pipeline.run(run_id).status.value == "sleeping"
    started = sum(1 for e in events if e["type"] == "TaskStarted")
    ended = sum(1 for e in events if e["type"] in ("TaskSucceeded", "TaskFailed"))
    assert started == ended == 1
    pipeline.assert_consistent(run_id)

    # And after the wait the run goes on to the end
    assert pipeline.finished(run_id)["status"] == "SUCCEEDED"
    run = pipeline.run(run_id)
    assert run.outputs["b"] == 2
    assert any(
        e.type == TimelineEventType.wait_finished
        for e in pipeline.container.runs.get_timeline(run_id)
    )
    pipeline.assert_consistent(run_id)


CHAIN = "workflows:\n  - plan_id: chain\n    memory: false\n    steps:\n" + "\n".join(
    f"      - {{step_id: s{i}, kind: transform, "
    + (f"depends_on: [s{i - 1}], " if i else "")
    + f'transform: {{n{i}: "{i}"}}}}'
    for i in range(6)
)


def test_a_run_longer_than_its_segment_budget_loops_through_continue(
    pipeline_factory: Callable[..., Pipeline],
):
    # Given a segment budget shorter than any step (each segment still runs one superstep), so
    # the outcome does not depend on how fast this machine runs a step
    pipeline = pipeline_factory(segment_budget_seconds=0.000_001)
    pipeline.register(CHAIN)

    # When a 6-step run is launched
    run_id = pipeline.launch("chain")

    # Then it takes several segments, looping through Continue, and still runs every step
    assert pipeline.finished(run_id, timeout=120)["status"] == "SUCCEEDED"
    run = pipeline.run(run_id)
    continues = [
        e
        for e in pipeline.history(run_id)
        if e["type"] == "PassStateEntered" and e["stateEnteredEventDetails"]["name"] == "Continue"
    ]
    assert run.segment >= 6  # at least one segment per step
    assert len(continues) == run.segment - 1
    assert run.outputs["n5"] == 5
    pipeline.assert_consistent(run_id)


FAILING = workflow("doomed").steps("""
      - {step_id: prep, kind: transform, transform: {a: "1"}}
      - {step_id: stop, kind: terminate, depends_on: [prep],
         terminate: {status: failed, message: "the invoice total is negative"}}
""")


def test_a_failing_workflow_ends_failed_with_its_reason_and_a_failed_execution(
    pipeline: Pipeline,
):
    # Given a workflow that terminates as failed
    pipeline.register(FAILING)

    # When it runs
    run_id = pipeline.launch("doomed")

    # Then the run failed with the workflow's reason, and so did the execution
    assert pipeline.finished(run_id)["status"] == "FAILED"
    run = pipeline.run(run_id)
    assert run.status.value == "failed"
    assert run.error is not None and "negative" in run.error.message
    pipeline.assert_consistent(run_id)


def test_a_segment_error_that_is_not_retried_marks_the_run_failed_with_the_cause(
    pipeline: Pipeline,
):
    # Given a queued run whose execution starts with a resume nothing is waiting for
    pipeline.register(LINEAR)
    run, _ = start_run(StartRun("linear", input={"x": 1}), pipeline.container)
    pipeline.container.stepfunctions.start(
        run.run_id, {"run_id": run.run_id, "resume": {"decision": "approved"}}
    )

    # When the segment refuses it (UnknownInterruptError is not in the Retry list)
    execution = pipeline.finished(run.run_id)

    # Then MarkFailed failed the run with the Lambda error's type and message
    assert execution["status"] == "FAILED"
    failed = pipeline.run(run.run_id)
    assert failed.status.value == "failed"
    assert failed.error is not None
    assert failed.error.type == "UnknownInterruptError"
    assert "not waiting on any interrupt" in failed.error.message
    assert any(
        e["type"] == "TaskStateEntered" and e["stateEnteredEventDetails"]["name"] == "MarkFailed"
        for e in pipeline.history(run.run_id)
    )
    pipeline.assert_consistent(run.run_id)


def test_a_transient_storage_error_is_retried_by_the_state_machine(
    pipeline_factory: Callable[..., Pipeline], monkeypatch: pytest.MonkeyPatch
):
    # Given the deployed composition (DynamoDB on moto), whose runs table refuses the first
    # lease write of the run_segment function once
    pipeline = pipeline_factory(cloud=True)
    import botocore.handlers

    pipeline.register(LINEAR)
    table = pipeline.container.settings.runs_table
    refused: list[str] = []

    def throttle_once(params: dict[str, Any], **_: Any) -> None:
        # The lease is one conditional UpdateItem of the run item.
        taking = "lease_owner = :owner" in params.get("UpdateExpression", "")
        if not refused and params["TableName"] == table and taking:
            refused.append(params["Key"]["pk"]["S"])
            raise ClientError(
                {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow"}},
                "UpdateItem",
            )

    # On every session created from now on: the function's container is built on its first
    # invocation (a cold start), after this.
    monkeypatch.setattr(
        botocore.handlers,
        "BUILTIN_HANDLERS",
        [
            *botocore.handlers.BUILTIN_HANDLERS,
            ("provide-client-params.dynamodb.UpdateItem", throttle_once),
        ],
    )

    # When the run is launched
    run_id = pipeline.launch("linear", {"x": 3})

    # Then the segment failed with StorageError, was retried by the state machine, and the run
    # succeeded
    assert pipeline.finished(run_id, timeout=60)["status"] == "SUCCEEDED"
    failures = [
        e["taskFailedEventDetails"]["error"]
        for e in pipeline.history(run_id)
        if e["type"] == "TaskFailed"
    ]
    assert refused and failures == ["StorageError"]
    assert pipeline.run(run_id).status.value == "succeeded"
    pipeline.assert_consistent(run_id)


def test_a_segment_whose_sandbox_died_is_retried_and_takes_back_its_lease(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
):
    # Given a run whose first segment dies after taking the run's lease: its sandbox exits
    # (Lambda reports Runtime.ExitError) and, dead, gives nothing back
    from langorch.adapters.sqlite.runs import SqliteRuns
    from langorch.local._sandbox import SandboxError

    pipeline.register(LINEAR)
    deaths: list[str] = []
    keep = SqliteRuns.release_lease

    def die_once(*args: Any, **kwargs: Any) -> Any:
        if not deaths:
            deaths.append("segment")
            raise SandboxError("Runtime.ExitError", "the run_segment sandbox exited: killed")
        return advance(*args, **kwargs)

    def dead_keeps_the_lease(self: SqliteRuns, run_id: str, fence: int) -> bool:
        return False if len(deaths) == 1 and fence == 1 else keep(self, run_id, fence)

    import langorch.engine.segments as segments

    advance = segments.advance
    monkeypatch.setattr(segments, "advance", die_once)
    monkeypatch.setattr(SqliteRuns, "release_lease", dead_keeps_the_lease)

    # When the run is launched (before: no Retry on Runtime.ExitError, MarkFailed failed it)
    run_id = pipeline.launch("linear", {"x": 2})

    # Then the state machine retried the segment as the same owner, which took the lease back
    # at once (not after it expired) and finished the run
    assert pipeline.finished(run_id)["status"] == "SUCCEEDED"
    history = pipeline.history(run_id)
    failures = [e["taskFailedEventDetails"]["error"] for e in history if e["type"] == "TaskFailed"]
    owners = [
        json.loads(e["taskScheduledEventDetails"]["parameters"])["Payload"]["owner"]
        for e in history
        if e["type"] == "TaskScheduled"
    ]
    assert failures == ["Runtime.ExitError"]
    assert len(owners) == 2 and owners[0] == owners[1] and owners[0].startswith(run_id)
    assert pipeline.run(run_id).outputs["w"] == 6
    pipeline.assert_consistent(run_id)


APPROVAL = GATED_APPROVAL.replace("timeout_seconds: 60", "timeout_seconds: 300")
"""The shared gated workflow, with time to park and decide on a loaded machine."""
assert APPROVAL != GATED_APPROVAL


def _task_token(pipeline: Pipeline, run_id: str) -> str:
    for event in pipeline.history(run_id):
        details = event.get("taskScheduledEventDetails")
        if details and "waitForTaskToken" in details.get("resource", ""):
            return str(json.loads(details["parameters"])["Payload"]["task_token"])
    raise AssertionError("no waitForTaskToken task was scheduled")


def test_an_approval_parks_the_run_at_await_approval_with_the_execution_running(
    pipeline: Pipeline,
):
    # Given a workflow with an approval
    pipeline.register(APPROVAL)

    # When a run reaches it
    run_id = pipeline.launch("gated", {"amount": 21})

    def parked() -> bool:
        return (
            any(
                e["type"] == "TaskStateEntered"
                and e["stateEnteredEventDetails"]["name"] == "AwaitApproval"
                for e in pipeline.history(run_id)
            )
            and pipeline.run(run_id).status.value == "waiting_approval"
        )

    pipeline.wait_for(parked)

    # Then the execution waits on the task token, and the run record agrees
    assert pipeline.execution(run_id)["status"] == "RUNNING"
    pipeline.assert_consistent(run_id)

    # And the decision sent to the token resumes the run to its end
    pipeline.container.stepfunctions.send_success(
        _task_token(pipeline, run_id), {"decision": "approved", "approver": "boss@example.com"}
    )
    assert pipeline.finished(run_id)["status"] == "SUCCEEDED"
    assert pipeline.run(run_id).outputs["paid"] == 42
    pipeline.assert_consistent(run_id)


LONG_WAIT = WAIT.replace("napper", "long_napper").replace("seconds: 2", "seconds: 3600")


def test_cancelling_a_sleeping_run_stops_its_execution(pipeline: Pipeline):
    # Given a run asleep in a long wait
    pipeline.register(LONG_WAIT)
    run_id = pipeline.launch("long_napper")
    pipeline.wait_for(lambda: pipeline.run(run_id).status.value == "sleeping")
    # The record says sleeping before the segment's Lambda has returned: wait for the Wait state.
    pipeline.wait_for(
        lambda: any(e["type"] == "WaitStateEntered" for e in pipeline.history(run_id))
    )

    # When an operator cancels it
    run, changed = cancel_run(run_id, pipeline.container, actor="ops@example.com")

    # Then the run is cancelled (once), its execution aborted, and the timeline says who did it
    assert changed and run.status.value == "cancelled"
    # moto's worker thread reflects the stop asynchronously, as AWS does
    pipeline.wait_for(lambda: pipeline.execution(run_id)["status"] == "ABORTED")
    again, changed_again = cancel_run(run_id, pipeline.container)
    assert not changed_again and again.status.value == "cancelled"
    cancelled = [
        e
        for e in pipeline.container.runs.get_timeline(run_id)
        if e.type == TimelineEventType.run_cancelled
    ]
    assert [e.actor for e in cancelled] == ["ops@example.com"]
    pipeline.assert_consistent(run_id)


def test_the_definition_fills_every_substitution_and_refuses_a_missing_one():
    # Given the two function ARNs the ASL names
    arns = {
        "RunSegmentFunctionArn": "arn:aws:lambda:us-east-1:1:function:seg",
        "RequestApprovalFunctionArn": "arn:aws:lambda:us-east-1:1:function:apr",
    }

    # When the definition is filled in
    definition = json.loads(definition_with(arns))

    # Then no variable is left and both tasks call their function
    assert "${" not in json.dumps(definition)
    states = definition["States"]
    assert states["RunSegment"]["Parameters"]["FunctionName"] == arns["RunSegmentFunctionArn"]
    assert states["MarkFailed"]["Parameters"]["FunctionName"] == arns["RunSegmentFunctionArn"]
    assert (
        states["AwaitApproval"]["Parameters"]["FunctionName"] == arns["RequestApprovalFunctionArn"]
    )
    with pytest.raises(KeyError, match="RequestApprovalFunctionArn"):
        definition_with({"RunSegmentFunctionArn": "x"})
