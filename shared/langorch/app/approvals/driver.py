"""Drives the approval lifecycle table: the run's side (timeout, cancel) and the shared driver.

The use-cases here and in :mod:`langorch.app.approvals.decisions` read an approval, ask the table
(:mod:`langorch.domain.approvals.lifecycle`) what an event does in its state, perform the write
the transition names (:func:`perform`) and write its audit line (:func:`record`). The store's
conditional writes stay the guard under concurrency: a write that lost a race is retried from a
fresh read (:func:`drive`), so the table decides again in the state the race left.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from langorch.app.approvals.ports import ApprovalsStore, Clock
from langorch.domain.approvals.audit import Visitor
from langorch.domain.approvals.lifecycle import (
    Event,
    State,
    Transition,
    TransitionRefusedError,
    Write,
    state_of,
    step,
)
from langorch.domain.approvals.record import (
    Approval,
    ApprovalStatus,
    AuditAction,
    AuditEntry,
    approval_id_for,
    bounded,
    decision_output,
)
from langorch.domain.errors import StorageError

logger = logging.getLogger(__name__)

MAX_USER_AGENT_CHARS = 256
RACE_ATTEMPTS = 3
"""How often a lifecycle event is retried after its conditional write lost a race (each retry
reads the approval again and asks the table again)."""


# --------------------------------------------------------------------------------------------
# Timeout and cancel (the run's side)
# --------------------------------------------------------------------------------------------


def resume_after_timeout(
    run_id: str, interrupt_id: str, *, approvals: ApprovalsStore, clock: Clock
) -> dict[str, Any]:
    """What a run whose approval task timed out resumes with (the run segment calls this).

    A decision recorded while the approval was open stands: if its delivery was lost (a crash
    between the write and ``SendTaskSuccess``), the run resumes with it, not ``timed_out``.
    It is claimed by marking it delivered, so a decider still on its way, finding the task
    closed, can no longer turn it into ``timed_out`` behind the run's back. Without a recorded
    decision the approval expires.

    Returns:
        The recorded decision's ``{"decision", "approver", "comment", "edits"}``, or
        ``{"decision": "timed_out"}``.

    Raises:
        StorageError: DynamoDB failed (the segment fails and is retried).
    """
    approval_id = current_approval_id(approvals, run_id, interrupt_id)
    driven = drive(approvals, approval_id, Event.timeout, clock)
    if driven is None or driven[0].target is State.timed_out:
        if driven is not None:
            logger.info("approval timed out", extra={"approval_id": approval_id, "run_id": run_id})
        return {"decision": "timed_out"}
    recorded = driven[1]
    logger.warning(
        "decision recovered at timeout",
        extra={"approval_id": approval_id, "run_id": run_id, "decision": recorded.status.value},
    )
    return decision_output(recorded)


def expire_approval(
    run_id: str, interrupt_id: str, *, approvals: ApprovalsStore, clock: Clock
) -> bool:
    """Close the approval of a run's interrupt as ``timed_out`` if nobody decided it.

    A missing or closed approval, or a recorded decision, is left as it is.

    Returns:
        Whether this call closed it.
    """
    approval_id = current_approval_id(approvals, run_id, interrupt_id)
    sources = frozenset({State.pending, State.expired})
    return drive(approvals, approval_id, Event.timeout, clock, sources=sources) is not None


def close_for_ended_run(
    run_id: str,
    interrupt_id: str,
    *,
    approvals: ApprovalsStore,
    clock: Clock,
    actor: str | None = None,
    keep_decision: bool = False,
) -> bool:
    """Close the approval a cancelled run was parked on, so no later click resumes anything.

    A decision the run already got stays as it is (the table refuses ``cancel`` there).

    Args:
        run_id: the run.
        interrupt_id: the interrupt it was parked on.
        approvals: the approvals store.
        clock: the clock.
        actor: who ended the run (kept in the audit).
        keep_decision: leave a decision recorded but not delivered as it is (a failed run's
            redrive parks on this approval again and gets it); only an open one is closed.

    Returns:
        Whether this call closed it.
    """
    approval_id = current_approval_id(approvals, run_id, interrupt_id)
    sources = frozenset({State.pending, State.expired}) if keep_decision else None
    return (
        drive(approvals, approval_id, Event.cancel, clock, sources=sources, actor=actor) is not None
    )


MAX_GENERATIONS = 100
"""Questions asked again at one pause point before the walk stops (each a changed input)."""


def newest_at(
    approvals: ApprovalsStore, run_id: str, interrupt_id: str
) -> tuple[int, Approval | None]:
    """The newest approval asked at a run's pause point, and its generation.

    A question asked again there because what it shows changed supersedes the one before and
    takes the next generation's id (:func:`approval_id_for`): the walk follows superseded
    ones to the newest that exists (one read per generation; nearly always one).

    Returns:
        The generation and the approval (``(1, None)``: none asked yet).
    """
    generation = 1
    found = approvals.get(approval_id_for(run_id, interrupt_id))
    while (
        found is not None
        and found.status is ApprovalStatus.superseded
        and generation < MAX_GENERATIONS
    ):
        newer = approvals.get(approval_id_for(run_id, interrupt_id, generation + 1))
        if newer is None:
            break
        generation, found = generation + 1, newer
    return generation, found


def current_approval_id(approvals: ApprovalsStore, run_id: str, interrupt_id: str) -> str:
    """The id of the newest approval asked at a run's pause point (the first's if none)."""
    generation, _ = newest_at(approvals, run_id, interrupt_id)
    return approval_id_for(run_id, interrupt_id, generation)


def supersede_id(
    approval_id: str, *, approvals: ApprovalsStore, clock: Clock, actor: str | None = None
) -> bool:
    """Supersede one open approval by its id (see :func:`supersede`)."""
    return drive(approvals, approval_id, Event.supersede, clock, actor=actor) is not None


def supersede(
    run_id: str,
    interrupt_id: str,
    *,
    approvals: ApprovalsStore,
    clock: Clock,
    actor: str | None = None,
) -> bool:
    """Close the open approval of a run's interrupt because a newer request asks again.

    Its links then say it was superseded and decide nothing; a decision already recorded is
    left as it is (the table has no ``supersede`` there).

    Args:
        run_id: the run.
        interrupt_id: the interrupt the run was parked on.
        approvals: the approvals store.
        clock: the clock.
        actor: who redrove the run (kept in the audit).

    Returns:
        Whether this call superseded it.
    """
    approval_id = current_approval_id(approvals, run_id, interrupt_id)
    return drive(approvals, approval_id, Event.supersede, clock, actor=actor) is not None


# --------------------------------------------------------------------------------------------
# Driving the lifecycle table: perform a transition's write, write its audit line
# --------------------------------------------------------------------------------------------


def drive(
    store: ApprovalsStore,
    approval_id: str,
    event: Event,
    clock: Clock,
    *,
    sources: frozenset[State] | None = None,
    actor: str | None = None,
) -> tuple[Transition, Approval] | None:
    """Apply ``event`` to the stored approval; ``None`` when the table refuses it.

    A conditional write that loses a race (someone moved the approval since it was read) is
    retried from a fresh read, so the table decides again in the new state.
    """
    for _ in range(RACE_ATTEMPTS):
        current, now = store.get(approval_id), clock()
        state = state_of(current, now=now)
        if current is None or (sources is not None and state not in sources):
            return None
        try:
            transition = step(state, event)
        except TransitionRefusedError:
            return None
        done = perform(store, current, transition, now)
        if done is not None:
            who = actor or (done.decided_by if transition.target is State.delivered else None)
            record(store, done, transition, at=now, actor=who)
            return transition, done
    return None


def apply_event(
    store: ApprovalsStore,
    approval: Approval,
    event: Event,
    now: datetime,
    actor: str | None,
    visitor: Visitor | None,
    *,
    tolerant: bool = False,
) -> Approval | None:
    """Apply ``event`` to the approval in hand: its write, then its audit line (always)."""
    transition = step(state_of(approval, now=now), event)
    done = perform(store, approval, transition, now, tolerant=tolerant)
    record(store, approval, transition, at=now, actor=actor, visitor=visitor)
    return done


_CLOSING = {
    Write.mark_timed_out: ApprovalStatus.timed_out,
    Write.mark_cancelled: ApprovalStatus.cancelled,
    Write.mark_superseded: ApprovalStatus.superseded,
}
"""The writes that close an approval (``ApprovalsStore.mark``), and the status each sets."""


def perform(
    store: ApprovalsStore,
    approval: Approval,
    transition: Transition,
    now: datetime,
    *,
    tolerant: bool = False,
) -> Approval | None:
    """The transition's write; the approval after it, or ``None`` when the write lost a race.

    ``tolerant``: a failure to note a delivery that happened is logged, not raised (it only
    costs one more send on a later visit).
    """
    write, approval_id = transition.write, approval.approval_id
    if write is Write.none:
        return approval
    if write is Write.mark_delivered:
        try:
            return store.mark_delivered(approval_id, now)
        except StorageError:
            if not tolerant:
                raise
            logger.warning(
                "approval decision delivered but not marked delivered",
                extra={"approval_id": approval_id, "run_id": approval.run_id},
            )
            return approval
    if write is Write.reopen:
        return approval if store.reopen(approval) else None
    if write in _CLOSING:
        status = _CLOSING[write]
        return (
            approval.model_copy(update={"status": status})
            if store.mark(approval_id, status)
            else None
        )
    raise ValueError(f"{write.value} is written by its own use-case, not by the lifecycle driver")


# --------------------------------------------------------------------------------------------
# Audit
# --------------------------------------------------------------------------------------------


def record(
    store: ApprovalsStore,
    approval: Approval,
    transition: Transition,
    *,
    at: datetime,
    actor: str | None = None,
    visitor: Visitor | None = None,
    detail: str | None = None,
) -> None:
    """Write the audit line ``transition`` names (if any); ``detail`` fills a
    :data:`~langorch.domain.approvals.lifecycle.DETAIL_OUTCOME`."""
    if transition.audit is None:
        return
    line = transition.audit
    audit(
        store,
        approval.approval_id,
        line.action,
        line.outcome_for(approval, detail),
        at=at,
        actor=actor,
        visitor=visitor,
    )


def audit(
    store: ApprovalsStore,
    approval_id: str,
    action: AuditAction,
    outcome: str,
    *,
    at: datetime,
    actor: str | None = None,
    visitor: Visitor | None = None,
) -> None:
    """Append one line to the approval's audit trail (with where it came from, if from outside).

    Args:
        store: the approvals store.
        approval_id: whose trail.
        action: what happened (``view``, ``decide``, ``refused``, ...).
        outcome: how it ended (``shown``, ``approved``, ``link_expired``, ...).
        at: when.
        actor: the approver's address once a link verified; the link's ref otherwise.
        visitor: who caused it from outside (address, user agent, method), if anyone did.
    """
    user_agent = visitor.user_agent if visitor else None
    store.append_audit(
        AuditEntry(
            approval_id=approval_id,
            at=at,
            action=action,
            outcome=outcome,
            actor=actor,
            source_ip=visitor.source_ip if visitor else None,
            user_agent=bounded(user_agent, MAX_USER_AGENT_CHARS) if user_agent else None,
            method=visitor.method.upper() if visitor else None,
            channel=visitor.channel if visitor else None,
            operator=visitor.operator if visitor else None,
        )
    )
