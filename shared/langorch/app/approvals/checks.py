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

from langorch.app.approvals.commands import DecideApproval, PageCommand
from langorch.app.approvals.driver import audit
from langorch.app.approvals.keys import load_signing_keys
from langorch.app.approvals.ports import PagePorts
from langorch.domain.approvals.codes import check_code, typed_code
from langorch.domain.approvals.edits import EDIT_PREFIX, EditRejectedError, parse_edits
from langorch.domain.approvals.fixes import fix_decision
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
    SupersededError,
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


def open_link(cmd: PageCommand, ports: PagePorts, *, refused_action: AuditAction) -> Opened:
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
    found = store.get(cmd.approval_id)
    generation = 0 if found is None else found.link_generation
    try:
        claims = verify_link(cmd.approval_id, cmd.link, keys.keys, now=now, generation=generation)
    except LinkForgedError:
        # Audited only under an approval that exists: a forger cannot make us write to
        # partitions of their choosing.
        if found is not None and replaced_link(cmd, found, keys.keys, now):
            audit_req(ports, cmd, found, refused_action, "replaced_link", None)
            raise LinkReissuedError(f"approval {cmd.approval_id}: a replaced link") from None
        if found is not None:
            audit_req(ports, cmd, found, refused_action, "forged_link", None)
        raise
    except LinkExpiredError:
        if found is None:
            raise
        # Links expire with their approval: a pending one is expired too (whatever the clock).
        state = state_of(found, now=now)
        who = approver_for(found, cmd.link.get("ap", ""))
        return Opened(found, who, State.expired if state is State.pending else state)
    approval = found
    if approval is None:
        raise ApprovalNotFoundError(f"approval {cmd.approval_id} does not exist")
    approver = approver_for(approval, claims.approver_ref)
    if approver is None:
        audit_req(ports, cmd, approval, refused_action, "not_an_approver", claims.approver_ref)
        raise NotAnApproverError("the link's approver is not an approver")
    state = state_of(approval, now=now)
    return Opened(approval, approver, state, claims, keys.keys[claims.key_id])


def view_token(ports: PagePorts, claims: LinkClaims, key: bytes) -> str:
    """A fresh view token for one page view (or one form shown again)."""
    return issue_view_token(claims, key, now=ports.clock(), view_id=secrets.token_urlsafe(12))


def form_again(
    cmd: DecideApproval, ports: PagePorts, opened: Opened, error: ApprovalLinkError
) -> FormAgain:
    """The form again, with a fresh view token, why, and what the person typed kept."""
    approver, claims, key = opened.form_key()
    kept = {k: v for k, v in cmd.form.items() if k == "comment" or k.startswith(EDIT_PREFIX)}
    token = view_token(ports, claims, key)
    return FormAgain(opened.approval, approver, token, error, values=kept)


def check_view(cmd: DecideApproval, ports: PagePorts, opened: Opened) -> FormAgain | None:
    """Accept the form's view token once, and only after the dwell; else the form again.

    Raises:
        FormExpiredError: the POST carries no token of this approval's page (audited).
    """
    approval = opened.approval
    approver, claims, key = opened.form_key()
    dwell = timedelta(seconds=max(ports.settings.approval_form_dwell_seconds, 0.0))
    try:
        view = check_view_token(
            claims, key, cmd.form.get("nonce", ""), now=ports.clock(), dwell=dwell
        )
    except SubmittedTooSoonError as exc:
        audit_req(ports, cmd, approval, "refused", "suspected_automated_submit", approver)
        return form_again(cmd, ports, opened, exc)
    except ApprovalLinkError as exc:
        audit_req(ports, cmd, approval, "refused", reason(exc), approver)
        raise
    if not ports.approvals.use_view_token(approval.approval_id, view.view_id):
        used = ViewTokenUsedError(f"approval {approval.approval_id}: view token used before")
        audit_req(ports, cmd, approval, "refused", "view_token_reused", approver)
        return form_again(cmd, ports, opened, used)
    return None


