"""Run records, dedupe markers, segment leases and timelines in the local store.

:class:`SqliteRuns` satisfies ``RunsStore`` as :class:`langorch.adapters.dynamodb.runs.
RunsRepository` does, refusal for refusal (``tests/contracts/test_runs_store.py`` runs both).

Layout::

    runs        run_id (key), workflow_id, workflow_version, status, created_at, updated_at,
                fence, lease_owner, lease_expires_at, attempt, forks (JSON list of ForkLink),
                body (RunRecord JSON)
    run_dedupe  dedupe_key (key), run_id, created_at
    run_events  (run_id, seq) (key), body (TimelineEvent JSON)
    run_pauses  run_id (key), pause (PauseRequest JSON, NULL once lifted), token (the task
                token of the execution parked on the pause)

The pause lives in a table of its own, beside the record: a segment's write of ``body`` never
drops a request made meanwhile (and a home from before pauses needs no migration).

The record is JSON in ``body``; what conditions and listings read is copied out beside it into
real columns, indexed for the listings (by time, by workflow, by status). Times are stored as
DynamoDB's index keys hold them (fixed-width UTC ISO-8601), so both order runs alike.

Every condition the DynamoDB adapter puts in a ``ConditionExpression`` is checked here by a read
in the same ``BEGIN IMMEDIATE`` transaction as the write (:meth:`Database.write`): nobody writes
between the check and the write, in this process or another, so of two segments racing for a
lease exactly one wins. ``fence`` is the lease's fencing counter; the local checkpointer checks
it (``SELECT fence FROM runs WHERE run_id = ?``) inside its own write transaction.

The record keeps the cloud's size budget (:func:`langorch.domain.runs.fitted_record`) although
SQLite has no item limit: a record the local stack stores, DynamoDB stores too.
"""

from __future__ import annotations

import itertools
import logging
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from pydantic import TypeAdapter

from langorch.adapters.sqlite._db import Database
from langorch.domain.errors import (
    ConflictError,
    LeaseHeldError,
    NotFoundError,
    UnreadableRecordError,
)
from langorch.domain.limits import MAX_RECORD_BODY_BYTES
from langorch.domain.runs import (
    MAX_LINEAGE,
    TERMINAL,
    ForkLink,
    PauseRequest,
    RunRecord,
    RunStatus,
    TimelineEvent,
    execution_name,
    fitted_record,
    unreadable_record,
)

__all__ = ["MAX_BODY_BYTES", "SCHEMA", "SqliteRuns"]

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = MAX_RECORD_BODY_BYTES
"""As :data:`langorch.adapters.dynamodb.runs.MAX_BODY_BYTES`: the record is bounded to this."""
_MAX_LIST = 1000

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS runs ("
    " run_id TEXT PRIMARY KEY, workflow_id TEXT NOT NULL, workflow_version INTEGER NOT NULL,"
    " status TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,"
    " fence INTEGER NOT NULL DEFAULT 0, lease_owner TEXT, lease_expires_at REAL,"
    " attempt INTEGER NOT NULL DEFAULT 0, forks TEXT NOT NULL DEFAULT '[]', body TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS runs_by_time ON runs (created_at, run_id)",
    "CREATE INDEX IF NOT EXISTS runs_by_workflow ON runs (workflow_id, created_at, run_id)",
    "CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status, created_at, run_id)",
    "CREATE TABLE IF NOT EXISTS run_dedupe ("
    " dedupe_key TEXT PRIMARY KEY, run_id TEXT NOT NULL, created_at TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS run_events ("
    " run_id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL,"
    " PRIMARY KEY (run_id, seq))",
    "CREATE TABLE IF NOT EXISTS run_pauses ( run_id TEXT PRIMARY KEY, pause TEXT, token TEXT)",
)
"""The runs store's tables (``Database.ensure_schema("runs", SCHEMA)``)."""

_FORKS = TypeAdapter(list[ForkLink])


class _Lease(NamedTuple):
    """What a run's conditions read: its status and its lease."""

    status: RunStatus
    fence: int
    owner: str | None
    expires_at: float | None


