"""An in-memory runs table with the DynamoDB adapter's conditional semantics.

Every refusal the adapter makes with a ``ConditionExpression`` is made here with an ``if``, in
the same order (``tests/contracts/test_runs_store.py`` runs both): unknown run, stale fence,
ended run. Records and events are copied through JSON on the way in and out, as the table
stores them, so a caller can never change what is stored by mutating what it got back.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime

from langorch.domain.errors import ConflictError, LeaseHeldError, LeaseLostError, NotFoundError
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
)

MAX_BODY_BYTES = MAX_RECORD_BODY_BYTES
"""As the adapter: the record is bounded to this (``domain.runs.fitted_record``)."""
_MAX_LIST = 1000


@dataclass
class _Row:
    body: str
    status: RunStatus
    fence: int = 0
    lease_owner: str | None = None
    lease_expires_at: float | None = None
    events: dict[int, str] = field(default_factory=dict)
    forks: list[str] = field(default_factory=list)
    pause: str | None = None
    pause_token: str | None = None


class InMemoryRuns:
    """Run records, dedupe markers, leases and timelines in dicts (one lock: atomic writes)."""

    def __init__(self) -> None:
        self._rows: dict[str, _Row] = {}
        self._dedupe: dict[str, str] = {}
        self._orphan_events: dict[str, dict[int, str]] = {}
        self._lock = threading.Lock()

    # --- records -------------------------------------------------------------------------

    def create_run(self, run: RunRecord) -> tuple[RunRecord, bool]:
        """Store a new run once per dedupe key and once per run id."""
        body = _bounded_body(run)
        with self._lock:
            if run.dedupe_key is not None and run.dedupe_key in self._dedupe:
                existing = self._dedupe[run.dedupe_key]
                return _full(self._rows[existing]), False
            if run.run_id in self._rows:
                return _full(self._rows[run.run_id]), False
            if run.dedupe_key is not None:
                self._dedupe[run.dedupe_key] = run.run_id
            self._rows[run.run_id] = _Row(body=body, status=run.status)
        return run, True

    def get_run(self, run_id: str) -> RunRecord:
        """The run (``NotFoundError`` when unknown)."""
        with self._lock:
            row = self._rows.get(run_id)
            if row is None:
                raise NotFoundError(f"run {run_id} does not exist (check the id with `runs list`)")
            return _full(row)

    def list_runs(
        self,
        workflow_id: str | None = None,
        status: RunStatus | None = None,
        limit: int = 50,
        before: tuple[datetime, str] | None = None,
    ) -> list[RunRecord]:
        """Runs, newest first (created_at, then run id), optionally filtered and paged."""
        if not 1 <= limit <= _MAX_LIST:
            raise ValueError(f"limit must be between 1 and {_MAX_LIST}, not {limit}")
        with self._lock:
            runs = [_full(row) for row in self._rows.values()]
        runs = [
            r
            for r in runs
            if (workflow_id is None or r.workflow_id == workflow_id)
            and (status is None or r.status is status)
            and (before is None or _cursor(r) < (before[0].astimezone(UTC), before[1]))
        ]
        runs.sort(key=lambda r: (r.created_at.astimezone(UTC), r.run_id), reverse=True)
        return runs[:limit]

    def save_run(
        self,
        run: RunRecord,
        *,
        fence: int | None = None,
        release: bool = False,
        events: Sequence[TimelineEvent] = (),
        in_execution: str | None = None,
    ) -> None:
        """Store the run's new state, and ``events`` with it; refused as the adapter refuses
        it (then neither is stored)."""
        self.before_save(run, release=release, events=events)
        body = _bounded_body(run)
        seqs = [event.seq for event in events]
        if any(b <= a for a, b in itertools.pairwise(seqs)):
            raise ValueError(f"timeline events must be in increasing seq order, got {seqs}")
        with self._lock:
            row = self._rows.get(run.run_id)
            if row is None:
                raise NotFoundError(f"run {run.run_id} does not exist; create it before saving")
            if fence is not None and row.fence != fence:
                raise LeaseHeldError(
                    f"run {run.run_id}: this segment's fence {fence} is stale (now {row.fence}, "
                    f"held by {row.lease_owner or 'nobody'}); its write was refused"
                )
            _refuse_new_ending(row, run)
            _refuse_other_execution(row, run, in_execution)
            row.body, row.status = body, run.status
            if release and fence is not None:
                row.lease_owner = row.lease_expires_at = None
            row.events.update((e.seq, e.model_dump_json(exclude_none=True)) for e in events)

    def before_save(
        self, run: RunRecord, *, release: bool, events: Sequence[TimelineEvent]
    ) -> None:
        """Nothing here: a test's subclass puts what happens just before a save lands (another
        writer's race, a crash) here rather than overriding ``save_run``."""

    def add_fork(self, run_id: str, link: ForkLink) -> None:
        """Note a run forked from ``run_id`` (beside the body, as the adapter keeps it)."""
        with self._lock:
            row = self._rows.get(run_id)
            if row is None:
                raise NotFoundError(f"run {run_id} does not exist; no fork to note")
            row.forks.append(link.model_dump_json())

    def request_pause(self, run_id: str, pause: PauseRequest) -> tuple[RunRecord, bool]:
        """Ask the run to pause (beside the body); a standing request is kept."""
        with self._lock:
            row = self._rows.get(run_id)
            if row is None:
                raise NotFoundError(f"run {run_id} does not exist; nothing to pause")
            if row.status in TERMINAL:
                raise ConflictError(f"run {run_id} already ended as {row.status}; not paused")
            asked = row.pause is None
            if asked:
                row.pause = pause.model_dump_json()
            return _full(row), asked

    def lift_pause(self, run_id: str) -> tuple[PauseRequest | None, str | None]:
        """Lift the standing request; the request and the parked token (kept)."""
        with self._lock:
            row = self._rows.get(run_id)
            if row is None:
                raise NotFoundError(f"run {run_id} does not exist; nothing to resume")
            lifted, row.pause = row.pause, None
            request = None if lifted is None else PauseRequest.model_validate_json(lifted)
            return request, row.pause_token

    def park_paused(self, run_id: str, task_token: str) -> bool:
        """Keep the parked execution's token while a request stands."""
        with self._lock:
            row = self._rows.get(run_id)
            if row is None:
                raise NotFoundError(f"run {run_id} does not exist; nothing to park")
            if row.pause is None:
                return False
            row.pause_token = task_token
            return True

    def pause_of(self, run_id: str) -> PauseRequest | None:
        """The standing request."""
        with self._lock:
            row = self._rows.get(run_id)
            if row is None:
                raise NotFoundError(f"run {run_id} does not exist")
            return None if row.pause is None else PauseRequest.model_validate_json(row.pause)

    def reopen_run(self, run: RunRecord, *, expected_attempt: int) -> bool:
        """Store the reopened run only while the stored one is on ``expected_attempt``."""
        body = _bounded_body(run)
        with self._lock:
            row = self._rows.get(run.run_id)
            if row is None:
                raise NotFoundError(f"run {run.run_id} does not exist; nothing to reopen")
            if _record(row.body).attempt != expected_attempt:
                return False
            row.body, row.status = body, run.status
            return True

    # --- leases --------------------------------------------------------------------------

    def acquire_lease(
        self,
        run_id: str,
        owner: str,
        *,
        now: float,
        ttl_seconds: float,
        saving: RunRecord | None = None,
    ) -> int:
        """Take the lease when free, expired or already this owner's (storing ``saving`` with
        it); returns the incremented fence."""
        if ttl_seconds <= 0:
            raise ValueError(f"ttl_seconds must be positive, not {ttl_seconds}")
        body = None if saving is None else _bounded_body(saving)
        with self._lock:
            row = self._rows.get(run_id)
            if row is None:
                raise NotFoundError(f"run {run_id} does not exist; no lease to take")
            if row.lease_owner not in (None, owner) and (row.lease_expires_at or 0.0) > now:
                until = datetime.fromtimestamp(row.lease_expires_at or 0.0, tz=UTC)
                raise LeaseHeldError(
                    f"run {run_id} is being run by {row.lease_owner} until {until.isoformat()}; "
                    "this segment must not touch it (retry after that time if the other "
                    "segment has stopped)"
                )
            if saving is not None and body is not None:
                _refuse_new_ending(row, saving)
                row.body, row.status = body, saving.status
            row.lease_owner, row.lease_expires_at = owner, now + ttl_seconds
            row.fence += 1
            return row.fence

    def renew_lease(self, run_id: str, fence: int, *, now: float, ttl_seconds: float) -> None:
        """Extend the lease held with ``fence`` (``LeaseHeldError`` when stale)."""
        with self._lock:
            row = self._held(run_id, fence)
            if row is None:
                raise LeaseHeldError(
                    f"run {run_id}: the lease with fence {fence} is no longer held; "
                    "another segment owns the run now"
                )
            row.lease_expires_at = now + ttl_seconds

    def release_lease(self, run_id: str, fence: int) -> bool:
        """Give the lease back, only if ``fence`` still holds it."""
        with self._lock:
            row = self._held(run_id, fence)
            if row is None:
                return False
            row.lease_owner = row.lease_expires_at = None
            return True

    def _held(self, run_id: str, fence: int) -> _Row | None:
        row = self._rows.get(run_id)
        if row is None or row.lease_owner is None or row.fence != fence:
            return None
        return row

    @contextmanager
    def fenced(self, run_id: str, fence: int) -> Iterator[None]:
        """Hold the table while ``fence`` is the run's: a transaction's ``ConditionCheck``.

        Raises:
            LeaseLostError: the run's fence is another (or the run is gone); the caller's
                write must not happen.
        """
        with self._lock:
            row = self._rows.get(run_id)
            if row is None or row.fence != fence:
                raise LeaseLostError(
                    f"run {run_id}: this segment's lease (fence {fence}) was taken over by "
                    "another segment; its checkpoint write was refused and nothing was written"
                )
            yield

    # --- timeline ------------------------------------------------------------------------

    def append_events(
        self, run_id: str, events: Sequence[TimelineEvent], *, fence: int | None = None
    ) -> None:
        """Add events (same ``seq`` replaces); with ``fence``, only while it is current."""
        seqs = [event.seq for event in events]
        if any(b <= a for a, b in itertools.pairwise(seqs)):
            raise ValueError(f"timeline events must be in increasing seq order, got {seqs}")
        bodies = {event.seq: event.model_dump_json(exclude_none=True) for event in events}
        with self._lock:
            row = self._rows.get(run_id)
            if fence is not None and (row is None or row.fence != fence):
                raise LeaseHeldError(
                    f"run {run_id}: fence {fence} is stale; another segment owns the run, "
                    "its timeline was not changed"
                )
            # Like a batch write, events of a run that does not exist (yet) are still stored.
            target = row.events if row is not None else self._orphan_events.setdefault(run_id, {})
            target.update(bodies)

    def get_timeline(self, run_id: str) -> list[TimelineEvent]:
        """The run's timeline in ``seq`` order (empty for an unknown run)."""
        with self._lock:
            stored = dict(self._orphan_events.get(run_id, {}))
            row = self._rows.get(run_id)
            if row is not None:
                stored.update(row.events)
        return [TimelineEvent.model_validate_json(stored[seq]) for seq in sorted(stored)]

    def next_event_seq(self, run_id: str) -> int:
        """One past the run's highest ``seq`` (1 without events)."""
        timeline = self.get_timeline(run_id)
        return timeline[-1].seq + 1 if timeline else 1

    # --- for tests -----------------------------------------------------------------------

    def lease_of(self, run_id: str) -> tuple[str | None, int]:
        """Who holds the run's lease (``None``: nobody) and its current fence."""
        with self._lock:
            row = self._rows[run_id]
            return row.lease_owner, row.fence


