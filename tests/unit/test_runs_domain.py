"""Run rules without AWS: status moves, parked interrupts, run ids, bounded timeline events."""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime, timedelta

import pytest

from langorch.domain.runs import (
    MAX_ERROR_MESSAGE_CHARS,
    MAX_SUMMARY_CHARS,
    REDACTED,
    TERMINAL,
    InvalidTransitionError,
    PauseRequest,
    PendingInterrupt,
    RunError,
    RunRecord,
    RunStatus,
    RunTrigger,
    TimelineEvent,
    TimelineEventType,
    can_transition,
    dedupe_run_id,
    holding,
    new_run_id,
    paused,
    summarize_outputs,
    transition,
    unpaused,
)

T0 = datetime(2025, 3, 4, 9, 0, tzinfo=UTC)
EXECUTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,80}$")


def a_run(status: RunStatus = RunStatus.queued, **fields: object) -> RunRecord:
    return RunRecord.model_validate(
        {
            "run_id": "run-abc",
            "workflow_id": "lunch_order",
            "workflow_version": 2,
            "status": status,
            "trigger": RunTrigger(type="manual"),
            "created_at": T0,
            "updated_at": T0,
            **fields,
        }
    )


APPROVAL = PendingInterrupt(interrupt_id="i-1", kind="approval", request={"step_id": "review"})
WAIT = PendingInterrupt(interrupt_id="i-2", kind="wait", request={"seconds": 60})


# --- transitions ---------------------------------------------------------------------------


def test_a_queued_run_starts_its_first_segment() -> None:
    # Given a queued run
    run = a_run()
    # When it starts running
    started = transition(run, RunStatus.running, now=T0 + timedelta(seconds=1))
    # Then it is running in segment 1, started and updated at that time
    assert (started.status, started.segment) == (RunStatus.running, 1)
    assert started.started_at == started.updated_at == T0 + timedelta(seconds=1)


def test_a_succeeded_run_cannot_run_again() -> None:
    # Given a run that succeeded
    run = transition(transition(a_run(), RunStatus.running, now=T0), RunStatus.succeeded, now=T0)
    # When something tries to run it again, then the move is refused by name
    with pytest.raises(InvalidTransitionError, match="from succeeded to running"):
        transition(run, RunStatus.running, now=T0)


@pytest.mark.parametrize(("frm", "to"), [(f, t) for f in sorted(TERMINAL) for t in RunStatus])
def test_nothing_leaves_a_terminal_status(frm: RunStatus, to: RunStatus) -> None:
    # Given an ended status, when asked about any move, then none is allowed
    assert not can_transition(frm, to)


def test_a_queued_run_cannot_jump_to_succeeded() -> None:
    assert not can_transition(RunStatus.queued, RunStatus.succeeded)


@pytest.mark.parametrize("frm", [s for s in RunStatus if s not in TERMINAL])
def test_every_unfinished_run_can_fail_or_be_cancelled(frm: RunStatus) -> None:
    assert can_transition(frm, RunStatus.failed)
    assert can_transition(frm, RunStatus.cancelled)


def test_the_next_segment_of_a_running_run_counts_up_and_keeps_started_at() -> None:
    # Given a running run in segment 1
    run = transition(a_run(), RunStatus.running, now=T0)
    # When the next segment starts later
    later = transition(run, RunStatus.running, now=T0 + timedelta(minutes=10))
    # Then it is segment 2 and the run still started at T0
    assert (later.segment, later.started_at) == (2, T0)


def test_parking_for_approval_needs_the_approval_interrupt() -> None:
    run = transition(a_run(), RunStatus.running, now=T0)
    with pytest.raises(InvalidTransitionError, match="needs the parked approval interrupt"):
        transition(run, RunStatus.waiting_approval, now=T0)


def test_parking_for_approval_refuses_a_wait_interrupt() -> None:
    run = transition(a_run(), RunStatus.running, now=T0)
    with pytest.raises(InvalidTransitionError, match="approval"):
        transition(run, RunStatus.waiting_approval, now=T0, pending=WAIT)


