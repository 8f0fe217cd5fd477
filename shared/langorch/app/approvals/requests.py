"""Requesting an approval: what the state machine's ``AwaitApproval`` task invokes.

It stores the task token server-side (never in an email, a URL, a page or a log line), records
the pending approval and emails each approver a link signed for them, then posts the request to
its chat channels (:mod:`langorch.app.approvals.channels`) when it names any.
"""

from __future__ import annotations

import logging
import secrets as random_source
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from langorch.app.approvals.channels import chosen_channels, post_to_channels
from langorch.app.approvals.driver import apply_event, audit, newest_at, record, supersede_id
from langorch.app.approvals.keys import SigningKeys, load_signing_keys
from langorch.app.approvals.ports import PagePorts, RequestPorts
from langorch.domain.approvals.audit import Visitor
from langorch.domain.approvals.codes import code_hash, new_code
from langorch.domain.approvals.lifecycle import Event, State, state_of, step
from langorch.domain.approvals.record import (
    Approval,
    ApprovalStatus,
    approval_id_for,
    approver_ref,
    decision_output,
    link_url,
    new_approval,
    sign_link,
)
from langorch.domain.approvals.votes import may_be_asked, next_timer
from langorch.domain.errors import ConflictError, NotFoundError, TaskClosedError

logger = logging.getLogger(__name__)

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
    ports: RequestPorts,
    *,
    randbelow: Callable[[int], int] = random_source.randbelow,
) -> ApprovalRequested:
    """Park the decision: store the token, record the approval, email each approver their link.

    Idempotent: the approval id derives from the run and interrupt, so a retried invocation
    stores nothing twice and emails only the approvers whose email did not go out yet.

    Args:
        cmd: the task's payload.
        ports: approvals, runs, secrets, email, settings and clock.
        randbelow: the random source for one-time codes.

    Raises:
        ValueError: the request has no interrupt id or no approvers.
        SecretNotFoundError: the link-signing secret is missing.
        StorageError: DynamoDB, Secrets Manager or SES failed transiently (retry).
        EmailNotSentError: SES refused an email for good.
    """
    now = ports.clock()
    workflow_id: str | None
    request = dict(cmd.approval)
    try:
        run = ports.runs.get_run(cmd.run_id)
        workflow_id = run.workflow_id
        # Who started the run, when the trigger knows (a signed webhook's sender field, the
        # CLI user): separation of duties keeps them from approving it.
        request.setdefault("started_by", run.trigger.detail.get("started_by"))
        # What it is asked about: a redrive onto another version asks again (supersedes it).
        request.setdefault("workflow_version", run.workflow_version)
    except NotFoundError:
        workflow_id = None  # the approval still works; only listings lose the workflow
    approval = _this_generation(
        new_approval(run_id=cmd.run_id, workflow_id=workflow_id, request=request, now=now), ports
    )
    stored, created = ports.approvals.put_pending(approval, cmd.task_token)
    if created:
        record(ports.approvals, stored, step(State.new, Event.request), at=now)
    if not created and state_of(stored, now=now) is State.decided:
        return _deliver_recorded(stored, cmd.task_token, ports)
    if not stored.is_pending:
        logger.info(
            "approval already closed; nothing to email",
            extra={"approval_id": stored.approval_id, "run_id": stored.run_id},
        )
        return ApprovalRequested(stored.approval_id, created, [], stored.status)
    channels = chosen_channels(stored, ports.settings)
    emailed: list[str] = []
    if "email" in channels:
        keys = load_signing_keys(ports.secrets, ports.settings.link_signing_secret)
        for address in stored.approvers:
            ref = approver_ref(stored.approval_id, address)
            if ref in stored.emailed or not may_be_asked(stored, address):
                continue
            _email_one(stored, address, ref, keys, ports, randbelow)
            emailed.append(address)
    posted = post_to_channels(stored, ports)
    upcoming = next_timer(stored, now)
    if upcoming is not None:
        # Its first reminder or escalation: a one-time wake-up, not a polling function.
        ports.approval_timers.schedule(stored.approval_id, upcoming.due)
    logger.info(
        "approval requested",
        extra={
            "approval_id": stored.approval_id,
            "run_id": stored.run_id,
            "workflow_id": stored.workflow_id,
            "step_id": stored.step_id,
            "first_request": created,
            "emailed": len(emailed),
            "posted": len(posted),
        },
    )
    return ApprovalRequested(stored.approval_id, created, emailed)


def _this_generation(approval: Approval, ports: RequestPorts) -> Approval:
    """``approval`` under the id it is asked by at its pause point: the newest one's (a retried
    request); or, when the newest is still open but showed something else (the run's state
    changed before the decision: a fix edited it, a redrive changed what it shows), the next
    generation's, the open one superseded so its links say so and decide nothing."""
    generation, newest = newest_at(ports.approvals, approval.run_id, approval.interrupt_id)
    if newest is not None and _shows_otherwise(newest, approval, ports.clock()):
        supersede_id(newest.approval_id, approvals=ports.approvals, clock=ports.clock)
        logger.info(
            "approval superseded: what it shows changed",
            extra={"approval_id": newest.approval_id, "run_id": approval.run_id},
        )
        generation += 1
    new_id = approval_id_for(approval.run_id, approval.interrupt_id, generation)
    return (
        approval
        if new_id == approval.approval_id
        else approval.model_copy(update={"approval_id": new_id})
    )


