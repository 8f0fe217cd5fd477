"""Approvals: the record of a parked human decision, signed links, codes, decide-once.

Pure: no boto3, no clock, no randomness of its own. The clock (``now``) and random sources are
passed in, so every rule is tested without AWS (STYLE habit 4).

Links (RELIABILITY "Approval links")::

    {public_base_url}/approvals/{approval_id}?ap={approver_ref}&exp={epoch}&kid={key_id}&sig={mac}

``mac`` is HMAC-SHA256 (base64url, no padding) over ``v1\\n{approval_id}\\n{approver_ref}\\n{exp}``
with the key named by ``kid``, so a link is bound to one approval and one approver, expires with
the approval and survives key rotation (old keys stay in the secret until their links expire).
``approver_ref`` is an opaque hash of the approver's address scoped to the approval: an address
never appears in a URL, and refs of one person in two approvals cannot be linked.

The page's form carries a *view token* issued by each page view
(:mod:`langorch.domain.approvals.views`): only a POST that carries one, at least a dwell after
that view, decides, so a mail scanner that fetches, blindly posts, or parses and submits the
page at once decides nothing. A step may also require a six-digit one-time code from the
email; only its keyed hash is stored.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from langorch.domain.approvals.audit import AuditAction as AuditAction
from langorch.domain.approvals.audit import AuditEntry as AuditEntry
from langorch.domain.approvals.policy import ApprovalPolicy, Vote
from langorch.domain.approvals.refusals import ApprovalLinkError as ApprovalLinkError
from langorch.domain.approvals.refusals import InvalidDecisionError as InvalidDecisionError
from langorch.domain.errors import (
    ConflictError,
    LangorchError,
    SignatureError,
)
from langorch.domain.evidence import digest
from langorch.domain.identities import identity_key

APPROVAL_ID_PREFIX = "apr-"
LINK_VERSION = "v1"
CODE_DIGITS = 6
MAX_CODE_ATTEMPTS = 5
"""Codes checked per approver link before that link refuses any more (10^6 codes, 5 guesses).

Counted per approver, so one mailbox's scanner cannot lock the others out; an empty code is
not an attempt. ``langorch approvals reissue`` sends fresh links and codes."""

# Query parameter names of a signed link.
P_APPROVER = "ap"
P_EXPIRES = "exp"
P_KEY_ID = "kid"
P_SIGNATURE = "sig"
LINK_PARAMS = (P_APPROVER, P_EXPIRES, P_KEY_ID, P_SIGNATURE)

_REF_RE = re.compile(r"^[a-z2-7]{26}$")
_KEY_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class ApprovalStatus(StrEnum):
    """Where an approval is. Only ``pending`` can change, and only once to a decision."""

    pending = "pending"
    approved = "approved"
    rejected = "rejected"
    timed_out = "timed_out"
    cancelled = "cancelled"
    superseded = "superseded"
    """Closed undecided because a newer request asks the question again (the run was redriven
    onto another workflow version or from an earlier step): its links decide nothing."""


CLOSED: frozenset[ApprovalStatus] = frozenset(
    {ApprovalStatus.timed_out, ApprovalStatus.cancelled, ApprovalStatus.superseded}
)
"""The statuses :meth:`~langorch.app.approvals.ports.ApprovalsStore.mark` closes with."""


DECISIONS: frozenset[ApprovalStatus] = frozenset({ApprovalStatus.approved, ApprovalStatus.rejected})


# --------------------------------------------------------------------------------------------
# Errors: why a link or a form is refused (the page each gets is in langorch.web.errors; the
# base and InvalidDecisionError are in langorch.domain.approvals.refusals)
# --------------------------------------------------------------------------------------------


class LinkForgedError(ApprovalLinkError, SignatureError):
    """The link's signature does not verify (tampered, forged, or signed by an unknown key)."""


class LinkExpiredError(ApprovalLinkError):
    """The link (and so the approval) expired before it was used."""


class NotAnApproverError(ApprovalLinkError):
    """The link's approver is not among the approval's approvers."""


class FormExpiredError(ApprovalLinkError):
    """The POST did not carry a view token of this approval's page (for this approver)."""


class CodeMismatchError(ApprovalLinkError):
    """The one-time code is malformed or wrong.

    Attributes:
        attempts_left: how many more codes this approver's link may try (``None``: not
            counted yet).
    """

    def __init__(self, message: str, *, attempts_left: int | None = None) -> None:
        self.attempts_left = attempts_left
        super().__init__(message)