def test_a_status_that_parks_nothing_refuses_a_pending_interrupt() -> None:
    run = transition(a_run(), RunStatus.running, now=T0)
    with pytest.raises(InvalidTransitionError, match="parks no interrupt"):
        transition(run, RunStatus.succeeded, now=T0, pending=APPROVAL)


def test_resuming_a_parked_run_clears_its_pending_interrupt() -> None:
    # Given a run parked on an approval
    running = transition(a_run(), RunStatus.running, now=T0)
    parked = transition(running, RunStatus.waiting_approval, now=T0, pending=APPROVAL)
    assert parked.pending == APPROVAL
    # When it resumes, then nothing is pending any more
    assert transition(parked, RunStatus.running, now=T0).pending is None


def test_a_sleeping_run_keeps_its_wait_interrupt() -> None:
    running = transition(a_run(), RunStatus.running, now=T0)
    assert transition(running, RunStatus.sleeping, now=T0, pending=WAIT).pending == WAIT


# --- pausing (issue 28 item 3) -----------------------------------------------------------

ASKED = PauseRequest(by="cli:alice", reason="month-end freeze", at=T0)


def test_a_run_paused_at_a_step_boundary_says_who_and_why() -> None:
    # Given a running run
    running = transition(a_run(), RunStatus.running, now=T0)
    # When it pauses as Alice asked
    stopped = paused(running, ASKED, now=T0 + timedelta(seconds=5))
    # Then it is paused, parked on nothing, and its reason names her and why
    assert (stopped.status, stopped.pending) == (RunStatus.paused, None)
    assert stopped.status_reason == "paused by cli:alice: month-end freeze"


def _parked_on_approval() -> RunRecord:
    """A run that started, then parked on ``APPROVAL`` (both at ``T0``)."""
    running = transition(a_run(), RunStatus.running, now=T0)
    return transition(running, RunStatus.waiting_approval, now=T0, pending=APPROVAL)


def test_a_run_paused_while_parked_keeps_its_approval_open() -> None:
    # Given a run waiting on an approval
    parked = _parked_on_approval()
    # When it is paused
    stopped = paused(parked, ASKED, now=T0)
    # Then it still waits on the same approval
    assert (stopped.status, stopped.pending) == (RunStatus.paused, APPROVAL)


def test_a_decision_that_arrives_while_paused_is_held_until_the_resume() -> None:
    # Given a run paused while waiting on an approval
    parked = _parked_on_approval()
    stopped = paused(parked, ASKED, now=T0)
    # When the approver decides meanwhile
    held = holding(stopped, {"decision": "approved"}, now=T0 + timedelta(minutes=1))
    # Then the decision is held while the run stays paused, and leaves with the pause
    assert (held.status, held.held) == (RunStatus.paused, {"decision": "approved"})
    assert transition(held, RunStatus.running, now=T0).held is None


def test_a_run_resumed_before_its_park_was_answered_goes_back_to_it() -> None:
    # Given a run paused while sleeping
    sleeping = transition(
        transition(a_run(), RunStatus.running, now=T0), RunStatus.sleeping, now=T0, pending=WAIT
    )
    stopped = paused(sleeping, ASKED, now=T0)
    # When it is resumed with nothing held
    back = unpaused(stopped, now=T0)
    # Then it sleeps again on the same wait
    assert (back.status, back.pending) == (RunStatus.sleeping, WAIT)


def test_a_run_paused_at_a_boundary_does_not_go_back_to_a_park() -> None:
    stopped = paused(transition(a_run(), RunStatus.running, now=T0), ASKED, now=T0)
    with pytest.raises(InvalidTransitionError, match="park still waits"):
        unpaused(stopped, now=T0)


def test_an_ended_run_cannot_be_paused() -> None:
    done = transition(transition(a_run(), RunStatus.running, now=T0), RunStatus.succeeded, now=T0)
    with pytest.raises(InvalidTransitionError, match="from succeeded to paused"):
        paused(done, ASKED, now=T0)


def test_a_run_that_is_not_paused_holds_nothing() -> None:
    with pytest.raises(InvalidTransitionError, match="holds an answer"):
        holding(a_run(), {"woke": True}, now=T0)


