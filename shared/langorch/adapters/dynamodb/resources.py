"""Resource locks in the runs table (seed 001 §7b): one item per resource, one per waiter.

Layout (beside the runs' items; one partition holds every resource, so listing is one Query)::

    pk                       sk             attributes
    resource                 <name>         limit (N, only once declared), version (N),
                                            grants (N), leases (JSON: holder -> expires at),
                                            arrivals (N: the last arrival key given),
                                            waiters (N: waiter items stored)
    resource-queue#<name>    p<key, 20      holder, expires_at (N), token (S, once parked)
                              digits>

A waiter's key is its priority band then its arrival (``rules.waiter_key``), so the sort key
orders the queue and a waiter queued ahead of lower priorities is one Put; keys written before
priorities (12 bare digits, priority 0) sort first and are moved by the change that needs it.

Every change reads the resource item (and, when it has waiters, its queue: one Query), decides
with :mod:`langorch.domain.resources` and writes back with a condition on ``version``
(optimistic concurrency): two acquires racing for the last slot both read version 7, one writes
8, the other's condition fails, it reads again and queues. A change that touches no waiter is
one UpdateItem; one that does is one TransactWriteItems of the resource item and the waiter
items it adds, changes or removes (usually one), so a write costs the same with 3 waiters or
900, where the queue used to be one JSON attribute rewritten whole (cost growing with the square
of the queue, and a few hundred waiters' task tokens filling the 400 KB item). The queue is
capped (``max_waiters``; :class:`langorch.domain.resources.QueueFullError` past it). ``limit``
is written by itself (``resources set``) and never touches ``version``, so declaring a limit
does not make a concurrent acquire retry. A queue written by an older langorch (the ``queue``
attribute) is read once and moved into items by the next change.

The resource item stays small (``MAX_LIMIT`` leases); every resource shares the ``resource``
partition, which takes DynamoDB's per-partition write rate (1,000 writes/s).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from botocore.exceptions import ClientError

from langorch.adapters.dynamodb._items import error_code as _code
from langorch.domain import resources as rules
from langorch.domain.errors import StorageError
from langorch.domain.resources import Grant, ResourceState, Waiter

T = TypeVar("T")

PK = "resource"
QUEUE_PK = "resource-queue#"
MAX_RACES = 25
"""Lost conditional writes in a row before giving up (a StorageError: the segment is retried)."""

MAX_ACTIONS = 100
"""TransactWriteItems' limit. Only expired waiters leave in bulk (dropped by a rule's ``live``);
those past the limit stay stored, expired, until a later change deletes them."""

Stored = list[tuple[int | None, Waiter]]
"""A resource's queue as stored: (arrival key, waiter) in order; ``None``: a legacy entry."""

UNCHANGED_SINCE_READ = "attribute_not_exists(#version) OR #version = :seen"
"""The write's condition: nobody changed the resource's leases since this process read them."""


