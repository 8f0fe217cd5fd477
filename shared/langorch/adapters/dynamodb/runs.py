"""Runs table: run records, dedupe markers, segment leases and timelines (one table).

Layout (string keys ``pk``/``sk``; every run's items share its partition)::

    item      pk                       sk            other attributes
    run       run#<run_id>             run           run_id, workflow_id, workflow_version, status,
                                                     created_at, updated_at, body (RunRecord JSON),
                                                     fence (N), lease_owner, lease_expires_at (N),
                                                     gsi1pk, gsi1sk, gsi2pk, gsi2sk,
                                                     attempt (N, a redrive's), forks (L of JSON),
                                                     pause (PauseRequest JSON), pause_token,
                                                     execution_name (the run's current one),
                                                     tail (L of M: seq, last_seq, events,
                                                     confirms), tail_bytes (N)
    events    run#<run_id>             ev#<seq:015d> seq (N, the first), last_seq (N),
                                                     events (JSON list of TimelineEvent),
                                                     confirms (a spilled entry's)
    overflow  run#<run_id>     ev#<seq:015d>#<tag>   the same, and commit (the tag)
    dedupe    dedupe#<sha256(key)>     dedupe        run_id, dedupe_key, created_at

    GSI gsi1  gsi1pk = wf#<workflow_id>#<n>  gsi1sk = <created_at>#<run_id>  (runs of a workflow)
    GSI gsi2  gsi2pk = status#<status>#<n>   gsi2sk = <created_at>#<run_id>  (runs in a status)

Only run items carry the GSI attributes, so both indexes are sparse and hold runs only. ``n`` is
one of ``INDEX_SHARDS`` (8), a hash of the run id: no index key takes every running run's writes
(one partition takes 1,000 write units a second; issue 33). The indexes carry only their keys,
``run_id`` and ``status``: a save that changes no status writes no index, and an index write is
one unit whatever the record's size. A listing queries every shard of its keys (and the
unsharded key runs stored before sharding still carry), merges them newest first, and reads the
page's records by key (``BatchGetItem``). ``created_at`` is fixed-width UTC ISO-8601
(``2025-01-31T09:00:00.000000Z``), so the sort keys order by time; lists read them backwards
for newest first. GSI reads are eventually consistent: a run created a moment ago may be missing
from a list for a moment, never from :meth:`RunsRepository.get_run`.

The record is stored as JSON in ``body`` rather than as a DynamoDB map because run input and
outputs are arbitrary JSON (floats, which boto3's serializer refuses, and deep nesting); the
attributes that conditions and indexes need are copied out next to it.

``forks``, ``pause`` and ``pause_token`` sit beside ``body``: each is written on its own
(``add_fork``, ``request_pause``, ``lift_pause``, ``park_paused``), so a segment's write of the
record never drops what an operator asked meanwhile.

Leases (ARCHITECTURE §2 "One writer per run"): a segment takes the run's lease with a conditional
write that also increments ``fence``. Writes made under a lease carry that fence and are refused
once a newer segment has taken over, so a segment that outlived its lease cannot overwrite the
run. A segment's checkpoint writes never read this table: the segment that takes a lease puts a
small marker in the run's next checkpoint slot, which refuses the next write of the segment
that held it before, and an operator's pause (``app.pause.pause_run``, once the request stands
here) puts a pause marker there, which the running segment's next checkpoint write finds
(``adapters.dynamodb.checkpointer``, "Fenced writes"). Leases taken to write the record only
(an operator's, a re-park's) claim no slot, so the functions taking them need no grant on the
checkpoints table. Runs stored before this design may still have a ``fence`` item
(``sk = fence``): nothing reads it.

Timeline events are stored in pages: one item per append (per segment, usually), keyed by its
first event's ``seq`` and split only when it would pass :data:`EVENT_PAGE_BYTES`. A segment's
dozens of events cost one write and a few write units instead of one item (and one unit at
least) each. A replayed append (a retried segment) writes the same keys and replaces its pages;
where pages overlap, the later page's event with a ``seq`` wins. Items of the older layout (one
event per item, its JSON in ``body``) still read back.

A segment's last write stores its record and its events without a transaction (which bills its
writes twice; issue 33): the record's conditional ``UpdateItem`` appends an entry to the run
item's ``tail``. A save that ends the run carries its events in that entry (one request); any
other save writes its events first as overflow pages under a fresh tag, and its entry carries
the tag (``confirms``). An overflow page is shown only when a carried entry, or a page one was
written out to, confirms its tag: a save refused for a stale fence, or one whose process died
before its update, leaves pages nobody is shown (and under keys of their own, so they never
replace a page that stands). ``CARRY_BYTES`` (``_run_items``) bounds the tail, and
``CONFIRM_BYTES`` when the save only confirms: past it, its entries are written out as pages
(spilled; the confirming entries as one item with a string set) before the update that
replaces them. A timeline read is one consistent ``Query`` from the run item back through the
pages, so an overflow page written after the run item was read is not confirmed by what was
read. Run items stored before the tail existed have none, and their pages carry no tag: both
read as before.

Starts are deduplicated without a transaction (which bills its writes twice): a run whose id is
derived from its dedupe key (``dedupe_run_id``, every start the app makes) is deduplicated by
its own item's ``attribute_not_exists``, and stores no marker. Only a run with a dedupe key and
an id of its caller's choosing writes a dedupe marker, first, then its run (see
:meth:`RunsRepository.create_run`). The marker is keyed by a hash of the dedupe key (an S3
bucket + key can exceed what a key attribute should carry); the raw key is kept beside it for
people. Runs stored before this have a marker beside their derived id; either deduplicates them.
One key started both ways (under its derived id and under another) is not deduplicated across
the two: the app never does that.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from langorch.adapters.dynamodb._items import batch_get
from langorch.adapters.dynamodb._items import error_code as _code
from langorch.adapters.dynamodb._items import old_item as _old_item
from langorch.adapters.dynamodb._items import response as _response
from langorch.adapters.dynamodb._items import utc_iso as _utc_iso
from langorch.adapters.dynamodb._run_items import (
    APPEND_TAIL,
    CARRY_BYTES,
    CONFIRM_BYTES,
    DEDUPE_SK,
    EVENT_PAGE_BYTES,
    EVENT_PREFIX,
    FENCE_IS_CURRENT,
    GSI_STATUS,
    GSI_WORKFLOW,
    IN_EXECUTION,
    LEASE_IS_FREE,
    LEASE_IS_OURS,
    MAX_BODY_BYTES,
    NOT_ENDED,
    NOT_ENDED_OTHERWISE,
    PAUSE_STANDS,
    REPLACE_TAIL,
    RUN_EXISTS,
    RUN_IS_NEW,
    RUN_SK,
    STILL_ON_ATTEMPT,
    STILL_ON_FIRST_ATTEMPT,
    TAIL_BYTES,
    TAIL_HAS_ROOM,
    TAIL_UNCHANGED,
    carried_save,
    chunks,
    dedupe_pk,
    event_items,
    last_seq_of,
    lease_until,
    pause_of,
    record,
    refused_save,
    run_item,
    run_pk,
    save_refusal,
    spilled_pages,
    status_keys,
    table_definition,
    timeline_of,
    workflow_keys,
)
from langorch.domain.errors import (
    ConflictError,
    LeaseHeldError,
    NotFoundError,
    RecordTooLargeError,
    StorageError,
    UnreadableRecordError,
)
from langorch.domain.runs import (
    TERMINAL,
    ForkLink,
    PauseRequest,
    RunRecord,
    RunStatus,
    TimelineEvent,
    dedupe_run_id,
)

__all__ = ["EVENT_PAGE_BYTES", "MAX_BODY_BYTES", "RunsRepository"]

logger = logging.getLogger(__name__)

_BATCH_WRITE_MAX = 25
_TRANSACT_PAGES = 50
"""Pages per fenced append (a transaction): 50 full pages stay under its 4 MB."""
_MAX_LIST = 1000
_BATCH_GET_MAX = 100
_LEASE_ATTEMPTS = 4
_FENCES_KEPT = 256
"""How many runs' fences a repository remembers from its reads (to take their leases without
reading the fence first): a Lambda sandbox runs one segment at a time."""


_RECORD_SET = (
    "body = :body, #status = :status, updated_at = :updated_at, gsi2pk = :gsi2pk,"
    " execution_name = :execution_name"
)
"""The attributes a save writes (``#status`` is ``status``, a reserved word)."""

_ENDINGS: dict[str, Any] = {
    ":succeeded": {"S": RunStatus.succeeded.value},
    ":failed": {"S": RunStatus.failed.value},
    ":cancelled": {"S": RunStatus.cancelled.value},
}
"""The values :data:`NOT_ENDED_OTHERWISE` names."""


_SPILLS = 3
"""Tries at a save that finds the carried events full: spill them, then replace them."""


def _record_values(run: RunRecord) -> dict[str, Any]:
    """The values of :data:`_RECORD_SET` for ``run``."""
    item = run_item(run, fence=None)
    return {key: item[name] for key, name in _RECORD_NAMES}


_RECORD_NAMES = (
    (":body", "body"),
    (":status", "status"),
    (":updated_at", "updated_at"),
    (":gsi2pk", "gsi2pk"),
    (":execution_name", "execution_name"),
)


class RunsRepository:
    """Run records, leases and timelines in the runs table (layout in the module docstring).

    Args:
        client: a boto3 DynamoDB client (built by :func:`langorch.adapters.aws.make_client`).
        table_name: the runs table (``Settings.runs_table``).
    """

    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name
        # The fence of each run as this repository last read or wrote it: taking a lease sets
        # the next one on the run item, computed from this one (and the write refused, then
        # retried, when the run's fence has moved since).
        self._fences: OrderedDict[str, int] = OrderedDict()

    # ----------------------------------------------------------------------------------------
    # Table
    # ----------------------------------------------------------------------------------------

    def create_table(self, *, full_index_projection: bool = False) -> None:
        """Create the runs table and its two indexes (tests and the local stack; CDK in AWS).

        Does nothing if the table exists.

        Args:
            full_index_projection: indexes as a stack deployed before the lean ones has them
                (:func:`table_definition`).
        """
        try:
            definition = table_definition(full_index_projection=full_index_projection)
            self._client.create_table(TableName=self._table, **definition)
            self._client.get_waiter("table_exists").wait(TableName=self._table)
        except ClientError as exc:
            if _code(exc) == "ResourceInUseException":
                return
            raise self._storage_error("CreateTable", exc) from exc

    # ----------------------------------------------------------------------------------------
    # Records
    # ----------------------------------------------------------------------------------------

    def create_run(self, run: RunRecord) -> tuple[RunRecord, bool]:
        """Store a new run, once per dedupe key: no write is a transaction (issue 33).

        A run whose id is derived from its dedupe key (:func:`dedupe_run_id`, as every start in
        :mod:`langorch.app.runs` makes it) is one conditional ``PutItem``: the run item's own
        ``attribute_not_exists`` is the dedupe, since a duplicate carries the same id. A run
        with a dedupe key and an id of its caller's choosing writes the dedupe marker first
        (conditional), then the run: a duplicate finds the marker and the run it names; a crash
        between the two leaves a marker naming a run not yet stored, which the next start with
        that key stores (the marker's id, the retry's record) and reports as created, so
        exactly one start goes on to launch it.

        Args:
            run: the new run (``queued``).

        Returns:
            ``(run, True)`` when stored now; ``(existing run, False)`` for a duplicate.

        Raises:
            StorageError: DynamoDB failed, or the record is too large even with its outputs
                summarised.
        """
        key = run.dedupe_key
        if key is None or run.run_id == dedupe_run_id(key):
            return self._put_new_run(run)
        marker = {
            "pk": {"S": dedupe_pk(key)},
            "sk": {"S": DEDUPE_SK},
            "run_id": {"S": run.run_id},
            "dedupe_key": {"S": key},
            "created_at": {"S": _utc_iso(run.created_at)},
        }
        try:
            self._client.put_item(
                TableName=self._table,
                Item=marker,
                ConditionExpression=RUN_IS_NEW,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise self._storage_error("PutItem", exc) from exc
            first = (_old_item(exc) or {}).get("run_id", {}).get("S")
            if first is None:  # no item came back: read the marker
                first = self._marker_run_id(key)
            try:
                return self.get_run(first), False
            except NotFoundError:
                # The start that wrote the marker stopped before its run: finish it.
                return self._put_new_run(run.model_copy(update={"run_id": first}))
        return self._put_new_run(run)

    def _put_new_run(self, run: RunRecord) -> tuple[RunRecord, bool]:
        """The run item, only if no run has its id (else the stored run and ``False``)."""
        try:
            self._client.put_item(
                TableName=self._table,
                Item=run_item(run, fence=0),
                ConditionExpression=RUN_IS_NEW,
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return self.get_run(run.run_id), False
            raise self._storage_error("PutItem", exc) from exc
        return run, True

    def _marker_run_id(self, dedupe_key: str) -> str:
        """The run id a dedupe marker names (read consistently)."""
        try:
            response = self._client.get_item(
                TableName=self._table,
                Key={"pk": {"S": dedupe_pk(dedupe_key)}, "sk": {"S": DEDUPE_SK}},
                ConsistentRead=True,
            )
        except ClientError as exc:
            raise self._storage_error("GetItem", exc) from exc
        return str(response["Item"]["run_id"]["S"])

    def get_run(self, run_id: str) -> RunRecord:
        """The run, read consistently.

        Raises:
            NotFoundError: no run has this id.
            UnreadableRecordError: its stored record does not parse (the message names the run
                and the way out).
            StorageError: DynamoDB failed.
        """
        try:
            response = self._client.get_item(
                TableName=self._table,
                Key={"pk": {"S": run_pk(run_id)}, "sk": {"S": RUN_SK}},
                ConsistentRead=True,
            )
        except ClientError as exc:
            raise self._storage_error("GetItem", exc) from exc
        item = response.get("Item")
        if item is None:
            raise NotFoundError(f"run {run_id} does not exist (check the id with `runs list`)")
        self._saw_fence(run_id, item)
        return record(item)

    def list_runs(
        self,
        workflow_id: str | None = None,
        status: RunStatus | None = None,
        limit: int = 50,
        before: tuple[datetime, str] | None = None,
    ) -> list[RunRecord]:
        """Runs, newest first, optionally of one workflow and/or in one status.

        A record that does not parse is skipped with a warning naming the run (never its
        content): one bad record must not take every listing down.

        Args:
            workflow_id: only runs of this workflow.
            status: only runs in this status.
            limit: at most this many (1-1000).
            before: a page cursor, the last ``(created_at, run_id)`` of the previous page.

        Raises:
            ValueError: ``limit`` is out of range.
            StorageError: DynamoDB failed.
        """
        if not 1 <= limit <= _MAX_LIST:
            raise ValueError(f"limit must be between 1 and {_MAX_LIST}, not {limit}")
        # The indexes' sort key is `<created_at>#<run_id>`: a cursor is a key condition.
        below = None if before is None else f"{_utc_iso(before[0])}#{before[1]}"
        if workflow_id is not None:
            streams = [
                self._index_keys(GSI_WORKFLOW, key, limit, status=status, below=below)
                for key in workflow_keys(workflow_id)
            ]
        else:
            # No index holds every run: read each status's keys (every shard) and merge.
            statuses = [status] if status is not None else list(RunStatus)
            streams = [
                self._index_keys(GSI_STATUS, key, limit, below=below)
                for each in statuses
                for key in status_keys(each)
            ]
        newest_first = heapq.merge(*streams, reverse=True)
        return self._records_in_order((run_id for _, run_id in newest_first), limit, status)

    def save_run(
        self,
        run: RunRecord,
        *,
        fence: int | None = None,
        release: bool = False,
        events: Sequence[TimelineEvent] = (),
        in_execution: str | None = None,
    ) -> None:
        """Store the run's new status, outputs, pending interrupt and error.

        Lease bookkeeping and ``created_at`` are left as they are, unless ``release``. With
        ``events`` (a segment's last write), no transaction: the record's conditional
        ``UpdateItem`` appends an entry to what the run item carries (``CARRY_BYTES`` in
        ``_run_items``). A save that ends the run carries its events there (one request); any
        other writes them first as overflow pages under a fresh tag (``BatchWriteItem``) and
        its entry confirms the tag: pages are shown only once their save has landed, so a
        refused or interrupted save leaves pages nobody is shown. When the carried entries are
        full, they are written out as pages first (events already stored) and replaced.

        Args:
            run: the run as it is now.
            fence: the fence from :meth:`acquire_lease`; the write is refused when a newer
                segment has taken the lease since. ``None`` writes without a lease (an
                operator's cancel).
            release: with ``fence``, the same write gives the lease back (a segment's last
                write: one request instead of two).
            events: timeline events to add (or replace, by ``seq``) with the record: both are
                shown or neither.
            in_execution: write only while the stored run is in this execution (its
                ``execution_name`` attribute): an operator's cancel, which must not write back
                the execution it read once a hand-over named the next one.

        Raises:
            ValueError: the events' ``seq`` is not strictly increasing.
            NotFoundError: the run does not exist.
            LeaseHeldError: ``fence`` is stale: another segment owns the run now.
            ConflictError: the run already ended with a different status, or is no longer in
                ``in_execution``.
            StorageError: DynamoDB failed.
        """
        condition = f"{RUN_EXISTS} AND {NOT_ENDED_OTHERWISE}"
        values = dict(_ENDINGS)
        if fence is not None:
            condition = f"{condition} AND {FENCE_IS_CURRENT}"
            values[":fence"] = {"N": str(fence)}
        if in_execution is not None:
            condition = f"{condition} AND {IN_EXECUTION}"
            values[":execution"] = {"S": in_execution}
        remove = " REMOVE lease_owner, lease_expires_at" if release and fence is not None else ""
        if events:
            old = self._save_with_events(
                run, condition, values, remove, events, fence, in_execution
            )
        else:
            old = self._update_record(run, condition, values, remove=remove)
        if old is not None:
            raise refused_save(run, fence, old or None, in_execution)

    def reopen_run(self, run: RunRecord, *, expected_attempt: int) -> bool:
        """Store a run reopened by a redrive, only while the stored run is on
        ``expected_attempt`` (a conditional write on the ``attempt`` attribute): of two
        concurrent redrives of one run, exactly one write goes through.

        Returns:
            Whether this call reopened the run (``False``: another redrive did first).

        Raises:
            NotFoundError: the run does not exist.
            StorageError: DynamoDB failed.
        """
        values = {":attempt": {"N": str(run.attempt)}, ":expected": {"N": str(expected_attempt)}}
        on_attempt = STILL_ON_FIRST_ATTEMPT if expected_attempt == 0 else STILL_ON_ATTEMPT
        condition = f"{RUN_EXISTS} AND {on_attempt}"
        old = self._update_record(run, condition, values, also="attempt = :attempt")
        if old is None:
            return True
        if not old:
            raise NotFoundError(f"run {run.run_id} does not exist; nothing to reopen")
        return False

    def add_fork(self, run_id: str, link: ForkLink) -> None:
        """Note a run forked from ``run_id``: appended to the ``forks`` attribute beside the
        body, so it never races a segment's or a redrive's write of the record.

        Raises:
            NotFoundError: the run does not exist.
            StorageError: DynamoDB failed.
        """
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"pk": {"S": run_pk(run_id)}, "sk": {"S": RUN_SK}},
                UpdateExpression="SET forks = list_append(if_not_exists(forks, :none), :link)",
                ConditionExpression=RUN_EXISTS,
                ExpressionAttributeValues={
                    ":none": {"L": []},
                    ":link": {"L": [{"S": link.model_dump_json()}]},
                },
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                raise NotFoundError(f"run {run_id} does not exist; no fork to note") from exc
            raise self._storage_error("UpdateItem", exc) from exc

    def request_pause(self, run_id: str, pause: PauseRequest) -> tuple[RunRecord, bool]:
        """Ask the run to pause (the ``pause`` attribute); a request already standing is kept.

        Returns:
            The run, with the request that stands, and whether this call made it.

        Raises:
            NotFoundError: the run does not exist.
            ConflictError: the run has ended (its ending stands).
            StorageError: DynamoDB failed.
        """
        ours = pause.model_dump_json()
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key=self._key(run_id),
                UpdateExpression="SET pause = if_not_exists(pause, :pause)",
                ConditionExpression=NOT_ENDED,
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={":pause": {"S": ours}, **_ENDINGS},
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise self._storage_error("UpdateItem", exc) from exc
            old = _old_item(exc)
            if old is None:
                raise NotFoundError(f"run {run_id} does not exist; nothing to pause") from exc
            raise ConflictError(
                f"run {run_id} already ended as {old['status']['S']}; not paused"
            ) from exc
        item = response["Attributes"]
        return record(item), item["pause"]["S"] == ours

    def lift_pause(self, run_id: str) -> tuple[PauseRequest | None, str | None]:
        """Lift the standing request (``REMOVE pause``).

        Returns:
            The request lifted (``None``: none stood) and the task token of the execution
            parked on the pause (kept, so a second resume can wake it again).

        Raises:
            NotFoundError: the run does not exist.
            StorageError: DynamoDB failed.
        """
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key=self._key(run_id),
                UpdateExpression="REMOVE pause",
                ConditionExpression=RUN_EXISTS,
                ReturnValues="ALL_OLD",
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                raise NotFoundError(f"run {run_id} does not exist; nothing to resume") from exc
            raise self._storage_error("UpdateItem", exc) from exc
        old = response.get("Attributes", {})
        return pause_of(old), old.get("pause_token", {}).get("S")

    def park_paused(self, run_id: str, task_token: str) -> bool:
        """Keep the task token of the execution parked on the pause, while a request stands.

        Returns:
            Whether it was kept (``False``: the pause was lifted meanwhile; wake it at once).

        Raises:
            NotFoundError: the run does not exist.
            StorageError: DynamoDB failed.
        """
        try:
            self._client.update_item(
                TableName=self._table,
                Key=self._key(run_id),
                UpdateExpression="SET pause_token = :token",
                ConditionExpression=f"{RUN_EXISTS} AND {PAUSE_STANDS}",
                ExpressionAttributeValues={":token": {"S": task_token}},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise self._storage_error("UpdateItem", exc) from exc
            if _old_item(exc) is None:
                raise NotFoundError(f"run {run_id} does not exist; nothing to park") from exc
            return False
        return True

    def pause_of(self, run_id: str) -> PauseRequest | None:
        """The standing request: a consistent read of that one attribute.

        Raises:
            NotFoundError: the run does not exist.
            StorageError: DynamoDB failed.
        """
        try:
            response = self._client.get_item(
                TableName=self._table,
                Key=self._key(run_id),
                ProjectionExpression="pk, pause",
                ConsistentRead=True,
            )
        except ClientError as exc:
            raise self._storage_error("GetItem", exc) from exc
        item = response.get("Item")
        if item is None:
            raise NotFoundError(f"run {run_id} does not exist")
        return pause_of(item)

    @staticmethod
    def _key(run_id: str) -> dict[str, Any]:
        return {"pk": {"S": run_pk(run_id)}, "sk": {"S": RUN_SK}}

    def _save_with_events(
        self,
        run: RunRecord,
        condition: str,
        values: dict[str, Any],
        remove: str,
        events: Sequence[TimelineEvent],
        fence: int | None,
        in_execution: str | None,
    ) -> dict[str, Any] | None:
        """The record's update carrying the save's events (see :meth:`save_run`).

        Returns:
            ``None`` when written; when refused, the stored item (``{}``: there is none).
        """
        ending = run.status in TERMINAL
        room, bound = (CARRY_BYTES, CARRY_BYTES) if ending else (0, CONFIRM_BYTES)
        overflow, entry, size = carried_save(run.run_id, events, uuid.uuid4().hex, room=room)
        for chunk in chunks(overflow, _BATCH_WRITE_MAX):
            self._batch_put(chunk)
        carried = {":entry": {"L": [{"M": entry}]}, ":size": {"N": str(size)}}
        was: str | None = None  # the carried events' size once spilled: replace them
        old: dict[str, Any] | None = None
        for _ in range(_SPILLS):
            if was is None:
                left = {":room": {"N": str(bound - size)}, ":no_tail": {"L": []}}
                old = self._update_record(
                    run,
                    f"{condition} AND {TAIL_HAS_ROOM}",
                    {**values, **carried, **left, ":zero": {"N": "0"}},
                    also=APPEND_TAIL,
                    remove=remove,
                )
            else:
                old = self._update_record(
                    run,
                    f"{condition} AND {TAIL_UNCHANGED}",
                    {**values, **carried, ":was": {"N": was}},
                    also=REPLACE_TAIL,
                    remove=remove,
                )
            if old is None:
                return None
            if not old or save_refusal(run, fence, old, in_execution) is not None:
                return old
            # Only the carried events stood in the way: write them out as pages, then replace.
            was = old.get(TAIL_BYTES, {}).get("N")
            if was is not None:
                for chunk in chunks(spilled_pages(run.run_id, old), _BATCH_WRITE_MAX):
                    self._batch_put(chunk)
        return old

    def _update_record(
        self,
        run: RunRecord,
        condition: str,
        values: dict[str, Any],
        *,
        also: str = "",
        remove: str = "",
    ) -> dict[str, Any] | None:
        """Write the record's body and indexed attributes under ``condition``.

        Returns:
            ``None`` when written; when refused, the stored item (``{}``: there is none).
        """
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"pk": {"S": run_pk(run.run_id)}, "sk": {"S": RUN_SK}},
                UpdateExpression=f"SET {_RECORD_SET}" + (f", {also}" if also else "") + remove,
                ConditionExpression=condition,
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={**_record_values(run), **values},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise self._storage_error("UpdateItem", exc) from exc
            return _old_item(exc) or {}
        return None

    # ----------------------------------------------------------------------------------------
    # Leases
    # ----------------------------------------------------------------------------------------

    def acquire_lease(
        self,
        run_id: str,
        owner: str,
        *,
        now: float,
        ttl_seconds: float,
        saving: RunRecord | None = None,
    ) -> int:
        """Take the run's lease: the one writer for a segment.

        Succeeds when no lease is held, the held one has expired, or ``owner`` holds it (a
        retry of a segment whose attempt died holding it), and increments the fence so writes
        of the segment that held it before are refused from now on.

        Args:
            run_id: the run.
            owner: who takes it (one entry of the execution into RunSegment, else a fresh id),
                shown to whoever is refused.
            now: the clock, in epoch seconds.
            ttl_seconds: how long the lease lasts without renewal; longer than a segment can
                run (Lambda stops at 15 minutes).
            saving: the run as the segment starts it (``running``), stored by the same write
                as :meth:`save_run` would (one request instead of two).

        Returns:
            The new fence: pass it to :meth:`save_run`, :meth:`append_events`,
            :meth:`renew_lease` and :meth:`release_lease`.

        Raises:
            LeaseHeldError: another owner's lease is still valid.
            NotFoundError: the run does not exist.
            ConflictError: ``saving`` would change the ending of a run that already ended.
            StorageError: DynamoDB failed.
        """
        if ttl_seconds <= 0:
            raise ValueError(f"ttl_seconds must be positive, not {ttl_seconds}")
        for attempt in range(_LEASE_ATTEMPTS):
            seen = self._fences.get(run_id)
            if seen is None:
                seen = self.fence_of(run_id)
            old = self._take_lease(run_id, owner, now, ttl_seconds, saving, seen)
            if old is None:
                self._fences[run_id] = seen + 1
                return seen + 1
            if not old:
                raise NotFoundError(f"run {run_id} does not exist; no lease to take")
            self._saw_fence(run_id, old)
            held = (
                float(old.get("lease_expires_at", {}).get("N", "0")) > now
                and old.get("lease_owner", {}).get("S") != owner
            )
            if held:
                raise LeaseHeldError(
                    f"run {run_id} is being run by {old.get('lease_owner', {}).get('S', '?')} "
                    f"until {lease_until(old)}; this segment must not touch it "
                    "(retry after that time if the other segment has stopped)"
                )
            stored = old.get("status", {}).get("S")
            ended = stored is not None and RunStatus(stored) in TERMINAL
            if saving is not None and ended and RunStatus(stored) is not saving.status:
                raise refused_save(saving, None, old)
            if attempt:  # another segment is taking it this very moment: let it finish
                time.sleep(0.05 * 2**attempt)
        raise LeaseHeldError(
            f"run {run_id}: its lease changed hands {_LEASE_ATTEMPTS} times while this segment "
            "tried to take it; another segment is taking it (retry later)"
        )

    def _take_lease(
        self,
        run_id: str,
        owner: str,
        now: float,
        ttl_seconds: float,
        saving: RunRecord | None,
        seen: int,
    ) -> dict[str, Any] | None:
        """One try at the lease, from fence ``seen``: one conditional ``UpdateItem`` of the run
        item (lease, fence, and the record with ``saving``).

        Returns:
            ``None`` when taken; when refused, the run item as it was (``{}``: there is none).
        """
        update = "SET lease_owner = :owner, lease_expires_at = :until, fence = :fence"
        unchanged = "fence = :seen" if seen else "(attribute_not_exists(fence) OR fence = :seen)"
        condition = f"{LEASE_IS_FREE} AND {unchanged}"
        values: dict[str, Any] = {
            ":owner": {"S": owner},
            ":until": {"N": repr(now + ttl_seconds)},
            ":now": {"N": repr(now)},
            ":fence": {"N": str(seen + 1)},
            ":seen": {"N": str(seen)},
        }
        extra: dict[str, Any] = {}
        if saving is not None:
            update = f"{update}, {_RECORD_SET}"
            condition = f"{condition} AND {NOT_ENDED_OTHERWISE}"
            values |= {**_record_values(saving), **_ENDINGS}
            extra = {"ExpressionAttributeNames": {"#status": "status"}}
        try:
            self._client.update_item(
                TableName=self._table,
                Key=self._key(run_id),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeValues=values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **extra,
            )
        except ClientError as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise self._storage_error("UpdateItem", exc) from exc
            return dict(_old_item(exc) or {})
        return None

    def fence_of(self, run_id: str) -> int:
        """The run's fence, read consistently (``NotFoundError`` for an unknown run): a
        checkpoint saver asks when a segment finds no lease marker of its own fence."""
        try:
            response = self._client.get_item(
                TableName=self._table,
                Key=self._key(run_id),
                ProjectionExpression="fence",
                ConsistentRead=True,
            )
        except ClientError as exc:
            raise self._storage_error("GetItem", exc) from exc
        if "Item" not in response:
            raise NotFoundError(f"run {run_id} does not exist; no lease to take")
        return int(response["Item"].get("fence", {}).get("N", "0"))

    def _saw_fence(self, run_id: str, item: dict[str, Any]) -> None:
        """Remember the fence a read of the run item found (``-1`` or none: forget it)."""
        value = int(item.get("fence", {}).get("N", "-1"))
        self._fences.pop(run_id, None)
        if value >= 0:
            self._fences[run_id] = value
            while len(self._fences) > _FENCES_KEPT:
                self._fences.popitem(last=False)

    def renew_lease(self, run_id: str, fence: int, *, now: float, ttl_seconds: float) -> None:
        """Extend the lease held with ``fence`` to ``now + ttl_seconds``.

        Raises:
            LeaseHeldError: the lease was released or taken over (the fence is stale).
            StorageError: DynamoDB failed.
        """
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"pk": {"S": run_pk(run_id)}, "sk": {"S": RUN_SK}},
                UpdateExpression="SET lease_expires_at = :until",
                ConditionExpression=LEASE_IS_OURS,
                ExpressionAttributeValues={
                    ":until": {"N": repr(now + ttl_seconds)},
                    ":fence": {"N": str(fence)},
                },
            )
        except ClientError as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise self._storage_error("UpdateItem", exc) from exc
            raise LeaseHeldError(
                f"run {run_id}: the lease with fence {fence} is no longer held; "
                "another segment owns the run now"
            ) from exc

    def release_lease(self, run_id: str, fence: int) -> bool:
        """Give the lease back, only if ``fence`` still holds it.

        Returns:
            ``True`` if released; ``False`` if it had already been released or taken over
            (nothing is changed then).

        Raises:
            StorageError: DynamoDB failed.
        """
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"pk": {"S": run_pk(run_id)}, "sk": {"S": RUN_SK}},
                UpdateExpression="REMOVE lease_owner, lease_expires_at",
                ConditionExpression=LEASE_IS_OURS,
                ExpressionAttributeValues={":fence": {"N": str(fence)}},
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise self._storage_error("UpdateItem", exc) from exc
        return True

    # ----------------------------------------------------------------------------------------
    # Timeline
    # ----------------------------------------------------------------------------------------

    def append_events(
        self, run_id: str, events: Sequence[TimelineEvent], *, fence: int | None = None
    ) -> None:
        """Add events to the run's timeline.

        The events go into as few items as fit (pages, see the module docstring). Writing an
        event again with the same ``seq`` replaces it, so a retried segment that replays its
        events does not duplicate them.

        Args:
            run_id: the run.
            events: in strictly increasing ``seq`` order.
            fence: when given, the pages are written in a transaction that also checks the
                fence, so a stale segment cannot add to the timeline.

        Raises:
            ValueError: ``seq`` is not strictly increasing.
            LeaseHeldError: ``fence`` is stale.
            StorageError: DynamoDB failed.
        """
        self._put_pages(run_id, event_items(run_id, events), fence)

    def _put_pages(self, run_id: str, items: list[dict[str, Any]], fence: int | None) -> None:
        """Store timeline pages: batched, or with ``fence`` in transactions that check it."""
        if fence is None:
            for chunk in chunks(items, _BATCH_WRITE_MAX):
                self._batch_put(chunk)
            return
        for chunk in chunks(items, _TRANSACT_PAGES):
            check = {
                "ConditionCheck": {
                    "TableName": self._table,
                    "Key": {"pk": {"S": run_pk(run_id)}, "sk": {"S": RUN_SK}},
                    "ConditionExpression": FENCE_IS_CURRENT,
                    "ExpressionAttributeValues": {":fence": {"N": str(fence)}},
                }
            }
            puts = [{"Put": {"TableName": self._table, "Item": item}} for item in chunk]
            try:
                self._client.transact_write_items(TransactItems=[check, *puts])
            except ClientError as exc:
                reasons = _response(exc).get("CancellationReasons", [])
                if reasons and reasons[0].get("Code") == "ConditionalCheckFailed":
                    raise LeaseHeldError(
                        f"run {run_id}: fence {fence} is stale; another segment owns the run, "
                        "its timeline was not changed"
                    ) from exc
                raise self._storage_error("TransactWriteItems", exc) from exc

    def get_timeline(self, run_id: str) -> list[TimelineEvent]:
        """The run's timeline in ``seq`` order (empty for an unknown run): its pages and the
        events its run item carries, in one consistent ``Query``."""
        return timeline_of(self._timeline_items(run_id, page=None))

    def next_event_seq(self, run_id: str) -> int:
        """The ``seq`` for the run's next timeline event (1 for a run without events)."""
        read: list[dict[str, Any]] = []
        for item in self._timeline_items(run_id, page=3):
            read.append(item)
            if item["sk"]["S"].startswith(EVENT_PREFIX):
                break  # the last page, after the run item: nothing further holds a later seq
        return last_seq_of(read) + 1

    # ----------------------------------------------------------------------------------------
    # Reads and writes
    # ----------------------------------------------------------------------------------------

    def _index_keys(
        self,
        index: str,
        partition: str,
        limit: int,
        *,
        status: RunStatus | None = None,
        below: str | None = None,
    ) -> Iterator[tuple[str, str]]:
        """``(sort key, run id)`` of one index key's runs, newest first, read a page at a time
        as the merge asks for them."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": index,
            "KeyConditionExpression": "#pk = :pk" + (" AND #sk < :below" if below else ""),
            "ExpressionAttributeNames": {"#pk": f"{index}pk"},
            "ExpressionAttributeValues": {":pk": {"S": partition}},
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if below:
            request["ExpressionAttributeNames"]["#sk"] = f"{index}sk"
            request["ExpressionAttributeValues"][":below"] = {"S": below}
        if status is not None:
            # Limit counts items read before the filter: keep paging until enough match.
            request["FilterExpression"] = "#status = :status"
            request["ExpressionAttributeNames"]["#status"] = "status"
            request["ExpressionAttributeValues"][":status"] = {"S": status.value}
        for item in self._paginate("Query", request):
            yield item[f"{index}sk"]["S"], item["run_id"]["S"]

    def _records_in_order(
        self, run_ids: Iterator[str], limit: int, status: RunStatus | None
    ) -> list[RunRecord]:
        """The records of ``run_ids`` in their order, ``limit`` at most, read by key a batch at
        a time (the indexes hold no bodies); a record that does not parse, or that left
        ``status`` since the index saw it, is passed over for the next."""
        runs: list[RunRecord] = []
        while len(runs) < limit:
            wanted = list(itertools.islice(run_ids, min(limit - len(runs), _BATCH_GET_MAX)))
            if not wanted:
                break
            items = self._batch_get_runs(wanted)
            for run_id in wanted:
                item = items.get(run_id)
                if item is None:
                    continue  # deleted since the index listed it
                try:
                    run = record(item)
                except UnreadableRecordError as exc:
                    # One bad record must not take the listing down (issue 35): skip it, say so.
                    logger.warning("%s", exc, extra={"run_id": run_id})
                    continue
                if status is None or run.status is status:
                    runs.append(run)
        return runs

    def _batch_get_runs(self, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The run items of ``run_ids`` (up to 100), by run id; absent ones are left out."""
        keys = [{"pk": {"S": run_pk(run_id)}, "sk": {"S": RUN_SK}} for run_id in run_ids]
        items = batch_get(self._client.batch_get_item, self._table, keys, self._storage_error)
        return {item["run_id"]["S"]: item for item in items}

    def _timeline_items(self, run_id: str, *, page: int | None) -> Iterator[dict[str, Any]]:
        """The run item, then the timeline pages from the last (``ev#`` < ``fence`` < ``run``):
        read backwards, so the run item comes first, and a page written after it (a save's
        overflow, not yet confirmed by the carried events read) is not shown."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :pages AND :run",
            "ExpressionAttributeValues": {
                ":pk": {"S": run_pk(run_id)},
                ":pages": {"S": EVENT_PREFIX},
                ":run": {"S": RUN_SK},
            },
            "ScanIndexForward": False,
            "ConsistentRead": True,
        }
        if page is not None:
            request["Limit"] = page
        yield from self._paginate("Query", request)

    def _paginate(self, operation: str, request: dict[str, Any]) -> Iterator[dict[str, Any]]:
        while True:
            try:
                response = self._client.query(**request)
            except ClientError as exc:
                raise self._storage_error(operation, exc) from exc
            yield from response.get("Items", [])
            last = response.get("LastEvaluatedKey")
            if not last:
                return
            request = {**request, "ExclusiveStartKey": last}

    def _batch_put(self, items: Sequence[dict[str, Any]]) -> None:
        pending: list[dict[str, Any]] = [{"PutRequest": {"Item": item}} for item in items]
        for attempt in range(8):
            try:
                response = self._client.batch_write_item(RequestItems={self._table: pending})
            except ClientError as exc:
                raise self._storage_error("BatchWriteItem", exc) from exc
            pending = response.get("UnprocessedItems", {}).get(self._table, [])
            if not pending:
                return
            # Unprocessed items mean throttling: back off before writing the rest.
            time.sleep(min(0.05 * 2**attempt, 2.0))
        raise StorageError(
            f"BatchWriteItem on {self._table}: {len(pending)} timeline events stayed unprocessed "
            "after retries (throttled); retry the segment"
        )

    def _storage_error(self, operation: str, exc: ClientError) -> StorageError:
        message = _response(exc).get("Error", {}).get("Message", "")
        if _code(exc) == "ValidationException" and "size" in message.lower():
            # Not transient: retrying the same write fails the same way (a distinct name, so
            # the state machine's Retry on StorageError does not match it).
            return RecordTooLargeError(
                f"DynamoDB {operation} on {self._table} refused the item as too large: "
                f"{message}; the run's data is over its budget (see langorch.domain.limits)"
            )
        return StorageError(f"DynamoDB {operation} on {self._table} failed: {_code(exc)} {message}")
