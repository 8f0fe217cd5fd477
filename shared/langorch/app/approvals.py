"""Approval use-cases: request one (email signed links), show its page, decide it once, expire it.

``request_approval`` is what the state machine's ``AwaitApproval`` task invokes with the task
token; ``view_approval`` and ``decide_approval`` answer ``GET|HEAD`` and ``POST
/approvals/{id}``; ``resume_after_timeout`` answers a run whose approval task timed out.

A decision is recorded first, then delivered with ``SendTaskSuccess``, then marked delivered. A
crash between the write and the send would leave it recorded but lost, so every later visit that
finds such a decision delivers it again from the record, and a run whose task times out resumes
with it instead of ``timed_out``: the record and the run never disagree.

The task token goes from the request into the approvals table and from there only into
``SendTaskSuccess``: never into an email, a URL, a page or a log line.
"""

from __future__ import annotations

import base64
import logging
import secrets as random_source
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from langorch.domain.approvals import (
    MAX_CODE_FAILURES,
    AlreadyDecidedError,
    Approval,
    ApprovalLinkError,
    ApprovalStatus,
    AuditEntry,
    CodeLockedError,
    CodeMismatchError,
    InvalidDecisionError,
    LinkClaims,
    LinkExpiredError,
    NotAnApproverError,
    RunEndedError,
    TooLateError,
    approval_id_for,
    approver_for,
    approver_ref,
    bounded,
    check_code,
    check_decidable,
    check_nonce,
    code_hash,
    decision_output,
    form_nonce,
    link_url,
    new_approval,
    new_code,
    parse_decision,
    redelivery_due,
    sign_link,
    verify_link,
)
from langorch.domain.errors import NotFoundError, StorageError, TaskClosedError

if TYPE_CHECKING:
    from langorch.adapters.secrets import Secrets
    from langorch.app.container import Container
    from langorch.web.emails import OutgoingEmail
    from langorch.web.pages import Page

logger = logging.getLogger(__name__)

MAX_COMMENT_CHARS = 4000
MAX_USER_AGENT_CHARS = 256
MIN_KEY_BYTES = 32
HTTP_METHODS_THAT_DECIDE = frozenset({"POST"})
REDELIVERY_GRACE = timedelta(seconds=30)
"""How old an undelivered decision must be before a later visit delivers it again.

Longer than the approval callback's 29 s Lambda timeout (API Gateway's limit), so the request
that recorded the decision has ended, delivered or crashed. Racing it would not resume the run
twice (Step Functions refuses a second ``SendTaskSuccess`` on a token as ``TaskTimedOut``, our
TaskClosedError), but the slower of the two would then tell its approver "too late"."""


class EmailSender(Protocol):
    """Where approval emails go: SES in the cloud, the outbox folder locally."""

    def send(self, email: OutgoingEmail) -> str:
        """Send one email; returns a message id."""
        ...


# --------------------------------------------------------------------------------------------
# The link-signing key (Secrets Manager)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SigningKeys:
    """The link-signing keys: ``current`` signs new links, every key in ``keys`` verifies."""

    current: str
    keys: dict[str, bytes] = field(repr=False)

    @property
    def current_key(self) -> bytes:
        """The key new links are signed with."""
        return self.keys[self.current]


def load_signing_keys(secrets: Secrets, name: str) -> SigningKeys:
    """Read ``{"current": KEY_ID, "keys": {KEY_ID: base64 key, ...}}`` from the secret.

    Raises:
        SecretNotFoundError: the secret does not exist (create it with
            :func:`ensure_signing_key`).
        StorageError: the secret is not of that shape.
    """
    value = secrets.get_json(name)
    current = value.get("current")
    raw = value.get("keys")
    if not isinstance(current, str) or not isinstance(raw, dict) or current not in raw:
        raise StorageError(
            f"secret {name} must be {{'current': KEY_ID, 'keys': {{KEY_ID: base64 key}}}} "
            "with the current key among the keys"
        )
    keys: dict[str, bytes] = {}
    for key_id, encoded in raw.items():
        try:
            key = base64.b64decode(str(encoded), validate=True)
        except ValueError as exc:
            raise StorageError(f"secret {name}: key {key_id} is not base64") from exc
        if len(key) < MIN_KEY_BYTES:
            raise StorageError(f"secret {name}: key {key_id} is shorter than {MIN_KEY_BYTES} bytes")
        keys[str(key_id)] = key
    return SigningKeys(current=current, keys=keys)


