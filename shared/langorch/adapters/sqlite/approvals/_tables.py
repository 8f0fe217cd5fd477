"""How approvals are stored in the local store: the tables, and the row <-> record mapping.

Tables (the same split as :mod:`langorch.adapters.dynamodb.approvals._items`)::

    approvals          one row per approval: what conditions and listings read in columns
                       (status, run_id, created_at, expires_at, decided_*, delivered_at,
                       link_generation, timer counters), the request as JSON in ``body``
    approval_secrets   the task token, apart from the record: no record read touches it
    approval_codes     per approver link: the keyed hash of its one-time code, its attempts
    approval_slots     per approver slot: their vote (JSON), or the delegate it was handed to
    approval_views     the page-view tokens already used
    approval_audit     the audit trail, append-only (triggers refuse UPDATE and DELETE)

Times are UTC text of fixed width (they compare and sort as text), ``expires_at`` whole epoch
seconds, as the DynamoDB adapter compares them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from langorch.domain.approvals.policy import Vote
from langorch.domain.approvals.record import Approval

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS approvals ("
    " approval_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, workflow_id TEXT,"
    " status TEXT NOT NULL, created_at TEXT NOT NULL, expires_at INTEGER NOT NULL,"
    " decided_by TEXT, decided_at TEXT, comment TEXT, edits TEXT, votes TEXT,"
    " delivered_at TEXT, emailed TEXT NOT NULL DEFAULT '[]',"
    " link_generation INTEGER NOT NULL DEFAULT 0, reminders_sent INTEGER NOT NULL DEFAULT 0,"
    " escalation_level INTEGER NOT NULL DEFAULT 0, body TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS approvals_newest ON approvals (created_at, approval_id)",
    "CREATE INDEX IF NOT EXISTS approvals_pending ON approvals (created_at, approval_id)"
    " WHERE status = 'pending'",
    "CREATE INDEX IF NOT EXISTS approvals_of_run ON approvals (run_id, created_at, approval_id)",
    "CREATE TABLE IF NOT EXISTS approval_secrets ("
    " approval_id TEXT PRIMARY KEY, task_token TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS approval_codes ("
    " approval_id TEXT NOT NULL, approver_ref TEXT NOT NULL, code_hash TEXT,"
    " attempts INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (approval_id, approver_ref))",
    "CREATE TABLE IF NOT EXISTS approval_slots ("
    " approval_id TEXT NOT NULL, slot TEXT NOT NULL, vote TEXT, delegate TEXT, delegator TEXT,"
    " PRIMARY KEY (approval_id, slot))",
    # One delegation per delegate and approval, as the DynamoDB item's ``dg#<address>``.
    "CREATE UNIQUE INDEX IF NOT EXISTS approval_delegates ON approval_slots (approval_id, delegate)"
    " WHERE delegate IS NOT NULL",
    "CREATE TABLE IF NOT EXISTS approval_views ("
    " approval_id TEXT NOT NULL, view_id TEXT NOT NULL, PRIMARY KEY (approval_id, view_id))",
    "CREATE TABLE IF NOT EXISTS approval_audit ("
    " seq INTEGER PRIMARY KEY, approval_id TEXT NOT NULL, at TEXT NOT NULL, body TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS approval_audit_trail ON approval_audit (approval_id, at, seq)",
    "CREATE TRIGGER IF NOT EXISTS approval_audit_no_update BEFORE UPDATE ON approval_audit"
    " BEGIN SELECT RAISE(ABORT, 'the approval audit trail is append-only'); END",
    "CREATE TRIGGER IF NOT EXISTS approval_audit_no_delete BEFORE DELETE ON approval_audit"
    " BEGIN SELECT RAISE(ABORT, 'the approval audit trail is append-only'); END",
    # Each chain's last line (a run's, see langorch.domain.approvals.audit.chained).
    "CREATE TABLE IF NOT EXISTS approval_audit_heads ("
    " chain TEXT PRIMARY KEY, digest TEXT NOT NULL)",
)

# The parts of the record kept in columns beside the request body (they change).
CHANGING = frozenset(
    {
        "status",
        "decided_by",
        "decided_at",
        "comment",
        "edits",
        "delivered_at",
        "emailed",
        "link_generation",
        "votes",
        "delegations",
        "escalation_level",
        "reminders_sent",
    }
)
RECORD = (
    "SELECT a.body, a.status, a.decided_by, a.decided_at, a.comment, a.edits, a.votes,"
    " a.delivered_at, a.emailed, a.link_generation, a.reminders_sent, a.escalation_level,"
    " (SELECT json_group_object(s.delegate, s.delegator) FROM approval_slots s"
    "  WHERE s.approval_id = a.approval_id AND s.delegate IS NOT NULL)"
    " FROM approvals a"
)
"""Every column a record is built from (:func:`approval_of` reads them in this order)."""


def iso(at: datetime) -> str:
    """A time as stored: UTC, fixed width, so it compares and sorts as text."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def moment(text: str | None) -> datetime | None:
    """A stored time read back (``None`` when there is none)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def epoch(at: datetime) -> int:
    """A time as ``expires_at`` is stored and compared (whole seconds)."""
    return int(at.timestamp())


def approval_of(row: Sequence[Any]) -> Approval:
    """The record a :data:`RECORD` row holds."""
    (body, status, by, at, comment, edits, votes, delivered, emailed, generation, *rest) = row
    reminders, escalation, delegations = rest
    data = json.loads(body)
    data.update(
        status=status,
        decided_by=by,
        decided_at=moment(at),
        comment=comment or None,
        edits=json.loads(edits) if edits else {},
        delivered_at=moment(delivered),
        emailed=sorted(json.loads(emailed)),
        link_generation=generation,
        votes=[Vote.model_validate(v) for v in json.loads(votes)] if votes else [],
        delegations=json.loads(delegations) if delegations else {},
        escalation_level=escalation,
        reminders_sent=reminders,
    )
    return Approval.model_validate(data)


def request_json(approval: Approval) -> str:
    """The parts that never change after the request (the rest live in columns beside it)."""
    return json.dumps(approval.model_dump(mode="json", exclude=set(CHANGING)))