class ResourceLocksRepository:
    """:class:`langorch.app.ports.ResourceLocks` on DynamoDB (the runs table).

    Args:
        client: a boto3 DynamoDB client.
        table_name: the runs table.
    """

    def __init__(
        self, client: Any, table_name: str, *, max_waiters: int = rules.MAX_WAITERS
    ) -> None:
        self._client = client
        self._table = table_name
        self._max_waiters = max_waiters

    def acquire(
        self,
        name: str,
        holder: str,
        *,
        now: float,
        lease_seconds: float,
        wait_seconds: float,
        priority: int = 0,
    ) -> Grant:
        """Take a lease for ``holder`` or queue it (see :func:`langorch.domain.resources.acquire`).

        Raises:
            QueueFullError: the queue holds ``max_waiters`` and ``holder`` would join it.
            StorageError: DynamoDB failed, or the resource changed under every attempt.
        """

        def decide(state: ResourceState) -> tuple[ResourceState, Grant]:
            return rules.acquire(
                state,
                holder,
                now=now,
                lease_seconds=lease_seconds,
                wait_seconds=wait_seconds,
                max_waiters=self._max_waiters,
                priority=priority,
            )

        return self._change(name, decide)

    def park(self, name: str, holder: str, token: str, *, now: float, wait_seconds: float) -> bool:
        """Keep ``holder``'s task token in its queue place (see :func:`rules.park`)."""

        def decide(state: ResourceState) -> tuple[ResourceState, bool]:
            return rules.park(
                state,
                holder,
                token,
                now=now,
                wait_seconds=wait_seconds,
                max_waiters=self._max_waiters,
            )

        return self._change(name, decide)

    def reserve(self, name: str, holder: str, *, now: float, limit: int, period: float) -> float:
        """Reserve ``holder``'s start slot (see :func:`rules.reserve`); when it may start."""

        def decide(state: ResourceState) -> tuple[ResourceState, float]:
            return rules.reserve(state, holder, now=now, limit=limit, period=period)

        return self._change(name, decide)

    def release(self, name: str, holder: str) -> bool:
        """Give back ``holder``'s lease and queue place; whether it had either."""
        return self._change(name, lambda state: rules.release(state, holder))

    def release_run(self, run_id: str) -> list[str]:
        """Release every lease and queue place of ``run_id``; the resources it touched."""
        touched: list[str] = []
        for state in self.list():
            holders = rules.holders_of_run(state, run_id)
            for holder in holders:
                self.release(state.name, holder)
            if holders:
                touched.append(state.name)
        return touched

    def set_limit(self, name: str, limit: int) -> None:
        """Declare ``name``'s ``concurrency_limit``.

        Raises:
            ValueError: the name or the limit is invalid.
            StorageError: DynamoDB failed.
        """
        problems = [*rules.check_name(name, "name"), *rules.check_limit(limit)]
        if problems:
            raise ValueError("; ".join(str(p) for p in problems))
        try:
            self._client.update_item(
                TableName=self._table,
                Key=_key(name),
                UpdateExpression="SET #limit = :limit",
                ExpressionAttributeNames={"#limit": "limit"},
                ExpressionAttributeValues={":limit": {"N": str(limit)}},
            )
        except ClientError as exc:
            raise self._error("UpdateItem", exc) from exc

    def get(self, name: str) -> ResourceState:
        """The resource as stored (undeclared and free when there is no item)."""
        return self._read(name).state

    def list(self) -> list[ResourceState]:
        """Every resource declared or used, by name."""
        found: list[ResourceState] = []
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": PK}},
            "ConsistentRead": True,
        }
        while True:
            try:
                page = self._client.query(**kwargs)
            except ClientError as exc:
                raise self._error("Query", exc) from exc
            found += [self._with_queue(item).state for item in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                return sorted(found, key=lambda s: s.name)
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    # ----------------------------------------------------------------------------------------

    def _change(self, name: str, decide: Callable[[ResourceState], tuple[ResourceState, T]]) -> T:
        for _ in range(MAX_RACES):
            seen = self._read(name)
            new, answer = decide(seen.state)
            if new == seen.state:
                return answer  # nothing to write (a release of nothing, a no-op)
            if self._write(new, seen):
                return answer
        raise StorageError(
            f"resource {name}: {MAX_RACES} conditional writes in a row lost a race; "
            "the segment is retried"
        )

    def _read(self, name: str) -> _Seen:
        try:
            item = self._client.get_item(
                TableName=self._table, Key=_key(name), ConsistentRead=True
            ).get("Item")
        except ClientError as exc:
            raise self._error("GetItem", exc) from exc
        if item is None:
            return _Seen(ResourceState(name=name), None, [], 0, 0)
        return self._with_queue(item)

    def _with_queue(self, item: dict[str, Any]) -> _Seen:
        """The resource item read with its waiters (queried only when it says it has some)."""
        name = item["sk"]["S"]
        stored: Stored = [
            (None, Waiter(str(w[0]), float(w[1]), w[2] if len(w) > 2 else None))
            for w in json.loads(item["queue"]["S"] if "queue" in item else "[]")
        ]
        count = int(item["waiters"]["N"]) if "waiters" in item else 0
        if count:
            stored += self._waiters(name)
        declared = "limit" in item
        leases = json.loads(item["leases"]["S"]) if "leases" in item else {}
        state = ResourceState(
            name=name,
            limit=int(item["limit"]["N"]) if declared else rules.DEFAULT_LIMIT,
            declared=declared,
            leases={str(h): float(t) for h, t in leases.items()},
            queue=tuple(w for _, w in stored),
            grants=int(item["grants"]["N"]) if "grants" in item else 0,
        )
        version = int(item["version"]["N"]) if "version" in item else None
        arrivals = int(item["arrivals"]["N"]) if "arrivals" in item else 0
        return _Seen(state, version, stored, arrivals, count)

    def _waiters(self, name: str) -> Stored:
        found: Stored = []
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": QUEUE_PK + name}},
            "ConsistentRead": True,
        }
        while True:
            try:
                page = self._client.query(**kwargs)
            except ClientError as exc:
                raise self._error("Query", exc) from exc
            for item in page.get("Items", []):
                token = item["token"]["S"] if "token" in item else None
                key = _key_of(item["sk"]["S"])
                expires_at = float(item["expires_at"]["N"])
                waiter = Waiter(item["holder"]["S"], expires_at, token, rules.priority_of(key))
                found.append((key, waiter))
            if "LastEvaluatedKey" not in page:
                return found
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _write(self, state: ResourceState, seen: _Seen) -> bool:
        changes = rules.queue_changes(seen.stored, state.queue, seen.arrivals)
        room = MAX_ACTIONS - 1 - len(changes.put)
        delete = changes.delete[:room]
        puts = changes.put
        arrivals = changes.arrivals
        stored = {key for key, _ in seen.stored if key is not None}
        added = sum(1 for key, _ in puts if key not in stored)
        waiters = seen.waiters - len(delete) + added
        leases = {h: t for h, t in sorted(state.leases.items())}
        update = {
            "TableName": self._table,
            "Key": _key(state.name),
            "UpdateExpression": (
                "SET #leases = :leases, #grants = :grants, #version = :next,"
                " #arrivals = :arrivals, #waiters = :waiters REMOVE #queue"
            ),
            "ConditionExpression": UNCHANGED_SINCE_READ,
            "ExpressionAttributeNames": {
                "#leases": "leases",
                "#queue": "queue",
                "#grants": "grants",
                "#version": "version",
                "#arrivals": "arrivals",
                "#waiters": "waiters",
            },
            "ExpressionAttributeValues": {
                ":leases": {"S": json.dumps(leases)},
                ":grants": {"N": str(state.grants)},
                ":seen": {"N": str(seen.version or 0)},
                ":next": {"N": str((seen.version or 0) + 1)},
                ":arrivals": {"N": str(arrivals)},
                ":waiters": {"N": str(waiters)},
            },
        }
        if not puts and not delete:
            return self._update(update)
        actions: list[dict[str, Any]] = [{"Update": update}]
        queue_pk = {"S": QUEUE_PK + state.name}
        actions += [
            {"Delete": {"TableName": self._table, "Key": {"pk": queue_pk, "sk": _arrival(key)}}}
            for key in delete
        ]
        actions += [
            {"Put": {"TableName": self._table, "Item": _waiter_item(queue_pk, key, w)}}
            for key, w in puts
        ]
        try:
            self._client.transact_write_items(TransactItems=actions)
        except ClientError as exc:
            if _code(exc) == "TransactionCanceledException":
                return False  # the version condition failed (or a concurrent transaction)
            raise self._error("TransactWriteItems", exc) from exc
        return True

    def _update(self, update: dict[str, Any]) -> bool:
        try:
            self._client.update_item(**update)
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise self._error("UpdateItem", exc) from exc
        return True

    def _error(self, operation: str, exc: ClientError) -> StorageError:
        return StorageError(f"DynamoDB {operation} on {self._table} (resources) failed: {exc}")


def _key(name: str) -> dict[str, Any]:
    return {"pk": {"S": PK}, "sk": {"S": name}}


@dataclass(frozen=True)
class _Seen:
    """A resource as read: its state, the version and queue items the write is conditioned on."""

    state: ResourceState
    version: int | None
    stored: Stored
    arrivals: int
    waiters: int


def _arrival(key: int) -> dict[str, str]:
    # Fixed width, so the sort key orders the queue. Keys from before priorities were 12 bare
    # digits; the "p" sorts these after them (they are read first, and moved on the next change
    # that queues a higher priority ahead of them).
    return {"S": f"{key:012d}" if key < rules.ARRIVALS else f"p{key:020d}"}


def _key_of(sk: str) -> int:
    return int(sk.removeprefix("p"))


def _waiter_item(pk: dict[str, str], key: int, waiter: Waiter) -> dict[str, Any]:
    item: dict[str, Any] = {
        "pk": pk,
        "sk": _arrival(key),
        "holder": {"S": waiter.holder},
        "expires_at": {"N": repr(waiter.expires_at)},
    }
    if waiter.token is not None:
        item["token"] = {"S": waiter.token}
    return item