def ensure_signing_key(
    secrets: Secrets,
    name: str,
    *,
    key_id: Callable[[], str] = lambda: "k1",
    token_bytes: Callable[[int], bytes] = random_source.token_bytes,
) -> str:
    """Create the link-signing secret with one fresh random key when it is missing.

    Used by the local stack (CDK creates the secret in AWS). An existing secret is left as is.

    Returns:
        The current key id.
    """
    # Asked with ``exists`` rather than by catching SecretNotFoundError from a read: a read
    # of a missing secret surfaces as a StorageError through Powertools' provider.
    if secrets.exists(name):
        return load_signing_keys(secrets, name).current
    kid = key_id()
    key = base64.b64encode(token_bytes(MIN_KEY_BYTES)).decode("ascii")
    secrets.put_json(
        name, {"current": kid, "keys": {kid: key}}, description="langorch approval link signing"
    )
    return load_signing_keys_fresh(secrets, name).current


def load_signing_keys_fresh(secrets: Secrets, name: str) -> SigningKeys:
    """:func:`load_signing_keys`, bypassing the per-process cache (just after a write)."""
    value = secrets.get_json(name, fresh=True)
    return SigningKeys(
        current=str(value["current"]),
        keys={k: base64.b64decode(str(v)) for k, v in value["keys"].items()},
    )


# --------------------------------------------------------------------------------------------
# Requesting an approval (invoked by the state machine with the task token)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RequestApproval:
    """The ``AwaitApproval`` task's payload: the run, its approval request, the task token."""

    run_id: str
    approval: dict[str, Any]
    task_token: str = field(repr=False)


@dataclass(frozen=True)
class ApprovalRequested:
    """What ``request_approval`` did."""

    approval_id: str
    created: bool
    emailed: list[str]
    """Approvers emailed by this call (a retried request mails only those not mailed yet)."""
    status: ApprovalStatus = ApprovalStatus.pending


def request_approval(
    cmd: RequestApproval,
    deps: Container,
    *,
    randbelow: Callable[[int], int] = random_source.randbelow,
) -> ApprovalRequested:
    """Park the decision: store the token, record the approval, email each approver their link.

    Idempotent: the approval id derives from the run and interrupt, so a retried invocation
    stores nothing twice and emails only the approvers whose email did not go out yet.

    Args:
        cmd: the task's payload.
        deps: the container (approvals, secrets, email, runs, settings, clock).
        randbelow: the random source for one-time codes.

    Raises:
        ValueError: the request has no interrupt id or no approvers.
        SecretNotFoundError: the link-signing secret is missing.
        StorageError: DynamoDB, Secrets Manager or SES failed transiently (retry).
        EmailNotSentError: SES refused an email for good.
    """
    now = deps.clock()
    workflow_id: str | None
    try:
        workflow_id = deps.runs.get_run(cmd.run_id).workflow_id
    except NotFoundError:
        workflow_id = None  # the approval still works; only listings lose the workflow
    approval = new_approval(
        run_id=cmd.run_id, workflow_id=workflow_id, request=cmd.approval, now=now
    )
    stored, created = deps.approvals.put_pending(approval, cmd.task_token)
    if created:
        _audit(deps, stored.approval_id, "requested", "pending", at=now)
    if not stored.is_pending:
        logger.info(
            "approval already closed; nothing to email",
            extra={"approval_id": stored.approval_id, "run_id": stored.run_id},
        )
        return ApprovalRequested(stored.approval_id, created, [], stored.status)
    keys = load_signing_keys(deps.secrets, deps.settings.link_signing_secret)
    emailed: list[str] = []
    for address in stored.approvers:
        ref = approver_ref(stored.approval_id, address)
        if ref in stored.emailed:
            continue
        _email_one(stored, address, ref, keys, deps, randbelow)
        emailed.append(address)
    logger.info(
        "approval requested",
        extra={
            "approval_id": stored.approval_id,
            "run_id": stored.run_id,
            "workflow_id": stored.workflow_id,
            "step_id": stored.step_id,
            "first_request": created,
            "emailed": len(emailed),
        },
    )
    return ApprovalRequested(stored.approval_id, created, emailed)