class CodeMissingError(ApprovalLinkError):
    """The form came without a code: not a guess, so it costs no attempt."""


class CodeLockedError(ApprovalLinkError):
    """Too many wrong codes from this approver's link: it refuses further attempts."""


class RunEndedError(ApprovalLinkError):
    """The run (or this approval) was cancelled or ended before the decision."""


class SupersededError(RunEndedError):
    """A newer request asks this approval's question again; this one decides nothing."""


class TooLateError(ApprovalLinkError):
    """The decision arrived after Step Functions stopped waiting (timeout)."""


class AlreadyDecidedError(ConflictError):
    """Someone decided first (or the approval ended). Not an error for the approver to fix.

    Attributes:
        approval_id: the approval.
        outcome: how it was decided.
        decided_by: who decided it, if known.
        decided_at: when, if known.
    """

    def __init__(
        self, approval_id: str, status: ApprovalStatus, by: str | None, at: datetime | None
    ):
        self.approval_id = approval_id
        self.outcome = status
        self.decided_by = by
        self.decided_at = at
        when = _human_time(at) if at else "an earlier time"
        super().__init__(f"approval {approval_id} was already {status} by {by or '?'} at {when}")


class EmailNotSentError(LangorchError):
    """An email was refused for good (bad address, unverified sender): retrying will not help."""


# --------------------------------------------------------------------------------------------
# The record
# --------------------------------------------------------------------------------------------


class PreviousRound(BaseModel):
    """The rejected round before this one: who, their comment, the shown keys changed since."""

    model_config = ConfigDict(extra="ignore")

    iteration: int
    approver: str | None = None
    comment: str = ""
    changed: list[str] = Field(default_factory=list)


class FixAsk(BaseModel):
    """What a person asked to fix a failed step sees of the failure, and may choose
    (:mod:`langorch.domain.approvals.fixes`)."""

    model_config = ConfigDict(extra="ignore")

    error_type: str
    error_message: str
    attempts: int = 1
    """How many attempts failed before the person was asked."""
    choices: list[str] = Field(default_factory=lambda: ["retry", "skip", "fail"])
    """What the person may do: ``retry`` (with the inputs as edited), ``skip`` (giving the
    outputs), ``fail`` (the run)."""
    kind: str = ""
    """The failed step's kind."""


class AskedAbout(BaseModel):
    """What an approval asked about, recorded with the request: a later request about anything
    else supersedes it rather than reusing its answer."""

    model_config = ConfigDict(extra="ignore")

    shown_digest: str
    """SHA-256 of the canonical JSON of what the approver was shown (context and editable)."""
    workflow_version: int | None = None
    """The version of the workflow the run was on when it asked."""


