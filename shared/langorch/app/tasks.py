"""Replay-safe side effects (seed 001 §5): a step's external calls as recorded tasks.

Every LLM answer, model round and tool call a step makes goes through :meth:`TaskRecorder.once`,
which numbers the calls of the attempt (0, 1, 2, ...). A call whose record exists is not made
again: its recorded result comes back. The records of a step's visit are read with one query
when the first call is made, and each new result is written as soon as it is known, so a crash
between a tool call and the step's checkpoint loses nothing: the step runs again, replays the
recorded calls in the same order, and only makes the calls that were never recorded.

Which record a call reuses: the one with the same index in this attempt; else (a retry after a
failed attempt) the latest earlier attempt's record with the same index, kind and fingerprint.
A record whose fingerprint differs (the model asked something else this time) is not reused.

A call to a tool server goes through :meth:`TaskRecorder.once_keyed`: it carries an idempotency
key (:func:`langorch.domain.tasks.call_key`) and is recorded as ``started`` with that key before
it is sent. A call found started but never done was sent by a process that stopped before it
recorded the answer: its outcome is unknown. It is never made again as if new: the caller is told
(it may refuse), and it is sent again with the same key, which a server that remembers keys
recognises.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from langorch.domain.limits import MAX_OUTPUTS_BYTES
from langorch.domain.tasks import TaskRecord, TaskState, call_key

if TYPE_CHECKING:
    from langorch.app.ports import SecretsStore, ToolConnector, ToolServerStore
    from langorch.config import Settings

logger = logging.getLogger(__name__)

MAX_TASK_BYTES = MAX_OUTPUTS_BYTES
"""A result larger than a run's outputs is not recorded (a replay makes that call again):
tool results are cut far below this before the model sees them, so only huge answers are."""


class TaskStore(Protocol):
    """Where recorded tasks live (the runs table; ``tests/contracts/test_task_store.py``)."""

    def load(self, run_id: str, step_id: str, visit: int) -> list[TaskRecord]:
        """Every record of this visit of the step, all attempts."""
        ...

    def put(self, run_id: str, record: TaskRecord) -> None:
        """Store one record (replacing one with the same key)."""
        ...


class SideEffectDeps(Protocol):
    """What recorded calls and tools need: where calls are recorded, the registered tools, the
    secrets their headers come from, and the tool settings."""

    @property
    def settings(self) -> Settings: ...
    @property
    def tasks(self) -> TaskStore: ...
    @property
    def tool_servers(self) -> ToolServerStore: ...
    @property
    def secrets(self) -> SecretsStore: ...
    @property
    def tool_connector(self) -> ToolConnector: ...


class TaskRecorder:
    """The recorded calls of one attempt of one visit of a step.

    Args:
        store: Where records are kept (``None``: recorded in memory only, for this attempt).
        run_id: The run.
        step_id: The step.
        visit: How many times the step finished before in this run.
        attempt: The step's attempt (1-based).
    """

    def __init__(
        self, store: TaskStore | None, run_id: str, step_id: str, visit: int, attempt: int
    ) -> None:
        self._store = store
        self._run_id = run_id
        self._step_id = step_id
        self._visit = visit
        self._attempt = attempt
        self._records: dict[tuple[int, int], TaskRecord] | None = None
        """The visit's records by (attempt, index), as the store keys them."""
        self._next = 0
        self.replayed = 0
        """Calls answered from a record in this attempt."""

    async def once(
        self,
        kind: str,
        digest: str,
        call: Callable[[], Awaitable[dict[str, Any]]],
    ) -> tuple[dict[str, Any], bool]:
        """Make ``call`` unless this call was recorded; returns ``(result, replayed)``.

        Args:
            kind: ``llm``, ``turn`` or ``tool``.
            digest: The fingerprint of what is asked (:func:`langorch.domain.tasks.fingerprint`).
            call: Makes the call; its result must be JSON-able. Raising records nothing.
        """
        index = self._take()
        recorded = await self._find(index, kind, digest)
        if recorded is not None and recorded.done:
            self.replayed += 1
            return recorded.result, True
        result = await call()
        await self._keep(self._record(index, kind, digest, result=result))
        return result, False

    async def once_keyed(
        self,
        kind: str,
        digest: str,
        call: Callable[[str], Awaitable[dict[str, Any]]],
        *,
        unknown: Callable[[str], None],
    ) -> tuple[dict[str, Any], bool]:
        """:meth:`once` for a call whose server may remember its idempotency key.

        The call is recorded as started, with its key, before it is made. Found started and
        never done, its outcome is unknown: ``unknown(key)`` is told (and may raise, so the
        call is not sent again), then the call is made again with the same key.

        Args:
            kind: ``tool``.
            digest: The fingerprint of what is asked.
            call: Makes the call with its key; its result must be JSON-able.
            unknown: Told the key of a call whose outcome is unknown, before it is resent.
        """
        index = self._take()
        recorded = await self._find(index, kind, digest)
        if recorded is not None and recorded.done:
            self.replayed += 1
            return recorded.result, True
        if recorded is None:
            key = call_key(self._run_id, self._step_id, self._visit, index, digest)
        else:
            key = recorded.key  # the key it was sent with, whatever derives keys today
            unknown(key)
        await self._keep(self._record(index, kind, digest, state="started", key=key))
        result = await call(key)
        await self._keep(self._record(index, kind, digest, result=result, key=key))
        return result, False

    def _take(self) -> int:
        """The next call's index in this attempt."""
        index, self._next = self._next, self._next + 1
        return index

    def _record(
        self,
        index: int,
        kind: str,
        digest: str,
        *,
        result: dict[str, Any] | None = None,
        state: TaskState = "done",
        key: str = "",
    ) -> TaskRecord:
        return TaskRecord(
            step_id=self._step_id,
            visit=self._visit,
            attempt=self._attempt,
            index=index,
            kind=kind,
            fingerprint=digest,
            result=result or {},
            state=state,
            key=key,
        )

    async def _keep(self, record: TaskRecord) -> None:
        """Record ``record`` here and in the store (replacing the call's earlier record)."""
        size = len(json.dumps(record.result, default=str).encode("utf-8"))
        if size > MAX_TASK_BYTES:
            logger.warning(
                "task result too large to record; a replay makes this call again",
                extra={"run_id": self._run_id, "step_id": self._step_id, "bytes": size},
            )
            return
        assert self._records is not None  # loaded by _find
        self._records[(record.attempt, record.index)] = record
        if self._store is not None:
            await asyncio.to_thread(self._store.put, self._run_id, record)

    async def _find(self, index: int, kind: str, digest: str) -> TaskRecord | None:
        """The record this call reuses: a done one before a started one; in each, this
        attempt's, else the latest earlier attempt's."""
        if self._records is None:
            loaded = (
                await asyncio.to_thread(self._store.load, self._run_id, self._step_id, self._visit)
                if self._store is not None
                else []
            )
            self._records = {(r.attempt, r.index): r for r in loaded}
        same = [
            r
            for r in self._records.values()
            if r.index == index
            and r.kind == kind
            and r.fingerprint == digest
            and r.attempt <= self._attempt
        ]
        for pool in ([r for r in same if r.done], [r for r in same if not r.done]):
            if pool:
                return max(pool, key=lambda r: r.attempt)
        return None
