"""Approval emails that could not be delivered: SES bounce and complaint events (issue 34).

SES publishes the configuration set's hard bounces and complaints to an SNS topic the trigger
function subscribes to. Each names the approval (the ``approval_id`` tag every approval email
carries) and the recipients. For a pending approval, the recipient is marked undeliverable on
it (an ``undeliverable`` audit line, shown by ``approvals show`` and the console), and the
approval escalates at once to its policy's next level, as its escalation timer would have
later: a person whose mail bounces cannot answer, so waiting for the timer only loses time.
"""

from __future__ import annotations

import json
import logging
import secrets as random_source
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from langorch.app.approvals.driver import audit
from langorch.app.approvals.ports import RequestPorts
from langorch.app.approvals.votes import fire_escalation
from langorch.domain.approvals.lifecycle import State, state_of

logger = logging.getLogger(__name__)

APPROVAL_TAG = "approval_id"
"""The SES message tag naming the approval an email asks for (``SesSender`` sets it)."""


@dataclass(frozen=True)
class Undeliverable:
    """One recipient SES could not deliver an approval email to, for good."""

    approval_id: str
    address: str
    kind: str
    """``bounce`` (a permanent bounce) or ``complaint`` (marked as spam)."""
    detail: str
    """SES's classification (``Permanent/NoEmail``, ``abuse``), for the audit line."""


def undeliverable_of(notification: Mapping[str, Any]) -> list[Undeliverable]:
    """The recipients an SES event notification gives up on (none for other events).

    Transient bounces (mailbox full, auto-replies) are not final: SES retried them, and the
    next reminder may get through, so they are not listed.
    """
    kind = str(notification.get("eventType") or notification.get("notificationType") or "")
    mail = notification.get("mail") or {}
    tags = mail.get("tags") or {}
    approval_id = next(iter(tags.get(APPROVAL_TAG) or []), None)
    if not approval_id:
        return []
    if kind == "Bounce":
        bounce = notification.get("bounce") or {}
        if bounce.get("bounceType") != "Permanent":
            return []
        detail = f"Permanent/{bounce.get('bounceSubType', 'General')}"
        recipients = bounce.get("bouncedRecipients") or []
        return [
            Undeliverable(str(approval_id), str(r["emailAddress"]), "bounce", detail)
            for r in recipients
            if r.get("emailAddress")
        ]
    if kind == "Complaint":
        complaint = notification.get("complaint") or {}
        detail = str(complaint.get("complaintFeedbackType") or "complaint")
        recipients = complaint.get("complainedRecipients") or []
        return [
            Undeliverable(str(approval_id), str(r["emailAddress"]), "complaint", detail)
            for r in recipients
            if r.get("emailAddress")
        ]
    return []


def record_undeliverable(
    notice: Undeliverable,
    ports: RequestPorts,
    *,
    randbelow: Callable[[int], int] = random_source.randbelow,
) -> bool:
    """Mark the recipient undeliverable on a pending approval and escalate it by its policy.

    Safe to repeat (SNS delivers at least once): a repeated notice adds an audit line but
    escalates no further than the level the first one reached, since an escalation fires only
    for the call that moves the approval's escalation counter.

    Returns:
        Whether an escalation was sent (``False``: the approval is not pending, or its policy
        has no further level).
    """
    store, now = ports.approvals, ports.clock()
    approval = store.get(notice.approval_id)
    if approval is None or state_of(approval, now=now) is not State.pending:
        return False
    audit(
        store,
        approval.approval_id,
        "undeliverable",
        f"{notice.kind} ({notice.detail})",
        at=now,
        actor=notice.address,
    )
    what = "bounced" if notice.kind == "bounce" else "was reported as spam"
    escalated = fire_escalation(
        approval, why=f"the email to {notice.address} {what}", ports=ports, randbelow=randbelow
    )
    logger.info(
        "approval email undeliverable",
        extra={
            "approval_id": approval.approval_id,
            "run_id": approval.run_id,
            "kind": notice.kind,
            "escalated": escalated,
        },
    )
    return escalated


def ses_notifications(event: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The SES event notifications in an SNS-delivered Lambda event (``None``: not one).

    S3 notifications can arrive through SNS too; an SES one is told apart by its ``mail``.
    """
    records = event.get("Records")
    if not isinstance(records, list) or not records:
        return None
    found: list[dict[str, Any]] = []
    for record in records:
        sns = record.get("Sns") if isinstance(record, Mapping) else None
        if not isinstance(sns, Mapping):
            return None
        try:
            message = json.loads(str(sns.get("Message") or ""))
        except ValueError:
            return None
        if not isinstance(message, dict) or "mail" not in message:
            return None
        found.append(message)
    return found