class Approval(BaseModel):
    """One parked human decision (what is asked, of whom, until when, and how it ended).

    The task token is *not* part of the record: it is stored beside it and read only by the
    code that resumes the run.
    """

    model_config = ConfigDict(extra="ignore")

    approval_id: str
    run_id: str
    workflow_id: str | None = None
    step_id: str
    interrupt_id: str
    iteration: int = 1
    max_iterations: int | None = None
    title: str = ""
    message: str = ""
    context: dict[str, Any] = Field(default_factory=dict)
    editable: dict[str, Any] = Field(default_factory=dict)
    approvers: list[str] = Field(default_factory=list)
    require_code: bool = False
    on_timeout: str | None = None
    previous: PreviousRound | None = None
    """From round 2 of a review loop on: the previous round's feedback and what changed."""
    fix: FixAsk | None = None
    """A failed step asking for a fix (``on_error: ask``): its error and the choices. Its
    ``editable`` are the step's inputs (``input.<key>``) and outputs (``output.<key>``)."""
    status: ApprovalStatus = ApprovalStatus.pending
    decided_by: str | None = None
    decided_at: datetime | None = None
    comment: str | None = None
    edits: dict[str, Any] = Field(default_factory=dict)
    """The changed editable keys; a fix's answer under ``fix`` (its choice, values, channel)."""
    delivered_at: datetime | None = None
    """When the decision reached the run's task (or the task was found closed, so there was
    nothing left to deliver). A decision without it may have been lost in a crash between the
    write and ``SendTaskSuccess``: it is delivered again from this record."""
    created_at: datetime
    expires_at: datetime
    emailed: list[str] = Field(default_factory=list)
    """Approver refs whose email was sent (a retried request mails only the rest)."""
    link_generation: int = 0
    """Raised by each ``langorch approvals reissue``: only links of this generation verify."""
    policy: ApprovalPolicy | None = None
    """Quorum, reminders, escalation… (``None``: the first decision wins, as before)."""
    started_by: str | None = None
    """Who started the run, when known (``separation_of_duties`` keeps them from approving)."""
    votes: list[Vote] = Field(default_factory=list)
    """The votes a counted decision was reached with (recorded with the decision)."""
    delegations: dict[str, str] = Field(default_factory=dict)
    """Delegate's address (as given) -> the approver who handed them their vote."""
    escalation_level: int = 0
    """How many escalation levels have joined."""
    reminders_sent: int = 0
    asked: AskedAbout | None = None
    """What it asked about (``None``: requested before this was recorded); its ``policy`` is
    the record's own."""
    channels: list[str] = Field(default_factory=list)
    """Where the request goes (``email``, ``slack``, ``console``…); empty: the stack's default
    (:func:`~langorch.domain.approvals.channels.channels_of`)."""

    def deciders(self) -> list[str]:
        """Everyone whose link opens this approval, each person once: approvers, escalated
        levels, delegates."""
        return _unique_addresses(self.named(), self.subaddressing)

    def named(self) -> list[str]:
        """Every address named to decide, as given: approvers, escalated levels, delegates
        (two spellings of one person both stay, so a link to either opens the approval)."""
        levels = self.policy.escalation[: self.escalation_level] if self.policy else []
        joined = [who for level in levels for who in level.approvers]
        return [*self.approvers, *joined, *self.delegations]

    @property
    def subaddressing(self) -> bool:
        """Whether ``name+tag@`` is ``name@`` when this approval compares people."""
        return self.policy.subaddressing if self.policy is not None else True

    def person(self, address: str) -> str:
        """Who ``address`` is, for comparing: its canonical identity
        (:func:`~langorch.domain.identities.identity_key`). Addresses are kept as given."""
        return identity_key(address, subaddressing=self.subaddressing)

    def same_person(self, first: str | None, second: str | None) -> bool:
        """Whether two addresses are one person's (``None`` is nobody)."""
        if not first or not second:
            return False
        return self.person(first) == self.person(second)

    def delegator_of(self, delegate: str) -> str | None:
        """The approver who handed ``delegate`` their vote (``None``: nobody did)."""
        who = self.person(delegate)
        return next((by for to, by in self.delegations.items() if self.person(to) == who), None)

    def has_delegated(self, approver: str) -> bool:
        """Whether ``approver`` handed their vote to someone (their link votes no more)."""
        return any(self.same_person(approver, by) for by in self.delegations.values())

    @property
    def is_pending(self) -> bool:
        """Whether nobody has decided and it has not ended."""
        return self.status is ApprovalStatus.pending

    @property
    def is_undelivered(self) -> bool:
        """Whether a decision was recorded but not (yet) delivered to the run."""
        return self.status in DECISIONS and self.delivered_at is None


def approval_id_for(run_id: str, interrupt_id: str, generation: int = 1) -> str:
    """The approval id of a run's interrupt: a retried request yields the same id.

    Args:
        run_id: The run.
        interrupt_id: The pause point.
        generation: 1 for the first question at this pause point; each question asked again
            there because what it shows changed (the one before superseded) is the next.

    Returns:
        ``"apr-"`` and 26 lowercase base32 characters of SHA-256 over run and interrupt id
        (and the generation after the first).
    """
    key = f"{run_id}\n{interrupt_id}" + (f"\n{generation}" if generation > 1 else "")
    digest = hashlib.sha256(key.encode()).digest()
    return APPROVAL_ID_PREFIX + base64.b32encode(digest).decode("ascii").lower()[:26]


