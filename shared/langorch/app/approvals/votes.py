"""Approval policies at work: votes, delegation, reminders and escalations (issue 13).

Each use-case asks the lifecycle table (:mod:`langorch.domain.approvals.lifecycle`) what its
event does, performs the store's conditional write and writes the audit line the table names:

- a **vote** takes the approver's slot (one per approver link) while the approval is
  decidable; the votes are then counted (:func:`langorch.domain.approvals.votes.progress`)
  and, when they complete the policy, the page use-case writes the decision once, with every
  vote (the decision's write requires the vote count it read, so none is left out);
- a **delegation** hands an approver's slot to someone they name on the page, who is emailed
  a link of their own;
- a **timer** (reminder, escalation) moves its counter from the value it saw, so a timer fired
  twice (Scheduler retries, the local ticker) sends once; the next timer is then scheduled,
  and every pending timer is cancelled once the approval is decided or closed.
"""

from __future__ import annotations

import logging
import secrets as random_source
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from langorch.app.approvals.channels import post_in_threads
from langorch.app.approvals.driver import record
from langorch.app.approvals.keys import load_signing_keys
from langorch.app.approvals.ports import ApprovalsStore, RequestPorts
from langorch.app.approvals.requests import _email_one
from langorch.domain.approvals.audit import Visitor
from langorch.domain.approvals.lifecycle import Event, State, state_of, step
from langorch.domain.approvals.policy import Vote
from langorch.domain.approvals.record import (
    Approval,
    ApprovalStatus,
    approver_ref,
    bounded,
)
from langorch.domain.approvals.votes import (
    DelegatedAwayError,
    DelegationRefusedError,
    Progress,
    Timer,
    due_timers,
    may_be_asked,
    next_timer,
    pool,
    progress,
    slot_ref,
)
from langorch.domain.errors import NotFoundError
from langorch.domain.identities import IdentityError, canonical_identity

logger = logging.getLogger(__name__)

MAX_ADDRESS_CHARS = 254


@dataclass(frozen=True)
class Tallied:
    """The votes after one was cast."""

    approval: Approval
    """The approval as read after the vote, with the current votes in ``votes``."""
    progress: Progress
    votes: list[Vote]
    recorded: bool
    """``False``: this approver had voted before (their earlier vote stands)."""


# --------------------------------------------------------------------------------------------
# Votes
# --------------------------------------------------------------------------------------------


def cast_vote(
    store: ApprovalsStore,
    approval: Approval,
    voter: str,
    decision: ApprovalStatus,
    comment: str | None,
    *,
    now: datetime,
    visitor: Visitor | None = None,
) -> Tallied:
    """Record ``voter``'s vote (once per approver link), then count every vote.

    Raises:
        DelegatedAwayError: the voter handed their vote to someone else.
        AlreadyDecidedError: decided already (later voters see the outcome).
        LinkExpiredError, RunEndedError: the approval is no longer decidable.
    """
    if approval.has_delegated(voter):
        raise DelegatedAwayError(f"approval {approval.approval_id}: {voter} delegated")
    transition = step(state_of(approval, now=now), Event.vote)
    vote = Vote(
        approver=voter,
        decision="approved" if decision is ApprovalStatus.approved else "rejected",
        at=now,
        comment=comment or "",
        on_behalf_of=approval.delegator_of(voter),
    )
    recorded = store.record_vote(approval.approval_id, slot_ref(approval, voter), vote)
    if recorded:
        record(
            store, approval, transition, at=now, actor=voter, visitor=visitor, detail=vote.decision
        )
    return recount(store, approval.approval_id, recorded=recorded)


def recount(store: ApprovalsStore, approval_id: str, *, recorded: bool = False) -> Tallied:
    """Count the approval's votes now (the approval is read first, then its votes, so a
    decision written with these votes requires no vote arrived since)."""
    current = store.get(approval_id)
    if current is None:
        raise NotFoundError(f"approval {approval_id} does not exist")
    votes = store.votes(approval_id)
    counted = progress(current, votes)
    shown = current.model_copy(update={"votes": votes})
    return Tallied(shown, counted, votes, recorded)


# --------------------------------------------------------------------------------------------
# Delegation
# --------------------------------------------------------------------------------------------


def delegate_vote(
    store: ApprovalsStore,
    approval: Approval,
    delegator: str,
    to: str,
    *,
    now: datetime,
    visitor: Visitor | None = None,
) -> Approval:
    """Hand ``delegator``'s vote to ``to`` (recorded and audited); returns the approval after.

    People are compared canonically (:mod:`langorch.domain.identities`): ``ana+x@`` is ana, so
    nobody delegates to themselves, to someone who decides already or to the run's starter by
    another spelling.

    Raises:
        DelegationRefusedError: delegation is off, ``to`` is not an address (or mixes scripts),
            is the delegator or someone who can decide already, or the delegator voted or
            delegated before.
    """
    address = to.strip()
    policy = approval.policy
    deciders = {approval.person(d) for d in approval.deciders()}
    allowed = (
        policy is not None
        and policy.delegation
        and _is_address(address)
        and approval.person(address) not in deciders
        and may_be_asked(approval, address)
    )
    if not allowed or approval.delegator_of(delegator) is not None:
        raise DelegationRefusedError(f"approval {approval.approval_id}: delegation refused")
    transition = step(state_of(approval, now=now), Event.delegate)
    slot = slot_ref(approval, delegator)
    if not store.delegate(approval.approval_id, slot, delegator, address, now):
        raise DelegationRefusedError(f"approval {approval.approval_id}: slot used already")
    record(store, approval, transition, at=now, actor=delegator, visitor=visitor, detail=address)
    fresh = store.get(approval.approval_id)
    return fresh if fresh is not None else approval


