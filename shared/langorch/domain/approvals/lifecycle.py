"""The approval lifecycle as a state table: states, events, allowed transitions, effects.

Pure data and two lookups. The app layer (:mod:`langorch.app.approvals.decisions`) reads an
approval, asks :func:`state_of` where it is, asks :func:`step` what an event does there, and
performs the named :class:`Write` (a conditional write in the store) and the audit line the step
names. A pair that is not in the table is refused with :class:`TransitionRefusedError`, whose
``reason`` is what the refusal is audited and shown as.

The store's conditional writes stay the guard under concurrency: the table says what the app
*tries*; when a write loses a race, the app reads the approval again and asks the table again.

States (derived from the record and the clock)::

    pending    nobody decided, not expired          expired    pending, but past its expiry
    decided    a decision recorded, not delivered   delivered  the run got the decision (final)
    timed_out  closed: its task timed out           cancelled  closed: its run ended
    superseded closed: a newer request asks again

Transitions (``source --event--> target: write; audit (action, outcome)``)::

    (new)     --request------> pending    put_pending      requested/pending
    pending   --view---------> pending    -                view/shown
    pending   --decide-------> decided    decide           - (audited once delivered)
    decided   --deliver------> delivered  mark_delivered   decide/<decision>
    decided   --delivery_failed--> pending  reopen         refused/delivery_failed
    decided   --task_closed--> timed_out  mark_timed_out   too_late/task_closed
    decided   --redeliver----> delivered  mark_delivered   redeliver/delivered
    decided   --redeliver_closed--> delivered  mark_delivered  redeliver/task_closed
    decided   --redeliver_failed--> decided  -             redeliver/failed
    decided   --hold---------> decided    -                held/run_not_running
    decided   --timeout------> delivered  mark_delivered   redeliver/at_timeout
    delivered --timeout------> delivered  mark_delivered   redeliver/at_timeout
    pending   --timeout------> timed_out  mark_timed_out   expired/timed_out
    pending   --run_ended----> cancelled  mark_cancelled   refused/run_ended
    pending   --run_moved_on-> timed_out  mark_timed_out   too_late/run_moved_on
    pending   --cancel-------> cancelled  mark_cancelled   cancelled/run_cancelled
    decided   --cancel-------> cancelled  mark_cancelled   cancelled/run_cancelled
    pending   --supersede----> superseded mark_superseded  superseded/newer_request

A redrive that asks the question again (another workflow version, an earlier step) supersedes
the open approval it does not keep; its links then only say so (``view/superseded``).

Policies (issue 13: :mod:`langorch.domain.approvals.policy`) stay in ``pending`` until a vote
completes the policy; then that vote's request takes ``decide`` like a single decision::

    pending   --vote---------> pending    record_vote      vote/<approved|rejected>
    pending   --delegate-----> pending    delegate         delegated/<to address>
    pending   --remind-------> pending    advance_timer    reminded/<reminder n: why>
    pending   --escalate-----> pending    advance_timer    escalated/<level n: why>

``expired`` behaves as ``pending`` for ``timeout``, ``cancel``, ``run_ended`` and
``run_moved_on`` and refuses a decision; a ``view`` is allowed everywhere and only audits what
the visitor was shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from langorch.domain.approvals.record import DECISIONS, Approval, ApprovalStatus, AuditAction
from langorch.domain.errors import LangorchError


class State(StrEnum):
    """Where an approval is in its lifecycle (finer than the stored ``ApprovalStatus``)."""

    new = "new"
    pending = "pending"
    expired = "expired"
    decided = "decided"
    delivered = "delivered"
    timed_out = "timed_out"
    cancelled = "cancelled"
    superseded = "superseded"


class Event(StrEnum):
    """What can happen to an approval."""

    request = "request"
    view = "view"
    decide = "decide"
    deliver = "deliver"
    delivery_failed = "delivery_failed"
    task_closed = "task_closed"
    redeliver = "redeliver"
    redeliver_closed = "redeliver_closed"
    redeliver_failed = "redeliver_failed"
    hold = "hold"
    timeout = "timeout"
    run_ended = "run_ended"
    run_moved_on = "run_moved_on"
    cancel = "cancel"
    vote = "vote"
    delegate = "delegate"
    remind = "remind"
    escalate = "escalate"
    supersede = "supersede"


class Write(StrEnum):
    """The store write a transition performs (each a conditional write in the adapter)."""

    none = "none"
    put_pending = "put_pending"
    decide = "decide"
    mark_delivered = "mark_delivered"
    reopen = "reopen"
    mark_timed_out = "mark_timed_out"
    mark_cancelled = "mark_cancelled"
    mark_superseded = "mark_superseded"
    record_vote = "record_vote"
    delegate = "delegate"
    advance_timer = "advance_timer"


DECISION_OUTCOME = "{decision}"
"""An audit outcome filled with the decision (``approved`` / ``rejected``) when written."""
DETAIL_OUTCOME = "{detail}"
"""An audit outcome filled by the use-case (the vote, the delegate, why a timer fired)."""


@dataclass(frozen=True)
class Audit:
    """The audit line a transition writes."""

    action: AuditAction
    outcome: str

    def outcome_for(self, approval: Approval, detail: str | None = None) -> str:
        """The outcome, with :data:`DECISION_OUTCOME` replaced by the recorded decision and
        :data:`DETAIL_OUTCOME` by ``detail``."""
        if self.outcome == DECISION_OUTCOME:
            return approval.status.value
        if self.outcome == DETAIL_OUTCOME:
            return detail or ""
        return self.outcome


@dataclass(frozen=True)
class Transition:
    """One allowed row of the table."""

    source: State
    event: Event
    target: State
    write: Write
    audit: Audit | None


def _t(
    source: State, event: Event, target: State, write: Write, audit: tuple[AuditAction, str] | None
) -> Transition:
    return Transition(source, event, target, write, Audit(*audit) if audit else None)


S, E, W = State, Event, Write
TRANSITIONS: tuple[Transition, ...] = (
    _t(S.new, E.request, S.pending, W.put_pending, ("requested", "pending")),
    # Viewing decides nothing: it audits what the visitor was shown.
    _t(S.pending, E.view, S.pending, W.none, ("view", "shown")),
    _t(S.expired, E.view, S.expired, W.none, ("view", "link_expired")),
    _t(S.decided, E.view, S.decided, W.none, ("view", "already_decided")),
    _t(S.delivered, E.view, S.delivered, W.none, ("view", "already_decided")),
    _t(S.timed_out, E.view, S.timed_out, W.none, ("view", "link_expired")),
    _t(S.cancelled, E.view, S.cancelled, W.none, ("view", "run_ended")),
    _t(S.superseded, E.view, S.superseded, W.none, ("view", "superseded")),
    # Decide once: record, deliver (SendTaskSuccess), mark delivered.
    _t(S.pending, E.decide, S.decided, W.decide, None),
    _t(S.decided, E.deliver, S.delivered, W.mark_delivered, ("decide", DECISION_OUTCOME)),
    _t(S.decided, E.delivery_failed, S.pending, W.reopen, ("refused", "delivery_failed")),
    _t(S.decided, E.task_closed, S.timed_out, W.mark_timed_out, ("too_late", "task_closed")),
    # A decision recorded but lost in a crash reaches the run later, as recorded.
    _t(S.decided, E.redeliver, S.delivered, W.mark_delivered, ("redeliver", "delivered")),
    _t(S.decided, E.redeliver_closed, S.delivered, W.mark_delivered, ("redeliver", "task_closed")),
    _t(S.decided, E.redeliver_failed, S.decided, W.none, ("redeliver", "failed")),
    # Its run is not running (the execution ended while the run waited on it): the decision is
    # kept, undelivered, for the run's next park after a redrive, never asked again.
    _t(S.decided, E.hold, S.decided, W.none, ("held", "run_not_running")),
    # The run's task timed out: a recorded decision stands, otherwise the approval expires.
    _t(S.decided, E.timeout, S.delivered, W.mark_delivered, ("redeliver", "at_timeout")),
    # (Delivered by a visit that found the task closed: the timed-out run resumes with it.)
    _t(S.delivered, E.timeout, S.delivered, W.mark_delivered, ("redeliver", "at_timeout")),
    _t(S.pending, E.timeout, S.timed_out, W.mark_timed_out, ("expired", "timed_out")),
    _t(S.expired, E.timeout, S.timed_out, W.mark_timed_out, ("expired", "timed_out")),
    # A decision finds the run gone or moved on: close the approval, nothing resumes.
    _t(S.pending, E.run_ended, S.cancelled, W.mark_cancelled, ("refused", "run_ended")),
    _t(S.pending, E.run_moved_on, S.timed_out, W.mark_timed_out, ("too_late", "run_moved_on")),
    # (Expired between the link check and the run check: closed the same way.)
    _t(S.expired, E.run_ended, S.cancelled, W.mark_cancelled, ("refused", "run_ended")),
    _t(S.expired, E.run_moved_on, S.timed_out, W.mark_timed_out, ("too_late", "run_moved_on")),
    # The run was cancelled: anything the run did not get closes.
    _t(S.pending, E.cancel, S.cancelled, W.mark_cancelled, ("cancelled", "run_cancelled")),
    _t(S.expired, E.cancel, S.cancelled, W.mark_cancelled, ("cancelled", "run_cancelled")),
    _t(S.decided, E.cancel, S.cancelled, W.mark_cancelled, ("cancelled", "run_cancelled")),
    # A newer request asks again (a redrive onto another version or from an earlier step).
    _t(S.pending, E.supersede, S.superseded, W.mark_superseded, ("superseded", "newer_request")),
    _t(S.expired, E.supersede, S.superseded, W.mark_superseded, ("superseded", "newer_request")),
    # Policies: votes, delegations and timers keep it pending until a vote completes it.
    _t(S.pending, E.vote, S.pending, W.record_vote, ("vote", DETAIL_OUTCOME)),
    _t(S.pending, E.delegate, S.pending, W.delegate, ("delegated", DETAIL_OUTCOME)),
    _t(S.pending, E.remind, S.pending, W.advance_timer, ("reminded", DETAIL_OUTCOME)),
    _t(S.pending, E.escalate, S.pending, W.advance_timer, ("escalated", DETAIL_OUTCOME)),
)
del S, E, W

TABLE: dict[tuple[State, Event], Transition] = {(t.source, t.event): t for t in TRANSITIONS}

REFUSAL_REASONS: dict[State, str] = {
    State.new: "not_found",
    State.pending: "still_pending",
    State.expired: "link_expired",
    State.decided: "already_decided",
    State.delivered: "already_decided",
    State.timed_out: "link_expired",
    State.cancelled: "run_ended",
    State.superseded: "superseded",
}
"""Why an event is refused in a state: the audited outcome and the refusal the visitor reads."""


class TransitionRefusedError(LangorchError):
    """The event is not allowed in the approval's state (nothing is written).

    Attributes:
        state: where the approval is.
        event: what was refused.
        reason: ``already_decided``, ``link_expired``, ``run_ended``, ``superseded``,
            ``still_pending`` or ``not_found`` — the audited outcome of the refusal.
    """

    def __init__(self, state: State, event: Event) -> None:
        self.state = state
        self.event = event
        self.reason = REFUSAL_REASONS[state]
        super().__init__(
            f"an approval that is {state.value} cannot take the event {event.value!r} "
            f"({self.reason}); nothing was written"
        )


def state_of(approval: Approval | None, *, now: datetime) -> State:
    """Where ``approval`` is at ``now`` (``new`` when there is no record yet)."""
    if approval is None:
        return State.new
    if approval.status in DECISIONS:
        return State.delivered if approval.delivered_at is not None else State.decided
    if approval.status is ApprovalStatus.timed_out:
        return State.timed_out
    if approval.status is ApprovalStatus.cancelled:
        return State.cancelled
    if approval.status is ApprovalStatus.superseded:
        return State.superseded
    return State.expired if now >= approval.expires_at else State.pending


def step(state: State, event: Event) -> Transition:
    """The transition ``event`` makes from ``state``.

    Raises:
        TransitionRefusedError: the table has no such transition (nothing may be written).
    """
    found = TABLE.get((state, event))
    if found is None:
        raise TransitionRefusedError(state, event)
    return found


def allowed(state: State, event: Event) -> bool:
    """Whether ``event`` is allowed in ``state``."""
    return (state, event) in TABLE
