"""The checkpoint table's requests: batched or fenced writes, grouped reads, named errors.

Every read is consistent. Newest-first, a checkpoint's writes sort right before it (their keys
extend its key), which is what lets one ``Query`` return a checkpoint with its writes.
"""

from __future__ import annotations

import builtins
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from langorch.adapters.dynamodb.checkpointer._fence import Fence
from langorch.adapters.dynamodb.checkpointer._keys import (
    Group,
    Item,
    Items,
    checkpoint_sk,
    ns_prefix,
    text,
)
from langorch.domain.errors import LeaseLostError, StorageError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

logger = logging.getLogger(__name__)

T = TypeVar("T")

_BATCH_LIMIT = 25  # BatchWriteItem's hard cap on items per request.
_MAX_ATTEMPTS = 8  # for UnprocessedItems; botocore already retries throttled requests.
_TRANSACT_LIMIT = 100  # TransactWriteItems' cap on actions per request (the check is one).
# Under TransactWriteItems' 4 MB cap on the items of a request, less the checked item (the fence
# item, small; once the run item, up to 400 KB) and a margin for our estimate of an item's size.
_TRANSACT_BYTES = 3_500_000
_RETRY_REASONS = frozenset(
    {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"}
)


class CheckpointTable:
    """One checkpoint table (``PK``/``SK`` strings) behind a boto3 DynamoDB client."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self.client = client
        self.name = table_name

    # ------------------------------------------------------------------ errors

    def call(self, operation: str, method: Callable[..., T], **kwargs: Any) -> T:
        """Call ``method`` (DynamoDB or S3), raising :class:`StorageError` when AWS refuses."""
        try:
            return method(**kwargs)
        except ClientError as exc:
            raise self.storage_error(operation, exc) from exc
        except BotoCoreError as exc:
            raise StorageError(
                f"{operation} on checkpoint table {self.name} failed: {exc}"
            ) from exc

    def storage_error(self, operation: str, exc: ClientError) -> StorageError:
        """The named error for a refused call, with AWS's code and message."""
        error = exc.response.get("Error", {})
        return StorageError(
            f"{operation} for checkpoint table {self.name} failed: "
            f"{error.get('Code', 'unknown')}: {error.get('Message', '')}"
        )

    # ------------------------------------------------------------------ setup

    def create(self, *, ttl: bool) -> None:
        """Create the table when missing (on-demand) and, with ``ttl``, enable TTL on ``ttl``."""
        try:
            self.client.describe_table(TableName=self.name)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                raise self.storage_error("DescribeTable", exc) from exc
            self.call(
                "CreateTable",
                self.client.create_table,
                TableName=self.name,
                BillingMode="PAY_PER_REQUEST",
                AttributeDefinitions=[
                    {"AttributeName": "PK", "AttributeType": "S"},
                    {"AttributeName": "SK", "AttributeType": "S"},
                ],
                KeySchema=[
                    {"AttributeName": "PK", "KeyType": "HASH"},
                    {"AttributeName": "SK", "KeyType": "RANGE"},
                ],
            )
            waiter = self.client.get_waiter("table_exists")
            waiter.wait(TableName=self.name, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
        if ttl:
            current = self.call(
                "DescribeTimeToLive", self.client.describe_time_to_live, TableName=self.name
            )
            status = current.get("TimeToLiveDescription", {}).get("TimeToLiveStatus")
            if status not in ("ENABLED", "ENABLING"):
                self.call(
                    "UpdateTimeToLive",
                    self.client.update_time_to_live,
                    TableName=self.name,
                    TimeToLiveSpecification={"Enabled": True, "AttributeName": "ttl"},
                )

    # ------------------------------------------------------------------ writes

    def write_items(self, items: Sequence[Item], *, what: str) -> None:
        """Put items with as few BatchWriteItem requests as possible, the last item last."""
        self.batch_write([{"PutRequest": {"Item": item}} for item in items])
        logger.debug("stored %s (%d items)", what, len(items))

    def write_fenced(
        self, items: Sequence[Item], fence: Fence, *, what: str, watch_pause: bool = False
    ) -> bool:
        """Put items only while ``fence`` holds the run's lease: one transaction per chunk.

        Each ``TransactWriteItems`` is a ``ConditionCheck`` on the run's fence item (``fence =
        :fence``) plus up to 99 puts and ~3.5 MB. When the items need more than one (rare: a
        superstep of many tasks or big payloads), every chunk carries the check, the last item
        (the checkpoint) in the last chunk. Chunks are not atomic together, and need not be:
        a chunk that lands was written while the lease was held (it is valid on its own, like
        the writes of a segment that crashed there), and a refused chunk writes nothing, so a
        stale segment never adds a checkpoint.

        With ``watch_pause`` the last chunk's check also asks that no operator's pause stands
        on the run. When that check fails the chunk is sent again with the fence check alone:
        it lands if the fence still holds (the pause was the reason), so a pause never costs a
        finished superstep, and costs a second request only when one stands.

        Returns:
            Whether a pause stood on the run when the last chunk was written (always ``False``
            without ``watch_pause``).

        Raises:
            LeaseLostError: the run's fence is no longer ``fence.value`` (or the run is gone).
            StorageError: DynamoDB refused the request for another reason.
        """
        chunks = _transaction_chunks(items)
        paused = False
        for n, chunk in enumerate(chunks):
            puts = [{"Put": {"TableName": self.name, "Item": item}} for item in chunk]
            if watch_pause and n == len(chunks) - 1:
                try:
                    self._transact([fence.condition_check(unpaused=True), *puts], fence)
                    continue
                except LeaseLostError:
                    paused = True  # or the lease was lost: the fence check alone tells
            self._transact([fence.condition_check(), *puts], fence)
        logger.debug("stored %s (%d items, fence %d)", what, len(items), fence.value)
        return paused

    def _transact(self, actions: builtins.list[dict[str, Any]], fence: Fence) -> None:
        for attempt in range(_MAX_ATTEMPTS):
            try:
                self.client.transact_write_items(TransactItems=actions)  # type: ignore[arg-type]
                return
            except ClientError as exc:
                reasons = [r.get("Code", "None") for r in _cancellation_reasons(exc)]
                if reasons and reasons[0] == "ConditionalCheckFailed":
                    raise LeaseLostError(
                        f"run {fence.run_id}: this segment's lease (fence {fence.value}) was "
                        "taken over by another segment; its checkpoint write was refused and "
                        "nothing was written (the newer segment carries the run on)"
                    ) from exc
                if not _RETRY_REASONS.intersection(reasons) or attempt == _MAX_ATTEMPTS - 1:
                    raise self.storage_error("TransactWriteItems", exc) from exc
            except BotoCoreError as exc:
                raise StorageError(
                    f"TransactWriteItems on checkpoint table {self.name} failed: {exc}"
                ) from exc
            time.sleep(min(0.05 * 2**attempt, 2.0))

    def batch_write(self, requests: Sequence[dict[str, Any]]) -> None:
        """Send put or delete requests, 25 a call, retrying ``UnprocessedItems`` with backoff."""
        # Chunks are cut from the end, so the last request (the checkpoint, in put()) lands in
        # the last call and the first call is the one that may be short.
        chunks: builtins.list[Sequence[dict[str, Any]]] = []
        end = len(requests)
        while end > 0:
            start = max(0, end - _BATCH_LIMIT)
            chunks.insert(0, requests[start:end])
            end = start
        for chunk in chunks:
            pending: dict[str, Any] = {self.name: list(chunk)}
            for attempt in range(_MAX_ATTEMPTS):
                response = self.call(
                    "BatchWriteItem", self.client.batch_write_item, RequestItems=pending
                )
                unprocessed = response.get("UnprocessedItems") or {}
                if not unprocessed.get(self.name):
                    break
                pending = dict(unprocessed)
                time.sleep(min(0.05 * 2**attempt, 2.0))
            else:
                raise StorageError(
                    f"DynamoDB kept {len(pending[self.name])} checkpoint items unprocessed "
                    f"in table {self.name} after {_MAX_ATTEMPTS} attempts "
                    "(hint: the table is throttled; retry the segment)"
                )

    def delete_thread(self, thread_id: str) -> int:
        """Delete every item of a thread; returns how many there were."""
        kwargs: dict[str, Any] = {
            "TableName": self.name,
            "KeyConditionExpression": "PK = :pk",
            "ExpressionAttributeValues": {":pk": {"S": thread_id}},
            "ProjectionExpression": "PK, SK",
            "ConsistentRead": True,
        }
        keys: Items = []
        for page in self.pages("Query", self.client.query, kwargs):
            keys.extend({"PK": item["PK"], "SK": item["SK"]} for item in page)
        self.batch_write([{"DeleteRequest": {"Key": key}} for key in keys])
        return len(keys)

    # ------------------------------------------------------------------ reads

    def checkpoint_group(self, thread_id: str, ns: str, checkpoint_id: str) -> Group | None:
        """One checkpoint and its stored writes: one ``Query`` (they share a key prefix)."""
        sk = checkpoint_sk(ns, checkpoint_id)
        kwargs: dict[str, Any] = {
            "TableName": self.name,
            "KeyConditionExpression": "PK = :pk AND begins_with(SK, :sk)",
            "ExpressionAttributeValues": {":pk": {"S": thread_id}, ":sk": {"S": sk}},
            "ConsistentRead": True,
        }
        checkpoint_item: Item | None = None
        writes: Items = []
        for page in self.pages("Query", self.client.query, kwargs):
            for item in page:
                item_sk = text(item, "SK")
                if item_sk == sk:
                    checkpoint_item = item
                elif item_sk.startswith(f"{sk}#W#"):
                    writes.append(item)
        return None if checkpoint_item is None else (checkpoint_item, writes)

    def latest_group(self, thread_id: str, ns: str) -> Group | None:
        """The newest checkpoint of a namespace and its writes, in one or two ``Query`` calls.

        Newest-first, the first item of the namespace is either the newest checkpoint (then it
        has no stored writes, since they would sort after it) or one of its writes, which names
        the checkpoint to fetch whole.
        """
        prefix = ns_prefix(ns)
        upper: str | None = None
        while True:
            if upper is None:
                condition = "PK = :pk AND begins_with(SK, :lo)"
                values = {":pk": {"S": thread_id}, ":lo": {"S": prefix}}
            else:
                condition = "PK = :pk AND SK BETWEEN :lo AND :hi"
                values = {":pk": {"S": thread_id}, ":lo": {"S": prefix}, ":hi": {"S": upper}}
            response = self.call(
                "Query",
                self.client.query,
                TableName=self.name,
                KeyConditionExpression=condition,
                ExpressionAttributeValues=values,
                ScanIndexForward=False,
                Limit=1,
                ConsistentRead=True,
            )
            items: Items = list(response.get("Items", []))
            if upper is not None:
                items = [item for item in items if text(item, "SK") < upper]
            if not items:
                return None
            first = items[0]
            if text(first, "k") == "c":
                return first, []
            group = self.checkpoint_group(thread_id, ns, text(first, "cid"))
            if group is not None:
                return group
            # Writes without their checkpoint (it was never stored): look below them.
            upper = checkpoint_sk(ns, text(first, "cid"))

    def checkpoint_range(self, thread_id: str, ns: str, low_id: str, high_id: str) -> Items:
        """The checkpoint items (no writes) of a namespace from ``low_id`` to ``high_id``,
        both included: one paged ``Query`` (a delta checkpoint's lineage lies in it)."""
        kwargs: dict[str, Any] = {
            "TableName": self.name,
            "KeyConditionExpression": "PK = :pk AND SK BETWEEN :lo AND :hi",
            "FilterExpression": "k = :c",
            "ExpressionAttributeValues": {
                ":pk": {"S": thread_id},
                ":lo": {"S": checkpoint_sk(ns, low_id)},
                ":hi": {"S": checkpoint_sk(ns, high_id)},
                ":c": {"S": "c"},
            },
            "ConsistentRead": True,
        }
        return [item for page in self.pages("Query", self.client.query, kwargs) for item in page]

    def query_groups(
        self,
        thread_id: str,
        ns: str | None,
        *,
        before_id: str | None,
        page_limit: int | None,
    ) -> Iterator[Group]:
        """Checkpoints of a thread newest-first, each with its stored writes, page by page."""
        if ns is not None and before_id is not None:
            condition = "PK = :pk AND SK BETWEEN :lo AND :hi"
            values = {
                ":pk": {"S": thread_id},
                ":lo": {"S": ns_prefix(ns)},
                ":hi": {"S": checkpoint_sk(ns, before_id)},
            }
        else:
            condition = "PK = :pk AND begins_with(SK, :lo)"
            values = {":pk": {"S": thread_id}, ":lo": {"S": "C#" if ns is None else ns_prefix(ns)}}
        kwargs: dict[str, Any] = {
            "TableName": self.name,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
            "ScanIndexForward": False,
            "ConsistentRead": True,
        }
        if page_limit is not None:
            kwargs["Limit"] = page_limit
        # Newest-first, a checkpoint's writes arrive just before the checkpoint itself.
        writes: Items = []
        for page in self.pages("Query", self.client.query, kwargs):
            for item in page:
                if writes and (text(writes[0], "ns"), text(writes[0], "cid")) != (
                    text(item, "ns"),
                    text(item, "cid"),
                ):
                    writes = []  # writes whose checkpoint was never stored
                if text(item, "k") == "w":
                    writes.append(item)
                else:
                    yield item, writes
                    writes = []

    def scan_groups(self) -> Iterator[Group]:
        """Every checkpoint of the table with its writes (operators' listing; a full scan)."""
        checkpoints: Items = []
        writes: dict[tuple[str, str], Items] = {}
        kwargs: dict[str, Any] = {"TableName": self.name, "ConsistentRead": True}
        for page in self.pages("Scan", self.client.scan, kwargs):
            for item in page:
                if text(item, "k") == "c":
                    checkpoints.append(item)
                else:
                    key = (text(item, "PK"), text(item, "SK").split("#W#", 1)[0])
                    writes.setdefault(key, []).append(item)
        checkpoints.sort(key=lambda item: (text(item, "PK"), text(item, "SK")), reverse=True)
        for item in checkpoints:
            yield item, writes.get((text(item, "PK"), text(item, "SK")), [])

    def pages(
        self, operation: str, method: Callable[..., Any], kwargs: dict[str, Any]
    ) -> Iterator[Items]:
        """The items of a ``Query`` or ``Scan``, one list per page."""
        start_key: Item | None = None
        while True:
            if start_key is not None:
                kwargs = {**kwargs, "ExclusiveStartKey": start_key}
            response = self.call(operation, method, **kwargs)
            yield list(response.get("Items", []))
            start_key = response.get("LastEvaluatedKey")
            if not start_key:
                return


def item_size(item: Item) -> int:
    """An estimate of an item's size as DynamoDB counts it: names plus values, in bytes."""
    size = 0
    for name, value in item.items():
        size += len(name.encode())
        for kind, raw in value.items():
            size += len(raw) if kind == "B" else len(str(raw).encode())
    return size


def _transaction_chunks(items: Sequence[Item]) -> builtins.list[Sequence[Item]]:
    """``items`` cut from the end into transactions' worth (the last item in the last one)."""
    chunks: builtins.list[Sequence[Item]] = []
    end = len(items)
    while end > 0:
        start, size = end, 0
        while start > 0 and end - start < _TRANSACT_LIMIT - 1:
            grown = size + item_size(items[start - 1])
            if grown > _TRANSACT_BYTES and start < end:
                break
            start, size = start - 1, grown
        chunks.insert(0, items[start:end])
        end = start
    return chunks


def _cancellation_reasons(exc: ClientError) -> builtins.list[dict[str, Any]]:
    response: dict[str, Any] = dict(exc.response)
    return list(response.get("CancellationReasons") or [])