def _email_one(
    approval: Approval,
    address: str,
    ref: str,
    keys: SigningKeys,
    deps: Container,
    randbelow: Callable[[int], int],
) -> None:
    from langorch.web.emails import render_approval_email

    code: str | None = None
    if approval.require_code:
        code = new_code(randbelow)
        # The hash is stored before the email goes out, so the code in the email always works.
        deps.approvals.set_code_hash(
            approval.approval_id, ref, code_hash(approval.approval_id, ref, code, keys.current_key)
        )
    params = sign_link(
        approval.approval_id, address, approval.expires_at, keys.current, keys.current_key
    )
    link = link_url(deps.settings.public_base_url, approval.approval_id, params)
    deps.email.send(render_approval_email(approval, to=address, link=link, code=code))
    deps.approvals.mark_emailed(approval.approval_id, ref)
    _audit(deps, approval.approval_id, "emailed", "sent", actor=address)


# --------------------------------------------------------------------------------------------
# The approval page: GET/HEAD show, POST decides
# --------------------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class _Opened:
    approval: Approval
    claims: LinkClaims
    approver: str
    key: bytes


def view_approval(req: ApprovalHttpRequest, deps: Container) -> Page:
    """Answer ``GET``/``HEAD``: verify the link, audit the view, show the page. Decides nothing.

    Returns:
        The confirmation page for a pending approval; otherwise the page that says why not
        (already decided by whom and when, expired, run ended, forged link). ``HEAD`` gets the
        same status and headers with an empty body.
    """
    opened = _open(req, deps, action="view")
    if not isinstance(opened, _Opened):
        return _for_method(req, opened)
    from langorch.web import pages

    approval = opened.approval
    try:
        check_decidable(approval, opened.approver, now=deps.clock())
    except AlreadyDecidedError as exc:
        _audit_req(deps, req, approval.approval_id, "view", "already_decided", opened.approver)
        _redeliver_if_lost(req, deps, approval, opened.approver)
        return _for_method(req, pages.already_decided_page(exc))
    except ApprovalLinkError as exc:
        _audit_req(deps, req, approval.approval_id, "view", _reason(exc), opened.approver)
        return _for_method(req, pages.refusal_page(exc))
    _audit_req(deps, req, approval.approval_id, "view", "shown", opened.approver)
    page = pages.approval_page(
        approval, approver=opened.approver, nonce=form_nonce(opened.claims, opened.key)
    )
    return _for_method(req, page)