def test_ending_a_run_records_when_why_and_the_error() -> None:
    # Given a running run
    run = transition(a_run(), RunStatus.running, now=T0)
    error = RunError(step_id="pay", type="StepFailedError", message="card declined")
    # When it fails
    failed = transition(
        run, RunStatus.failed, now=T0 + timedelta(hours=1), reason="pay failed", error=error
    )
    # Then the record says when, why and which step
    assert failed.ended_at == T0 + timedelta(hours=1)
    assert (failed.status_reason, failed.error) == ("pay failed", error)


def test_a_transition_leaves_the_original_record_unchanged() -> None:
    run = a_run()
    transition(run, RunStatus.running, now=T0)
    assert (run.status, run.segment) == (RunStatus.queued, 0)


def test_a_clock_without_timezone_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone"):
        transition(a_run(), RunStatus.running, now=datetime(2025, 1, 1))


def test_a_run_record_round_trips_through_json() -> None:
    run = transition(a_run(input={"n": 1.5}), RunStatus.running, now=T0)
    assert RunRecord.model_validate_json(run.model_dump_json()) == run


def test_a_long_error_message_is_cut_short() -> None:
    error = RunError(type="LLMError", message="x" * 10_000)
    assert len(error.message) == MAX_ERROR_MESSAGE_CHARS


# --- run ids -------------------------------------------------------------------------------


def test_the_same_dedupe_key_always_gives_the_same_run_id() -> None:
    key = "schedule:lunch#2025-03-04T09:00:00Z"
    assert dedupe_run_id(key) == dedupe_run_id(key)


def test_different_dedupe_keys_give_different_run_ids() -> None:
    assert dedupe_run_id("delivery-1") != dedupe_run_id("delivery-2")


@pytest.mark.parametrize("key", ["d-1", "s3://bucket/a b/ü.pdf#v3", "x" * 5000])
def test_a_dedupe_run_id_is_a_valid_execution_name(key: str) -> None:
    run_id = dedupe_run_id(key)
    assert EXECUTION_NAME.match(run_id)
    assert run_id.startswith("run-")
    assert len(run_id) == 30


def test_an_empty_dedupe_key_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        dedupe_run_id("")


def test_a_manual_run_id_comes_from_the_id_generator() -> None:
    ids = (f"id{n}" for n in itertools.count())
    assert [new_run_id(lambda: next(ids)) for _ in range(2)] == ["run-id0", "run-id1"]


def test_an_id_generator_token_unfit_for_an_execution_name_is_refused() -> None:
    with pytest.raises(ValueError, match="letters, digits"):
        new_run_id(lambda: "has space")


# --- timeline ------------------------------------------------------------------------------


def test_an_outputs_summary_stays_within_its_budget() -> None:
    # Given outputs far larger than a timeline event may carry
    outputs = {f"key_{n}": "v" * 1000 for n in range(50)}
    # When summarised
    summary = summarize_outputs(outputs)
    # Then keys and values together fit the budget and the rest is counted
    assert sum(len(k) + len(v) for k, v in summary.items()) <= MAX_SUMMARY_CHARS
    assert summary["key_0"].endswith("…")
    assert summary["…"].startswith("+")


@pytest.mark.parametrize("key", ["api_key", "accessToken", "db-password", "X-Signature"])
def test_a_summary_never_shows_a_secret(key: str) -> None:
    assert summarize_outputs({key: "s3cr3t", "total": 12})[key] == REDACTED


def test_a_summary_shows_non_string_values_as_json() -> None:
    assert summarize_outputs({"items": ["soup", "bread"], "total": 12.5}) == {
        "items": '["soup", "bread"]',
        "total": "12.5",
    }


def test_a_timeline_event_rebounds_an_oversized_summary_and_detail() -> None:
    # Given an event built with a summary and detail nobody bounded
    event = TimelineEvent(
        seq=1,
        at=T0,
        type=TimelineEventType.step_finished,
        outputs_summary={"text": "w" * 5000},
        detail={"blob": "z" * 5000},
    )
    # Then both were cut to their bounds
    assert event.outputs_summary is not None
    assert len(event.outputs_summary["text"]) < MAX_SUMMARY_CHARS
    assert len(event.detail["blob"]) < 1000