def _is_address(text: str) -> bool:
    """One plain address (no display name), in one script (a look-alike is refused)."""
    name, at, domain = text.partition("@")
    plain = all(c.isprintable() and not c.isspace() for c in text)
    if not (name and at and "." in domain and plain and len(text) <= MAX_ADDRESS_CHARS):
        return False
    try:
        canonical_identity(text)
    except IdentityError:
        return False
    return True


def email_delegate(
    approval: Approval,
    delegator: str,
    to: str,
    ports: RequestPorts,
    *,
    randbelow: Callable[[int], int] = random_source.randbelow,
) -> None:
    """Send the delegate their own link, saying who handed them the vote."""
    keys = load_signing_keys(ports.secrets, ports.settings.link_signing_secret)
    ref = approver_ref(approval.approval_id, to)
    why = f"{bounded(delegator, 200)} handed you their vote on this approval"
    _email_one(approval, to, ref, keys, ports, randbelow, reason=why)


# --------------------------------------------------------------------------------------------
# Timers
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TimersFired:
    """What one wake-up did."""

    fired: list[Timer]
    next_at: datetime | None


def fire_timers(
    approval_id: str,
    ports: RequestPorts,
    *,
    randbelow: Callable[[int], int] = random_source.randbelow,
) -> TimersFired:
    """Send the reminders and escalations due now, then schedule the next (or cancel).

    Safe to call any number of times at any time: a timer is sent only by the call that moved
    its counter, and nothing is sent once the approval is decided or closed.
    """
    store, now = ports.approvals, ports.clock()
    approval = store.get(approval_id)
    if approval is None or state_of(approval, now=now) is not State.pending:
        ports.approval_timers.cancel(approval_id)
        return TimersFired([], None)
    fired: list[Timer] = []
    for timer in due_timers(approval, now):
        current = store.get(approval_id)
        if current is None or not current.is_pending:
            break
        if _fire(current, timer, ports, randbelow):
            fired.append(timer)
    after = store.get(approval_id)
    upcoming = next_timer(after, now) if after is not None else None
    if upcoming is None:
        ports.approval_timers.cancel(approval_id)
        return TimersFired(fired, None)
    ports.approval_timers.schedule(approval_id, upcoming.due)
    return TimersFired(fired, upcoming.due)


def fire_escalation(
    approval: Approval,
    *,
    why: str,
    ports: RequestPorts,
    randbelow: Callable[[int], int] = random_source.randbelow,
) -> bool:
    """Escalate a pending approval to its policy's next level now, not when its timer is due
    (an approver's email bounced). ``False``: no level is left, or another call moved it."""
    policy = approval.policy
    level = approval.escalation_level
    if policy is None or level >= len(policy.escalation):
        return False
    timer = Timer(kind="escalation", index=level, due=ports.clock(), why=why)
    return _fire(approval, timer, ports, randbelow)


def _fire(
    approval: Approval, timer: Timer, ports: RequestPorts, randbelow: Callable[[int], int]
) -> bool:
    store, now = ports.approvals, ports.clock()
    event = Event.remind if timer.kind == "reminder" else Event.escalate
    transition = step(state_of(approval, now=now), event)
    counter, seen = (
        ("reminders_sent", approval.reminders_sent)
        if timer.kind == "reminder"
        else ("escalation_level", approval.escalation_level)
    )
    if timer.index != seen or not store.advance_timer(approval.approval_id, counter, seen):
        return False  # fired by another wake-up already
    record(
        store, approval, transition, at=now, detail=f"{timer.kind} {timer.index + 1}: {timer.why}"
    )
    after = store.get(approval.approval_id) or approval
    votes = store.votes(approval.approval_id)
    counted = progress(after, votes)
    if timer.kind == "reminder":
        to = [who for who in counted.waiting_on if may_be_asked(after, who)]
        why = f"Reminder: {timer.why}."
    else:
        level = after.policy.escalation[timer.index] if after.policy else None
        to = list(level.approvers) if level is not None else []
        why = f"Escalated to you: {timer.why}."
    keys = load_signing_keys(ports.secrets, ports.settings.link_signing_secret)
    for address in to:
        ref = approver_ref(after.approval_id, address)
        _email_one(
            after, address, ref, keys, ports, randbelow, reason=why, progress=counted.summary
        )
    if timer.kind == "reminder":
        told = f"Reminded {', '.join(to) or 'nobody'}: {timer.why} ({counted.summary})."
    else:
        told = f"Escalated to {', '.join(to) or 'nobody'}: {timer.why}."
    post_in_threads(after, told, ports)
    logger.info(
        "approval timer fired",
        extra={"approval_id": after.approval_id, "run_id": after.run_id, "timer": timer.kind},
    )
    return True


def next_step_text(approval: Approval, votes: list[Vote], now: datetime) -> dict[str, Any]:
    """What people read about a pending approval: progress, and what happens next and when."""
    counted = progress(approval, votes)
    upcoming = next_timer(approval, now)
    return {
        "progress": counted.summary,
        "voters": pool(approval),
        "waiting_on": counted.waiting_on,
        "next": None
        if upcoming is None
        else {"kind": upcoming.kind, "at": upcoming.due.isoformat(), "why": upcoming.why},
        "on_timeout": {"at": approval.expires_at.isoformat(), "then": approval.on_timeout},
    }
