"""Votes, delegations and timer marks of approvals in DynamoDB (issue 13): the requests.

The repository (:class:`~langorch.adapters.dynamodb.approvals.repository.ApprovalsRepository`)
sends them with its client, so its methods stay the one place an approval's AWS calls are made.

Items in the approval's partition of the runs table (layout in
:mod:`langorch.adapters.dynamodb.approvals.repository`)::

    vote      approval#<id>   vote#<slot ref>   body (Vote JSON)  |  delegated_to (a delegation)

One item per approver *slot* (the approver's ref, or their delegator's for a delegate), created
only if absent and only while the approval is still decidable, in one transaction with a
``ConditionCheck`` on the approval: one vote per approver link, none after the decision. A
delegation takes the delegator's slot the same way and names the delegate on the approval
item (``dg#<address>``). Reminders and escalations count up ``reminders_sent`` /
``escalation_level`` from the value the timer saw, so a timer fired twice (the Scheduler
retries, the ticker and a page visit race) sends once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, cast

from botocore.exceptions import ClientError

from langorch.adapters.dynamodb.approvals._items import APPROVAL_SK, DELEGATE_PREFIX, pk, utc_now_n
from langorch.domain.approvals.policy import Vote
from langorch.domain.approvals.record import ApprovalStatus

VOTE_PREFIX = "vote#"

SLOT_IS_FREE = "attribute_not_exists(pk)"
IS_DECIDABLE = "#status = :pending AND expires_at > :now"
"""A vote or a delegation is taken only while nobody decided and the approval has not expired."""
NOT_DELEGATED_YET = "attribute_not_exists(#dg)"
TIMER_UNMOVED = "#status = :pending AND (attribute_not_exists(#count) OR #count = :seen)"
"""A timer moves its counter only from the value it saw: a second firing finds it moved."""

Written = Literal["written", "taken", "closed"]
"""``taken``: the slot has a vote (or delegation) already; ``closed``: not decidable."""


def vote_items(table: str, approval_id: str, slot: str, vote: Vote) -> list[dict[str, Any]]:
    """The transaction recording one vote in ``slot``: the free slot, and a decidable approval
    whose ``vote_count`` goes up (a decision is written only with the count it read)."""
    item = {
        "pk": {"S": pk(approval_id)},
        "sk": {"S": VOTE_PREFIX + slot},
        "body": {"S": vote.model_dump_json(exclude_none=True)},
    }
    return [
        {"Put": {"TableName": table, "Item": item, "ConditionExpression": SLOT_IS_FREE}},
        {
            "Update": {
                "TableName": table,
                "Key": {"pk": {"S": pk(approval_id)}, "sk": {"S": APPROVAL_SK}},
                "UpdateExpression": "ADD vote_count :one",
                "ConditionExpression": IS_DECIDABLE,
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": {**_decidable(vote.at), ":one": {"N": "1"}},
            }
        },
    ]


def delegation_items(
    table: str, approval_id: str, slot: str, delegator: str, to: str, at: datetime
) -> list[dict[str, Any]]:
    """The transaction handing ``delegator``'s slot to ``to``: the slot is taken like a vote
    (so they can no longer vote), and the approval names the delegate (``dg#<address>``)."""
    item = {
        "pk": {"S": pk(approval_id)},
        "sk": {"S": VOTE_PREFIX + slot},
        "delegated_to": {"S": to},
        "delegator": {"S": delegator},
    }
    return [
        {"Put": {"TableName": table, "Item": item, "ConditionExpression": SLOT_IS_FREE}},
        {
            "Update": {
                "TableName": table,
                "Key": {"pk": {"S": pk(approval_id)}, "sk": {"S": APPROVAL_SK}},
                "UpdateExpression": "SET #dg = :from",
                "ConditionExpression": f"{IS_DECIDABLE} AND {NOT_DELEGATED_YET}",
                "ExpressionAttributeNames": {
                    "#status": "status",
                    "#dg": DELEGATE_PREFIX + to.strip().lower(),
                },
                "ExpressionAttributeValues": {**_decidable(at), ":from": {"S": delegator}},
            }
        },
    ]


def _decidable(at: datetime) -> dict[str, Any]:
    return {":pending": {"S": ApprovalStatus.pending.value}, ":now": {"N": utc_now_n(at)}}


def slot_outcome(exc: ClientError) -> Written | None:
    """What a cancelled slot transaction means (``None``: not a condition, a real failure)."""
    reasons = cast(dict[str, Any], exc.response).get("CancellationReasons") or []
    codes = [r.get("Code") for r in reasons]
    if len(codes) < 2 or "ConditionalCheckFailed" not in codes:
        return None
    return "taken" if codes[0] == "ConditionalCheckFailed" else "closed"


def prefix_query(table: str, approval_id: str, prefix: str) -> dict[str, Any]:
    """A consistent query for the approval's items whose sort key starts with ``prefix``."""
    return {
        "TableName": table,
        "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
        "ExpressionAttributeValues": {":pk": {"S": pk(approval_id)}, ":prefix": {"S": prefix}},
        "ConsistentRead": True,
    }


def votes_of(items: list[dict[str, Any]]) -> list[Vote]:
    """The votes among the slot items (delegations hold none), oldest first."""
    found = [Vote.model_validate_json(i["body"]["S"]) for i in items if "body" in i]
    return sorted(found, key=lambda v: v.at)


def timer_update(table: str, approval_id: str, counter: str, seen: int) -> dict[str, Any]:
    """Move ``reminders_sent`` or ``escalation_level`` from ``seen`` to ``seen + 1`` while the
    approval is pending (a repeated firing finds it moved)."""
    if counter not in ("reminders_sent", "escalation_level"):
        raise ValueError(f"no timer counter {counter!r}")
    return {
        "TableName": table,
        "Key": {"pk": {"S": pk(approval_id)}, "sk": {"S": APPROVAL_SK}},
        "UpdateExpression": "SET #count = :next",
        "ConditionExpression": TIMER_UNMOVED,
        "ExpressionAttributeNames": {"#status": "status", "#count": counter},
        "ExpressionAttributeValues": {
            ":pending": {"S": ApprovalStatus.pending.value},
            ":seen": {"N": str(seen)},
            ":next": {"N": str(seen + 1)},
        },
    }
