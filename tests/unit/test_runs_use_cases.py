"""Starting, launching, failing and cancelling runs, and one writer per run, on fakes."""

from __future__ import annotations

import pytest

from langorch.app.recovery.reconcile import START_GRACE_SECONDS, reconcile_runs
from langorch.app.runs import (
    RunSegment,
    StartRun,
    cancel_run,
    launch_run,
    mark_failed,
    run_segment,
    start_run,
)
from langorch.domain.approvals.record import ApprovalStatus
from langorch.domain.errors import (
    InputValidationError,
    LeaseHeldError,
    NotFoundError,
    StorageError,
)
from langorch.domain.runs import RunError, RunStatus, TimelineEventType, transition
from tests.fakes import Fakes
from tests.integration.conftest import register_text
from tests.support.definitions import workflow
from tests.support.parking import parked_on_approval, with_approvals
from tests.workflows import ASK_THEN_DONE

FLOW = workflow("flow", inputs={"n": "number"}, required=["n"]).steps("""
      - {step_id: double, kind: transform, transform: {twice: "n * 2"}}
""")


@pytest.fixture
def deps() -> Fakes:
    fakes = with_approvals(Fakes(), FLOW)
    register_text(fakes, ASK_THEN_DONE)  # type: ignore[arg-type]
    return fakes


# --- starting --------------------------------------------------------------------------------


def test_a_launched_run_is_queued_and_its_execution_is_named_by_it(deps: Fakes) -> None:
    run, created = launch_run(StartRun("flow", input={"n": 2}), deps)
    assert created and run.status is RunStatus.queued
    assert deps.executions.names == [run.run_id]
    assert run.execution_arn == deps.executions.execution_arn(run.run_id)
    [started] = deps.runs.get_timeline(run.run_id)
    assert (started.type, started.detail["workflow"]) == (TimelineEventType.run_started, "flow@1")


def test_a_repeated_dedupe_key_starts_one_run_and_one_execution(deps: Fakes) -> None:
    first, _ = launch_run(StartRun("flow", input={"n": 2}, dedupe_key="evt-1"), deps)
    again, created = launch_run(StartRun("flow", input={"n": 2}, dedupe_key="evt-1"), deps)
    assert (again.run_id, created) == (first.run_id, False)
    assert deps.executions.names == [first.run_id]
    assert len(deps.runs.get_timeline(first.run_id)) == 1


def test_a_start_retried_after_the_execution_failed_to_start_starts_it_once(
    deps: Fakes,
) -> None:
    # Given a start whose record was written but whose execution could not start
    deps.executions.fail_next_start()
    with pytest.raises(StorageError):
        launch_run(StartRun("flow", input={"n": 2}, dedupe_key="evt-2"), deps)
    # When the event is retried, then the same run gets its one execution
    run, created = launch_run(StartRun("flow", input={"n": 2}, dedupe_key="evt-2"), deps)
    assert not created
    assert deps.executions.names == [run.run_id]


def test_reconcile_starts_a_queued_run_whose_execution_never_started(deps: Fakes) -> None:
    # Given a start whose record was written but whose execution could not start (throttled),
    # and nobody retried the event
    deps.executions.fail_next_start()
    with pytest.raises(StorageError):
        launch_run(StartRun("flow", input={"n": 2}), deps)
    (run,) = deps.runs.list_runs()

    # When the runs are reconciled while its start could still be under way, then it is left
    assert reconcile_runs(deps) == []
    assert deps.executions.names == []

    # When they are reconciled five minutes on, then its execution is started, once
    deps.clock.advance(START_GRACE_SECONDS + 1)
    (repair,) = reconcile_runs(deps)
    assert (repair.run_id, repair.execution_status, repair.repaired) == (
        run.run_id,
        "NOT_STARTED",
        True,
    )
    assert deps.executions.names == [run.run_id]
    assert reconcile_runs(deps) == []


def test_an_unknown_workflow_is_not_found_with_how_to_register_it(deps: Fakes) -> None:
    with pytest.raises(NotFoundError, match="langorch workflows put"):
        start_run(StartRun("nope"), deps)


def test_input_outside_the_schema_stores_nothing(deps: Fakes) -> None:
    with pytest.raises(InputValidationError):
        start_run(StartRun("flow", input={"n": "two"}), deps)
    assert deps.runs.list_runs() == []


# --- one writer per run ---------------------------------------------------------------------


