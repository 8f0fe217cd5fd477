"""Approval policies as data: quorum, rejection rule, reminders, escalation, business hours,
delegation and separation of duties (issue 13).

The settings models are part of the stored format (``PlanStep.approval``); they import nothing
of the approval record, so :mod:`langorch.domain.step_settings` and
:mod:`langorch.domain.approvals.record` can both use them. :func:`policy_problems` checks what the
models cannot (durations, time zones, group sizes) with paths and hints.

A step's policy, written in a workflow::

    approval:
      approvers: [cfo@example.com]
      quorum: {groups: {finance: {approvers: [a@x, b@x, c@x], at_least: 2}}}
      rejection: count          # or any_reject (default): one rejection ends it
      reminders: [4h, 24h]      # or {after: [4h], max: 3}
      escalation: [{after: 1d, approvers: [manager@example.com]}]
      business_hours: {timezone: Europe/Berlin, days: [mon, tue, wed, thu, fri],
                       start: "09:00", end: "17:00"}
      delegation: true
      separation_of_duties: true
      subaddressing: true       # ana+x@example.com is ana@example.com (the default)

People are compared canonically everywhere here (:mod:`langorch.domain.identities`): one slot,
one link and one vote per person, however their address is spelled.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from datetime import datetime, time, timedelta
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator

from langorch.domain.errors import ConflictError, Problem
from langorch.domain.identities import identity_key, identity_problems

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
WEEKDAYS = list(DAYS[:5])
MAX_REMINDERS = 20
MAX_LEVELS = 10
_DURATION_RE = re.compile(r"^\s*(\d{1,7})\s*([smhd]?)\s*$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86_400}
_HOUR_RE = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")

Duration = int | str
"""Seconds, or text like ``90s``, ``30m``, ``4h``, ``1d``."""


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class GroupQuorum(_Spec):
    """One group of approvers and how many of them must approve."""

    approvers: list[str] = Field(default_factory=list)
    at_least: int = Field(default=1, ge=1)


class QuorumRule(_Spec):
    """``{at_least: N}`` of all approvers, or ``{groups: {name: {approvers, at_least}}}``."""

    at_least: int | None = Field(default=None, ge=1)
    groups: dict[str, GroupQuorum] = Field(default_factory=dict)


class Reminders(_Spec):
    """Re-send to those who have not answered, after each delay (from the request)."""

    after: list[Duration] = Field(default_factory=list)
    max: int | None = Field(default=None, ge=0, le=MAX_REMINDERS)
    """At most this many reminders (default: one per delay)."""


class EscalationLevel(_Spec):
    """After ``after`` (from the request) with no decision, these approvers join and are told."""

    after: Duration
    approvers: list[str] = Field(default_factory=list)
    group: str | None = None
    """The quorum group their votes count for (with groups); otherwise they count as any
    approver's."""


class BusinessHours(_Spec):
    """When reminders and escalations may be sent (a timer due outside waits for the next
    opening)."""

    timezone: str = "UTC"
    days: list[str] = Field(default_factory=lambda: list(WEEKDAYS))
    start: str = "09:00"
    end: str = "17:00"


QuorumSpec = Literal["any", "all"] | QuorumRule
RejectionRule = Literal["any_reject", "count"]


class ApprovalPolicy(_Spec):
    """The policy an approval is decided by (carried in the request and the record)."""

    quorum: QuorumSpec = "any"
    rejection: RejectionRule = "any_reject"
    reminders: Reminders | None = None
    escalation: list[EscalationLevel] = Field(default_factory=list)
    business_hours: BusinessHours | None = None
    delegation: bool = False
    separation_of_duties: bool = False
    subaddressing: bool = True
    """``name+tag@`` is ``name@`` when people are compared (off for a domain where ``+`` is
    part of names)."""

    @field_validator("reminders", mode="before")
    @classmethod
    def _reminder_list(cls, value: object) -> object:
        # ``reminders: [4h, 24h]`` is short for ``reminders: {after: [4h, 24h]}``.
        return {"after": value} if isinstance(value, list) else value

    @property
    def groups(self) -> dict[str, GroupQuorum]:
        """The quorum's groups (empty without groups)."""
        return self.quorum.groups if isinstance(self.quorum, QuorumRule) else {}

    @property
    def counts_votes(self) -> bool:
        """Whether more than one vote may be needed (otherwise the first vote decides)."""
        return self.quorum != "any"

    def group_approvers(self) -> list[str]:
        """Every approver named in a group (they are approvers of the step too)."""
        return [who for group in self.groups.values() for who in group.approvers]

    def reminder_delays(self) -> list[int]:
        """The reminders' delays in seconds, at most ``max`` of them (the last repeats)."""
        if self.reminders is None or not self.reminders.after:
            return []
        delays = [duration_seconds(d) for d in self.reminders.after]
        limit = self.reminders.max if self.reminders.max is not None else len(delays)
        while len(delays) < limit:
            delays.append(delays[-1] + (delays[-1] - (delays[-2] if len(delays) > 1 else 0)))
        return sorted(delays)[:limit]

    def escalation_delays(self) -> list[int]:
        """Each level's delay in seconds (from the request)."""
        return [duration_seconds(level.after) for level in self.escalation]