def _shows_otherwise(stored: Approval, asked: Approval, now: datetime) -> bool:
    """Whether an open approval was asked about something other than ``asked`` shows."""
    if state_of(stored, now=now) not in (State.pending, State.expired):
        return False
    if stored.asked is None or asked.asked is None:
        return False  # recorded before the digest was: nothing to compare
    return stored.asked.shown_digest != asked.asked.shown_digest


def hand_over_decision(
    approval: Approval,
    task_token: str,
    ports: PagePorts,
    actor: str | None,
    visitor: Visitor | None,
) -> Event:
    """Send a recorded decision to ``task_token`` and note it delivered: ``redeliver``, or
    ``redeliver_closed`` when the task is closed (delivered after all, or timed out, and then
    the run's timeout resumes with this same decision)."""
    try:
        ports.executions.send_success(task_token, decision_output(approval))
        event = Event.redeliver
    except TaskClosedError:
        event = Event.redeliver_closed
    apply_event(ports.approvals, approval, event, ports.clock(), actor, visitor, tolerant=True)
    return event


def _deliver_recorded(stored: Approval, task_token: str, ports: RequestPorts) -> ApprovalRequested:
    """Hand a decision recorded while the run had no task (its execution was replaced: recovery
    after a restart, a redrive) to the task that parks it now, instead of emailing again.

    A second delivery to one task is refused by Step Functions, so a click that reaches the new
    task too never resumes the run twice.
    """
    event = hand_over_decision(stored, task_token, ports, None, None)
    logger.info(
        "recorded approval decision delivered to the run's new task",
        extra={
            "approval_id": stored.approval_id,
            "run_id": stored.run_id,
            "decision": stored.status.value,
            "outcome": event.value,
        },
    )
    return ApprovalRequested(stored.approval_id, False, [], stored.status)


def _email_one(
    approval: Approval,
    address: str,
    ref: str,
    keys: SigningKeys,
    ports: RequestPorts,
    randbelow: Callable[[int], int],
    *,
    reason: str | None = None,
    progress: str | None = None,
) -> None:
    from langorch.web.emails import render_approval_email

    code: str | None = None
    if approval.require_code:
        code = new_code(randbelow)
        # The hash is stored before the email goes out, so the code in the email always works.
        ports.approvals.set_code_hash(
            approval.approval_id, ref, code_hash(approval.approval_id, ref, code, keys.current_key)
        )
    params = sign_link(
        approval.approval_id,
        address,
        approval.expires_at,
        keys.current,
        keys.current_key,
        generation=approval.link_generation,
    )
    link = link_url(ports.settings.public_base_url, approval.approval_id, params)
    ports.email.send(
        render_approval_email(
            approval, to=address, link=link, code=code, reason=reason, progress=progress
        )
    )
    ports.approvals.mark_emailed(approval.approval_id, ref)
    outcome = "sent" if reason is None else f"sent: {reason}"
    audit(
        ports.approvals, approval.approval_id, "emailed", outcome, at=ports.clock(), actor=address
    )


# --------------------------------------------------------------------------------------------
# Reissuing links and codes (``langorch approvals reissue``)
# --------------------------------------------------------------------------------------------


def reissue_approval(
    approval_id: str,
    ports: RequestPorts,
    *,
    randbelow: Callable[[int], int] = random_source.randbelow,
) -> ApprovalRequested:
    """Send every approver a fresh link (and code): the links sent before stop working.

    The approval's link generation goes up (older links are refused with "this link was
    replaced"), every approver's code and code attempts are forgotten, and each approver is
    emailed again. Audited as ``reissued``.

    Raises:
        NotFoundError: no such approval.
        ApprovalNotPendingError: it was decided or ended (there is nothing left to decide).
    """
    approval = ports.approvals.get(approval_id)
    if approval is None:
        raise NotFoundError(
            f"approval {approval_id} does not exist (list them with `langorch approvals list`)"
        )
    now = ports.clock()
    refs = [approver_ref(approval_id, address) for address in approval.approvers]
    fresh = None
    if state_of(approval, now=now) is State.pending:
        fresh = ports.approvals.reissue_links(approval_id, refs)
    if fresh is None:
        raise ApprovalNotPendingError(
            f"approval {approval_id} is {approval.status.value}, not pending: "
            "only a pending approval's links can be reissued"
        )
    audit(ports.approvals, approval_id, "reissued", f"generation {fresh.link_generation}", at=now)
    keys = load_signing_keys(ports.secrets, ports.settings.link_signing_secret)
    for address, ref in zip(fresh.approvers, refs, strict=True):
        _email_one(fresh, address, ref, keys, ports, randbelow)
    logger.info(
        "approval links reissued",
        extra={"approval_id": approval_id, "run_id": fresh.run_id, "emailed": len(refs)},
    )
    return ApprovalRequested(approval_id, False, list(fresh.approvers))


class ApprovalNotPendingError(ConflictError):
    """The approval was decided or ended: its links cannot be reissued."""
