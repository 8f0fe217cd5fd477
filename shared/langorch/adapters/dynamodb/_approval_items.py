"""How an approval is stored in the runs table: keys, and the item <-> record mapping.

Shared by :mod:`langorch.adapters.dynamodb.approvals` and
:mod:`langorch.adapters.dynamodb.approval_votes` (layout in the former's docstring).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from langorch.domain.approval_policy import Vote
from langorch.domain.approvals import Approval, ApprovalStatus

APPROVAL_SK = "approval"
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
