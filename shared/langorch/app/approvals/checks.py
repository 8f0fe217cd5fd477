"""The approval page's checks: the signed link, the form's view token, the typed code, the
edits — each refusal audited — and the audit lines a page request writes.

Used by the page use-cases in :mod:`langorch.app.approvals.decisions`; nothing here decides.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from langorch.app.approvals.driver import audit
from langorch.app.approvals.keys import load_signing_keys
from langorch.app.approvals.ports import PagePorts
from langorch.domain.approvals.codes import check_code, typed_code
from langorch.domain.approvals.edits import EDIT_PREFIX, EditRejectedError, parse_edits
from langorch.domain.approvals.lifecycle import State, state_of
from langorch.domain.approvals.outcomes import ApprovalNotFoundError, FormAgain
from langorch.domain.approvals.record import (
    MAX_CODE_ATTEMPTS,
    Approval,
    ApprovalLinkError,
    ApprovalStatus,
    AuditAction,
    CodeLockedError,
    CodeMismatchError,
    CodeMissingError,
    InvalidDecisionError,
    LinkClaims,
    LinkExpiredError,
    LinkForgedError,
    NotAnApproverError,
    RunEndedError,
    approver_for,
    bounded,
    parse_decision,
    verify_link,
)
from langorch.domain.approvals.views import (
    LinkReissuedError,
    SubmittedTooSoonError,
    ViewTokenUsedError,
    check_view_token,
    issue_view_token,
)

MAX_COMMENT_CHARS = 4000


@dataclass(frozen=True)
class ApprovalHttpRequest:
    """One request on ``/approvals/{id}``, parsed by the callback handler."""

    approval_id: str
    method: str
    query: Mapping[str, str] = field(repr=False)
    """The signed link's parameters (never logged)."""
    form: Mapping[str, str] = field(default_factory=dict, repr=False)
    source_ip: str | None = None
    user_agent: str | None = None
    channel: str | None = None
    """``console`` for the console's decisions (``None``: the emailed link)."""
    operator: str | None = None
    """Who acted through that channel (audited beside the approver)."""


@dataclass(frozen=True)
class Opened:
    """A link that verified (or verified but expired) and the approval it opens."""

    approval: Approval
    approver: str | None
    state: State
    claims: LinkClaims | None = None
    """``None`` when the link's signature verified but it expired."""
    key: bytes | None = field(default=None, repr=False)

    def form_key(self) -> tuple[str, LinkClaims, bytes]:
        """Approver, claims and key of a live link (what the form needs)."""
        if self.approver is None or self.claims is None or self.key is None:
            raise LinkExpiredError(f"approval {self.approval.approval_id}: the link expired")
        return self.approver, self.claims, self.key


@dataclass(frozen=True)
class Form:
    decision: ApprovalStatus
    edits: dict[str, Any]
    comment: str | None


def open_link(req: ApprovalHttpRequest, ports: PagePorts, *, refused_action: AuditAction) -> Opened:
    """Verify the link and find the approval and approver.

    Raises:
        LinkForgedError: the signature does not verify.
        LinkExpiredError: it expired and there is no such approval.
        ApprovalNotFoundError: it verified but the approval does not exist.
        NotAnApproverError: its approver is none of the approval's.
    """
    keys = load_signing_keys(ports.secrets, ports.settings.link_signing_secret)
    now = ports.clock()
    store = ports.approvals
    found = store.get(req.approval_id)
    generation = 0 if found is None else found.link_generation
    try:
        claims = verify_link(req.approval_id, req.query, keys.keys, now=now, generation=generation)
    except LinkForgedError:
        # Audited only under an approval that exists: a forger cannot make us write to
        # partitions of their choosing.
        if found is not None and replaced_link(req, found, keys.keys, now):
            audit_req(ports, req, found, refused_action, "replaced_link", None)
            raise LinkReissuedError(f"approval {req.approval_id}: a replaced link") from None
        if found is not None:
            audit_req(ports, req, found, refused_action, "forged_link", None)
        raise
    except LinkExpiredError:
        if found is None:
            raise
        # Links expire with their approval: a pending one is expired too (whatever the clock).
        state = state_of(found, now=now)
        who = approver_for(found, req.query.get("ap", ""))
        return Opened(found, who, State.expired if state is State.pending else state)
    approval = found
    if approval is None:
        raise ApprovalNotFoundError(f"approval {req.approval_id} does not exist")
    approver = approver_for(approval, claims.approver_ref)
    if approver is None:
        audit_req(ports, req, approval, refused_action, "not_an_approver", claims.approver_ref)
        raise NotAnApproverError("the link's approver is not an approver")
    state = state_of(approval, now=now)
    return Opened(approval, approver, state, claims, keys.keys[claims.key_id])


def view_token(ports: PagePorts, claims: LinkClaims, key: bytes) -> str:
    """A fresh view token for one page view (or one form shown again)."""
    return issue_view_token(claims, key, now=ports.clock(), view_id=secrets.token_urlsafe(12))


def form_again(
    req: ApprovalHttpRequest,
    ports: PagePorts,
    opened: Opened,
    error: ApprovalLinkError,
    message: str,
) -> FormAgain:
    """The form again, with a fresh view token and what the person typed kept."""
    approver, claims, key = opened.form_key()
    kept = {k: v for k, v in req.form.items() if k == "comment" or k.startswith(EDIT_PREFIX)}
    token = view_token(ports, claims, key)
    return FormAgain(opened.approval, approver, token, message, error, values=kept)


