"""Counting votes against a policy, and the timers a pending approval is waiting on.

Pure: the votes, the record and the clock come in; the outcome, the progress people read
("2 of 3 approvals; waiting for legal") and the next timer go out. The decision is replayed
over the votes in the order they were recorded, so the vote that completes the policy is the
one that decides, whatever arrives later.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from langorch.domain.approvals.policy import (
    ApprovalPolicy,
    QuorumRule,
    Vote,
    next_business_time,
)
from langorch.domain.approvals.record import Approval, ApprovalLinkError, approver_ref, new_approval

Outcome = Literal["approved", "rejected"]


class SelfApprovalError(ApprovalLinkError):
    """Separation of duties: the person who started the run may not approve it."""


class DelegatedAwayError(ApprovalLinkError):
    """This approver handed their vote to someone else: their link no longer votes."""


class DelegationRefusedError(ApprovalLinkError):
    """The delegation cannot be made (not allowed, bad address, already voted)."""


@dataclass(frozen=True)
class Tally:
    """One count: approvals of whom, how many needed, rejections."""

    name: str
    members: list[str]
    needed: int
    approved: int = 0
    rejected: int = 0

    @property
    def met(self) -> bool:
        """Enough approvals."""
        return self.approved >= self.needed

    @property
    def impossible(self) -> bool:
        """Too many rejections for ``needed`` approvals to be reachable."""
        return len(self.members) - self.rejected < self.needed


@dataclass(frozen=True)
class Progress:
    """Where the votes stand."""

    outcome: Outcome | None
    tallies: list[Tally]
    waiting_on: list[str] = field(default_factory=list)
    """Approvers who have not voted (nor delegated)."""
    deciding: Vote | None = None
    """The vote that completed the policy."""

    @property
    def summary(self) -> str:
        """``2 of 3 approvals; waiting for legal`` (people read this on the page and CLI)."""
        if len(self.tallies) == 1:
            only = self.tallies[0]
            text = f"{min(only.approved, only.needed)} of {only.needed} approvals"
            if only.rejected:
                text += f", {only.rejected} rejected"
        else:
            text = ", ".join(
                f"{t.name} {min(t.approved, t.needed)} of {t.needed}" for t in self.tallies
            )
        if self.outcome is not None:
            return f"{text}; {self.outcome}"
        open_groups = [t.name for t in self.tallies if not t.met]
        if len(self.tallies) > 1 and open_groups:
            return f"{text}; waiting for {', '.join(open_groups)}"
        if self.waiting_on:
            shown = ", ".join(self.waiting_on[:3]) + (" …" if len(self.waiting_on) > 3 else "")
            return f"{text}; waiting for {shown}"
        return text


def pool(approval: Approval) -> list[str]:
    """Who may vote, each person once (compared canonically): approvers and escalated levels,
    less the run's starter under separation of duties (delegates vote in their delegator's
    place, so they are not extra)."""
    policy = approval.policy or ApprovalPolicy()
    levels = policy.escalation[: approval.escalation_level]
    people = [*approval.approvers, *(w for level in levels for w in level.approvers)]
    starter = approval.started_by if policy.separation_of_duties else None
    voters: dict[str, str] = {}
    for who in people:
        if not approval.same_person(who, starter):
            voters.setdefault(approval.person(who), who)
    return list(voters.values())


def _tallies(approval: Approval, votes: Sequence[Vote]) -> list[Tally]:
    policy = approval.policy or ApprovalPolicy()
    everyone = pool(approval)
    quorum = policy.quorum
    if isinstance(quorum, QuorumRule) and quorum.groups:
        levels = policy.escalation[: approval.escalation_level]
        specs = [
            (name, [*g.approvers, *(w for lv in levels if lv.group == name for w in lv.approvers)])
            for name, g in quorum.groups.items()
        ]
        needed = [g.at_least for g in quorum.groups.values()]
    else:
        at_least = quorum.at_least if isinstance(quorum, QuorumRule) else None
        count = len(everyone) if quorum == "all" else (at_least or 1)
        specs, needed = [("approvals", everyone)], [count]
    tallies = []
    allowed = _people(approval, everyone)
    for (name, members), need in zip(specs, needed, strict=True):
        counted = _people(approval, members) & allowed
        # One vote per person: a person's spellings share their slot (slot_ref), and are
        # counted once here too.
        decided = {approval.person(v.slot): v.decision for v in votes}
        approved = sum(1 for p, d in decided.items() if p in counted and d == "approved")
        rejected = sum(1 for p, d in decided.items() if p in counted and d == "rejected")
        tallies.append(Tally(name, sorted(counted), need, approved, rejected))
    return tallies


def _people(approval: Approval, addresses: Sequence[str]) -> set[str]:
    """The persons (canonical identities) ``addresses`` name."""
    return {approval.person(a) for a in addresses}


def _outcome(approval: Approval, votes: Sequence[Vote], tallies: list[Tally]) -> Outcome | None:
    policy = approval.policy or ApprovalPolicy()
    allowed = _people(approval, pool(approval))
    if policy.rejection == "any_reject" and any(
        v.decision == "rejected" and approval.person(v.slot) in allowed for v in votes
    ):
        return "rejected"
    if all(t.met for t in tallies):
        return "approved"
    if policy.rejection == "count" and any(t.impossible for t in tallies):
        return "rejected"
    return None


def progress(approval: Approval, votes: Sequence[Vote]) -> Progress:
    """Replay ``votes`` (in recorded order) against the approval's policy.

    Returns:
        The outcome reached by the first vote that completes the policy (``None`` while
        open), the counts, and who has not voted yet.
    """
    ordered = sorted(votes, key=lambda v: v.at)
    outcome: Outcome | None = None
    deciding: Vote | None = None
    for n in range(1, len(ordered) + 1):
        outcome = _outcome(approval, ordered[:n], _tallies(approval, ordered[:n]))
        if outcome is not None:
            deciding = ordered[n - 1]
            ordered = ordered[:n]
            break
    voted = _people(approval, [*(v.slot for v in ordered), *approval.delegations.values()])
    waiting = [p for p in pool(approval) if approval.person(p) not in voted]
    return Progress(outcome, _tallies(approval, ordered), waiting, deciding)


def check_may_vote(approval: Approval, voter: str, decision: Outcome) -> None:
    """Separation of duties: the run's starter may not approve (nor approve through a
    delegate); rejecting their own run stays allowed.

    Raises:
        SelfApprovalError: the starter tried to approve.
    """
    policy = approval.policy
    if policy is None or not policy.separation_of_duties or not approval.started_by:
        return
    slot = approval.delegator_of(voter) or voter
    starter = approval.started_by
    if decision == "approved" and (
        approval.same_person(voter, starter) or approval.same_person(slot, starter)
    ):
        raise SelfApprovalError(
            f"approval {approval.approval_id}: {voter} started the run and may not approve it"
        )


def may_be_asked(approval: Approval, address: str) -> bool:
    """Whether ``address`` is asked to decide (not the run's starter under separation of
    duties: their approval would be refused, so they get no email)."""
    policy = approval.policy
    if policy is None or not policy.separation_of_duties or not approval.started_by:
        return True
    return not approval.same_person(address, approval.started_by)


def slot_ref(approval: Approval, voter: str) -> str:
    """The key of a voter's single vote: one per person, however their address is spelled
    (the ref of their canonical identity). A delegation takes the delegator's slot, so a
    delegator can neither vote after delegating nor delegate after voting; the delegate votes
    in their own slot, counted in the delegator's place."""
    return approver_ref(approval.approval_id, approval.person(voter))


