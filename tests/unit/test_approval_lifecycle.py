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

S, E, W = State, Event, Write  # short, so that each row of the table is one line

# (source, event) -> (target, write, audit action, audit outcome); None: no audit line.
ALLOWED: dict[tuple[State, Event], tuple[State, Write, str | None, str | None]] = {
    (S.new, E.request): (S.pending, W.put_pending, "requested", "pending"),
    (S.pending, E.view): (S.pending, W.none, "view", "shown"),
    (S.expired, E.view): (S.expired, W.none, "view", "link_expired"),
    (S.decided, E.view): (S.decided, W.none, "view", "already_decided"),
    (S.delivered, E.view): (S.delivered, W.none, "view", "already_decided"),
    (S.timed_out, E.view): (S.timed_out, W.none, "view", "link_expired"),
    (S.cancelled, E.view): (S.cancelled, W.none, "view", "run_ended"),
    (S.pending, E.decide): (S.decided, W.decide, None, None),
    (S.decided, E.deliver): (S.delivered, W.mark_delivered, "decide", DECISION_OUTCOME),
    (S.decided, E.delivery_failed): (S.pending, W.reopen, "refused", "delivery_failed"),
    (S.decided, E.task_closed): (S.timed_out, W.mark_timed_out, "too_late", "task_closed"),
    (S.decided, E.redeliver): (S.delivered, W.mark_delivered, "redeliver", "delivered"),
    (S.decided, E.redeliver_closed): (S.delivered, W.mark_delivered, "redeliver", "task_closed"),
    (S.decided, E.redeliver_failed): (S.decided, W.none, "redeliver", "failed"),
    (S.decided, E.hold): (S.decided, W.none, "held", "run_not_running"),
    (S.decided, E.timeout): (S.delivered, W.mark_delivered, "redeliver", "at_timeout"),
    (S.delivered, E.timeout): (S.delivered, W.mark_delivered, "redeliver", "at_timeout"),
    (S.pending, E.timeout): (S.timed_out, W.mark_timed_out, "expired", "timed_out"),
    (S.expired, E.timeout): (S.timed_out, W.mark_timed_out, "expired", "timed_out"),
    (S.pending, E.run_ended): (S.cancelled, W.mark_cancelled, "refused", "run_ended"),
    (S.pending, E.run_moved_on): (S.timed_out, W.mark_timed_out, "too_late", "run_moved_on"),
    (S.expired, E.run_ended): (S.cancelled, W.mark_cancelled, "refused", "run_ended"),
    (S.expired, E.run_moved_on): (S.timed_out, W.mark_timed_out, "too_late", "run_moved_on"),
    (S.pending, E.cancel): (S.cancelled, W.mark_cancelled, "cancelled", "run_cancelled"),
    (S.expired, E.cancel): (S.cancelled, W.mark_cancelled, "cancelled", "run_cancelled"),
    (S.decided, E.cancel): (S.cancelled, W.mark_cancelled, "cancelled", "run_cancelled"),
    # Policies (issue 13): votes, delegations and timers only while pending; the use-case
    # fills the outcome (the vote, the delegate, why the timer fired).
    (S.pending, E.vote): (S.pending, W.record_vote, "vote", "{detail}"),
    (S.pending, E.delegate): (S.pending, W.delegate, "delegated", "{detail}"),
    (S.pending, E.remind): (S.pending, W.advance_timer, "reminded", "{detail}"),
    (S.pending, E.escalate): (S.pending, W.advance_timer, "escalated", "{detail}"),
    # Superseded (issue 29): a newer request asks again; its links only say so.
    (S.pending, E.supersede): (S.superseded, W.mark_superseded, "superseded", "newer_request"),
    (S.expired, E.supersede): (S.superseded, W.mark_superseded, "superseded", "newer_request"),
    (S.superseded, E.view): (S.superseded, W.none, "view", "superseded"),
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
