"""The runs table's items: keys, conditions, and the mapping to run records and timelines.

Private to :mod:`langorch.adapters.dynamodb.runs` (the layout is in its docstring); pure
functions of items, no requests.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import TypeAdapter

from langorch.adapters.dynamodb._items import utc_iso as _utc_iso
from langorch.domain.errors import ConflictError, LeaseHeldError, NotFoundError
from langorch.domain.limits import MAX_RECORD_BODY_BYTES
from langorch.domain.runs import (
    MAX_LINEAGE,
    TERMINAL,
    ForkLink,
    PauseRequest,
    RunRecord,
    RunStatus,
    TimelineEvent,
    current_execution,
    fitted_record,
    unreadable_record,
)

_EVENT_PAGE = TypeAdapter(list[TimelineEvent])

RUN_SK = "run"
DEDUPE_SK = "dedupe"
EVENT_PREFIX = "ev#"
GSI_WORKFLOW = "gsi1"
GSI_STATUS = "gsi2"

INDEX_SHARDS = 8
"""Each index key is written as this many (``wf#<id>#<n>``, ``status#<status>#<n>``, ``n`` a
hash of the run id): every running run on one ``status#running`` key would hold all of them to
one partition's 1,000 write units a second (issue 33). Listings read every shard and merge."""
INDEX_ATTRIBUTES = ("run_id", "status")
"""What the indexes carry besides their keys (and the table's): a listing reads the records by
key, so a save of the body never writes an index, and a status filter still runs in the index."""


def index_shard(run_id: str) -> int:
    """Which of the :data:`INDEX_SHARDS` keys a run's index entries go to (stable per run)."""
    return int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:4], "big") % INDEX_SHARDS


def workflow_keys(workflow_id: str) -> list[str]:
    """Every ``gsi1pk`` the runs of a workflow can have: each shard's, and the unsharded key
    that runs stored before sharding still carry."""
    return [f"wf#{workflow_id}#{n}" for n in range(INDEX_SHARDS)] + [f"wf#{workflow_id}"]


def status_keys(status: RunStatus) -> list[str]:
    """Every ``gsi2pk`` of the runs in ``status`` (each shard's, and the unsharded key)."""
    return [f"status#{status.value}#{n}" for n in range(INDEX_SHARDS)] + [f"status#{status.value}"]


MAX_BODY_BYTES = MAX_RECORD_BODY_BYTES
"""The record's JSON stays under this (derived in :mod:`langorch.domain.limits`): an update
replacing it still fits an item, on DynamoDB and on the local stack's emulator."""
EVENT_PAGE_BYTES = 64_000
"""A timeline page holds events up to this much JSON (DynamoDB items stop at 400 KB; pages
this size keep a retried write cheap). An event longer than this gets a page of its own."""

# Conditions, named (habit 8).
RUN_IS_NEW = "attribute_not_exists(pk)"
RUN_EXISTS = "attribute_exists(pk)"
LEASE_IS_FREE = (
    "attribute_exists(pk) AND (attribute_not_exists(lease_owner) OR lease_expires_at <= :now"
    " OR lease_owner = :owner)"
)
"""Free, expired, or held by this same owner: a retry of the segment whose attempt died
holding it (an owner names one entry of one execution into RunSegment, and Step Functions
retries a task only after its attempt ended; the fence still rises, so a write of that attempt
would be refused)."""
FENCE_IS_CURRENT = "fence = :fence"
LEASE_IS_OURS = "attribute_exists(lease_owner) AND fence = :fence"
NOT_ENDED_OTHERWISE = "(NOT #status IN (:succeeded, :failed, :cancelled) OR #status = :status)"
"""A run that has ended keeps its ending: a late segment cannot revive a cancelled run, while
re-saving the same ending (a retried final write) is allowed."""
STILL_ON_ATTEMPT = "attempt = :expected"
"""A redrive reopens the run only from the attempt it read (one of two concurrent ones wins)."""
STILL_ON_FIRST_ATTEMPT = "(attribute_not_exists(attempt) OR attempt = :expected)"
"""Attempt 0: runs never redriven carry no ``attempt`` attribute."""
NOT_ENDED = "attribute_exists(pk) AND NOT #status IN (:succeeded, :failed, :cancelled)"
"""A pause is asked only of a run that has not ended."""
IN_EXECUTION = "(attribute_not_exists(execution_name) OR execution_name = :execution)"
"""A write for one execution of the run (an operator's cancel) lands only while the run is still
in it: a hand-over to the next execution, or a redrive, writes ``execution_name`` with the body.
An item written before the attribute existed has not moved since it was read."""
PAUSE_STANDS = "attribute_exists(pause)"
"""The execution parked on a pause is kept only while the pause stands."""


