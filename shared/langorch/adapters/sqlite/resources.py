"""Resource locks (seed 001 §7b) in the local store; satisfies ``ResourceLocks`` as
:class:`langorch.adapters.dynamodb.resources.ResourceLocksRepository` does.

One row per resource: its declared limit (``NULL`` until ``resources set``), the number of
leases granted and the holder set (JSON: holder -> expires at; at most the limit). The queue is
one row per waiter in ``resource_waiters`` (holder, expires at, task token), ordered by its
``arrival`` key (``AUTOINCREMENT``: never reused, so later arrivals sort later); an acquire or a
release writes the waiters it changes, not the whole queue, and the queue holds at most
``max_waiters`` (:class:`langorch.domain.resources.QueueFullError` past it). The ``queue`` column
of files written by an older langorch is read once and moved into rows by the next change.

Every change reads the row, applies :mod:`langorch.domain.resources`' rule and writes the result
in one ``BEGIN IMMEDIATE`` transaction: nobody writes between the read and the write (another
thread or process waits for the lock), so where DynamoDB needs a version condition and a retry
loop, here the first attempt is the only one. Two acquires racing for the last slot: one takes
it, the other then reads it taken and queues.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import TypeVar

from langorch.adapters.sqlite._db import Database
from langorch.domain import resources as rules
from langorch.domain.resources import Grant, ResourceState, Waiter

T = TypeVar("T")

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS resources ("
    " name TEXT PRIMARY KEY, concurrency_limit INTEGER, grants INTEGER NOT NULL DEFAULT 0,"
    " leases TEXT NOT NULL DEFAULT '{}', queue TEXT NOT NULL DEFAULT '[]')",
    "CREATE TABLE IF NOT EXISTS resource_waiters ("
    " arrival INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, holder TEXT NOT NULL,"
    " expires_at REAL NOT NULL, token TEXT, UNIQUE (name, holder))",
)

Stored = list[tuple[int | None, Waiter]]
"""A resource's queue as stored: (arrival key, waiter) in order; ``None``: a legacy entry."""


class SqliteResourceLocks:
    """:class:`langorch.app.ports.ResourceLocks` in the local store.

    Args:
        db: the home's database.
    """

    def __init__(self, db: Database, *, max_waiters: int = rules.MAX_WAITERS) -> None:
        self._db = db
        self._max_waiters = max_waiters
        db.ensure_schema("resources", SCHEMA)

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
        """Take a lease for ``holder`` or queue it (see :func:`rules.acquire`)."""

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
        """Release every lease and queue place of ``run_id``; the resources it touched.

        One transaction: a resource the run is released from cannot be granted to it again
        half-way (the DynamoDB adapter releases resource by resource).
        """
        touched: list[str] = []
        with self._db.write():
            for state in self.list():
                holders = rules.holders_of_run(state, run_id)
                for holder in holders:
                    self.release(state.name, holder)
                if holders:
                    touched.append(state.name)
        return touched

    def set_limit(self, name: str, limit: int) -> None:
        """Declare ``name``'s ``concurrency_limit`` (leases already held are kept).

        Raises:
            ValueError: the name or the limit is invalid.
        """
        problems = [*rules.check_name(name, "name"), *rules.check_limit(limit)]
        if problems:
            raise ValueError("; ".join(str(p) for p in problems))
        with self._db.write() as connection:
            connection.execute(
                "INSERT INTO resources (name, concurrency_limit) VALUES (?, ?)"
                " ON CONFLICT (name) DO UPDATE SET concurrency_limit = excluded.concurrency_limit",
                (name, limit),
            )

    def get(self, name: str) -> ResourceState:
        """The resource as stored (undeclared and free when there is no row)."""
        with self._db.read() as connection:
            return _read(connection, name)[0]

    def list(self) -> list[ResourceState]:
        """Every resource declared or used, by name."""
        with self._db.read() as connection:
            names = [row[0] for row in connection.execute(_SELECT_NAMES).fetchall()]
            return [_read(connection, name)[0] for name in names]

    def _change(self, name: str, decide: Callable[[ResourceState], tuple[ResourceState, T]]) -> T:
        with self._db.write() as connection:
            state, stored = _read(connection, name)
            new, answer = decide(state)
            if new != state:  # a release of nothing writes nothing
                _write(connection, new, stored)
        return answer


_SELECT_ONE = "SELECT name, concurrency_limit, grants, leases, queue FROM resources WHERE name = ?"
_SELECT_NAMES = "SELECT name FROM resources ORDER BY name"
_SELECT_WAITERS = (
    "SELECT arrival, holder, expires_at, token FROM resource_waiters WHERE name = ?"
    " ORDER BY arrival"
)


def _read(connection: sqlite3.Connection, name: str) -> tuple[ResourceState, Stored]:
    row = connection.execute(_SELECT_ONE, (name,)).fetchone()
    if row is None:
        return ResourceState(name=name), []
    _, limit, grants, leases, legacy = row
    stored: Stored = [
        (None, Waiter(str(w[0]), float(w[1]), w[2] if len(w) > 2 else None))
        for w in json.loads(legacy)
    ]
    stored += [
        (int(arrival), Waiter(str(holder), float(expires_at), token, rules.priority_of(arrival)))
        for arrival, holder, expires_at, token in connection.execute(_SELECT_WAITERS, (name,))
    ]
    state = ResourceState(
        name=name,
        limit=rules.DEFAULT_LIMIT if limit is None else int(limit),
        declared=limit is not None,
        leases={str(h): float(t) for h, t in json.loads(leases).items()},
        queue=tuple(w for _, w in stored),
        grants=int(grants),
    )
    return state, stored


def _write(connection: sqlite3.Connection, state: ResourceState, stored: Stored) -> None:
    """Store the holder set and the grant count (never the limit: ``set_limit``'s), and the
    waiters that changed."""
    leases = dict(sorted(state.leases.items()))
    connection.execute(
        "INSERT INTO resources (name, grants, leases, queue) VALUES (?, ?, ?, '[]')"
        " ON CONFLICT (name) DO UPDATE SET grants = excluded.grants, leases = excluded.leases,"
        " queue = '[]'",
        (state.name, state.grants, json.dumps(leases)),
    )
    # The last arrival number stored (keys are unique table-wide, and a key only has to sort
    # among the waiters stored today).
    (arrivals,) = connection.execute(
        "SELECT MAX(arrival % ?) FROM resource_waiters", (rules.ARRIVALS,)
    ).fetchone()
    changes = rules.queue_changes(stored, state.queue, int(arrivals or 0))
    connection.executemany(
        "DELETE FROM resource_waiters WHERE arrival = ?", [(key,) for key in changes.delete]
    )
    # A waiter's key carries its priority (rules.waiter_key): one row per waiter, put by key.
    connection.executemany(
        "INSERT INTO resource_waiters (arrival, name, holder, expires_at, token)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (arrival) DO UPDATE SET"
        " expires_at = excluded.expires_at, token = excluded.token",
        [(key, state.name, w.holder, w.expires_at, w.token) for key, w in changes.put],
    )