def decide_approval(req: ApprovalHttpRequest, deps: Container) -> Page:
    """Answer ``POST``: verify link, expiry, nonce, approver and code; decide once; resume.

    The decision is one conditional write; only its winner calls ``SendTaskSuccess`` with
    ``{"decision", "approver", "comment", "edits"}`` read back from the record, then marks it
    delivered. A closed task (timed out) turns the approval ``timed_out`` and shows "too late";
    nothing resumes. A visit to an approval decided earlier delivers that decision again if it
    never reached the run (see :data:`REDELIVERY_GRACE`).

    Returns:
        The outcome page (decided, already decided by whom and when, or why it was refused).
    """
    from langorch.web import pages

    opened = _open(req, deps, action="decide")
    if not isinstance(opened, _Opened):
        return opened
    approval, approver = opened.approval, opened.approver
    now = deps.clock()
    try:
        check_decidable(approval, approver, now=now)
        check_nonce(opened.claims, opened.key, req.form.get("nonce", ""))
        decision = parse_decision(req.form.get("decision"))
        edits = _edits(approval, req.form)
    except AlreadyDecidedError as exc:
        _audit_req(deps, req, approval.approval_id, "refused", "already_decided", approver)
        _redeliver_if_lost(req, deps, approval, approver)
        return pages.already_decided_page(exc)
    except InvalidDecisionError as exc:
        _audit_req(deps, req, approval.approval_id, "refused", "invalid_form", approver)
        return _form_again(opened, str(exc) or exc.user_message, 400)
    except ApprovalLinkError as exc:
        _audit_req(deps, req, approval.approval_id, "refused", _reason(exc), approver)
        return pages.refusal_page(exc)

    refused = _check_code(req, deps, opened)
    if refused is not None:
        return refused
    refused = _check_run(req, deps, opened)
    if refused is not None:
        return refused

    comment = bounded(req.form.get("comment", "").strip(), MAX_COMMENT_CHARS) or None
    try:
        decided = deps.approvals.decide(
            approval.approval_id, ApprovalStatus(decision), approver, comment, edits, now
        )
    except AlreadyDecidedError as exc:
        _audit_req(deps, req, approval.approval_id, "refused", "already_decided", approver)
        return pages.already_decided_page(exc)
    except ApprovalLinkError as exc:
        _audit_req(deps, req, approval.approval_id, "refused", _reason(exc), approver)
        return pages.refusal_page(exc)

    try:
        deps.stepfunctions.send_success(
            deps.approvals.task_token(approval.approval_id), decision_output(decided)
        )
    except TaskClosedError:
        if not deps.approvals.mark(approval.approval_id, ApprovalStatus.timed_out):
            current = deps.approvals.get(approval.approval_id)
            if current is not None and current.delivered_at is not None:
                # The task timed out meanwhile and the run's timeout took this recorded
                # decision (resume_after_timeout): it stands.
                _audit_req(deps, req, approval.approval_id, "decide", decision, approver)
                return pages.decided_page(current)
        _audit_req(deps, req, approval.approval_id, "too_late", "task_closed", approver)
        logger.info(
            "approval decided after its task closed",
            extra={"approval_id": approval.approval_id, "run_id": approval.run_id},
        )
        return pages.refusal_page(TooLateError("the approval's task is closed"))
    except StorageError:
        # Recorded but not delivered: undo it so pressing again works, instead of leaving a
        # decision that never reaches the run.
        deps.approvals.reopen(decided)
        _audit_req(deps, req, approval.approval_id, "refused", "delivery_failed", approver)
        logger.warning(
            "approval decision could not be delivered; reopened",
            extra={"approval_id": approval.approval_id, "run_id": approval.run_id},
        )
        return pages.unavailable_page()
    _mark_delivered(deps, decided)
    _audit_req(deps, req, approval.approval_id, "decide", decision, approver)
    logger.info(
        "approval decided",
        extra={
            "approval_id": approval.approval_id,
            "run_id": approval.run_id,
            "workflow_id": approval.workflow_id,
            "step_id": approval.step_id,
            "decision": decision,
            "wait_seconds": int((now - approval.created_at).total_seconds()),
        },
    )
    return pages.decided_page(decided)


def _redeliver_if_lost(
    req: ApprovalHttpRequest, deps: Container, approval: Approval, visitor: str | None
) -> None:
    """Deliver a decision again that was recorded but never reached the run.

    That happens when the request that recorded it died between the write and
    ``SendTaskSuccess``. Any valid link holder's visit (even a GET: this decides nothing, it
    delivers what a POST decided) re-sends the recorded decision, never the visitor's. A closed
    task means it was delivered after all, or timed out, and then the run's timeout resumes
    with this same decision (:func:`resume_after_timeout`): either way nothing is left to send.
    A storage failure leaves it for the next visit.
    """
    if not redelivery_due(approval, now=deps.clock(), grace=REDELIVERY_GRACE):
        return
    ids = {"approval_id": approval.approval_id, "run_id": approval.run_id}
    try:
        token = deps.approvals.task_token(approval.approval_id)
        deps.stepfunctions.send_success(token, decision_output(approval))
        outcome = "delivered"
    except TaskClosedError:
        outcome = "task_closed"
    except (StorageError, NotFoundError):
        _audit_req(deps, req, approval.approval_id, "redeliver", "failed", visitor)
        logger.warning("recorded approval decision could not be redelivered", extra=ids)
        return
    _mark_delivered(deps, approval)
    _audit_req(deps, req, approval.approval_id, "redeliver", outcome, visitor)
    logger.warning(
        "lost approval decision redelivered",
        extra={**ids, "decision": approval.status.value, "outcome": outcome},
    )


def _mark_delivered(deps: Container, approval: Approval) -> None:
    """Note the delivery; failing to note it only costs one more send on a later visit."""
    try:
        deps.approvals.mark_delivered(approval.approval_id, deps.clock())
    except StorageError:
        logger.warning(
            "approval decision delivered but not marked delivered",
            extra={"approval_id": approval.approval_id, "run_id": approval.run_id},
        )