class SqliteRuns:
    """Run records, leases and timelines in the local store (layout in the module docstring).

    Args:
        db: the home's database.
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        db.ensure_schema("runs", SCHEMA)

    def create_table(self) -> None:
        """Create the tables when missing (construction already did, once per process)."""
        self._db.ensure_schema("runs", SCHEMA)

    # ----------------------------------------------------------------------------------------
    # Records
    # ----------------------------------------------------------------------------------------

    def create_run(self, run: RunRecord) -> tuple[RunRecord, bool]:
        """Store a new run, once per dedupe key and once per run id.

        Args:
            run: the new run (``queued``).

        Returns:
            ``(run, True)`` when stored now; ``(existing run, False)`` for a duplicate (the run
            the dedupe key started, else the run with this id).

        Raises:
            RecordTooLargeError: the record is too large even with its outputs summarised.
        """
        body = _bounded_body(run)
        created = _utc_iso(run.created_at)
        with self._db.write() as connection:
            existing = _existing_run_id(connection, run)
            if existing is not None:
                return _get(connection, existing), False
            if run.dedupe_key is not None:
                connection.execute(
                    "INSERT INTO run_dedupe (dedupe_key, run_id, created_at) VALUES (?, ?, ?)",
                    (run.dedupe_key, run.run_id, created),
                )
            connection.execute(
                "INSERT INTO runs (run_id, workflow_id, workflow_version, status, created_at,"
                " updated_at, body) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    run.run_id,
                    run.workflow_id,
                    run.workflow_version,
                    run.status.value,
                    created,
                    _utc_iso(run.updated_at),
                    body,
                ),
            )
        return run, True

    def get_run(self, run_id: str) -> RunRecord:
        """The run.

        Raises:
            NotFoundError: no run has this id.
            UnreadableRecordError: its stored record does not parse (the message names the run
                and the way out).
        """
        with self._db.read() as connection:
            return _get(connection, run_id)

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
        """
        if not 1 <= limit <= _MAX_LIST:
            raise ValueError(f"limit must be between 1 and {_MAX_LIST}, not {limit}")
        clauses: list[str] = []
        values: list[Any] = []
        if workflow_id is not None:
            clauses.append("workflow_id = ?")
            values.append(workflow_id)
        if status is not None:
            clauses.append("status = ?")
            values.append(status.value)
        if before is not None:
            clauses.append("(created_at, r.run_id) < (?, ?)")
            values += [_utc_iso(before[0]), before[1]]
        # Constant fragments only; every value is bound.
        query = (
            "SELECT r.run_id, r.body, r.forks, p.pause FROM runs r"  # noqa: S608
            " LEFT JOIN run_pauses p ON p.run_id = r.run_id WHERE "
            + (" AND ".join(clauses) or "1")
            + " ORDER BY created_at DESC, r.run_id DESC"
        )
        runs: list[RunRecord] = []
        with self._db.read() as connection:
            # Rows are read as the loop asks for them: it stops at `limit` readable ones.
            rows = connection.execute(query, values)
            for run_id, body, forks, pause in rows:
                try:
                    runs.append(_record(run_id, body, forks, pause))
                except UnreadableRecordError as exc:
                    logger.warning("%s", exc, extra={"run_id": run_id})
                    continue
                if len(runs) >= limit:
                    break
            rows.close()
        return runs

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

        Lease bookkeeping and ``created_at`` are left as they are, unless ``release``.

        Args:
            run: the run as it is now.
            fence: the fence from :meth:`acquire_lease`; the write is refused when a newer
                segment has taken the lease since. ``None`` writes without a lease (an
                operator's cancel).
            release: with ``fence``, the same write gives the lease back.
            events: timeline events to add (or replace, by ``seq``) in the same transaction:
                both land or neither.
            in_execution: write only while the stored run is in this execution (an
                operator's cancel, which must not write back the execution it read once a
                hand-over named the next one).

        Raises:
            ValueError: the events' ``seq`` is not strictly increasing.
            NotFoundError: the run does not exist.
            LeaseHeldError: ``fence`` is stale: another segment owns the run now.
            ConflictError: the run already ended with a different status, or is no longer in
                ``in_execution``.
            RecordTooLargeError: the record is too large even with its outputs summarised.
        """
        body = _bounded_body(run)
        rows = _event_rows(run.run_id, events)
        with self._db.write() as connection:
            refusal = _refused_save(run, fence, _lease(connection, run.run_id))
            if refusal is None and in_execution is not None:
                refusal = _refused_execution(connection, run, in_execution)
            if refusal is not None:
                raise refusal
            _write_record(connection, run.run_id, run, body)
            if release and fence is not None:
                _drop_lease(connection, run.run_id)
            _write_events(connection, rows)

    def reopen_run(self, run: RunRecord, *, expected_attempt: int) -> bool:
        """Store a run reopened by a redrive, only while the stored run is on
        ``expected_attempt``: of two concurrent redrives of one run, exactly one write goes
        through.

        Returns:
            Whether this call reopened the run (``False``: another redrive did first).

        Raises:
            NotFoundError: the run does not exist.
            RecordTooLargeError: the record is too large even with its outputs summarised.
        """
        body = _bounded_body(run)
        with self._db.write() as connection:
            row = connection.execute(
                "SELECT attempt FROM runs WHERE run_id = ?", (run.run_id,)
            ).fetchone()
            if row is None:
                raise NotFoundError(f"run {run.run_id} does not exist; nothing to reopen")
            if row[0] != expected_attempt:
                return False
            _write_record(connection, run.run_id, run, body)
            connection.execute(
                "UPDATE runs SET attempt = ? WHERE run_id = ?", (run.attempt, run.run_id)
            )
        return True

    def add_fork(self, run_id: str, link: ForkLink) -> None:
        """Note a run forked from ``run_id``: appended to ``forks`` beside the body, so it never
        races a segment's or a redrive's write of the record.

        Raises:
            NotFoundError: the run does not exist.
        """
        with self._db.write() as connection:
            appended = connection.execute(
                "UPDATE runs SET forks = json_insert(forks, '$[#]', json(?)) WHERE run_id = ?",
                (link.model_dump_json(), run_id),
            )
        if appended.rowcount == 0:
            raise NotFoundError(f"run {run_id} does not exist; no fork to note")

    # ----------------------------------------------------------------------------------------
    # Pauses (beside the record)
    # ----------------------------------------------------------------------------------------

    def request_pause(self, run_id: str, pause: PauseRequest) -> tuple[RunRecord, bool]:
        """Ask the run to pause; a request already standing is kept (the first asker's).

        Returns:
            The run, with the request that stands, and whether this call made it.

        Raises:
            NotFoundError: the run does not exist.
            ConflictError: the run has ended (its ending stands).
        """
        with self._db.write() as connection:
            lease = _lease(connection, run_id)
            if lease is None:
                raise NotFoundError(f"run {run_id} does not exist; nothing to pause")
            if lease.status in TERMINAL:
                raise ConflictError(f"run {run_id} already ended as {lease.status}; not paused")
            asked = connection.execute(
                "INSERT INTO run_pauses (run_id, pause) VALUES (?, ?) ON CONFLICT (run_id)"
                " DO UPDATE SET pause = excluded.pause WHERE run_pauses.pause IS NULL",
                (run_id, pause.model_dump_json()),
            )
            return _get(connection, run_id), asked.rowcount > 0

    def lift_pause(self, run_id: str) -> tuple[PauseRequest | None, str | None]:
        """Lift the standing request.

        Returns:
            The request lifted (``None``: none stood) and the task token of the execution
            parked on the pause (kept, so a second resume can wake it again).

        Raises:
            NotFoundError: the run does not exist.
        """
        with self._db.write() as connection:
            if _lease(connection, run_id) is None:
                raise NotFoundError(f"run {run_id} does not exist; nothing to resume")
            row = connection.execute(
                "SELECT pause, token FROM run_pauses WHERE run_id = ?", (run_id,)
            ).fetchone()
            if row is None:
                return None, None
            connection.execute("UPDATE run_pauses SET pause = NULL WHERE run_id = ?", (run_id,))
        return _pause(row[0]), row[1]

    def park_paused(self, run_id: str, task_token: str) -> bool:
        """Keep the task token of the execution parked on the pause, while a request stands.

        Returns:
            Whether it was kept (``False``: the pause was lifted meanwhile; wake it at once).

        Raises:
            NotFoundError: the run does not exist.
        """
        with self._db.write() as connection:
            if _lease(connection, run_id) is None:
                raise NotFoundError(f"run {run_id} does not exist; nothing to park")
            kept = connection.execute(
                "UPDATE run_pauses SET token = ? WHERE run_id = ? AND pause IS NOT NULL",
                (task_token, run_id),
            )
        return kept.rowcount > 0

    def pause_of(self, run_id: str) -> PauseRequest | None:
        """The standing request (``NotFoundError`` for an unknown run)."""
        with self._db.read() as connection:
            row = connection.execute(
                "SELECT p.pause FROM runs r LEFT JOIN run_pauses p ON p.run_id = r.run_id"
                " WHERE r.run_id = ?",
                (run_id,),
            ).fetchone()
        if row is None:
            raise NotFoundError(f"run {run_id} does not exist")
        return _pause(row[0])

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
            owner: who takes it (e.g. the sandbox's request id), shown to whoever is refused.
            now: the clock, in epoch seconds.
            ttl_seconds: how long the lease lasts without renewal.
            saving: the run as the segment starts it (``running``), stored by the same
                transaction as :meth:`save_run` would.

        Returns:
            The new fence: pass it to :meth:`save_run`, :meth:`append_events`,
            :meth:`renew_lease` and :meth:`release_lease`.

        Raises:
            ValueError: ``ttl_seconds`` is not positive.
            LeaseHeldError: another owner's lease is still valid.
            NotFoundError: the run does not exist.
            ConflictError: ``saving`` would change the ending of a run that already ended.
            RecordTooLargeError: ``saving`` is too large even with its outputs summarised.
        """
        if ttl_seconds <= 0:
            raise ValueError(f"ttl_seconds must be positive, not {ttl_seconds}")
        body = None if saving is None else _bounded_body(saving)
        with self._db.write() as connection:
            lease = _lease(connection, run_id)
            if lease is None:
                raise NotFoundError(f"run {run_id} does not exist; no lease to take")
            # Held by this same owner: a retry of the segment whose attempt died holding it.
            held = lease.owner not in (None, owner) and (lease.expires_at or 0.0) > now
            if held:
                raise LeaseHeldError(
                    f"run {run_id} is being run by {lease.owner} until "
                    f"{_utc_iso(datetime.fromtimestamp(lease.expires_at or 0.0, tz=UTC))}; "
                    "this segment must not touch it (retry after that time if the other "
                    "segment has stopped)"
                )
            if saving is not None and body is not None:
                refusal = _refused_save(saving, None, lease)
                if refusal is not None:
                    raise refusal
                _write_record(connection, run_id, saving, body)
            connection.execute(
                "UPDATE runs SET lease_owner = ?, lease_expires_at = ?, fence = fence + 1"
                " WHERE run_id = ?",
                (owner, now + ttl_seconds, run_id),
            )
        return lease.fence + 1

    def renew_lease(self, run_id: str, fence: int, *, now: float, ttl_seconds: float) -> None:
        """Extend the lease held with ``fence`` to ``now + ttl_seconds``.

        Raises:
            LeaseHeldError: the lease was released or taken over (the fence is stale).
        """
        with self._db.write() as connection:
            renewed = connection.execute(
                "UPDATE runs SET lease_expires_at = ?"
                " WHERE run_id = ? AND lease_owner IS NOT NULL AND fence = ?",
                (now + ttl_seconds, run_id, fence),
            )
        if renewed.rowcount == 0:
            raise LeaseHeldError(
                f"run {run_id}: the lease with fence {fence} is no longer held; "
                "another segment owns the run now"
            )

    def release_lease(self, run_id: str, fence: int) -> bool:
        """Give the lease back, only if ``fence`` still holds it.

        Returns:
            ``True`` if released; ``False`` if it had already been released or taken over
            (nothing is changed then).
        """
        with self._db.write() as connection:
            released = connection.execute(
                "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL"
                " WHERE run_id = ? AND lease_owner IS NOT NULL AND fence = ?",
                (run_id, fence),
            )
        return released.rowcount > 0

    # ----------------------------------------------------------------------------------------
    # Timeline
    # ----------------------------------------------------------------------------------------

    def append_events(
        self, run_id: str, events: Sequence[TimelineEvent], *, fence: int | None = None
    ) -> None:
        """Add events to the run's timeline, one row each. Writing an event again with the same
        ``seq`` replaces it, so a retried segment that replays its events does not duplicate
        them. As in DynamoDB, events of a run that does not exist (yet) are stored unfenced.

        Args:
            run_id: the run.
            events: in strictly increasing ``seq`` order.
            fence: when given, the events are written only while it is the run's fence (in the
                same transaction), so a stale segment cannot add to the timeline.

        Raises:
            ValueError: ``seq`` is not strictly increasing.
            LeaseHeldError: ``fence`` is stale.
        """
        rows = _event_rows(run_id, events)
        if not rows:
            return  # nothing to write, nothing to check (as DynamoDB: no request at all)
        with self._db.write() as connection:
            if fence is not None:
                current = connection.execute(
                    "SELECT fence FROM runs WHERE run_id = ?", (run_id,)
                ).fetchone()
                if current is None or current[0] != fence:
                    raise LeaseHeldError(
                        f"run {run_id}: fence {fence} is stale; another segment owns the run, "
                        "its timeline was not changed"
                    )
            _write_events(connection, rows)

    def get_timeline(self, run_id: str) -> list[TimelineEvent]:
        """The run's timeline in ``seq`` order (empty for an unknown run)."""
        with self._db.read() as connection:
            rows = connection.execute(
                "SELECT body FROM run_events WHERE run_id = ? ORDER BY seq", (run_id,)
            ).fetchall()
        return [TimelineEvent.model_validate_json(body) for (body,) in rows]

    def events_after(
        self, position: int, *, limit: int = 500
    ) -> tuple[list[tuple[str, str, TimelineEvent]], int]:
        """Every run's timeline events stored after ``position``, in the order they were
        stored: what a follower of the whole stack reads (``langorch dev``'s terminal).

        Args:
            position: where the previous call left off (0: from the start; see
                :meth:`events_end`).
            limit: at most this many events.

        Returns:
            ``(run id, workflow id, event)`` for each, and the position to ask from next.
        """
        with self._db.read() as connection:
            rows = connection.execute(
                "SELECT e.rowid, e.run_id, r.workflow_id, e.body FROM run_events e"
                " JOIN runs r ON r.run_id = e.run_id WHERE e.rowid > ? ORDER BY e.rowid LIMIT ?",
                (position, limit),
            ).fetchall()
        found = [
            (run_id, workflow_id, TimelineEvent.model_validate_json(body))
            for _, run_id, workflow_id, body in rows
        ]
        return found, (rows[-1][0] if rows else position)

    def events_end(self) -> int:
        """The position after the last event stored so far (follow from now on)."""
        with self._db.read() as connection:
            (last,) = connection.execute("SELECT MAX(rowid) FROM run_events").fetchone()
        return int(last or 0)

    def next_event_seq(self, run_id: str) -> int:
        """The ``seq`` for the run's next timeline event (1 for a run without events)."""
        with self._db.read() as connection:
            (last,) = connection.execute(
                "SELECT MAX(seq) FROM run_events WHERE run_id = ?", (run_id,)
            ).fetchone()
        return 1 if last is None else int(last) + 1


# --------------------------------------------------------------------------------------------
# Rows
# --------------------------------------------------------------------------------------------


def _utc_iso(moment: datetime) -> str:
    """A time as stored: UTC, fixed width, so it sorts as text (as the DynamoDB index keys)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _bounded_body(run: RunRecord) -> str:
    """The record's JSON, bounded to :data:`MAX_BODY_BYTES` (``RecordTooLargeError`` past it),
    as the DynamoDB adapter bounds it."""
    return fitted_record(run, MAX_BODY_BYTES).model_dump_json()


def _record(run_id: str, body: str, forks: str, pause: str | None) -> RunRecord:
    """The record a row holds, with the forks and the pause kept beside its body.

    Raises:
        UnreadableRecordError: the body, the forks or the pause do not parse.
    """
    try:
        run = RunRecord.model_validate_json(body)
        links = _FORKS.validate_json(forks)
        update: dict[str, Any] = {"pause": _pause(pause)}
    except ValueError as exc:
        # Not chained: pydantic's message quotes the stored input, which must not reach a log.
        raise unreadable_record(run_id, exc) from None
    if links:
        update["forks"] = links[-MAX_LINEAGE:]
    return run.model_copy(update=update)


def _pause(stored: str | None) -> PauseRequest | None:
    return None if stored is None else PauseRequest.model_validate_json(stored)


def _get(connection: sqlite3.Connection, run_id: str) -> RunRecord:
    row = connection.execute(
        "SELECT r.body, r.forks, p.pause FROM runs r"
        " LEFT JOIN run_pauses p ON p.run_id = r.run_id WHERE r.run_id = ?",
        (run_id,),
    ).fetchone()
    if row is None:
        raise NotFoundError(f"run {run_id} does not exist (check the id with `runs list`)")
    return _record(run_id, row[0], row[1], row[2])


def _existing_run_id(connection: sqlite3.Connection, run: RunRecord) -> str | None:
    """The run a start would duplicate: the one its dedupe key started, else its own id."""
    if run.dedupe_key is not None:
        marker = connection.execute(
            "SELECT run_id FROM run_dedupe WHERE dedupe_key = ?", (run.dedupe_key,)
        ).fetchone()
        if marker is not None:
            return str(marker[0])
    same_id = connection.execute("SELECT 1 FROM runs WHERE run_id = ?", (run.run_id,)).fetchone()
    return None if same_id is None else run.run_id


def _lease(connection: sqlite3.Connection, run_id: str) -> _Lease | None:
    row = connection.execute(
        "SELECT status, fence, lease_owner, lease_expires_at FROM runs WHERE run_id = ?",
        (run_id,),
    ).fetchone()
    return None if row is None else _Lease(RunStatus(row[0]), int(row[1]), row[2], row[3])


def _refused_save(run: RunRecord, fence: int | None, lease: _Lease | None) -> Exception | None:
    """Why a save of ``run`` under ``fence`` is refused, checked in the DynamoDB adapter's
    order (unknown run, stale fence, another ending); ``None`` when it may be written."""
    if lease is None:
        return NotFoundError(f"run {run.run_id} does not exist; create it before saving")
    if fence is not None and lease.fence != fence:
        return LeaseHeldError(
            f"run {run.run_id}: this segment's fence {fence} is stale (now {lease.fence}, "
            f"held by {lease.owner or 'nobody'}); its write was refused"
        )
    # A run that has ended keeps its ending; re-saving the same ending (a retried final
    # write) is allowed.
    if lease.status in TERMINAL and lease.status is not run.status:
        return ConflictError(
            f"run {run.run_id} already ended as {lease.status}; the write of status "
            f"{run.status} was refused"
        )
    return None


def _refused_execution(
    connection: sqlite3.Connection, run: RunRecord, in_execution: str
) -> ConflictError | None:
    """Why a save for ``in_execution`` is refused: the stored run has moved to another one
    (its attempt or continuation, read from the body in the write's transaction)."""
    row = connection.execute(
        "SELECT json_extract(body, '$.attempt'), json_extract(body, '$.continued')"
        " FROM runs WHERE run_id = ?",
        (run.run_id,),
    ).fetchone()
    stored = execution_name(run.run_id, int(row[0] or 0), int(row[1] or 0))
    if stored == in_execution:
        return None
    return ConflictError(
        f"run {run.run_id} moved to execution {stored} since it was read in {in_execution}; "
        "the write was refused (read the run again and retry)"
    )


def _write_record(connection: sqlite3.Connection, run_id: str, run: RunRecord, body: str) -> None:
    """Write what a save changes: the body and the columns that follow it (never the lease,
    ``created_at`` or the workflow, which the listings' order rests on)."""
    connection.execute(
        "UPDATE runs SET body = ?, status = ?, updated_at = ? WHERE run_id = ?",
        (body, run.status.value, _utc_iso(run.updated_at), run_id),
    )


def _drop_lease(connection: sqlite3.Connection, run_id: str) -> None:
    connection.execute(
        "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL WHERE run_id = ?", (run_id,)
    )


def _event_rows(run_id: str, events: Sequence[TimelineEvent]) -> list[tuple[str, int, str]]:
    """``run_events`` rows of ``events`` (``ValueError`` unless ``seq`` strictly increases)."""
    seqs = [event.seq for event in events]
    if any(b <= a for a, b in itertools.pairwise(seqs)):
        raise ValueError(f"timeline events must be in increasing seq order, got {seqs}")
    return [(run_id, event.seq, event.model_dump_json(exclude_none=True)) for event in events]


def _write_events(connection: sqlite3.Connection, rows: list[tuple[str, int, str]]) -> None:
    """Add (or replace, by ``seq``) timeline rows, inside the caller's transaction."""
    connection.executemany(
        "INSERT OR REPLACE INTO run_events (run_id, seq, body) VALUES (?, ?, ?)", rows
    )
