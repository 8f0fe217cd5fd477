"""The checkpoint table's requests: batched or slot writes, grouped reads, named errors.

Every read is consistent. Newest-first, a checkpoint's writes come before it: in the unfenced
layout their keys extend its key, in slots they lie in later slots. That is what lets one
``Query`` return a checkpoint with its writes.
"""

from __future__ import annotations

import builtins
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from langorch.adapters.dynamodb._items import old_item
from langorch.adapters.dynamodb.checkpoint_slots import (
    CHECKPOINT,
    FREE,
    LEASE,
    PAUSE,
    slot_number,
    slot_prefix,
)
from langorch.adapters.dynamodb.checkpointer._keys import (
    Group,
    Item,
    Items,
    checkpoint_sk,
    ns_prefix,
    text,
)
from langorch.adapters.dynamodb.checkpointer._slotting import checkpoints_in, writes_in
from langorch.domain.errors import StorageError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

logger = logging.getLogger(__name__)

T = TypeVar("T")

_BATCH_LIMIT = 25  # BatchWriteItem's hard cap on items per request.
_MAX_ATTEMPTS = 8  # for UnprocessedItems; botocore already retries throttled requests.
_HEAD_PAGE = 3
"""Slots a read of the newest checkpoint asks for at first: a lease marker, the checkpoint, and
one more (writes stored after it); it pages on when there are more."""


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

    def put_slot(self, item: Item) -> Item | None:
        """Put a slot item only if its slot is free: ``None`` when it landed, else the item
        that holds the slot (``{}`` when DynamoDB did not return it)."""
        try:
            self.client.put_item(
                TableName=self.name,
                Item=item,
                ConditionExpression=FREE,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise self.storage_error("PutItem", exc) from exc
            taken: Item = old_item(exc) or {}
            return taken
        except BotoCoreError as exc:
            raise StorageError(f"PutItem on checkpoint table {self.name} failed: {exc}") from exc
        return None

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

    def read_head(self, thread_id: str, ns: str) -> Head:
        """The newest checkpoint of a namespace with its writes, and the state of its slots.

        One ``Query`` newest-first over the namespace's slots, down to the first slot holding a
        checkpoint (usually the first or second item: a lease marker sits above it); a thread
        with no checkpoint in slots (written before slots, or a fork's copy) is read in the
        unfenced layout too, and the writes in slots aimed at its checkpoint are added.
        """
        top = 0
        fence: int | None = None
        paused = False
        writes: dict[str, Item] = {}
        kwargs: dict[str, Any] = {
            "TableName": self.name,
            "KeyConditionExpression": "PK = :pk AND begins_with(SK, :slots)",
            "ExpressionAttributeValues": {
                ":pk": {"S": thread_id},
                ":slots": {"S": slot_prefix(ns)},
            },
            "ScanIndexForward": False,
            "Limit": _HEAD_PAGE,
            "ConsistentRead": True,
        }
        for page in self.pages("Query", self.client.query, kwargs):
            for item in page:
                top = top or slot_number(text(item, "SK"))
                kind = text(item, "k")
                if kind == PAUSE:
                    paused = True  # above the newest checkpoint: asked since it was stored
                    continue
                if fence is None and "f" in item:
                    fence = int(item["f"]["N"])
                if kind == LEASE:
                    continue
                if kind == CHECKPOINT:
                    checkpoint_id = text(item, "cid")
                    return Head((item, _aimed_at(writes, checkpoint_id)), top, fence, paused)
                for write in writes_in(item):
                    writes.setdefault(text(write, "SK"), write)
        legacy = self._legacy_latest(thread_id, ns)
        if legacy is not None:
            stored = {text(write, "SK"): write for write in legacy[1]}
            newer = _aimed_at(writes, text(legacy[0], "cid"))
            legacy = (legacy[0], list({**stored, **{text(w, "SK"): w for w in newer}}.values()))
        return Head(legacy, top, fence, paused)

    def latest_group(self, thread_id: str, ns: str) -> Group | None:
        """The newest checkpoint of a namespace and its writes (see :meth:`read_head`)."""
        return self.read_head(thread_id, ns).group

    def checkpoint_group(self, thread_id: str, ns: str, checkpoint_id: str) -> Group | None:
        """One checkpoint and its stored writes, found by id.

        In the unfenced layout one ``Query`` of its key prefix; in slots (rare: a rewind, a
        fork, a read of history by id) a ``Query`` of the namespace's slots, newest first, up
        to it: a slot's key says nothing of the checkpoint id it holds.
        """
        for group in self._slot_groups(thread_id, ns):
            if text(group[0], "cid") == checkpoint_id:
                return group
        stored = self._legacy_group(thread_id, ns, checkpoint_id)
        if stored is None:
            return None
        checkpoint_item, writes = stored
        slotted = self._slot_writes(thread_id, ns, checkpoint_id)
        merged = {text(w, "SK"): w for w in [*writes, *slotted]}
        return checkpoint_item, list(merged.values())

    def _legacy_latest(self, thread_id: str, ns: str) -> Group | None:
        """The newest checkpoint of a namespace in the unfenced layout, in one or two ``Query``
        calls.

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
            group = self._legacy_group(thread_id, ns, text(first, "cid"))
            if group is not None:
                return group
            # Writes without their checkpoint (it was never stored): look below them.
            upper = checkpoint_sk(ns, text(first, "cid"))

    def _legacy_group(self, thread_id: str, ns: str, checkpoint_id: str) -> Group | None:
        """A checkpoint of the unfenced layout and the writes stored under its key, by id, in
        one paged ``Query`` of its key prefix (``None``: not stored)."""
        sk = checkpoint_sk(ns, checkpoint_id)
        kwargs: dict[str, Any] = {
            "TableName": self.name,
            "KeyConditionExpression": "PK = :pk AND begins_with(SK, :sk)",
            "ExpressionAttributeValues": {":pk": {"S": thread_id}, ":sk": {"S": sk}},
            "ConsistentRead": True,
        }
        found: Item | None = None
        writes: Items = []
        for page in self.pages("Query", self.client.query, kwargs):
            for item in page:
                if text(item, "SK") == sk:
                    found = item
                elif text(item, "SK").startswith(f"{sk}#W#"):
                    writes.append(item)
        return None if found is None else (found, writes)

    def _slot_writes(self, thread_id: str, ns: str, checkpoint_id: str) -> Items:
        """The writes in a namespace's slots aimed at one checkpoint (a checkpoint stored
        before slots can have some: its segment's resume value, written under a fence)."""
        found: dict[str, Item] = {}
        for page in self.pages("Query", self.client.query, self._slots_query(thread_id, ns)):
            for item in page:
                for write in writes_in(item):
                    if text(write, "cid") == checkpoint_id:
                        found.setdefault(text(write, "SK"), write)
        return list(found.values())

    def checkpoint_range(self, thread_id: str, low_sk: str, high_sk: str) -> Items:
        """The checkpoint items (no writes) with keys from ``low_sk`` to ``high_sk``, both
        included: one paged ``Query`` (a delta checkpoint's lineage lies in it). Unfenced keys
        sort before slots, so a range from a checkpoint stored before slots to one in a slot
        holds everything between."""
        kwargs: dict[str, Any] = {
            "TableName": self.name,
            "KeyConditionExpression": "PK = :pk AND SK BETWEEN :lo AND :hi",
            "FilterExpression": "k = :c",
            "ExpressionAttributeValues": {
                ":pk": {"S": thread_id},
                ":lo": {"S": low_sk},
                ":hi": {"S": high_sk},
                ":c": {"S": "c"},
            },
            "ConsistentRead": True,
        }
        return [
            checkpoint
            for page in self.pages("Query", self.client.query, kwargs)
            for item in page
            for checkpoint in (
                checkpoints_in(item) if text(item, "SK").startswith("S#") else [item]
            )
        ]

    def query_groups(
        self,
        thread_id: str,
        ns: str | None,
        *,
        before_id: str | None,
        page_limit: int | None,
    ) -> Iterator[Group]:
        """Checkpoints of a thread newest-first, each with its stored writes, page by page:
        those in slots (the newer), then those of the unfenced layout."""
        leftover: dict[tuple[str, str], dict[str, Item]] = {}
        yield from self._slot_groups(thread_id, ns, page_limit=page_limit, leftover=leftover)
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
                    key = (text(item, "ns"), text(item, "cid"))
                    slotted = leftover.pop(key, {})
                    merged = {**{text(w, "SK"): w for w in writes}, **slotted}
                    yield item, list(merged.values())
                    writes = []

    def _slots_query(self, thread_id: str, ns: str | None) -> dict[str, Any]:
        return {
            "TableName": self.name,
            "KeyConditionExpression": "PK = :pk AND begins_with(SK, :slots)",
            "ExpressionAttributeValues": {
                ":pk": {"S": thread_id},
                ":slots": {"S": "S#" if ns is None else slot_prefix(ns)},
            },
            "ScanIndexForward": False,
            "ConsistentRead": True,
        }

    def _slot_groups(
        self,
        thread_id: str,
        ns: str | None,
        *,
        page_limit: int | None = None,
        leftover: dict[tuple[str, str], dict[str, Item]] | None = None,
    ) -> Iterator[Group]:
        """The checkpoints in a thread's slots newest-first, each with the writes aimed at it
        (they lie in later slots, so a newest-first read has met them already). Writes aimed at
        checkpoints not in slots are left in ``leftover``."""
        kwargs = self._slots_query(thread_id, ns)
        if page_limit is not None:
            kwargs["Limit"] = page_limit
        pending = {} if leftover is None else leftover
        for page in self.pages("Query", self.client.query, kwargs):
            for item in page:
                yield from _slot_item_groups(item, pending)

    def scan_groups(self) -> Iterator[Group]:
        """Every checkpoint of the table with its writes (operators' listing; a full scan)."""
        checkpoints: Items = []
        writes: dict[tuple[str, str, str], dict[str, Item]] = {}
        kwargs: dict[str, Any] = {"TableName": self.name, "ConsistentRead": True}
        for page in self.pages("Scan", self.client.scan, kwargs):
            for item in page:
                if text(item, "SK").startswith("S#"):
                    checkpoints.extend(checkpoints_in(item))
                    found = writes_in(item)
                elif text(item, "k") == "c":
                    checkpoints.append(item)
                    found = []
                else:
                    found = [item]
                for write in found:
                    key = (text(write, "PK"), text(write, "ns"), text(write, "cid"))
                    writes.setdefault(key, {})[text(write, "SK")] = write
        # Newest first: slots above the unfenced layout, a slot's own checkpoints newest first.
        order = {id(item): n for n, item in enumerate(checkpoints)}
        checkpoints.sort(
            key=lambda item: (text(item, "PK"), text(item, "SK"), order[id(item)]), reverse=True
        )
        for item in checkpoints:
            key = (text(item, "PK"), text(item, "ns"), text(item, "cid"))
            yield item, list(writes.get(key, {}).values())

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


@dataclass(frozen=True)
class Head:
    """What a newest-first read of a namespace's slots found.

    Attributes:
        group: the newest checkpoint with its writes (``None``: the namespace has none).
        top: the newest slot taken (0: none).
        fence: the fence of the newest slot that carries one (a lease marker, or a segment's
            write); ``None``: no slot does.
        paused: a pause marker lies above the newest write (an operator's pause since).
    """

    group: Group | None
    top: int
    fence: int | None
    paused: bool


def _aimed_at(writes: dict[str, Item], checkpoint_id: str) -> Items:
    return [write for write in writes.values() if text(write, "cid") == checkpoint_id]


def _slot_item_groups(
    item: Item, pending: dict[tuple[str, str], dict[str, Item]]
) -> builtins.list[Group]:
    """The checkpoints of one slot item (newest first) with the pending writes aimed at them;
    the writes it carries join ``pending`` (they are aimed at older checkpoints)."""
    groups: builtins.list[Group] = []
    for checkpoint in reversed(checkpoints_in(item)):
        key = (text(checkpoint, "ns"), text(checkpoint, "cid"))
        groups.append((checkpoint, list(pending.pop(key, {}).values())))
    for write in writes_in(item):
        key = (text(write, "ns"), text(write, "cid"))
        pending.setdefault(key, {}).setdefault(text(write, "SK"), write)
    return groups
