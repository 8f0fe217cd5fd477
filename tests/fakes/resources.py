"""In-memory resource locks: the same rules as the DynamoDB adapter, atomic under a lock."""

from __future__ import annotations

import threading
from dataclasses import replace

from langorch.domain import resources as rules
from langorch.domain.resources import Grant, ResourceState


class InMemoryResourceLocks:
    """:class:`langorch.app.ports.ResourceLocks` in memory (one lock stands for the
    adapter's conditional write: a change is decided and stored as one step)."""

    def __init__(self, *, max_waiters: int = rules.MAX_WAITERS) -> None:
        self._max_waiters = max_waiters
        self._lock = threading.Lock()
        self._states: dict[str, ResourceState] = {}

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
        with self._lock:
            state, grant = rules.acquire(
                self.get(name),
                holder,
                now=now,
                lease_seconds=lease_seconds,
                wait_seconds=wait_seconds,
                max_waiters=self._max_waiters,
                priority=priority,
            )
            self._states[name] = state
            return grant

    def park(self, name: str, holder: str, token: str, *, now: float, wait_seconds: float) -> bool:
        with self._lock:
            state, turn = rules.park(
                self.get(name),
                holder,
                token,
                now=now,
                wait_seconds=wait_seconds,
                max_waiters=self._max_waiters,
            )
            self._states[name] = state
            return turn

    def reserve(self, name: str, holder: str, *, now: float, limit: int, period: float) -> float:
        with self._lock:
            state, due = rules.reserve(self.get(name), holder, now=now, limit=limit, period=period)
            self._states[name] = state
            return due

    def release(self, name: str, holder: str) -> bool:
        with self._lock:
            if name not in self._states:
                return False
            state, changed = rules.release(self._states[name], holder)
            self._states[name] = state
            return changed

    def release_run(self, run_id: str) -> list[str]:
        touched = []
        for state in self.list():
            holders = rules.holders_of_run(state, run_id)
            for holder in holders:
                self.release(state.name, holder)
            if holders:
                touched.append(state.name)
        return touched

    def set_limit(self, name: str, limit: int) -> None:
        problems = [*rules.check_name(name, "name"), *rules.check_limit(limit)]
        if problems:
            raise ValueError("; ".join(str(p) for p in problems))
        with self._lock:
            self._states[name] = replace(self.get(name), limit=limit, declared=True)

    def get(self, name: str) -> ResourceState:
        return self._states.get(name) or ResourceState(name=name)

    def list(self) -> list[ResourceState]:
        return [self._states[name] for name in sorted(self._states)]
