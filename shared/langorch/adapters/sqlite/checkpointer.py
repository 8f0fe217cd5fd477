"""The local stack's LangGraph checkpointer: LangGraph's ``SqliteSaver`` on the home's file, fenced.

:class:`SqliteCheckpointSaver` is ``SqliteSaver`` (its tables, queries and serialization, which
LangGraph holds to its own conformance suite) with three changes:

- **Connections.** ``SqliteSaver`` serialises every call of a process on one connection behind a
  lock. Here each thread of each process uses its own connection of the
  :class:`~langorch.adapters.sqlite._db.Database` (``conn`` and ``cursor()`` are overridden), and
  every transaction is the database's: writes are ``BEGIN IMMEDIATE``, a read is one snapshot.
  SQLite errors become :class:`~langorch.domain.errors.StorageError`, which the engine treats as
  infrastructure (the segment is retried), not as the workflow failing.
- **Fenced writes** (RELIABILITY.md "Runs and state": the history never forks). A segment puts
  its lease's fence in the config (``configurable["langorch_fence"]``, see ``engine.segments``).
  A ``put`` or ``put_writes`` whose config carries one reads the run's ``fence`` from the runs
  table (``thread_id`` is the run id) inside the same ``BEGIN IMMEDIATE`` transaction that
  writes, and refuses with :class:`~langorch.domain.errors.LeaseLostError`, writing nothing,
  unless it is still the run's. Nobody can take the lease over between the check and the write:
  the transaction holds the file's write lock from its start. A config without a fence writes
  unchecked (tests, the conformance suite, forks into a new run). The runs table is the runs
  store's; this saver only reads its ``fence`` column, so a fenced write before that table exists
  is a :class:`~langorch.domain.errors.StorageError`, never an unchecked write. A fenced
  ``put`` also notes whether an operator's pause stands on the run (:meth:`pause_seen`), in the
  same transaction, so a segment needs no read of its own at each step boundary.
- **Async.** ``SqliteSaver`` has no async API (its async twin needs ``aiosqlite`` and its own
  connection); the engine drives graphs asynchronously, so each async method runs its sync twin
  in a worker thread, as the DynamoDB saver does.

Nothing is buffered: every write is stored when its call returns, so :meth:`flush` has nothing
to do (the DynamoDB saver buffers a superstep's writes; segments call ``flush`` on either).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.sqlite import SqliteSaver

from langorch.adapters.sqlite._db import Database
from langorch.domain.errors import LeaseLostError, StorageError

FENCE_KEY = "langorch_fence"
"""As ``engine.segments.FENCE_KEY``: the ``configurable`` key a segment's lease fence travels
under (not imported: the engine module brings LangGraph's runtime, which a store need not load;
the fenced-write contract suite passes the engine's key)."""

_SELECT_FENCE = "SELECT fence FROM runs WHERE run_id = ?"
"""The lease's fence of a run, as the runs store keeps it (``acquire_lease`` increments it)."""
_SELECT_PAUSE = "SELECT 1 FROM run_pauses WHERE run_id = ? AND pause IS NOT NULL"
"""Whether an operator's pause stands on the run (the runs store's ``run_pauses`` table)."""


class SqliteCheckpointSaver(SqliteSaver):
    """LangGraph's ``SqliteSaver`` on the home's database: per-thread connections, fenced
    writes, and the async API (worker threads). The design is in the module docstring.

    Args:
        db: the home's database (its ``checkpoints`` and ``writes`` tables are created here
            when missing, as ``SqliteSaver.setup`` makes them).
        serde: the LangGraph serializer (default: ``SqliteSaver``'s).
    """

    def __init__(self, db: Database, *, serde: SerializerProtocol | None = None) -> None:
        self._db = db
        self._setup_lock = threading.Lock()
        self._pause_lock = threading.Lock()
        self._paused: set[str] = set()  # runs whose fenced put found a pause (pause_seen)
        super().__init__(db.connection(), serde=serde)
        self.setup()

    @property
    def conn(self) -> sqlite3.Connection:
        """This thread's connection to the home's database (``SqliteSaver`` reads this)."""
        return self._db.connection()

    @conn.setter
    def conn(self, _connection: sqlite3.Connection) -> None:
        # ``SqliteSaver.__init__`` keeps the connection it is given; ours is the thread's.
        pass

    def setup(self) -> None:
        """Create ``SqliteSaver``'s tables when missing (once per saver; idempotent).

        Raises:
            SchemaVersionError: the file was written by a newer langorch.
            StorageError: SQLite refused.
        """
        if self.is_setup:
            return
        with self._setup_lock:
            if self.is_setup:
                return
            self._db.ensure_schema("checkpoints", ())  # the file's layout version
            try:
                with self._db.setup_lock():  # another process may be creating them too
                    super().setup()
            except sqlite3.Error as exc:
                raise StorageError(f"cannot create the checkpoint tables: {exc}") from exc

    async def asetup(self) -> None:
        """Async twin of :meth:`setup`."""
        await asyncio.to_thread(self.setup)

    @contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
        """A cursor in a transaction of the database: a write (``BEGIN IMMEDIATE``, committed
        when the block ends) or, with ``transaction=False``, a read of one snapshot. Inside a
        fenced write it joins that write's transaction.

        Raises:
            StorageError: SQLite refused (no value is quoted).
        """
        self.setup()
        begin = self._db.write if transaction else self._db.read
        with begin() as connection:
            cur = connection.cursor()
            try:
                yield cur
            except sqlite3.Error as exc:
                raise StorageError(f"checkpoint store on {self._db.path.name}: {exc}") from exc
            finally:
                cur.close()

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint; under the config's fence, only while it is the run's.

        Raises:
            LeaseLostError: the config's fence is no longer the run's (nothing written).
            StorageError: SQLite refused, or a fenced write found no runs table.
        """
        with self._fenced(config, watch_pause=True):
            return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes; under the config's fence, only while it is the run's.

        Raises:
            LeaseLostError: the config's fence is no longer the run's (nothing written).
            StorageError: SQLite refused, or a fenced write found no runs table.
        """
        with self._fenced(config):
            super().put_writes(config, writes, task_id, task_path)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """List checkpoints, newest first (``SqliteSaver.list``), read from one snapshot.

        The listing is read whole before the first tuple is yielded: ``SqliteSaver`` keeps its
        cursor open between yields, which here would leave a read transaction open on the
        thread's connection for any write the caller makes while iterating to join.
        """
        yield from [*super().list(config, filter=filter, before=before, limit=limit)]

    def pause_seen(self, run_id: str) -> bool:
        """Whether a fenced checkpoint write of ``run_id`` found an operator's pause standing
        since the last call (which this call forgets): read in the write's own transaction,
        so a segment needs no read of its own at each step boundary."""
        with self._pause_lock:
            if run_id not in self._paused:
                return False
            self._paused.discard(run_id)
            return True

    def flush(self) -> None:
        """Nothing is buffered: every write is stored when its call returns."""

    def claim_lease(self, run_id: str, fence: int) -> None:
        """Nothing to claim: each write checks the run's fence in its own transaction."""

    def claim_pause(self, run_id: str) -> None:
        """Nothing to claim: each fenced ``put`` looks for a pause in its own transaction."""

    def starts_empty(self, run_id: str, fence: int) -> None:
        """Nothing to note: its reads are local."""

    async def aflush(self) -> None:
        """Async twin of :meth:`flush`."""

    @contextmanager
    def _fenced(self, config: RunnableConfig, *, watch_pause: bool = False) -> Iterator[None]:
        """The write transaction of a ``put``/``put_writes``, opened by the fence check when
        the config carries a fence (``SqliteSaver``'s own cursor joins it); with
        ``watch_pause``, it also notes a standing pause for :meth:`pause_seen`."""
        fence = config.get("configurable", {}).get(FENCE_KEY)
        if fence is None:
            yield
            return
        run_id = str(config["configurable"]["thread_id"])
        with self._db.write() as connection:
            try:
                row = connection.execute(_SELECT_FENCE, (run_id,)).fetchone()
            except sqlite3.Error as exc:
                raise StorageError(
                    f"run {run_id}: cannot check its lease fence before a checkpoint write "
                    f"({exc}); the runs table must exist in {self._db.path.name}"
                ) from exc
            if row is None or int(row[0]) != int(fence):
                raise LeaseLostError(
                    f"run {run_id}: this segment's lease (fence {fence}) was taken over by "
                    "another segment; its checkpoint write was refused and nothing was written"
                )
            if watch_pause and _pause_stands(connection, run_id):
                with self._pause_lock:
                    self._paused.add(run_id)
            yield

    # --- async: each runs its sync twin in a worker thread -------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async twin of :meth:`get_tuple`."""
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async twin of :meth:`list` (the listing is read in a worker thread)."""
        tuples = await asyncio.to_thread(
            lambda: [*self.list(config, filter=filter, before=before, limit=limit)]
        )
        for tup in tuples:
            yield tup

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async twin of :meth:`put`."""
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async twin of :meth:`put_writes`."""
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """Async twin of :meth:`delete_thread`."""
        await asyncio.to_thread(self.delete_thread, thread_id)


def _pause_stands(connection: sqlite3.Connection, run_id: str) -> bool:
    """Whether an operator's pause stands on the run. A file without the runs store's
    ``run_pauses`` table (only a fence column, as some tests keep) has no pause to find."""
    try:
        return connection.execute(_SELECT_PAUSE, (run_id,)).fetchone() is not None
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return False
        raise StorageError(f"run {run_id}: cannot read its pause ({exc})") from exc
