"""Resource locks (seed 001 §7b) in the local store; satisfies ``ResourceLocks`` as
:class:`langorch.adapters.dynamodb.resources.ResourceLocksRepository` does.

One row per resource: its declared limit (``NULL`` until ``resources set``), the number of
leases granted, the leases (JSON: holder -> expires at) and the queue (JSON: ``[[holder,
expires at, task token]]``).

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
)


class SqliteResourceLocks:
    """:class:`langorch.app.ports.ResourceLocks` in the local store.

    Args:
        db: the home's database.
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        db.ensure_schema("resources", SCHEMA)

    def acquire(
        self, name: str, holder: str, *, now: float, lease_seconds: float, wait_seconds: float
    ) -> Grant:
        """Take a lease for ``holder`` or queue it (see :func:`rules.acquire`)."""

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
            return _read(connection, name)

    def list(self) -> list[ResourceState]:
        """Every resource declared or used, by name."""
        with self._db.read() as connection:
            rows = connection.execute(_SELECT_ALL).fetchall()
        return [_state(row) for row in rows]

    def _change(self, name: str, decide: Callable[[ResourceState], tuple[ResourceState, T]]) -> T:
        with self._db.write() as connection:
            state = _read(connection, name)
            new, answer = decide(state)
            if new != state:  # a release of nothing writes nothing
                _write(connection, new)
        return answer


_SELECT_ONE = "SELECT name, concurrency_limit, grants, leases, queue FROM resources WHERE name = ?"
_SELECT_ALL = "SELECT name, concurrency_limit, grants, leases, queue FROM resources ORDER BY name"


def _read(connection: sqlite3.Connection, name: str) -> ResourceState:
    row = connection.execute(_SELECT_ONE, (name,)).fetchone()
    return ResourceState(name=name) if row is None else _state(row)


def _write(connection: sqlite3.Connection, state: ResourceState) -> None:
    """Store the leases, the queue and the grant count (never the limit: ``set_limit``'s)."""
    leases = dict(sorted(state.leases.items()))
    queue = [[w.holder, w.expires_at, w.token] for w in state.queue]
    connection.execute(
        "INSERT INTO resources (name, grants, leases, queue) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (name) DO UPDATE SET grants = excluded.grants, leases = excluded.leases,"
        " queue = excluded.queue",
        (state.name, state.grants, json.dumps(leases), json.dumps(queue)),
    )


def _state(row: tuple[str, int | None, int, str, str]) -> ResourceState:
    name, limit, grants, leases, queue = row
    return ResourceState(
        name=name,
        limit=rules.DEFAULT_LIMIT if limit is None else int(limit),
        declared=limit is not None,
        leases={str(h): float(t) for h, t in json.loads(leases).items()},
        queue=tuple(
            Waiter(str(w[0]), float(w[1]), w[2] if len(w) > 2 else None) for w in json.loads(queue)
        ),
        grants=int(grants),
    )
