"""Workflow budget counters (``BudgetCounters``) in the runs table: one item per key.

Layout (beside the runs' items; one partition per workflow and period)::

    pk                 sk        attributes
    budget#<key>       counter   spent (N, micro-dollars)

A reservation is one ``UpdateItem`` adding the amount under the condition that the total stays
within the limit (``attribute_not_exists(spent) OR spent <= :room``): DynamoDB applies
conditional writes to one item one at a time, so concurrent reservations never pass the limit
together. A settle is an unconditional ``ADD``.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from langorch.adapters.dynamodb._items import error_code as _code
from langorch.domain.errors import StorageError

ROOM_LEFT = "attribute_not_exists(#spent) OR #spent <= :room"
"""The total after this reservation stays within the limit (``room = limit - amount``)."""


class BudgetCountersRepository:
    """:class:`langorch.app.ports.BudgetCounters` on DynamoDB.

    Args:
        client: a DynamoDB client.
        table_name: the runs table.
    """

    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def reserve(self, key: str, amount: int, limit: int) -> bool:
        """See :meth:`langorch.app.ports.BudgetCounters.reserve`."""
        if amount > limit:
            return False
        try:
            self._client.update_item(
                TableName=self._table,
                Key=_key(key),
                UpdateExpression="ADD #spent :amount",
                ConditionExpression=ROOM_LEFT,
                ExpressionAttributeNames={"#spent": "spent"},
                ExpressionAttributeValues={
                    ":amount": {"N": str(amount)},
                    ":room": {"N": str(limit - amount)},
                },
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise self._error("UpdateItem", exc) from exc
        return True

    def settle(self, key: str, amount: int) -> None:
        """See :meth:`langorch.app.ports.BudgetCounters.settle`."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=_key(key),
                UpdateExpression="ADD #spent :amount",
                ExpressionAttributeNames={"#spent": "spent"},
                ExpressionAttributeValues={":amount": {"N": str(amount)}},
            )
        except ClientError as exc:
            raise self._error("UpdateItem", exc) from exc

    def spent(self, key: str) -> int:
        """See :meth:`langorch.app.ports.BudgetCounters.spent`."""
        try:
            item = self._client.get_item(
                TableName=self._table, Key=_key(key), ConsistentRead=True
            ).get("Item")
        except ClientError as exc:
            raise self._error("GetItem", exc) from exc
        return int(item["spent"]["N"]) if item and "spent" in item else 0

    def _error(self, operation: str, exc: ClientError) -> StorageError:
        return StorageError(f"DynamoDB {operation} on {self._table} (budgets) failed: {exc}")


def _key(key: str) -> dict[str, Any]:
    return {"pk": {"S": f"budget#{key}"}, "sk": {"S": "counter"}}