def _record(body: str) -> RunRecord:
    return RunRecord.model_validate_json(body)


def _full(row: _Row) -> RunRecord:
    """The record with the forks and the pause kept beside its body, as the adapter reads it."""
    run = _record(row.body)
    pause = None if row.pause is None else PauseRequest.model_validate_json(row.pause)
    update: dict[str, object] = {"pause": pause}
    if row.forks:
        update["forks"] = [ForkLink.model_validate_json(f) for f in row.forks][-MAX_LINEAGE:]
    return run.model_copy(update=update)


def _bounded_body(run: RunRecord) -> str:
    # The adapter's bounding, shared (a pure function of the record).
    return fitted_record(run, MAX_BODY_BYTES).model_dump_json()


def _cursor(run: RunRecord) -> tuple[datetime, str]:
    """Where a run sorts in a listing (the adapter's index sort key)."""
    return (run.created_at.astimezone(UTC), run.run_id)


def _refuse_new_ending(row: _Row, run: RunRecord) -> None:
    """A run that ended keeps its ending (re-saving the same one is allowed)."""
    if row.status in TERMINAL and row.status is not run.status:
        raise ConflictError(
            f"run {run.run_id} already ended as {row.status}; the write of status "
            f"{run.status} was refused"
        )


def _refuse_other_execution(row: _Row, run: RunRecord, in_execution: str | None) -> None:
    """A write for one execution of the run is refused once the run has moved to another."""
    if in_execution is None:
        return
    stored = current_execution(_record(row.body))
    if stored != in_execution:
        raise ConflictError(
            f"run {run.run_id} moved to execution {stored} since it was read in "
            f"{in_execution}; the write was refused (read the run again and retry)"
        )