def test_a_segment_is_refused_while_another_holds_the_lease_until_it_expires(
    deps: Fakes,
) -> None:
    # Given a run whose lease a crashed segment still holds
    run, _ = start_run(StartRun("flow", input={"n": 2}), deps)
    deps.runs.acquire_lease(run.run_id, "crashed", now=deps.clock().timestamp(), ttl_seconds=60)
    # When a segment starts, then it is refused
    with pytest.raises(LeaseHeldError, match="crashed"):
        run_segment(RunSegment(run.run_id), deps)
    # And once the lease has expired, the next segment runs the run and gives the lease back
    deps.clock.advance(61)
    assert run_segment(RunSegment(run.run_id), deps).status == "succeeded"
    assert deps.runs.lease_of(run.run_id)[0] is None


def test_a_segment_of_an_ended_run_changes_nothing(deps: Fakes) -> None:
    run, _ = start_run(StartRun("flow", input={"n": 2}), deps)
    cancel_run(run.run_id, deps)
    result = run_segment(RunSegment(run.run_id), deps)
    assert (result.status, result.ended) == ("cancelled", False)
    assert deps.runs.lease_of(run.run_id) == (None, 0)


# --- failing ---------------------------------------------------------------------------------


def test_marking_a_run_failed_ends_it_once_with_one_closing_event(deps: Fakes) -> None:
    # Given a running run
    run, _ = start_run(StartRun("flow", input={"n": 2}), deps)
    deps.runs.save_run(transition(run, RunStatus.running, now=deps.clock()))
    error = RunError(step_id="double", type="States.Timeout", message="segment timed out")
    # When the state machine marks it failed, and retries the call
    assert mark_failed(run.run_id, error, deps) is True
    assert mark_failed(run.run_id, error, deps) is False
    # Then it failed with the error, and the timeline ends with one run_finished
    stored = deps.runs.get_run(run.run_id)
    assert (stored.status, stored.error) == (RunStatus.failed, error)
    finished = [
        e for e in deps.runs.get_timeline(run.run_id) if e.type is TimelineEventType.run_finished
    ]
    assert len(finished) == 1 and finished[0].detail == {"status": "failed"}


def test_marking_an_ended_run_failed_keeps_its_ending(deps: Fakes) -> None:
    run, _ = start_run(StartRun("flow", input={"n": 2}), deps)
    assert run_segment(RunSegment(run.run_id), deps).status == "succeeded"
    assert mark_failed(run.run_id, RunError(type="Error", message="late"), deps) is False
    assert deps.runs.get_run(run.run_id).status is RunStatus.succeeded


# --- cancelling ------------------------------------------------------------------------------


def test_cancelling_ends_the_run_and_stops_its_execution(deps: Fakes) -> None:
    run, _ = launch_run(StartRun("flow", input={"n": 2}), deps)
    cancelled, changed = cancel_run(run.run_id, deps, actor="ops@example.com", reason="wrong input")
    assert changed and cancelled.status is RunStatus.cancelled
    assert deps.executions.describe(run.run_id)["status"] == "ABORTED"
    last = deps.runs.get_timeline(run.run_id)[-1]
    assert (last.type, last.actor, last.detail) == (
        TimelineEventType.run_cancelled,
        "ops@example.com",
        {"reason": "wrong input"},
    )


def test_cancelling_again_changes_nothing_and_adds_no_event(deps: Fakes) -> None:
    run, _ = launch_run(StartRun("flow", input={"n": 2}), deps)
    cancel_run(run.run_id, deps)
    events = deps.runs.get_timeline(run.run_id)
    again, changed = cancel_run(run.run_id, deps)
    assert (again.status, changed) == (RunStatus.cancelled, False)
    assert deps.runs.get_timeline(run.run_id) == events


def test_a_finished_run_is_not_cancelled_and_nothing_is_stopped(deps: Fakes) -> None:
    run, _ = launch_run(StartRun("flow", input={"n": 2}), deps)
    run_segment(RunSegment(run.run_id), deps)
    after, changed = cancel_run(run.run_id, deps)
    assert (after.status, changed) == (RunStatus.succeeded, False)
    assert deps.executions.describe(run.run_id)["status"] == "RUNNING"


def test_cancelling_a_run_parked_on_an_approval_closes_the_approval(deps: Fakes) -> None:
    # Given a run waiting on an approval whose email went out
    parked = parked_on_approval(deps)
    # When it is cancelled, then its approval is closed as cancelled
    cancel_run(parked.run_id, deps)
    closed = deps.approvals.get(parked.requested.approval_id)  # type: ignore[attr-defined]
    assert closed is not None and closed.status is ApprovalStatus.cancelled


