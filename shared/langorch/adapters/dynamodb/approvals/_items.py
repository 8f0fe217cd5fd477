"""How an approval is stored in the runs table: keys, and the item <-> record mapping.

Layout (same table and key names as :mod:`langorch.adapters.dynamodb.runs`)::

    item      pk                   sk                         other attributes
    approval  approval#<id>        approval                   approval_id, run_id, workflow_id,
                                                              status, created_at, expires_at (N),
                                                              decided_by, decided_at, comment,
                                                              edits (JSON), votes (JSON),
                                                              delivered_at, body (request JSON),
                                                              emailed (SS), vote_count (N),
                                                              dg#<delegate> (delegator),
                                                              reminders_sent, escalation_level,
                                                              gsi1pk, gsi1sk, gsi2pk, gsi2sk
    secret    approval#<id>        secret                     task_token, code#<approver_ref>,
                                                              attempts#<approver_ref> (N)
    vote      approval#<id>        vote#<approver_ref>        body (Vote JSON) | delegated_to
    audit     audit#approval#<id>  audit#<iso time>#<random>  body (AuditEntry JSON)
    view      approval#<id>        view#<view_id>             (a used page-view token)

    GSI gsi1  gsi1pk = approvals          gsi1sk = <created_at>#<id>   (every approval)
    GSI gsi2  gsi2pk = approvals#pending  gsi2sk = <created_at>#<id>   (removed when it ends)

Audit lines have a partition of their own (``audit#...``) so IAM can tell them apart: a
``dynamodb:LeadingKeys`` condition (partition keys only; IAM cannot see sort keys) denies every
role UpdateItem/DeleteItem on them and the roles that never read them any read
(``infra/constructs/functions.py``). Lines written before that lived under ``approval#<id>``
and are still read from there.

The task token and the code hashes live in their own ``secret`` item, which carries no index
attributes: the GSIs (projection ALL) never copy them, and only ``task_token`` and
``code_hash`` read them. The ``approvals`` and ``approvals#pending`` partitions cannot clash
with run items, whose index keys start with ``wf#`` and ``status#``.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from langorch.domain.approvals.policy import Vote
from langorch.domain.approvals.record import Approval, ApprovalStatus

APPROVAL_SK = "approval"
ALL_PARTITION = "approvals"
PENDING_PARTITION = "approvals#pending"
GSI_ALL = "gsi1"
GSI_PENDING = "gsi2"
DELEGATE_PREFIX = "dg#"
"""Attributes ``dg#<delegate address>`` on the approval item name who delegated to them (one
attribute per delegate, so concurrent delegations never overwrite each other)."""

# The parts of the record kept in attributes beside the request body (they change).
_CHANGING = frozenset(
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


def pk(approval_id: str) -> str:
    """The approval's partition key."""
    return f"approval#{approval_id}"


AUDIT_PARTITION_PREFIX = "audit#"
"""Partition keys of audit lines start with this (the IAM conditions in ``infra`` match it)."""


def audit_pk(approval_id: str) -> str:
    """The partition of the approval's audit lines (apart from its other items, for IAM)."""
    return f"{AUDIT_PARTITION_PREFIX}{pk(approval_id)}"


def text(item: dict[str, Any], name: str) -> str | None:
    """A string attribute (``None`` when absent)."""
    value = item.get(name, {}).get("S")
    return None if value is None else str(value)


def moment(item: dict[str, Any], name: str) -> datetime | None:
    """A time attribute (``None`` when absent)."""
    value = text(item, name)
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def number(item: dict[str, Any], name: str) -> int:
    """A number attribute (0 when absent: items written before it existed)."""
    return int(item.get(name, {}).get("N", "0"))


def request_json(approval: Approval) -> str:
    """The parts that never change after the request; the decision lives in attributes beside
    it, so deciding needs no read-modify-write of this body."""
    return json.dumps(approval.model_dump(mode="json", exclude=set(_CHANGING)), default=str)


def approval_of(item: dict[str, Any]) -> Approval:
    """The record an approval item holds."""
    data = json.loads(item["body"]["S"])
    edits = text(item, "edits")
    votes = text(item, "votes")
    data.update(
        status=text(item, "status") or ApprovalStatus.pending.value,
        decided_by=text(item, "decided_by"),
        decided_at=moment(item, "decided_at"),
        comment=text(item, "comment") or None,
        edits=json.loads(edits) if edits else {},
        delivered_at=moment(item, "delivered_at"),  # absent on items written before it
        emailed=sorted(item.get("emailed", {}).get("SS", [])),
        link_generation=number(item, "link_generation"),
        votes=[Vote.model_validate(v) for v in json.loads(votes)] if votes else [],
        delegations={
            name.removeprefix(DELEGATE_PREFIX): value["S"]
            for name, value in item.items()
            if name.startswith(DELEGATE_PREFIX)
        },
        escalation_level=number(item, "escalation_level"),
        reminders_sent=number(item, "reminders_sent"),
    )
    return Approval.model_validate(data)


def utc_now_n(at: datetime) -> str:
    """A time as the number ``expires_at`` is compared with (epoch seconds)."""
    return str(int(at.timestamp()))


def list_query(table: str, *, pending_only: bool, run_id: str | None, limit: int) -> dict[str, Any]:
    """The index query listing approvals, newest first (every one, or the pending ones)."""
    index, partition = (
        (GSI_PENDING, PENDING_PARTITION) if pending_only else (GSI_ALL, ALL_PARTITION)
    )
    request: dict[str, Any] = {
        "TableName": table,
        "IndexName": index,
        "KeyConditionExpression": "#pk = :pk",
        "ExpressionAttributeNames": {"#pk": f"{index}pk"},
        "ExpressionAttributeValues": {":pk": {"S": partition}},
        "ScanIndexForward": False,
    }
    if run_id is not None:
        # Limit would count items before the filter: page until enough match instead.
        request["FilterExpression"] = "run_id = :run"
        request["ExpressionAttributeValues"][":run"] = {"S": run_id}
    else:
        request["Limit"] = limit
    return request