def check_view(req: ApprovalHttpRequest, ports: PagePorts, opened: Opened) -> FormAgain | None:
    """Accept the form's view token once, and only after the dwell; else the form again.

    Raises:
        FormExpiredError: the POST carries no token of this approval's page (audited).
    """
    approval = opened.approval
    approver, claims, key = opened.form_key()
    dwell = timedelta(seconds=max(ports.settings.approval_form_dwell_seconds, 0.0))
    try:
        view = check_view_token(
            claims, key, req.form.get("nonce", ""), now=ports.clock(), dwell=dwell
        )
    except SubmittedTooSoonError as exc:
        audit_req(ports, req, approval, "refused", "suspected_automated_submit", approver)
        return form_again(req, ports, opened, exc, exc.user_message)
    except ApprovalLinkError as exc:
        audit_req(ports, req, approval, "refused", reason(exc), approver)
        raise
    if not ports.approvals.use_view_token(approval.approval_id, view.view_id):
        used = ViewTokenUsedError(f"approval {approval.approval_id}: view token used before")
        audit_req(ports, req, approval, "refused", "view_token_reused", approver)
        return form_again(req, ports, opened, used, used.user_message)
    return None


def replaced_link(
    req: ApprovalHttpRequest, approval: Approval, keys: Mapping[str, bytes], now: datetime
) -> bool:
    """Whether the link verifies as one of an earlier generation (replaced by a reissue)."""
    for older in range(approval.link_generation):
        try:
            verify_link(req.approval_id, req.query, keys, now=now, generation=older)
        except LinkExpiredError:
            return True
        except LinkForgedError:
            continue
        return True
    return False


def read_form(req: ApprovalHttpRequest, ports: PagePorts, opened: Opened) -> Form | FormAgain:
    """The decision the form carries, or the form again; refusals are raised (audited)."""
    approval = opened.approval
    approver = opened.form_key()[0]
    again = check_view(req, ports, opened)
    if again is not None:
        return again
    try:
        decision = parse_decision(req.form.get("decision"))
        edits = parse_edits(approval.editable, req.form)
    except EditRejectedError as exc:
        audit_req(ports, req, approval, "refused", "invalid_edit", approver)
        return form_again(req, ports, opened, exc, exc.user_message)
    except InvalidDecisionError as exc:
        audit_req(ports, req, approval, "refused", "invalid_form", approver)
        return form_again(req, ports, opened, exc, str(exc) or exc.user_message)
    again = check_code_typed(req, ports, opened)
    if again is not None:
        return again
    comment = bounded(req.form.get("comment", "").strip(), MAX_COMMENT_CHARS) or None
    return Form(ApprovalStatus(decision), edits, comment)


def check_code_typed(
    req: ApprovalHttpRequest, ports: PagePorts, opened: Opened
) -> FormAgain | None:
    """The form again for a missing or wrong code; raises CodeLockedError once this approver's
    link has used its attempts.

    An empty code is answered "enter the code" and costs nothing. Any other code first claims
    one attempt of this approver's link (one conditional update in the store), and only a
    granted attempt is checked: under any concurrency no more than :data:`MAX_CODE_ATTEMPTS`
    codes are ever checked per approver, and one approver's lockout leaves the others' links.
    """
    approval = opened.approval
    if not approval.require_code:
        return None
    approver, claims, key = opened.form_key()
    typed = typed_code(req.form.get("code"))
    if not typed:
        missing = CodeMissingError(f"approval {approval.approval_id}: no code was typed")
        return form_again(req, ports, opened, missing, missing.user_message)
    attempt = ports.approvals.claim_code_attempt(
        approval.approval_id, claims.approver_ref, MAX_CODE_ATTEMPTS
    )
    if attempt is None:
        audit_req(ports, req, approval, "refused", "code_locked", approver)
        raise CodeLockedError(f"approval {approval.approval_id}: code attempts exhausted")
    stored = ports.approvals.code_hash(approval.approval_id, claims.approver_ref)
    try:
        check_code(approval, claims, typed, stored, key)
    except CodeMismatchError as exc:
        audit_req(ports, req, approval, "refused", "wrong_code", approver)
        left = MAX_CODE_ATTEMPTS - attempt
        if left <= 0:
            raise CodeLockedError("code attempts exhausted") from exc
        return form_again(req, ports, opened, exc, f"{exc.user_message} ({left} attempts left.)")
    return None


# --------------------------------------------------------------------------------------------
# Refusals and audit
# --------------------------------------------------------------------------------------------


def refusal(approval_id: str, state: State) -> ApprovalLinkError:
    """The refusal an approval in ``state`` answers a visitor with."""
    if state is State.cancelled:
        return RunEndedError(f"approval {approval_id} was cancelled")
    return LinkExpiredError(f"approval {approval_id} timed out")


def reason(exc: ApprovalLinkError) -> str:
    name = type(exc).__name__.removesuffix("Error")
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


def audit_req(
    ports: PagePorts,
    req: ApprovalHttpRequest,
    approval: Approval,
    action: AuditAction,
    outcome: str,
    actor: str | None,
) -> None:
    audit(
        ports.approvals,
        approval.approval_id,
        action,
        outcome,
        at=ports.clock(),
        actor=actor,
        req=req,
    )
