"""The approval lifecycle table: one test per transition, allowed and refused.

Each allowed row says where the event leads, which write it performs and which audit line it
writes; each refused pair says why (the reason is what the refusal is audited and shown as).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from langorch.domain.approvals.lifecycle import (
    DECISION_OUTCOME,
    TABLE,
    TRANSITIONS,
    Event,
    State,
    TransitionRefusedError,
    Write,
    allowed,
    state_of,
    step,
)
from langorch.domain.approvals.record import Approval, ApprovalStatus, new_approval

NOW = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)

# (source, event) -> (target, write, audit action, audit outcome); None: no audit line.
ALLOWED: dict[tuple[State, Event], tuple[State, Write, str | None, str | None]] = {
    (State.new, Event.request): (State.pending, Write.put_pending, "requested", "pending"),
    (State.pending, Event.view): (State.pending, Write.none, "view", "shown"),
    (State.expired, Event.view): (State.expired, Write.none, "view", "link_expired"),
    (State.decided, Event.view): (State.decided, Write.none, "view", "already_decided"),
    (State.delivered, Event.view): (State.delivered, Write.none, "view", "already_decided"),
    (State.timed_out, Event.view): (State.timed_out, Write.none, "view", "link_expired"),
    (State.cancelled, Event.view): (State.cancelled, Write.none, "view", "run_ended"),
    (State.pending, Event.decide): (State.decided, Write.decide, None, None),
    (State.decided, Event.deliver): (
        State.delivered,
        Write.mark_delivered,
        "decide",
        DECISION_OUTCOME,
    ),
    (State.decided, Event.delivery_failed): (
        State.pending,
        Write.reopen,
        "refused",
        "delivery_failed",
    ),
    (State.decided, Event.task_closed): (
        State.timed_out,
        Write.mark_timed_out,
        "too_late",
        "task_closed",
    ),
    (State.decided, Event.redeliver): (
        State.delivered,
        Write.mark_delivered,
        "redeliver",
        "delivered",
    ),
    (State.decided, Event.redeliver_closed): (
        State.delivered,
        Write.mark_delivered,
        "redeliver",
        "task_closed",
    ),
    (State.decided, Event.redeliver_failed): (State.decided, Write.none, "redeliver", "failed"),
    (State.decided, Event.hold): (State.decided, Write.none, "held", "run_not_running"),
    (State.decided, Event.timeout): (
        State.delivered,
        Write.mark_delivered,
        "redeliver",
        "at_timeout",
    ),
    (State.delivered, Event.timeout): (
        State.delivered,
        Write.mark_delivered,
        "redeliver",
        "at_timeout",
    ),
    (State.pending, Event.timeout): (State.timed_out, Write.mark_timed_out, "expired", "timed_out"),
    (State.expired, Event.timeout): (State.timed_out, Write.mark_timed_out, "expired", "timed_out"),
    (State.pending, Event.run_ended): (
        State.cancelled,
        Write.mark_cancelled,
        "refused",
        "run_ended",
    ),
    (State.pending, Event.run_moved_on): (
        State.timed_out,
        Write.mark_timed_out,
        "too_late",
        "run_moved_on",
    ),
    (State.expired, Event.run_ended): (
        State.cancelled,
        Write.mark_cancelled,
        "refused",
        "run_ended",
    ),
    (State.expired, Event.run_moved_on): (
        State.timed_out,
        Write.mark_timed_out,
        "too_late",
        "run_moved_on",
    ),
    (State.pending, Event.cancel): (
        State.cancelled,
        Write.mark_cancelled,
        "cancelled",
        "run_cancelled",
    ),
    (State.expired, Event.cancel): (
        State.cancelled,
        Write.mark_cancelled,
        "cancelled",
        "run_cancelled",
    ),
    (State.decided, Event.cancel): (
        State.cancelled,
        Write.mark_cancelled,
        "cancelled",
        "run_cancelled",
    ),
    # Policies (issue 13): votes, delegations and timers only while pending; the use-case
    # fills the outcome (the vote, the delegate, why the timer fired).
    (State.pending, Event.vote): (State.pending, Write.record_vote, "vote", "{detail}"),
    (State.pending, Event.delegate): (State.pending, Write.delegate, "delegated", "{detail}"),
    (State.pending, Event.remind): (State.pending, Write.advance_timer, "reminded", "{detail}"),
    (State.pending, Event.escalate): (State.pending, Write.advance_timer, "escalated", "{detail}"),
    # Superseded (issue 29): a newer request asks again; its links only say so.
    (State.pending, Event.supersede): (
        State.superseded,
        Write.mark_superseded,
        "superseded",
        "newer_request",
    ),
    (State.expired, Event.supersede): (
        State.superseded,
        Write.mark_superseded,
        "superseded",
        "newer_request",
    ),
    (State.superseded, Event.view): (State.superseded, Write.none, "view", "superseded"),
}

REFUSED = sorted(
    ((s, e) for s in State for e in Event if (s, e) not in ALLOWED),
    key=lambda pair: (pair[0].value, pair[1].value),
)

REASONS = {
    State.new: "not_found",
    State.pending: "still_pending",
    State.expired: "link_expired",
    State.decided: "already_decided",
    State.delivered: "already_decided",
    State.timed_out: "link_expired",
    State.cancelled: "run_ended",
    State.superseded: "superseded",
}


def _approval(**changes: object) -> Approval:
    approval = new_approval(
        run_id="run-1",
        workflow_id="wf",
        request={"interrupt_id": "int-1", "step_id": "review", "approvers": ["a@example.com"]},
        now=NOW,
        default_timeout_seconds=3600,
    )
    return approval.model_copy(update=changes)


@pytest.mark.parametrize(("source", "event"), sorted(ALLOWED, key=lambda p: (p[0], p[1])))
def test_an_allowed_transition_names_its_target_write_and_audit(source: State, event: Event):
    # Given an approval in `source`
    target, write, action, outcome = ALLOWED[(source, event)]
    # When `event` happens
    transition = step(source, event)
    # Then the table says where it goes, what it writes and what it audits
    assert (transition.source, transition.event) == (source, event)
    assert (transition.target, transition.write) == (target, write)
    if action is None:
        assert transition.audit is None
    else:
        assert transition.audit is not None
        assert (transition.audit.action, transition.audit.outcome) == (action, outcome)
    assert allowed(source, event)


@pytest.mark.parametrize(("source", "event"), REFUSED)
def test_a_refused_transition_writes_nothing_and_says_why(source: State, event: Event):
    # Given an approval in `source`, where `event` is not allowed
    # When it happens / Then it is refused with the reason the visitor reads
    with pytest.raises(TransitionRefusedError) as refused:
        step(source, event)
    assert (refused.value.state, refused.value.event) == (source, event)
    assert refused.value.reason == REASONS[source]
    assert "nothing was written" in str(refused.value)
    assert not allowed(source, event)


def test_the_table_is_exactly_the_listed_transitions():
    # Given the table / Then it has no row these tests do not pin, and no duplicate rows
    assert set(TABLE) == set(ALLOWED)
    assert len(TRANSITIONS) == len(TABLE)


def test_a_delivered_decision_cannot_be_reopened_closed_or_decided_again():
    # Given a decision the run got / When anything but a view or a timeout claims it
    for event in (
        Event.decide,
        Event.delivery_failed,
        Event.task_closed,
        Event.cancel,
        Event.run_ended,
    ):
        # Then it is refused: a delivered decision is final
        assert not allowed(State.delivered, event)


def test_the_decision_outcome_is_filled_from_the_record():
    # Given the deliver transition of an approved decision
    audit = step(State.decided, Event.deliver).audit
    assert audit is not None
    # When its outcome is written / Then it is the decision
    assert audit.outcome_for(_approval(status=ApprovalStatus.approved)) == "approved"
    assert audit.outcome_for(_approval(status=ApprovalStatus.rejected)) == "rejected"


@pytest.mark.parametrize(
    ("changes", "now", "state"),
    [
        ({}, NOW, State.pending),
        ({}, NOW + timedelta(hours=1), State.expired),
        ({"status": ApprovalStatus.approved, "decided_at": NOW}, NOW, State.decided),
        (
            {"status": ApprovalStatus.rejected, "decided_at": NOW, "delivered_at": NOW},
            NOW,
            State.delivered,
        ),
        ({"status": ApprovalStatus.timed_out}, NOW, State.timed_out),
        ({"status": ApprovalStatus.cancelled}, NOW, State.cancelled),
        ({"status": ApprovalStatus.superseded}, NOW, State.superseded),
        (
            {"status": ApprovalStatus.approved, "decided_at": NOW},
            NOW + timedelta(days=2),
            State.decided,
        ),
    ],
)
def test_the_state_comes_from_the_record_and_the_clock(
    changes: dict[str, object], now: datetime, state: State
):
    # Given a record / When its state is asked at `now` / Then it is `state`
    assert state_of(_approval(**changes), now=now) is state


def test_no_record_is_the_new_state():
    assert state_of(None, now=NOW) is State.new