def duration_seconds(value: Duration) -> int:
    """Seconds of ``value`` (``4h``, ``30m``, ``1d``, ``90s`` or a number of seconds).

    Raises:
        ValueError: it is not a duration (the message says how to write one).
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{value} is negative")
        return value
    match = _DURATION_RE.match(str(value))
    if match is None:
        raise ValueError(f"{value!r:.40} is not a duration")
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def policy_of(
    *,
    quorum: QuorumSpec = "any",
    rejection: RejectionRule = "any_reject",
    reminders: Reminders | Sequence[Duration] | None = None,
    escalation: Sequence[EscalationLevel] = (),
    business_hours: BusinessHours | None = None,
    delegation: bool = False,
    separation_of_duties: bool = False,
    subaddressing: bool = True,
) -> ApprovalPolicy:
    """The policy of a step's settings (a plain list of reminder delays is ``{after: list}``)."""
    if reminders is not None and not isinstance(reminders, Reminders):
        reminders = Reminders(after=list(reminders))
    return ApprovalPolicy(
        quorum=quorum,
        rejection=rejection,
        reminders=reminders,
        escalation=list(escalation),
        business_hours=business_hours,
        delegation=delegation,
        separation_of_duties=separation_of_duties,
        subaddressing=subaddressing,
    )


# --------------------------------------------------------------------------------------------
# Validation (what the models cannot say), with paths and hints
# --------------------------------------------------------------------------------------------


def policy_problems(
    policy: ApprovalPolicy, approvers: Sequence[str], path: str
) -> Iterator[Problem]:
    """Every problem of ``policy`` for a step whose approvers are ``approvers``.

    Args:
        policy: the step's policy.
        approvers: the step's (or workflow's) approvers, without the groups'.
        path: the step's ``approval`` path (``steps[2].approval``).
    """
    yield from _quorum_problems(policy, approvers, path)
    if policy.reminders is not None:
        for j, delay in enumerate(policy.reminders.after):
            yield from _duration_problems(delay, f"{path}.reminders.after[{j}]")
    for j, level in enumerate(policy.escalation):
        at = f"{path}.escalation[{j}]"
        yield from _duration_problems(level.after, f"{at}.after")
        if not level.approvers:
            yield Problem(
                f"{at}.approvers", "an escalation level names nobody", "list approver emails"
            )
        yield from _email_problems(level.approvers, f"{at}.approvers")
        if level.group is not None and level.group not in policy.groups:
            yield Problem(
                f"{at}.group",
                f"{level.group!r} is not a quorum group",
                f"use one of {sorted(policy.groups) or 'the groups in quorum.groups'}",
            )
    if policy.business_hours is not None:
        yield from _hours_problems(policy.business_hours, f"{path}.business_hours")


