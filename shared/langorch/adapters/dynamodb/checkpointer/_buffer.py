"""The write buffer: a task's writes wait for the next ``put()`` unless nothing will carry them.

``put_writes`` is buffered in memory and persisted in the same request as the next
``put()``. The checkpoint that ``put()`` stores already contains the effect of those writes, so
nothing a completed superstep produced can be lost: a crash mid-superstep loses the writes of
that superstep's finished tasks, and those tasks run again on resume (external effects carry
idempotency keys, RELIABILITY.md). Writes after which no ``put()`` follows are flushed at once
with everything buffered (see :meth:`WriteBuffer.add`).

Fenced writes (a segment's, carrying its lease's fence) are kept apart by ``(thread id,
fence)``: a put under a fence stores only its own group, so one saver shared by segments
(local mode runs them as threads of one process) never writes a stale segment's items under
a newer fence, nor the other way round.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import TypeAlias

from langgraph.checkpoint.serde.types import ERROR, INTERRUPT, RESUME, SCHEDULED

from langorch.adapters.dynamodb.checkpointer._keys import Item, Items, Thread, text

# LangGraph's channel names for these two have no public import (they live in
# ``langgraph._internal._constants``); pinned here, and a unit test checks them against
# LangGraph's values so an upgrade that renames one fails loudly.
ERROR_SOURCE_NODE = "__error_source_node__"
"""The marker a task writes before an error handler routes (LangGraph waits for it)."""
PUSH = "__pregel_push"
"""The channel of ``update_state``'s writes, which come after its ``put()``."""

# After a write to one of these channels no put() follows in this superstep: the graph parks
# or fails. Writes of sibling tasks that finish later go straight through too.
TERMINAL_CHANNELS = frozenset({ERROR, INTERRUPT})
# Persisted at once as well: a human's resume value must survive a crash before the next put;
# LangGraph waits for the error-handler marker to be durable before it routes; PUSH writes come
# from update_state() after its put(), with no put() to follow.
FLUSH_NOW_CHANNELS = TERMINAL_CHANNELS | {RESUME, SCHEDULED, ERROR_SOURCE_NODE, PUSH}

FenceGroup: TypeAlias = tuple[str, int] | None
"""Which write carries buffered items: ``(thread id, fence)``, or ``None`` for unfenced ones."""


class WriteBuffer:
    """Buffered write items by ``(PK, SK)``, and what decides when they must go at once.

    Callers hold :attr:`lock` around a read of :meth:`items` and the write that stores them,
    then :meth:`clear` (it is re-entrant: ``put()`` flushes while holding it).
    """

    def __init__(self) -> None:
        self.lock = threading.RLock()
        # A repeated put_writes replaces its item, as a PutItem would.
        self._items: dict[tuple[str, str], Item] = {}
        self._groups: dict[tuple[str, str], FenceGroup] = {}
        # The newest checkpoint stored per (thread, ns): writes aimed at any other checkpoint
        # will not be carried by a coming put(), so they are flushed at once.
        self._latest_put: dict[Thread, str] = {}
        # Checkpoints per (thread, ns) that got an interrupt or error write: no put() follows,
        # so the writes of tasks still finishing in that superstep are persisted at once.
        self._closed: dict[Thread, str] = {}

    def items(self, group: FenceGroup = None) -> Items:
        """The buffered items of one group (``None``: every unfenced one), in buffered order."""
        return [item for key, item in self._items.items() if self._groups[key] == group]

    def groups(self) -> list[FenceGroup]:
        """Every group that has buffered items, unfenced first."""
        found = dict.fromkeys(self._groups.values())
        return sorted(found, key=lambda g: (g is not None, g or ("", 0)))

    def clear(self, group: FenceGroup = None) -> None:
        """Forget the buffered items of one group (they were stored, or can never be)."""
        for key in [key for key, g in self._groups.items() if g == group]:
            del self._items[key]
            del self._groups[key]

    def add(
        self,
        thread: Thread,
        checkpoint_id: str,
        channels: Iterable[str],
        items: Items,
        group: FenceGroup = None,
    ) -> bool:
        """Buffer a task's write items; whether they (and the whole buffer) must be stored now.

        Now when a channel is in :data:`FLUSH_NOW_CHANNELS`, when the checkpoint already got an
        interrupt or error (no ``put()`` follows), or when the writes aim at a checkpoint other
        than the newest one stored in that namespace. Call with :attr:`lock` held.
        """
        channels = set(channels)
        if channels & TERMINAL_CHANNELS:
            self._closed[thread] = checkpoint_id
        latest = self._latest_put.get(thread)
        flush_now = bool(channels & FLUSH_NOW_CHANNELS) or (
            (latest is not None and latest != checkpoint_id)
            or self._closed.get(thread) == checkpoint_id
        )
        for item in items:
            key = (thread[0], text(item, "SK"))
            self._items[key] = item
            self._groups[key] = group
        return flush_now

    def hold(self, item: Item, group: FenceGroup) -> None:
        """Keep a checkpoint item for the group's next write (it goes before the items buffered
        after it). Call with :attr:`lock` held."""
        key = (text(item, "PK"), text(item, "SK"))
        self._items[key] = item
        self._groups[key] = group

    def held_groups(self, thread_id: str | None) -> list[FenceGroup]:
        """The groups holding a checkpoint item of a thread (``None``: of any thread)."""
        with self.lock:
            return list(
                dict.fromkeys(
                    self._groups[key]
                    for key, item in self._items.items()
                    if text(item, "k") == "c" and (thread_id is None or key[0] == thread_id)
                )
            )

    def stored_checkpoint(self, thread: Thread, checkpoint_id: str) -> None:
        """Record a stored checkpoint: the newest of its namespace, open for writes."""
        self._latest_put[thread] = checkpoint_id
        self._closed.pop(thread, None)

    def snapshot(self, thread_id: str | None) -> dict[tuple[str, str], Item]:
        """The buffered items of a thread (all threads for ``None``), for a read to merge."""
        # Taken before the table is read: a flush in between leaves the items in both places,
        # and the merge by key makes that harmless; the other order could miss them.
        with self.lock:
            return {
                key: item
                for key, item in self._items.items()
                if thread_id is None or key[0] == thread_id
            }

    def forget_thread(self, thread_id: str) -> None:
        """Drop everything known about a thread (it is being deleted)."""
        with self.lock:
            self._items = {k: v for k, v in self._items.items() if k[0] != thread_id}
            self._groups = {k: v for k, v in self._groups.items() if k[0] != thread_id}
            self._latest_put = {k: v for k, v in self._latest_put.items() if k[0] != thread_id}
            self._closed = {k: v for k, v in self._closed.items() if k[0] != thread_id}
