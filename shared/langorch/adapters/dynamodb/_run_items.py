"""The runs table's items: keys, conditions, and the mapping to run records and timelines.

Private to :mod:`langorch.adapters.dynamodb.runs` (the layout is in its docstring); pure
functions of items, no requests.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
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

CARRY_BYTES = 6_000
"""What the run item carries beside the record, at most: the timeline entries of the saves
that landed since the last spill (``tail``; their size in ``tail_bytes``).

A save with events (a segment's last write) is one conditional ``UpdateItem`` of the record
that appends an entry to ``tail``: the condition that refuses a stale record refuses the entry,
with no transaction (which bills its writes twice). A save that ends the run carries its events
in the entry (up to this much: one request for the record and its timeline, and nothing writes
the run item after its end); any other save writes its events first as overflow pages under a
fresh tag, and its entry carries only that tag, confirming them (a save that is refused or
never lands leaves pages nobody is shown). Carried events are kept off saves a run goes on
after because an update bills the larger of the item before and after: the next segment's
lease would bill them again. Past this bound, the carried entries are written out as ordinary
pages first (spilled) and the tail starts again; it also leaves the room the emulator needs
(``domain.limits``)."""
CONFIRM_BYTES = 1_000
"""The bound on the tail for a save the run goes on after (its entry only confirms a tag): the
next lease bills whatever the run item carries, so it is spilled sooner (every ten segments or
so, its confirmations in one item)."""
TAIL = "tail"
TAIL_BYTES = "tail_bytes"
_ENTRY_OVERHEAD = 40
"""What a carried entry weighs besides its events and tag (names, numbers), for ``tail_bytes``."""
COMMIT = "commit"
"""On an overflow page: the save it belongs to (shown only once that save is confirmed)."""
CONFIRMS = "confirms"
"""On a carried entry (and the page it spills to): the save whose overflow pages stand."""

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
TAIL_HAS_ROOM = "(attribute_not_exists(tail_bytes) OR tail_bytes <= :room)"
"""The carried events leave room for a save's (``:room`` = :data:`CARRY_BYTES` less them)."""
TAIL_UNCHANGED = "tail_bytes = :was"
"""The carried events are still the ones just spilled (nothing was appended meanwhile)."""
APPEND_TAIL = (
    "tail = list_append(if_not_exists(tail, :no_tail), :entry),"
    " tail_bytes = if_not_exists(tail_bytes, :zero) + :size"
)
REPLACE_TAIL = "tail = :entry, tail_bytes = :size"
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


def _serialized(events: Sequence[TimelineEvent]) -> list[tuple[int, str]]:
    """``(seq, JSON)`` of each event.

    Raises:
        ValueError: ``seq`` is not strictly increasing.
    """
    seqs = [event.seq for event in events]
    if any(b <= a for a, b in itertools.pairwise(seqs)):
        raise ValueError(f"timeline events must be in increasing seq order, got {seqs}")
    return [(event.seq, event.model_dump_json(exclude_none=True)) for event in events]


def _page_items(
    run_id: str, events: Sequence[tuple[int, str]], commit: str | None = None
) -> list[dict[str, Any]]:
    """Serialized events as page items; with ``commit``, overflow pages of that save."""
    items = []
    for page in _pages(events):
        item: dict[str, Any] = {
            "pk": {"S": run_pk(run_id)},
            "sk": {"S": event_sk(page[0][0])},
            "seq": {"N": str(page[0][0])},
            "last_seq": {"N": str(page[-1][0])},
            "events": {"S": "[" + ",".join(body for _, body in page) + "]"},
        }
        if commit is not None:
            # Its own key: a save refused after this write must not replace a page that stands.
            item["sk"] = {"S": f"{event_sk(page[0][0])}#{commit}"}
            item[COMMIT] = {"S": commit}
        items.append(item)
    return items


def event_items(run_id: str, events: Sequence[TimelineEvent]) -> list[dict[str, Any]]:
    """Timeline events as page items (as few as fit, see :data:`EVENT_PAGE_BYTES`).

    Raises:
        ValueError: ``seq`` is not strictly increasing.
    """
    return _page_items(run_id, _serialized(events))


def page_events(item: Mapping[str, Any]) -> list[TimelineEvent]:
    """The events of a timeline item (a page, a carried entry, or one event in the older
    layout)."""
    if "events" in item:
        return _EVENT_PAGE.validate_json(item["events"]["S"])
    return [TimelineEvent.model_validate_json(item["body"]["S"])]


def carried_save(
    run_id: str, events: Sequence[TimelineEvent], commit: str, *, room: int
) -> tuple[list[dict[str, Any]], dict[str, Any], int]:
    """A save's events as the run item carries them (see :data:`CARRY_BYTES`).

    The trailing events that fit in ``room`` bytes make the tail entry the record's update
    appends; the leading rest become overflow pages tagged ``commit``, written before the
    update, which confirms them (the entry's ``confirms``).

    Args:
        run_id: the run.
        events: the save's events, in increasing ``seq`` order (at least one).
        commit: a tag no other save uses.
        room: how much of them the entry may carry (0: none; all go as overflow pages).

    Returns:
        The overflow pages, the tail entry (a map) and its size as :data:`TAIL_BYTES` counts.

    Raises:
        ValueError: ``seq`` is not strictly increasing, or there are no events.
    """
    serialized = _serialized(events)
    if not serialized:
        raise ValueError("a save carries at least one timeline event")
    start, size = len(serialized), 2
    while start > 0 and size + len(serialized[start - 1][1]) + 1 <= room:
        start -= 1
        size += len(serialized[start][1]) + 1
    carried = serialized[start:]
    entry: dict[str, Any] = {
        "seq": {"N": str(serialized[start if carried else 0][0])},
        "last_seq": {"N": str(serialized[-1][0])},
        "events": {"S": "[" + ",".join(body for _, body in carried) + "]"},
    }
    overflow = _page_items(run_id, serialized[:start], commit)
    if overflow:
        entry[CONFIRMS] = {"S": commit}
    return overflow, entry, _ENTRY_OVERHEAD + len(entry["events"]["S"]) + len(commit)


def _tail(item: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The entries a run item carries (none in items stored before the tail existed)."""
    return [entry["M"] for entry in item.get(TAIL, {}).get("L", [])]


def spilled_pages(run_id: str, item: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The entries a run item carries, as the page items they become when written out: one
    page per entry with events, and one item for all the entries that only confirm a tag (its
    ``confirms`` a string set, under a key of its own)."""
    pages: list[dict[str, Any]] = []
    tags: list[str] = []
    for entry in _tail(item):
        if entry["events"]["S"] == "[]":
            tags.append(entry[CONFIRMS]["S"])
            continue
        sk = event_sk(int(entry["seq"]["N"]))
        pages.append({"pk": {"S": run_pk(run_id)}, "sk": {"S": sk}, **entry})
    if tags:
        last = max(int(entry["last_seq"]["N"]) for entry in _tail(item))
        pages.append(
            {
                "pk": {"S": run_pk(run_id)},
                "sk": {"S": f"{event_sk(last)}#{tags[0]}#confirmed"},
                "seq": {"N": str(last)},
                "last_seq": {"N": str(last)},
                "events": {"S": "[]"},
                CONFIRMS: {"SS": tags},
            }
        )
    return pages


def _confirmed(entry: Mapping[str, Any]) -> list[str]:
    """The tags an entry or an untagged page confirms (a string, or a set once spilled)."""
    value = entry.get(CONFIRMS, {})
    return [value["S"]] if "S" in value else list(value.get("SS", []))


def timeline_of(items: Iterable[Mapping[str, Any]]) -> list[TimelineEvent]:
    """The timeline of a run's items (its run item and its pages, in any order).

    Shown: every page without a ``commit`` tag, the overflow pages of a save that landed (its
    tag confirmed by a carried entry or a spilled page), and the carried entries. Where events
    share a ``seq``, a later page (by key) replaces an earlier one and a carried entry, the
    newest save's, replaces a page.
    """
    pages: list[Mapping[str, Any]] = []
    tail: list[dict[str, Any]] = []
    for item in items:
        sk = item["sk"]["S"]
        if sk == RUN_SK:
            tail = _tail(item)
        elif sk.startswith(EVENT_PREFIX):
            pages.append(item)
    confirmed = {
        tag
        for entry in [*tail, *(page for page in pages if COMMIT not in page)]
        for tag in _confirmed(entry)
    }
    by_seq: dict[int, TimelineEvent] = {}
    for page in sorted(pages, key=lambda page: str(page["sk"]["S"])):
        if COMMIT not in page or page[COMMIT]["S"] in confirmed:
            by_seq.update((event.seq, event) for event in page_events(page))
    for entry in tail:
        by_seq.update((event.seq, event) for event in page_events(entry))
    return [by_seq[seq] for seq in sorted(by_seq)]


def last_seq_of(items: Iterable[Mapping[str, Any]]) -> int:
    """The highest ``seq`` a run's run item and pages hold (0: none)."""
    last = 0
    for item in items:
        sk = item["sk"]["S"]
        entries = _tail(item) if sk == RUN_SK else [item] if sk.startswith(EVENT_PREFIX) else []
        for entry in entries:
            last = max(last, int((entry.get("last_seq") or entry["seq"])["N"]))
    return last


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


def save_refusal(
    run: RunRecord,
    fence: int | None,
    old: Mapping[str, Any] | None,
    in_execution: str | None = None,
) -> Exception | None:
    """Why a save's conditions refuse it, from the item as it was (``None``: no run); ``None``
    when none of them does (a refusal then came from the carried events' room, or a race)."""
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
    return None


def refused_save(
    run: RunRecord,
    fence: int | None,
    old: Mapping[str, Any] | None,
    in_execution: str | None = None,
) -> Exception:
    """Why a conditional save was refused, from the item as it was (``None``: no run)."""
    return save_refusal(run, fence, old, in_execution) or ConflictError(
        f"run {run.run_id} changed meanwhile; read it again and retry"
    )