# --------------------------------------------------------------------------------------------
# Timers: reminders and escalations
# --------------------------------------------------------------------------------------------

TimerKind = Literal["reminder", "escalation"]


@dataclass(frozen=True)
class Timer:
    """The next reminder or escalation of a pending approval."""

    kind: TimerKind
    index: int
    """Which reminder (0 = the first) or escalation level."""
    due: datetime
    """When it may fire (moved into business hours)."""
    why: str
    """Why it is sent, for the email and ``approvals show``."""


def timers(approval: Approval) -> list[Timer]:
    """The approval's remaining reminder and escalation timers, soonest first.

    Timers at or after the approval's expiry are left out (the timeout decides then).
    """
    policy = approval.policy
    if policy is None:
        return []
    hours, start = policy.business_hours, approval.created_at
    found: list[Timer] = []
    for i, delay in enumerate(policy.reminder_delays()):
        if i >= approval.reminders_sent:
            due = next_business_time(start + timedelta(seconds=delay), hours)
            why = f"no decision {_human(delay)} after the request (reminder {i + 1})"
            found.append(Timer("reminder", i, due, why))
    for i, delay in enumerate(policy.escalation_delays()):
        if i >= approval.escalation_level:
            due = next_business_time(start + timedelta(seconds=delay), hours)
            why = f"no decision {_human(delay)} after the request (escalation level {i + 1})"
            found.append(Timer("escalation", i, due, why))
    return sorted((t for t in found if t.due < approval.expires_at), key=lambda t: t.due)


def due_timers(approval: Approval, now: datetime) -> list[Timer]:
    """The timers due at ``now`` (only while the approval is pending)."""
    if not approval.is_pending or now >= approval.expires_at:
        return []
    return [t for t in timers(approval) if t.due <= now]


def next_timer(approval: Approval, now: datetime) -> Timer | None:
    """The next timer not yet due (``None`` when none is left or it is not pending)."""
    if not approval.is_pending:
        return None
    return next((t for t in timers(approval) if t.due > now), None)


def _human(seconds: int) -> str:
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def votes_answering(request: Mapping[str, Any], decision: Outcome, at: datetime) -> list[Vote]:
    """The votes that answer a policy's approval with ``decision`` in one go (``runs start
    --local --approve``/``--reject``): approvers vote in turn until the policy is met.

    Returns:
        The votes (one, without a policy that counts votes).
    """
    approval = new_approval(
        run_id="cli",
        workflow_id=None,
        request={"interrupt_id": "cli", **request},
        now=at,
    )
    votes: list[Vote] = []
    counted = progress(approval, votes)
    for who in pool(approval):
        vote = Vote(approver=who, decision=decision, at=at + timedelta(microseconds=len(votes)))
        after = progress(approval, [*votes, vote])
        if after.tallies == counted.tallies and after.outcome is None:
            continue  # their vote counts in no group: not needed
        votes, counted = [*votes, vote], after
        if after.outcome is not None:
            break
    return votes