def _open(req: ApprovalHttpRequest, deps: Container, *, action: str) -> _Opened | Page:
    """Verify the link and find the approval and approver, or the page that says why not."""
    from langorch.domain.approvals import LinkForgedError
    from langorch.web import pages

    audit_action = "view" if action == "view" else "refused"
    keys = load_signing_keys(deps.secrets, deps.settings.link_signing_secret)
    now = deps.clock()
    try:
        claims = verify_link(req.approval_id, req.query, keys.keys, now=now)
    except LinkForgedError as exc:
        # Audited only under an approval that exists: a forger cannot make us write to
        # partitions of their choosing.
        if deps.approvals.get(req.approval_id) is not None:
            _audit_req(deps, req, req.approval_id, audit_action, "forged_link", None)
        return pages.refusal_page(exc)
    except LinkExpiredError as exc:
        expired = deps.approvals.get(req.approval_id)
        if expired is None:
            return pages.refusal_page(exc)
        who = approver_for(expired, req.query.get("ap", ""))
        if expired.status in (ApprovalStatus.approved, ApprovalStatus.rejected):
            _audit_req(deps, req, req.approval_id, audit_action, "already_decided", who)
            _redeliver_if_lost(req, deps, expired, who)
            return pages.already_decided_page(
                AlreadyDecidedError(
                    expired.approval_id, expired.status, expired.decided_by, expired.decided_at
                )
            )
        _audit_req(deps, req, req.approval_id, audit_action, "expired", who)
        return pages.refusal_page(exc)
    approval = deps.approvals.get(req.approval_id)
    if approval is None:
        return pages.not_found_page()
    approver = approver_for(approval, claims.approver_ref)
    if approver is None:
        _audit_req(
            deps, req, approval.approval_id, audit_action, "not_an_approver", claims.approver_ref
        )
        return pages.refusal_page(NotAnApproverError("the link's approver is not an approver"))
    return _Opened(approval, claims, approver, keys.keys[claims.key_id])


def _check_code(req: ApprovalHttpRequest, deps: Container, opened: _Opened) -> Page | None:
    from langorch.web import pages

    approval = opened.approval
    if not approval.require_code:
        return None
    stored = deps.approvals.code_hash(approval.approval_id, opened.claims.approver_ref)
    try:
        check_code(approval, opened.claims, req.form.get("code", ""), stored, opened.key)
    except CodeLockedError as exc:
        _audit_req(deps, req, approval.approval_id, "refused", "code_locked", opened.approver)
        return pages.refusal_page(exc)
    except CodeMismatchError as exc:
        failures = deps.approvals.record_code_failure(approval.approval_id)
        _audit_req(deps, req, approval.approval_id, "refused", "wrong_code", opened.approver)
        if failures >= MAX_CODE_FAILURES:
            return pages.refusal_page(CodeLockedError("code attempts exhausted"))
        left = MAX_CODE_FAILURES - failures
        return _form_again(opened, f"{exc.user_message} ({left} attempts left.)", exc.status)
    return None


def _check_run(req: ApprovalHttpRequest, deps: Container, opened: _Opened) -> Page | None:
    """Refuse when the run ended or no longer waits on this approval (nothing may resume)."""
    from langorch.web import pages

    approval = opened.approval
    try:
        run = deps.runs.get_run(approval.run_id)
    except NotFoundError:
        run = None
    if run is None or run.is_terminal:
        deps.approvals.mark(approval.approval_id, ApprovalStatus.cancelled)
        _audit_req(deps, req, approval.approval_id, "refused", "run_ended", opened.approver)
        return pages.refusal_page(RunEndedError("the run has ended"))
    if run.pending is None or run.pending.interrupt_id != approval.interrupt_id:
        deps.approvals.mark(approval.approval_id, ApprovalStatus.timed_out)
        _audit_req(deps, req, approval.approval_id, "too_late", "run_moved_on", opened.approver)
        return pages.refusal_page(TooLateError("the run no longer waits on this approval"))
    return None


