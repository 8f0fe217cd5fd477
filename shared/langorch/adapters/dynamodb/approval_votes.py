"""Votes, delegations and timer marks of approvals in DynamoDB (issue 13).

Items in the approval's partition of the runs table (layout in
:mod:`langorch.adapters.dynamodb.approvals`)::

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

from collections.abc import Callable
from typing import Any, Literal, cast

from botocore.exceptions import ClientError

from langorch.adapters.dynamodb._approval_items import APPROVAL_SK, DELEGATE_PREFIX, pk, utc_now_n
from langorch.adapters.dynamodb._items import error_code, utc_iso
from langorch.domain.approval_policy import Vote
from langorch.domain.approvals import ApprovalStatus, AuditEntry
from langorch.domain.errors import StorageError

VOTE_PREFIX = "vote#"
AUDIT_PREFIX = "audit#"
ENTRY_IS_NEW = "attribute_not_exists(pk)"
SLOT_IS_FREE = "attribute_not_exists(pk)"
IS_DECIDABLE = "#status = :pending AND expires_at > :now"
"""A vote or a delegation is taken only while nobody decided and the approval has not expired."""
NOT_DELEGATED_YET = "attribute_not_exists(#dg)"
TIMER_UNMOVED = "#status = :pending AND (attribute_not_exists(#count) OR #count = :seen)"
"""A timer moves its counter only from the value it saw: a second firing finds it moved."""

Written = Literal["written", "taken", "closed"]
"""``taken``: the slot has a vote (or delegation) already; ``closed``: not decidable."""


def record_vote(client: Any, table: str, approval_id: str, slot: str, vote: Vote) -> Written:
    """Record one vote in ``slot`` (one transaction: the free slot and a decidable approval)."""
    item = {
        "pk": {"S": pk(approval_id)},
        "sk": {"S": VOTE_PREFIX + slot},
        "body": {"S": vote.model_dump_json(exclude_none=True)},
    }
    return _take_slot(client, table, approval_id, item, vote_at=vote.at, update=None)


def delegate(
    client: Any, table: str, approval_id: str, slot: str, delegator: str, to: str, at: Any
) -> Written:
    """Hand ``delegator``'s slot to ``to`` (taken like a vote, so they can no longer vote)."""
    item = {
        "pk": {"S": pk(approval_id)},
        "sk": {"S": VOTE_PREFIX + slot},
        "delegated_to": {"S": to},
        "delegator": {"S": delegator},
    }
    name = DELEGATE_PREFIX + to.strip().lower()
    update = {
        "UpdateExpression": "SET #dg = :from",
        "ConditionExpression": f"{IS_DECIDABLE} AND {NOT_DELEGATED_YET}",
        "ExpressionAttributeNames": {"#status": "status", "#dg": name},
        "extra_values": {":from": {"S": delegator}},
    }
    return _take_slot(client, table, approval_id, item, vote_at=at, update=update)


def _take_slot(
    client: Any,
    table: str,
    approval_id: str,
    item: dict[str, Any],
    *,
    vote_at: Any,
    update: dict[str, Any] | None,
) -> Written:
    values = {
        ":pending": {"S": ApprovalStatus.pending.value},
        ":now": {"N": utc_now_n(vote_at)},
    }
    key = {"pk": {"S": pk(approval_id)}, "sk": {"S": APPROVAL_SK}}
    second: dict[str, Any]
    if update is None:
        # A vote also counts up ``vote_count``: a decision is written only with the count it
        # read, so no vote accepted before the decision is missing from it.
        second = {
            "Update": {
                "TableName": table,
                "Key": key,
                "UpdateExpression": "ADD vote_count :one",
                "ConditionExpression": IS_DECIDABLE,
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": {**values, ":one": {"N": "1"}},
            }
        }
    else:
        second = {
            "Update": {
                "TableName": table,
                "Key": key,
                "UpdateExpression": update["UpdateExpression"],
                "ConditionExpression": update["ConditionExpression"],
                "ExpressionAttributeNames": update["ExpressionAttributeNames"],
                "ExpressionAttributeValues": {**values, **update["extra_values"]},
            }
        }
    first = {"Put": {"TableName": table, "Item": item, "ConditionExpression": SLOT_IS_FREE}}
    try:
        client.transact_write_items(TransactItems=[first, second])
    except ClientError as exc:
        reasons = cast(dict[str, Any], exc.response).get("CancellationReasons") or []
        codes = [r.get("Code") for r in reasons]
        if len(codes) < 2 or "ConditionalCheckFailed" not in codes:
            message = cast(dict[str, Any], exc.response).get("Error", {}).get("Message", "")
            raise StorageError(
                f"DynamoDB TransactWriteItems on {table} failed: {error_code(exc)} {message}"
            ) from exc
        return "taken" if codes[0] == "ConditionalCheckFailed" else "closed"
    return "written"


