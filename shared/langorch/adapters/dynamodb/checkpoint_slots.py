"""Slots of the checkpoint table: the keys fenced checkpoint writes take, and the claims a lease
and an operator's pause make on them.

The design is in :mod:`langorch.adapters.dynamodb.checkpointer` ("Fenced writes"). In short: a
fenced thread's items take a dense sequence of slots per namespace (``SK`` ``S#{ns}#{n:012d}``),
each written by one ``PutItem`` that only lands on a free slot. Taking a lease (fence above 1)
puts a small *lease marker* in the slot after the newest one, so the next write of a segment
that lost the lease finds its slot taken by a higher fence and writes nothing; an operator's
pause puts a *pause marker* there the same way, so the running segment learns of the pause from
the write it makes anyway.

This module stays free of LangGraph (a small piece any adapter may share); the container builds
one :class:`SlotClaims` for every saver, so the marker a process wrote is known to its saver.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from langorch.adapters.dynamodb._items import old_item as _old_item
from langorch.domain.errors import StorageError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

CHECKPOINT, WRITES, LEASE, PAUSE = "c", "w", "l", "p"
"""The kinds of slot (the ``k`` attribute): a checkpoint (with writes it carries), writes only,
a lease marker (``f`` its fence), a pause marker (no fence)."""
FREE = "attribute_not_exists(SK)"
"""A slot write's condition: the slot is still free."""
_CLAIM_ATTEMPTS = 32
"""Slots a claim tries before giving up (each taken one means another writer got there first)."""
_CLAIMS_KEPT = 256


def escape_ns(ns: str) -> str:
    """The namespace as it appears in keys."""
    # '#' separates key parts; escaping it (and '%', the escape character) makes a namespace's
    # prefix the prefix of exactly that namespace's keys.
    return ns.replace("%", "%25").replace("#", "%23")


def slot_prefix(ns: str) -> str:
    """The ``SK`` prefix of every slot of one namespace."""
    return f"S#{escape_ns(ns)}#"


def slot_sk(ns: str, number: int) -> str:
    """The ``SK`` of slot ``number`` (from 1) of a namespace."""
    return f"{slot_prefix(ns)}{number:012d}"


def slot_number(sk: str) -> int:
    """Which slot an ``SK`` names."""
    return int(sk.rsplit("#", 1)[1])


class SlotClaims:
    """The claims a lease and an operator's pause make on a run's checkpoint slots.

    Args:
        client: a boto3 DynamoDB client.
        table_name: the checkpoints table.
    """

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self.name = table_name
        self._lock = threading.Lock()
        # The lease markers this process wrote, by run: (fence, slot). A saver given these
        # claims starts its next write after the marker instead of bumping into it.
        self._claimed: OrderedDict[str, tuple[int, int]] = OrderedDict()
        # The newest root slot this process knows of, by run (its saver's writes, its own
        # markers): a claim tries the slot after it first, without a Query.
        self._tops: OrderedDict[str, int] = OrderedDict()

    def claim_lease(self, run_id: str, fence: int) -> None:
        """Put a lease marker of ``fence`` in the slot after the run's newest one.

        The run's first lease (fence 1) writes none: no segment wrote before it, so none can
        be stale (a saver that finds no marker of its fence checks the run item instead).

        Raises:
            StorageError: DynamoDB refused, or other writers kept taking the slots.
        """
        if fence <= 1:
            return
        slot = self._claim(run_id, {"k": {"S": LEASE}, "f": {"N": str(fence)}}, fence)
        if slot is not None:
            with self._lock:
                _keep(self._claimed, run_id, (fence, slot))

    def claim_pause(self, run_id: str) -> None:
        """Put a pause marker in the slot after the run's newest one: the running segment's
        next checkpoint write finds it (and stores its superstep in the slot after).

        Raises:
            StorageError: DynamoDB refused, or other writers kept taking the slots.
        """
        self._claim(run_id, {"k": {"S": PAUSE}}, None)

    def claimed(self, run_id: str) -> tuple[int, int] | None:
        """The newest lease marker this process wrote for the run: ``(fence, slot)``."""
        with self._lock:
            return self._claimed.get(run_id)

    def note_top(self, run_id: str, slot: int) -> None:
        """Note that the run's root slot ``slot`` is taken (a saver's write landed there)."""
        with self._lock:
            if slot > self._tops.get(run_id, 0):
                _keep(self._tops, run_id, slot)

    def _claim(self, run_id: str, marker: dict[str, Any], fence: int | None) -> int | None:
        """Write ``marker`` in the first free slot after the newest (root namespace); returns
        its slot, ``None`` when a newer lease's marker got there first (nothing to claim).

        It starts after the newest slot this process knows of, without a read; when that slot
        turns out taken (another process wrote since), after the newest one a ``Query`` finds.
        """
        with self._lock:
            hint = self._tops.get(run_id)
        slot = hint + 1 if hint is not None else self._newest(run_id) + 1
        for _ in range(_CLAIM_ATTEMPTS):
            item = {"PK": {"S": run_id}, "SK": {"S": slot_sk("", slot)}, "ns": {"S": ""}}
            try:
                self._client.put_item(
                    TableName=self.name,
                    Item={**item, **marker},
                    ConditionExpression=FREE,
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
                self.note_top(run_id, slot)
                return slot
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                    raise self._error("PutItem", exc) from exc
                taken: dict[str, Any] = _old_item(exc) or {}
                taken_fence = int(taken.get("f", {}).get("N", "0"))
                if fence is not None and taken_fence > fence:
                    return None  # a newer lease claimed it: this one is already stale
                slot = slot + 1 if hint is None else max(slot + 1, self._newest(run_id) + 1)
                hint = None
            except BotoCoreError as exc:
                raise StorageError(
                    f"PutItem on checkpoint table {self.name} failed: {exc}"
                ) from exc
        raise StorageError(
            f"run {run_id}: {_CLAIM_ATTEMPTS} checkpoint slots in a row were taken while a "
            f"marker was written to table {self.name} (hint: another writer is racing; retry)"
        )

    def _newest(self, run_id: str) -> int:
        """The run's newest slot in the root namespace (0: none), its key read only."""
        try:
            response = self._client.query(
                TableName=self.name,
                KeyConditionExpression="PK = :pk AND begins_with(SK, :slots)",
                ExpressionAttributeValues={":pk": {"S": run_id}, ":slots": {"S": slot_prefix("")}},
                ProjectionExpression="SK",
                ScanIndexForward=False,
                Limit=1,
                ConsistentRead=True,
            )
        except ClientError as exc:
            raise self._error("Query", exc) from exc
        except BotoCoreError as exc:
            raise StorageError(f"Query on checkpoint table {self.name} failed: {exc}") from exc
        items = response.get("Items", [])
        return slot_number(str(items[0]["SK"]["S"])) if items else 0

    def _error(self, operation: str, exc: ClientError) -> StorageError:
        error = exc.response.get("Error", {})
        return StorageError(
            f"{operation} on checkpoint table {self.name} failed: "
            f"{error.get('Code', 'unknown')}: {error.get('Message', '')}"
        )


def _keep(kept: OrderedDict[str, Any], run_id: str, value: Any) -> None:
    """Keep ``value`` for the run, the newest last, at most :data:`_CLAIMS_KEPT` runs."""
    kept[run_id] = value
    kept.move_to_end(run_id)
    while len(kept) > _CLAIMS_KEPT:
        kept.popitem(last=False)