def _quorum_problems(
    policy: ApprovalPolicy, approvers: Sequence[str], path: str
) -> Iterator[Problem]:
    quorum = policy.quorum
    if not isinstance(quorum, QuorumRule):
        return
    if quorum.at_least is None and not quorum.groups:
        yield Problem(
            f"{path}.quorum",
            "a quorum rule needs at_least or groups",
            "write quorum: any, quorum: all, quorum: {at_least: 2} or quorum: {groups: …}",
        )
    if quorum.at_least is not None and quorum.groups:
        yield Problem(
            f"{path}.quorum",
            "a quorum has both at_least and groups",
            "use groups (each with its own at_least), or at_least alone",
        )
    everyone = [*approvers, *policy.group_approvers()]
    pool = len({identity_key(a, subaddressing=policy.subaddressing) for a in everyone})
    pool += sum(len(level.approvers) for level in policy.escalation if level.group is None)
    if quorum.at_least is not None and approvers and quorum.at_least > pool:
        yield Problem(
            f"{path}.quorum.at_least",
            f"at_least {quorum.at_least} but only {pool} approvers can vote",
            "lower at_least or add approvers",
        )
    for name, group in quorum.groups.items():
        at = f"{path}.quorum.groups.{name}"
        yield from _email_problems(group.approvers, f"{at}.approvers")
        if group.at_least > len(group.approvers):
            yield Problem(
                f"{at}.at_least",
                f"group {name!r} needs {group.at_least} approvals but names "
                f"{len(group.approvers)} approvers",
                "lower at_least or add approvers to the group",
            )


def _duration_problems(value: Duration, path: str) -> Iterator[Problem]:
    try:
        seconds = duration_seconds(value)
    except ValueError as exc:
        yield Problem(path, str(exc), "write a duration like 30m, 4h or 1d (or seconds)")
        return
    if seconds <= 0:
        yield Problem(path, "a delay of zero", "use a positive delay like 4h")


def _email_problems(addresses: Sequence[str], path: str) -> Iterator[Problem]:
    yield from identity_problems(addresses, path)


def _hours_problems(hours: BusinessHours, path: str) -> Iterator[Problem]:
    try:
        ZoneInfo(hours.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        yield Problem(
            f"{path}.timezone",
            f"{hours.timezone!r:.60} is not a time zone",
            "use an IANA name like Europe/Berlin or UTC",
        )
    for j, day in enumerate(hours.days):
        if day not in DAYS:
            yield Problem(f"{path}.days[{j}]", f"{day!r:.20} is not a day", f"use {DAYS}")
    if not hours.days:
        yield Problem(f"{path}.days", "no business days", "list days like [mon, tue, wed]")
    bad = [n for n in ("start", "end") if not _HOUR_RE.match(getattr(hours, n))]
    for name in bad:
        yield Problem(f"{path}.{name}", f"{getattr(hours, name)!r:.20} is not HH:MM", "e.g. 09:00")
    if not bad and hours.start >= hours.end:
        yield Problem(f"{path}.end", "business hours end before they start", "end after start")


# --------------------------------------------------------------------------------------------
# Business hours
# --------------------------------------------------------------------------------------------


def next_business_time(at: datetime, hours: BusinessHours | None) -> datetime:
    """The first moment at or after ``at`` inside business hours (``at`` without any).

    A timer due at night or on a weekend waits for the next opening, in the policy's zone.
    """
    if hours is None:
        return at
    zone = ZoneInfo(hours.timezone)
    start, end = time.fromisoformat(hours.start), time.fromisoformat(hours.end)
    local = at.astimezone(zone)
    for offset in range(8):
        day = (local + timedelta(days=offset)).date()
        if DAYS[day.weekday()] not in hours.days:
            continue
        opens = datetime.combine(day, start, tzinfo=zone)
        closes = datetime.combine(day, end, tzinfo=zone)
        if local < opens:
            return opens.astimezone(at.tzinfo)
        if local < closes:
            return at
    return at  # no business day at all: validation refuses it; never block a timer forever


# --------------------------------------------------------------------------------------------
# Votes
# --------------------------------------------------------------------------------------------


class Vote(BaseModel):
    """One approver's vote (one per approver link, recorded with a conditional write)."""

    model_config = ConfigDict(extra="ignore")

    approver: str
    decision: Literal["approved", "rejected"]
    at: datetime
    comment: str = ""
    on_behalf_of: str | None = None
    """The approver who delegated their vote to ``approver`` (the vote counts as theirs)."""

    @property
    def slot(self) -> str:
        """Whose place in the quorum this vote fills."""
        return self.on_behalf_of or self.approver


class VotesChangedError(ConflictError):
    """A counted decision was not written: a vote arrived after the votes were read (count
    again and decide with every vote)."""