def votes(client: Any, table: str, approval_id: str) -> list[Vote]:
    """Every vote recorded for the approval (consistent read), oldest first."""
    items = _items(client, table, approval_id, VOTE_PREFIX)
    found = [Vote.model_validate_json(i["body"]["S"]) for i in items if "body" in i]
    return sorted(found, key=lambda v: v.at)


def advance_timer(client: Any, table: str, approval_id: str, counter: str, seen: int) -> bool:
    """Move ``reminders_sent`` or ``escalation_level`` from ``seen`` to ``seen + 1``, while the
    approval is pending; whether this call moved it (a repeated firing does not)."""
    if counter not in ("reminders_sent", "escalation_level"):
        raise ValueError(f"no timer counter {counter!r}")
    try:
        client.update_item(
            TableName=table,
            Key={"pk": {"S": pk(approval_id)}, "sk": {"S": APPROVAL_SK}},
            UpdateExpression="SET #count = :next",
            ConditionExpression=TIMER_UNMOVED,
            ExpressionAttributeNames={"#status": "status", "#count": counter},
            ExpressionAttributeValues={
                ":pending": {"S": ApprovalStatus.pending.value},
                ":seen": {"N": str(seen)},
                ":next": {"N": str(seen + 1)},
            },
        )
    except ClientError as exc:
        if error_code(exc) == "ConditionalCheckFailedException":
            return False
        raise StorageError(f"DynamoDB UpdateItem on {table} failed: {error_code(exc)}") from exc
    return True


def append_audit(client: Any, table: str, entry: AuditEntry, suffix: Callable[[], str]) -> None:
    """Add one line to an approval's audit trail (create-only, never overwritten)."""
    for _ in range(3):
        sk = f"{AUDIT_PREFIX}{utc_iso(entry.at)}#{suffix()}"
        try:
            client.put_item(
                TableName=table,
                Item={
                    "pk": {"S": pk(entry.approval_id)},
                    "sk": {"S": sk},
                    "body": {"S": entry.model_dump_json(exclude_none=True)},
                },
                ConditionExpression=ENTRY_IS_NEW,
            )
            return
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise StorageError(
                    f"DynamoDB PutItem on {table} failed: {error_code(exc)}"
                ) from exc
    raise StorageError(f"approval {entry.approval_id}: no free audit key after 3 attempts")


def audit(client: Any, table: str, approval_id: str) -> list[AuditEntry]:
    """An approval's audit trail, oldest first."""
    return [
        AuditEntry.model_validate_json(i["body"]["S"])
        for i in _items(client, table, approval_id, AUDIT_PREFIX)
    ]


def _items(client: Any, table: str, approval_id: str, prefix: str) -> list[dict[str, Any]]:
    request: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
        "ExpressionAttributeValues": {":pk": {"S": pk(approval_id)}, ":prefix": {"S": prefix}},
        "ConsistentRead": True,
    }
    found: list[dict[str, Any]] = []
    while True:
        try:
            response = client.query(**request)
        except ClientError as exc:
            raise StorageError(f"DynamoDB Query on {table} failed: {error_code(exc)}") from exc
        found += response.get("Items", [])
        last = response.get("LastEvaluatedKey")
        if not last:
            return found
        request = {**request, "ExclusiveStartKey": last}