def run_pk(run_id: str) -> str:
    """The partition of a run's items."""
    return f"run#{run_id}"


def dedupe_pk(dedupe_key: str) -> str:
    """The partition of a dedupe marker (a hash: keys can be long)."""
    return "dedupe#" + hashlib.sha256(dedupe_key.encode("utf-8")).hexdigest()


def event_sk(seq: int) -> str:
    """The sort key of the timeline page starting at ``seq``."""
    return f"{EVENT_PREFIX}{seq:015d}"


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    """``items`` in consecutive slices of at most ``size``."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _pages(events: Sequence[tuple[int, str]]) -> Iterator[list[tuple[int, str]]]:
    """``(seq, JSON)`` events in consecutive pages of at most :data:`EVENT_PAGE_BYTES`."""
    page: list[tuple[int, str]] = []
    size = 0
    for seq, body in events:
        if page and size + len(body) > EVENT_PAGE_BYTES:
            yield page
            page, size = [], 0
        page.append((seq, body))
        size += len(body) + 1
    if page:
        yield page


def event_items(run_id: str, events: Sequence[TimelineEvent]) -> list[dict[str, Any]]:
    """Timeline events as page items (as few as fit, see :data:`EVENT_PAGE_BYTES`).

    Raises:
        ValueError: ``seq`` is not strictly increasing.
    """
    seqs = [event.seq for event in events]
    if any(b <= a for a, b in itertools.pairwise(seqs)):
        raise ValueError(f"timeline events must be in increasing seq order, got {seqs}")
    return [
        {
            "pk": {"S": run_pk(run_id)},
            "sk": {"S": event_sk(page[0][0])},
            "seq": {"N": str(page[0][0])},
            "last_seq": {"N": str(page[-1][0])},
            "events": {"S": "[" + ",".join(body for _, body in page) + "]"},
        }
        for page in _pages(
            [(event.seq, event.model_dump_json(exclude_none=True)) for event in events]
        )
    ]


def page_events(item: Mapping[str, Any]) -> list[TimelineEvent]:
    """The events of a timeline item (a page, or one event in the older layout)."""
    if "events" in item:
        return _EVENT_PAGE.validate_json(item["events"]["S"])
    return [TimelineEvent.model_validate_json(item["body"]["S"])]


def run_item(run: RunRecord, *, fence: int | None) -> dict[str, Any]:
    """The run's item: the record as JSON, with the attributes conditions and indexes read.

    ``fence`` is set only when given (a new run starts at 0; a save leaves it alone).
    """
    created = _utc_iso(run.created_at)
    item: dict[str, Any] = {
        "pk": {"S": run_pk(run.run_id)},
        "sk": {"S": RUN_SK},
        "run_id": {"S": run.run_id},
        "workflow_id": {"S": run.workflow_id},
        "workflow_version": {"N": str(run.workflow_version)},
        "status": {"S": run.status.value},
        "created_at": {"S": created},
        "updated_at": {"S": _utc_iso(run.updated_at)},
        "body": {"S": bounded_body(run)},
        "execution_name": {"S": current_execution(run)},
        "gsi1pk": {"S": f"wf#{run.workflow_id}#{index_shard(run.run_id)}"},
        "gsi1sk": {"S": f"{created}#{run.run_id}"},
        "gsi2pk": {"S": f"status#{run.status.value}#{index_shard(run.run_id)}"},
        "gsi2sk": {"S": f"{created}#{run.run_id}"},
    }
    if fence is not None:
        item["fence"] = {"N": str(fence)}
    return item


def bounded_body(run: RunRecord) -> str:
    """The record's JSON, bounded to :data:`MAX_BODY_BYTES` (see ``domain.runs.fitted_record``).

    Raises:
        RecordTooLargeError: even bounded, the record does not fit (its input is over the
            budget: a door let it in).
    """
    return fitted_record(run, MAX_BODY_BYTES).model_dump_json()


def record(item: Mapping[str, Any]) -> RunRecord:
    """The record a run item holds (with the forks and the pause kept beside its body).

    Raises:
        UnreadableRecordError: the body, a fork or the pause does not parse.
    """
    try:
        run = RunRecord.model_validate_json(item["body"]["S"])
        forks = item.get("forks", {}).get("L")
        links = [ForkLink.model_validate_json(f["S"]) for f in forks or ()]
        update: dict[str, Any] = {"pause": pause_of(item)}
    except ValueError as exc:
        # Not chained: pydantic's message quotes the stored input, which must not reach a log.
        raise unreadable_record(item["run_id"]["S"], exc) from None
    if links:
        update["forks"] = links[-MAX_LINEAGE:]
    return run.model_copy(update=update)


def pause_of(item: Mapping[str, Any]) -> PauseRequest | None:
    """The pause request a run item keeps beside its body (``None``: none stands)."""
    stored = item.get("pause", {}).get("S")
    return None if stored is None else PauseRequest.model_validate_json(stored)


def table_definition(*, full_index_projection: bool = False) -> dict[str, Any]:
    """The runs table's keys and its two sparse indexes (``CreateTable`` without the name).

    Args:
        full_index_projection: the indexes project the whole record, as a stack deployed
            before the lean indexes has them (its ``runs_indexes: full``). Listings read the
            records by key either way; only the index writes are larger.
    """
    projection: dict[str, Any] = (
        {"ProjectionType": "ALL"}
        if full_index_projection
        else {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(INDEX_ATTRIBUTES)}
    )
    return {
        "BillingMode": "PAY_PER_REQUEST",
        "KeySchema": [
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        "AttributeDefinitions": [
            {"AttributeName": name, "AttributeType": "S"}
            for name in ("pk", "sk", "gsi1pk", "gsi1sk", "gsi2pk", "gsi2sk")
        ],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": index,
                "KeySchema": [
                    {"AttributeName": f"{index}pk", "KeyType": "HASH"},
                    {"AttributeName": f"{index}sk", "KeyType": "RANGE"},
                ],
                "Projection": projection,
            }
            for index in (GSI_WORKFLOW, GSI_STATUS)
        ],
    }


def lease_until(item: Mapping[str, Any]) -> str:
    """When an item's lease expires, as stored times read (``?`` when it has none)."""
    raw = item.get("lease_expires_at", {}).get("N")
    if raw is None:
        return "?"
    return _utc_iso(datetime.fromtimestamp(float(raw), tz=UTC))


def refused_save(
    run: RunRecord,
    fence: int | None,
    old: Mapping[str, Any] | None,
    in_execution: str | None = None,
) -> Exception:
    """Why a conditional save was refused, from the item as it was (``None``: no run)."""
    if old is None:
        return NotFoundError(f"run {run.run_id} does not exist; create it before saving")
    current_fence = old.get("fence", {}).get("N")
    if fence is not None and current_fence != str(fence):
        owner = old.get("lease_owner", {}).get("S", "nobody")
        return LeaseHeldError(
            f"run {run.run_id}: this segment's fence {fence} is stale (now {current_fence}, "
            f"held by {owner}); its write was refused"
        )
    stored = RunStatus(old["status"]["S"])
    if stored in TERMINAL and stored is not run.status:
        return ConflictError(
            f"run {run.run_id} already ended as {stored}; the write of status {run.status} "
            "was refused"
        )
    moved_to = old.get("execution_name", {}).get("S")
    if in_execution is not None and moved_to not in (None, in_execution):
        return ConflictError(
            f"run {run.run_id} moved to execution {moved_to} since it was read in "
            f"{in_execution}; the write was refused (read the run again and retry)"
        )
    return ConflictError(f"run {run.run_id} changed meanwhile; read it again and retry")