def new_approval(
    *,
    run_id: str,
    workflow_id: str | None,
    request: Mapping[str, Any],
    now: datetime,
    default_timeout_seconds: int = 86_400,
) -> Approval:
    """The pending record for an approval request (``executors._approval`` + ``interrupt_id``).

    Args:
        run_id: the run that parked.
        workflow_id: the run's workflow, for listings.
        request: the approval request the run parked with.
        now: the clock (timezone-aware).
        default_timeout_seconds: used when the request has no timeout.

    Raises:
        ValueError: the request has no ``interrupt_id`` or no approvers.
    """
    interrupt_id = str(request.get("interrupt_id") or "")
    if not interrupt_id:
        raise ValueError("an approval request needs its interrupt_id")
    policy = ApprovalPolicy.model_validate(request["policy"]) if request.get("policy") else None
    approvers = _unique_addresses(
        request.get("approvers") or [], policy.subaddressing if policy is not None else True
    )
    if not approvers:
        raise ValueError(f"approval {request.get('step_id')} has no approvers")
    timeout = int(request.get("timeout_seconds") or default_timeout_seconds)
    return Approval(
        approval_id=approval_id_for(run_id, interrupt_id),
        run_id=run_id,
        workflow_id=workflow_id,
        step_id=str(request.get("step_id") or ""),
        interrupt_id=interrupt_id,
        iteration=int(request.get("iteration") or 1),
        max_iterations=request.get("max_iterations"),
        title=str(request.get("title") or request.get("step_id") or "Approval"),
        message=str(request.get("message") or ""),
        context=dict(request.get("context") or {}),
        editable=dict(request.get("editable") or {}),
        approvers=approvers,
        require_code=bool(request.get("require_code")),
        on_timeout=request.get("on_timeout"),
        previous=_previous_round(request.get("previous")),
        fix=FixAsk.model_validate(request["fix"]) if request.get("fix") else None,
        policy=policy,
        started_by=request.get("started_by") or None,
        channels=[str(c) for c in request.get("channels") or []],
        asked=asked_about(request),
        created_at=now,
        expires_at=datetime.fromtimestamp(int(now.timestamp()) + timeout, tz=UTC),
    )


def asked_about(request: Mapping[str, Any]) -> AskedAbout:
    """What ``request`` asks about: the digest of what it shows, the workflow version."""
    shown = {"context": request.get("context") or {}, "editable": request.get("editable") or {}}
    version = request.get("workflow_version")
    return AskedAbout(
        shown_digest=digest(shown), workflow_version=int(version) if version else None
    )


def _previous_round(value: Any) -> PreviousRound | None:
    """The request's ``previous``; malformed is left out (context, not a reason to refuse)."""
    if not isinstance(value, Mapping):
        return None
    try:
        return PreviousRound.model_validate(value)
    except ValueError:
        return None


def _unique_addresses(values: Any, subaddressing: bool) -> list[str]:
    """Each person once (compared canonically), in the spelling first given."""
    seen: dict[str, str] = {}
    for value in values:
        address = str(value).strip()
        key = identity_key(address, subaddressing=subaddressing)
        if address and key not in seen:
            seen[key] = address
    return list(seen.values())


# --------------------------------------------------------------------------------------------
# Approvers as opaque refs
# --------------------------------------------------------------------------------------------


def approver_ref(approval_id: str, approver: str) -> str:
    """The opaque id of an approver in one approval's links (never the address itself)."""
    data = f"approver\n{approval_id}\n{approver.strip().lower()}".encode()
    return base64.b32encode(hashlib.sha256(data).digest()).decode("ascii").lower()[:26]


def approver_for(approval: Approval, ref: str) -> str | None:
    """The approver address a link's ref stands for, or ``None`` if it is none of them."""
    for address in approval.named():
        if hmac.compare_digest(approver_ref(approval.approval_id, address), ref):
            return address
    return None


# --------------------------------------------------------------------------------------------
# Signed links
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LinkClaims:
    """What a verified link says: which approver, until when, signed with which key."""

    approval_id: str
    approver_ref: str
    expires_at: datetime
    key_id: str


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _mac(key: bytes, *parts: str) -> bytes:
    return hmac.new(key, "\n".join(parts).encode("utf-8"), hashlib.sha256).digest()


def _signed(approval_id: str, ref: str, exp: str, generation: int) -> tuple[str, ...]:
    # Links of a reissue (generation > 0) sign their generation too, so older links stop
    # verifying; generation 0 keeps the original message (links already emailed stay valid).
    parts = (LINK_VERSION, approval_id, ref, exp)
    return (*parts, f"g{generation}") if generation else parts


def sign_link(
    approval_id: str,
    approver: str,
    expires_at: datetime,
    key_id: str,
    key: bytes,
    generation: int = 0,
) -> dict[str, str]:
    """The query parameters of one approver's link to one approval.

    Args:
        approval_id: the approval.
        approver: the approver's address (only its opaque ref goes into the link).
        expires_at: when the approval expires; the link dies with it.
        key_id: the signing key's id (carried, so rotated keys still verify).
        key: the signing key.
        generation: the approval's link generation (raised by each reissue).

    Returns:
        ``{"ap", "exp", "kid", "sig"}``.
    """
    if not _KEY_ID_RE.match(key_id):
        raise ValueError(f"key id {key_id!r} must be 1-64 letters, digits, '.', '_' or '-'")
    ref = approver_ref(approval_id, approver)
    exp = str(int(expires_at.timestamp()))
    sig = _b64(_mac(key, *_signed(approval_id, ref, exp, generation)))
    return {P_APPROVER: ref, P_EXPIRES: exp, P_KEY_ID: key_id, P_SIGNATURE: sig}