def _edits(approval: Approval, form: Mapping[str, str]) -> dict[str, Any]:
    """The editable values the approver changed, typed like the originals.

    Raises:
        InvalidDecisionError: a non-text value was edited into something that is not JSON.
    """
    import json

    from langorch.web.pages import EDIT_PREFIX, editable_as_text, is_editable_here

    edits: dict[str, Any] = {}
    for key, original in approval.editable.items():
        typed = form.get(EDIT_PREFIX + key)
        if typed is None or not is_editable_here(original):
            continue
        # Browsers send a textarea's line breaks as CRLF.
        typed = typed.replace("\r\n", "\n")
        if typed == editable_as_text(original):
            continue
        if isinstance(original, str):
            edits[key] = typed
            continue
        if original is None and not typed.strip():
            continue
        try:
            edits[key] = json.loads(typed)
        except ValueError as exc:
            raise InvalidDecisionError(
                f"The field {key} must be JSON (as shown when the page opened); "
                "nothing was changed. Correct it and press the button again."
            ) from exc
    return edits


def _form_again(opened: _Opened, error: str, status: int) -> Page:
    from langorch.web import pages

    return pages.approval_page(
        opened.approval,
        approver=opened.approver,
        nonce=form_nonce(opened.claims, opened.key),
        error=error,
        status=status,
    )


def _for_method(req: ApprovalHttpRequest, page: Page) -> Page:
    from langorch.web.pages import Page as PageType

    if req.method.upper() == "HEAD":
        return PageType(status=page.status, body="", headers=page.headers)
    return page


# --------------------------------------------------------------------------------------------
# Timeout
# --------------------------------------------------------------------------------------------


def resume_after_timeout(run_id: str, interrupt_id: str, deps: Container) -> dict[str, Any]:
    """What a run whose approval task timed out resumes with (the run segment calls this).

    A decision recorded while the approval was open stands: if its delivery was lost (a crash
    between the write and ``SendTaskSuccess``), the run resumes with it, not ``timed_out``.
    It is claimed by marking it delivered, so a decider still on its way, finding the task
    closed, can no longer turn it into ``timed_out`` behind the run's back. Without a recorded
    decision the approval expires (:func:`expire_approval`).

    Returns:
        The recorded decision's ``{"decision", "approver", "comment", "edits"}``, or
        ``{"decision": "timed_out"}``.
    """
    approval_id = approval_id_for(run_id, interrupt_id)
    recorded = deps.approvals.mark_delivered(approval_id, deps.clock())
    if recorded is None:
        expire_approval(run_id, interrupt_id, deps)
        return {"decision": "timed_out"}
    _audit(deps, approval_id, "redeliver", "at_timeout", actor=recorded.decided_by)
    logger.warning(
        "decision recovered at timeout",
        extra={
            "approval_id": approval_id,
            "run_id": run_id,
            "decision": recorded.status.value,
        },
    )
    return decision_output(recorded)


def expire_approval(run_id: str, interrupt_id: str, deps: Container) -> bool:
    """Close the approval of a run's interrupt as ``timed_out`` (its task timed out).

    Called by :func:`resume_after_timeout` when no decision was recorded. A missing or already
    closed approval, or a decision already delivered, is left as it is.

    Returns:
        Whether this call closed it.
    """
    approval_id = approval_id_for(run_id, interrupt_id)
    changed = deps.approvals.mark(approval_id, ApprovalStatus.timed_out)
    if changed:
        _audit(deps, approval_id, "expired", "timed_out")
        logger.info("approval timed out", extra={"approval_id": approval_id, "run_id": run_id})
    return changed


# --------------------------------------------------------------------------------------------
# Audit
# --------------------------------------------------------------------------------------------


def _reason(exc: ApprovalLinkError) -> str:
    name = type(exc).__name__.removesuffix("Error")
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


def _audit(
    deps: Container,
    approval_id: str,
    action: Any,
    outcome: str,
    *,
    actor: str | None = None,
    at: datetime | None = None,
) -> None:
    deps.approvals.append_audit(
        AuditEntry(
            approval_id=approval_id,
            at=at or deps.clock(),
            action=action,
            outcome=outcome,
            actor=actor,
        )
    )


def _audit_req(
    deps: Container,
    req: ApprovalHttpRequest,
    approval_id: str,
    action: Any,
    outcome: str,
    actor: str | None,
) -> None:
    deps.approvals.append_audit(
        AuditEntry(
            approval_id=approval_id,
            at=deps.clock(),
            action=action,
            outcome=outcome,
            actor=actor,
            source_ip=req.source_ip,
            user_agent=bounded(req.user_agent, MAX_USER_AGENT_CHARS) if req.user_agent else None,
            method=req.method.upper(),
        )
    )
