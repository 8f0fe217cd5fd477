"""The approval page's guards in DynamoDB: code attempts per approver link, used view tokens.

Both live in the approval's partition of the runs table (layout in
:mod:`langorch.adapters.dynamodb.approvals.repository`): the attempts as ``attempts#<approver_ref>``
counters on its ``secret`` item, the used view tokens as ``view#<view_id>`` items. Each check
is one conditional write, so racing requests can never both pass it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from botocore.exceptions import ClientError

from langorch.adapters.dynamodb._items import error_code as _code
from langorch.domain.errors import NotFoundError, StorageError

SECRET_SK = "secret"  # noqa: S105 - an item name
APPROVAL_SK = "approval"
VIEW_PREFIX = "view#"
CODE_ATTEMPT_LEFT = "attribute_exists(pk) AND (attribute_not_exists(#att) OR #att < :limit)"
"""An approver's link may try one more code only while its count is below the limit."""
VIEW_IS_NEW = "attribute_not_exists(pk)"


def claim_code_attempt(
    client: Any, table: str, pk: str, approver_ref: str, limit: int
) -> int | None:
    """Count one code attempt of one approver's link, unless it already made ``limit``.

    One conditional ``UpdateItem`` (count below the limit, then add one): DynamoDB serialises
    writes to the item, so however many requests race, at most ``limit`` attempts are ever
    granted per approver (never read, then increment).

    Returns:
        The attempt's number (1..limit), or ``None`` when the limit was reached.

    Raises:
        NotFoundError: no such approval.
        StorageError: DynamoDB failed.
    """
    name = f"attempts#{approver_ref}"
    try:
        response = client.update_item(
            TableName=table,
            Key={"pk": {"S": pk}, "sk": {"S": SECRET_SK}},
            UpdateExpression="SET #att = if_not_exists(#att, :zero) + :one",
            ConditionExpression=CODE_ATTEMPT_LEFT,
            ExpressionAttributeNames={"#att": name},
            ExpressionAttributeValues={
                ":zero": {"N": "0"},
                ":one": {"N": "1"},
                ":limit": {"N": str(limit)},
            },
            ReturnValues="UPDATED_NEW",
        )
    except ClientError as exc:
        if _code(exc) != "ConditionalCheckFailedException":
            raise _storage_error(table, "UpdateItem", exc) from exc
        _must_exist(client, table, pk, SECRET_SK)
        return None
    return int(response["Attributes"][name]["N"])


def use_view_token(client: Any, table: str, pk: str, view_id: str) -> bool:
    """Record a page view's token as used (one conditional put); ``False`` if it was.

    Raises:
        NotFoundError: no such approval.
        StorageError: DynamoDB failed.
    """
    _must_exist(client, table, pk, APPROVAL_SK)
    try:
        client.put_item(
            TableName=table,
            Item={"pk": {"S": pk}, "sk": {"S": VIEW_PREFIX + view_id}},
            ConditionExpression=VIEW_IS_NEW,
        )
    except ClientError as exc:
        if _code(exc) == "ConditionalCheckFailedException":
            return False
        raise _storage_error(table, "PutItem", exc) from exc
    return True


def reissue_links(client: Any, table: str, pk: str, approver_refs: Sequence[str]) -> bool:
    """Raise a pending approval's link generation and forget its emails; then drop the
    approvers' code hashes and attempt counters. ``False`` (nothing changed) unless pending.

    Raises:
        StorageError: DynamoDB failed.
    """
    try:
        client.update_item(
            TableName=table,
            Key={"pk": {"S": pk}, "sk": {"S": APPROVAL_SK}},
            UpdateExpression="ADD link_generation :one REMOVE emailed",
            ConditionExpression="#status = :pending",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={
                ":one": {"N": "1"},
                ":pending": {"S": "pending"},
            },
        )
    except ClientError as exc:
        if _code(exc) == "ConditionalCheckFailedException":
            return False
        raise _storage_error(table, "UpdateItem", exc) from exc
    names = {}
    for n, ref in enumerate(approver_refs):
        names[f"#c{n}"] = f"code#{ref}"
        names[f"#a{n}"] = f"attempts#{ref}"
    if names:
        try:
            client.update_item(
                TableName=table,
                Key={"pk": {"S": pk}, "sk": {"S": SECRET_SK}},
                UpdateExpression="REMOVE " + ", ".join(names),
                ExpressionAttributeNames=names,
            )
        except ClientError as exc:
            raise _storage_error(table, "UpdateItem", exc) from exc
    return True


def _must_exist(client: Any, table: str, pk: str, sk: str) -> None:
    try:
        found = client.get_item(
            TableName=table,
            Key={"pk": {"S": pk}, "sk": {"S": sk}},
            ConsistentRead=True,
            ProjectionExpression="pk",
        )
    except ClientError as exc:
        raise _storage_error(table, "GetItem", exc) from exc
    if "Item" not in found:
        raise NotFoundError(f"approval {pk.removeprefix('approval#')} does not exist")


def _storage_error(table: str, operation: str, exc: ClientError) -> StorageError:
    message = cast(dict[str, Any], exc.response).get("Error", {}).get("Message", "")
    return StorageError(f"DynamoDB {operation} on {table} failed: {_code(exc)} {message}")
