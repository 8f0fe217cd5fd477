"""Resource locks in the runs table (seed 001 §7b): one item per resource.

Layout (beside the runs' items; one partition holds every resource, so listing is one Query)::

    pk          sk       attributes
    resource    <name>   limit (N, only once declared), version (N), grants (N),
                         leases (JSON: holder -> expires at),
                         queue (JSON: [[holder, expires at, task token]])

Every change is read, decided by :mod:`langorch.domain.resources` and written back with a
condition on ``version`` (optimistic concurrency): two acquires racing for the last slot both
read version 7, one writes 8, the other's condition fails, it reads again and queues. ``limit``
is written by itself (``resources set``) and never touches ``version``, so declaring a limit
does not make a concurrent acquire retry.

The lease state is small (``MAX_LIMIT`` leases, one waiter per waiting step); the hot partition
takes DynamoDB's per-partition write rate (1,000 writes/s), far above what runs that queue for
a desktop session make.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from botocore.exceptions import ClientError

from langorch.adapters.dynamodb._items import error_code as _code
from langorch.domain import resources as rules
from langorch.domain.errors import StorageError
from langorch.domain.resources import Grant, ResourceState, Waiter

T = TypeVar("T")

PK = "resource"
MAX_RACES = 25
"""Lost conditional writes in a row before giving up (a StorageError: the segment is retried)."""

UNCHANGED_SINCE_READ = "attribute_not_exists(#version) OR #version = :seen"
"""The write's condition: nobody changed the resource's leases since this process read them."""


class ResourceLocksRepository:
    """:class:`langorch.app.ports.ResourceLocks` on DynamoDB (the runs table).

    Args:
        client: a boto3 DynamoDB client.
        table_name: the runs table.
    """

    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def acquire(
        self, name: str, holder: str, *, now: float, lease_seconds: float, wait_seconds: float
    ) -> Grant:
        """Take a lease for ``holder`` or queue it (see :func:`langorch.domain.resources.acquire`).

        Raises:
            StorageError: DynamoDB failed, or the resource changed under every attempt.
        """

        def decide(state: ResourceState) -> tuple[ResourceState, Grant]:
            return rules.acquire(
                state, holder, now=now, lease_seconds=lease_seconds, wait_seconds=wait_seconds
            )

        return self._change(name, decide)

    def park(self, name: str, holder: str, token: str, *, now: float, wait_seconds: float) -> bool:
        """Keep ``holder``'s task token in its queue place (see :func:`rules.park`)."""

        def decide(state: ResourceState) -> tuple[ResourceState, bool]:
            return rules.park(state, holder, token, now=now, wait_seconds=wait_seconds)

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
        return self._read(name)[0]

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
            found += [_state(item) for item in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                return sorted(found, key=lambda s: s.name)
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    # ----------------------------------------------------------------------------------------

    def _change(self, name: str, decide: Callable[[ResourceState], tuple[ResourceState, T]]) -> T:
        for _ in range(MAX_RACES):
            state, version = self._read(name)
            new, answer = decide(state)
            if new == state:
                return answer  # nothing to write (a release of nothing, a no-op)
            if self._write(new, version):
                return answer
        raise StorageError(
            f"resource {name}: {MAX_RACES} conditional writes in a row lost a race; "
            "the segment is retried"
        )

    def _read(self, name: str) -> tuple[ResourceState, int | None]:
        try:
            item = self._client.get_item(
                TableName=self._table, Key=_key(name), ConsistentRead=True
            ).get("Item")
        except ClientError as exc:
            raise self._error("GetItem", exc) from exc
        if item is None:
            return ResourceState(name=name), None
        version = int(item["version"]["N"]) if "version" in item else None
        return _state(item), version

    def _write(self, state: ResourceState, version: int | None) -> bool:
        leases = {h: t for h, t in sorted(state.leases.items())}
        queue = [[w.holder, w.expires_at, w.token] for w in state.queue]
        try:
            self._client.update_item(
                TableName=self._table,
                Key=_key(state.name),
                UpdateExpression=(
                    "SET #leases = :leases, #queue = :queue, #grants = :grants, #version = :next"
                ),
                ConditionExpression=UNCHANGED_SINCE_READ,
                ExpressionAttributeNames={
                    "#leases": "leases",
                    "#queue": "queue",
                    "#grants": "grants",
                    "#version": "version",
                },
                ExpressionAttributeValues={
                    ":leases": {"S": json.dumps(leases)},
                    ":queue": {"S": json.dumps(queue)},
                    ":grants": {"N": str(state.grants)},
                    ":seen": {"N": str(version or 0)},
                    ":next": {"N": str((version or 0) + 1)},
                },
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise self._error("UpdateItem", exc) from exc
        return True

    def _error(self, operation: str, exc: ClientError) -> StorageError:
        return StorageError(f"DynamoDB {operation} on {self._table} (resources) failed: {exc}")


def _key(name: str) -> dict[str, Any]:
    return {"pk": {"S": PK}, "sk": {"S": name}}


def _state(item: dict[str, Any]) -> ResourceState:
    declared = "limit" in item
    leases = json.loads(item["leases"]["S"]) if "leases" in item else {}
    queue = json.loads(item["queue"]["S"]) if "queue" in item else []
    return ResourceState(
        name=item["sk"]["S"],
        limit=int(item["limit"]["N"]) if declared else rules.DEFAULT_LIMIT,
        declared=declared,
        leases={str(h): float(t) for h, t in leases.items()},
        queue=tuple(Waiter(str(w[0]), float(w[1]), w[2] if len(w) > 2 else None) for w in queue),
        grants=int(item["grants"]["N"]) if "grants" in item else 0,
    )