def replaced_link(
    cmd: PageCommand, approval: Approval, keys: Mapping[str, bytes], now: datetime
) -> bool:
    """Whether the link verifies as one of an earlier generation (replaced by a reissue)."""
    for older in range(approval.link_generation):
        try:
            verify_link(cmd.approval_id, cmd.link, keys, now=now, generation=older)
        except LinkExpiredError:
            return True
        except LinkForgedError:
            continue
        return True
    return False


def read_form(cmd: DecideApproval, ports: PagePorts, opened: Opened) -> Form | FormAgain:
    """The decision the form carries, or the form again; refusals are raised (audited)."""
    approval = opened.approval
    approver = opened.form_key()[0]
    again = check_view(cmd, ports, opened)
    if again is not None:
        return again
    try:
        if approval.fix is None:
            decision = parse_decision(cmd.form.get("decision"))
            edits = parse_edits(approval.editable, cmd.form)
        else:
            # A fix's buttons are its choices; the answer travels in the edits (fixes.py).
            decision, edits = fix_decision(
                approval.fix,
                cmd.form.get("decision"),
                parse_edits(approval.editable, cmd.form),
                cmd.visitor.channel,
            )
    except EditRejectedError as exc:
        audit_req(ports, cmd, approval, "refused", "invalid_edit", approver)
        return form_again(cmd, ports, opened, exc)
    except InvalidDecisionError as exc:
        audit_req(ports, cmd, approval, "refused", "invalid_form", approver)
        return form_again(cmd, ports, opened, exc)
    again = check_code_typed(cmd, ports, opened)
    if again is not None:
        return again
    comment = bounded(cmd.form.get("comment", "").strip(), MAX_COMMENT_CHARS) or None
    return Form(ApprovalStatus(decision), edits, comment)


def check_code_typed(cmd: DecideApproval, ports: PagePorts, opened: Opened) -> FormAgain | None:
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
    typed = typed_code(cmd.form.get("code"))
    if not typed:
        missing = CodeMissingError(f"approval {approval.approval_id}: no code was typed")
        return form_again(cmd, ports, opened, missing)
    attempt = ports.approvals.claim_code_attempt(
        approval.approval_id, claims.approver_ref, MAX_CODE_ATTEMPTS
    )
    if attempt is None:
        audit_req(ports, cmd, approval, "refused", "code_locked", approver)
        raise CodeLockedError(f"approval {approval.approval_id}: code attempts exhausted")
    stored = ports.approvals.code_hash(approval.approval_id, claims.approver_ref)
    try:
        check_code(approval, claims, typed, stored, key)
    except CodeMismatchError as exc:
        audit_req(ports, cmd, approval, "refused", "wrong_code", approver)
        left = MAX_CODE_ATTEMPTS - attempt
        if left <= 0:
            raise CodeLockedError("code attempts exhausted") from exc
        wrong = CodeMismatchError(str(exc), attempts_left=left)
        return form_again(cmd, ports, opened, wrong)
    return None


# --------------------------------------------------------------------------------------------
# Refusals and audit
# --------------------------------------------------------------------------------------------


def refusal(approval_id: str, state: State) -> ApprovalLinkError:
    """The refusal an approval in ``state`` answers a visitor with."""
    if state is State.cancelled:
        return RunEndedError(f"approval {approval_id} was cancelled")
    if state is State.superseded:
        return SupersededError(f"approval {approval_id} was superseded by a newer request")
    return LinkExpiredError(f"approval {approval_id} timed out")


def reason(exc: ApprovalLinkError) -> str:
    name = type(exc).__name__.removesuffix("Error")
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


def audit_req(
    ports: PagePorts,
    cmd: PageCommand,
    approval: Approval,
    action: AuditAction,
    outcome: str,
    actor: str | None,
) -> None:
    """Append one audit line for what ``cmd``'s visitor caused."""
    audit(
        ports.approvals,
        approval.approval_id,
        action,
        outcome,
        at=ports.clock(),
        actor=actor,
        visitor=cmd.visitor,
    )