def test_a_new_execution_of_a_parked_run_parks_on_the_same_approval(deps: Fakes) -> None:
    # Given a run parked on an approval, whose execution was lost (a restart of the stack)
    run, _ = launch_run(StartRun("gated"), deps)
    parked = run_segment(RunSegment(run.run_id), deps)
    events = len(deps.runs.get_timeline(run.run_id))
    # When a new execution runs its first segment, with no answer
    again = run_segment(RunSegment(run.run_id), deps)
    # Then it waits on the same approval (same interrupt, same request), and nothing was written
    assert again.status == "waiting_approval"
    assert again.approval == parked.approval
    assert again.segment == parked.segment
    assert len(deps.runs.get_timeline(run.run_id)) == events
    assert deps.runs.get_run(run.run_id).status is RunStatus.waiting_approval


WAITING = workflow("napping").steps("""
      - {step_id: nap, kind: wait, wait: {seconds: 100}}
      - {step_id: done, kind: transform, transform: {ok: "1"}}
""")


def test_a_new_execution_of_a_sleeping_run_sleeps_only_the_rest_of_its_wait(deps: Fakes) -> None:
    # Given a run that started a 100 s wait 30 s ago
    register_text(deps, WAITING)  # type: ignore[arg-type]
    run, _ = launch_run(StartRun("napping"), deps)
    asleep = run_segment(RunSegment(run.run_id), deps)
    assert (asleep.status, asleep.seconds) == ("sleeping", 100)
    deps.clock.advance(30)  # type: ignore[attr-defined]
    # When a new execution runs its first segment, with no answer
    again = run_segment(RunSegment(run.run_id), deps)
    # Then it sleeps the 70 s that are left, then wakes the same wait
    assert (again.status, again.seconds) == ("sleeping", 70)
    deps.clock.advance(80)  # type: ignore[attr-defined]
    assert run_segment(RunSegment(run.run_id), deps).seconds == 0
    woke = run_segment(RunSegment(run.run_id, resume={"woke": True}), deps)
    assert woke.status == "succeeded"


def test_an_unknown_run_cannot_be_cancelled(deps: Fakes) -> None:
    with pytest.raises(NotFoundError):
        cancel_run("run-ghost", deps)


# --- reconciling runs whose execution ended without them ------------------------------------


def _parked_on_approval(deps: Fakes) -> tuple[str, str]:
    parked = parked_on_approval(deps)
    return parked.run_id, parked.requested.approval_id


def test_reconcile_fails_a_run_parked_on_an_approval_and_closes_the_approval(deps: Fakes):
    # Given a run waiting on an approval whose execution then ended FAILED (before: the run
    # ended failed, but its approval stayed pending and its emailed links still offered to
    # decide a run that was gone)
    run_id, approval_id = _parked_on_approval(deps)
    deps.executions.end(run_id, "FAILED", error="States.Timeout", cause="heartbeat")

    # When the runs are reconciled
    (repair,) = reconcile_runs(deps)

    # Then the run failed with the execution's cause and its approval is closed
    assert (repair.run_id, repair.record_status, repair.repaired) == (
        run_id,
        "waiting_approval",
        True,
    )
    assert deps.runs.get_run(run_id).status is RunStatus.failed
    closed = deps.approvals.get(approval_id)  # type: ignore[attr-defined]
    assert closed is not None and closed.status is ApprovalStatus.cancelled


def test_reconcile_cancels_a_run_whose_execution_was_stopped_from_outside(deps: Fakes):
    # Given a run parked on an approval whose execution someone stopped in the console
    # (before: reconcile called that a failure)
    run_id, approval_id = _parked_on_approval(deps)
    deps.executions.end(run_id, "ABORTED", cause="stopped in the console")

    # When the runs are reconciled
    (repair,) = reconcile_runs(deps)

    # Then the run is cancelled by "reconcile", naming the execution's end, and its approval
    # is closed; the stopped execution keeps its own cause (it is not stopped again)
    run = deps.runs.get_run(run_id)
    assert (repair.repaired, run.status) == (True, RunStatus.cancelled)
    last = deps.runs.get_timeline(run_id)[-1]
    assert (last.type, last.actor) == (TimelineEventType.run_cancelled, "reconcile")
    assert "ended ABORTED" in last.detail["reason"]
    assert deps.executions.describe(run_id).get("cause") == "stopped in the console"
    closed = deps.approvals.get(approval_id)  # type: ignore[attr-defined]
    assert closed is not None and closed.status is ApprovalStatus.cancelled
    # And a second pass finds nothing left to repair
    assert reconcile_runs(deps) == []