def verify_link(
    approval_id: str,
    params: Mapping[str, str],
    keys: Mapping[str, bytes],
    *,
    now: datetime,
    generation: int = 0,
) -> LinkClaims:
    """Check a link's signature, then its expiry.

    Args:
        approval_id: from the path.
        params: the query parameters.
        keys: signing keys by id (current and still-valid previous ones).
        now: the clock.
        generation: the approval's current link generation (older links do not verify).

    Returns:
        The verified claims.

    Raises:
        LinkForgedError: a parameter is missing or malformed, the key id is unknown, or the
            signature does not match (compared in constant time).
        LinkExpiredError: the signature is valid but the link has expired; raised only after
            the signature verified, so the caller may still say who decided.
    """
    ref = params.get(P_APPROVER, "")
    exp = params.get(P_EXPIRES, "")
    key_id = params.get(P_KEY_ID, "")
    sig = params.get(P_SIGNATURE, "")
    if not (_REF_RE.match(ref) and exp.isdigit() and len(exp) <= 12 and sig):
        raise LinkForgedError(f"approval {approval_id}: link parameters missing or malformed")
    key = keys.get(key_id)
    if key is None:
        raise LinkForgedError(f"approval {approval_id}: unknown signing key id {key_id!r:.70}")
    expected = _b64(_mac(key, *_signed(approval_id, ref, exp, generation)))
    if not hmac.compare_digest(expected.encode("ascii"), sig.encode("utf-8", "replace")):
        raise LinkForgedError(f"approval {approval_id}: link signature does not verify")
    expires_at = datetime.fromtimestamp(int(exp), tz=UTC)
    claims = LinkClaims(approval_id, ref, expires_at, key_id)
    if now >= expires_at:
        raise LinkExpiredError(f"approval {approval_id}: link expired at {expires_at.isoformat()}")
    return claims


def link_url(base_url: str, approval_id: str, params: Mapping[str, str]) -> str:
    """The absolute link, built only from the configured public URL (never request headers)."""
    from urllib.parse import quote, urlencode

    return f"{base_url.rstrip('/')}/approvals/{quote(approval_id, safe='')}?{urlencode(params)}"


# --------------------------------------------------------------------------------------------
# Decide once
# --------------------------------------------------------------------------------------------


def decision_output(approval: Approval) -> dict[str, Any]:
    """What ``SendTaskSuccess`` carries for a recorded decision (the run's resume value).

    Built from the record only, so a decision delivered again is exactly the first one.
    """
    output: dict[str, Any] = {
        "decision": approval.status.value,
        "approver": approval.decided_by,
        "comment": approval.comment or "",
        "edits": approval.edits,
    }
    if approval.votes:
        output["votes"] = [v.model_dump(mode="json", exclude_none=True) for v in approval.votes]
    return output


def redelivery_due(approval: Approval, *, now: datetime, grace: timedelta) -> bool:
    """Whether a recorded decision looks lost: decided, never delivered, and older than ``grace``.

    ``grace`` must outlast the request that recorded it, so a decision still on its way is not
    raced (see ``app.approvals.REDELIVERY_GRACE``).
    """
    return (
        approval.is_undelivered
        and approval.decided_at is not None
        and now - approval.decided_at >= grace
    )


Decision = Literal["approved", "rejected"]


def parse_decision(value: str | None) -> Decision:
    """The decision a form button carries.

    Raises:
        InvalidDecisionError: neither ``approved`` nor ``rejected``.
    """
    if value == "approved":
        return "approved"
    if value == "rejected":
        return "rejected"
    raise InvalidDecisionError(f"unknown decision {value!r:.40}")


# --------------------------------------------------------------------------------------------
# Audit
# --------------------------------------------------------------------------------------------


def bounded(text: str | None, limit: int) -> str:
    """``text`` cut to ``limit`` characters (marked with an ellipsis when cut)."""
    value = text or ""
    return value if len(value) <= limit else value[: max(limit - 1, 0)] + "…"


def _human_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def human_time(moment: datetime) -> str:
    """A time as approvers read it (UTC, to the minute)."""
    return _human_time(moment)
