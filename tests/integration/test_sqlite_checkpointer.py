"""``SqliteCheckpointSaver``, the local stack's checkpointer, on a real SQLite file: what its
fence and its transactions promise beyond the saver contract (``test_checkpointer_conformance``)
and the fenced-write contract (``tests/contracts/test_checkpoint_fences.py``).

"Another process" is a real one (``spawn``), with its own saver on the same file, as the local
stack's sandboxes are.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import sqlite3
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langorch.adapters.sqlite._db import Database
from langorch.adapters.sqlite.checkpointer import SqliteCheckpointSaver
from langorch.domain.errors import LeaseLostError, StorageError
from langorch.engine.segments import FENCE_KEY
from tests.support.sqlite_segment import put_checkpoint

RUN = "run-1"
RUNS_TABLE = (
    "CREATE TABLE IF NOT EXISTS runs (run_id TEXT PRIMARY KEY, fence INTEGER NOT NULL DEFAULT 0)"
)


def _config(fence: int | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": RUN, "checkpoint_ns": ""}
    if fence is not None:
        configurable[FENCE_KEY] = fence
    return {"configurable": configurable}


def _put(saver: SqliteCheckpointSaver, fence: int | None) -> str:
    stored = saver.put(_config(fence), empty_checkpoint(), {"source": "loop", "step": 0}, {})
    return str(stored["configurable"]["checkpoint_id"])


def _stored_ids(saver: SqliteCheckpointSaver) -> list[str]:
    return [t.config["configurable"]["checkpoint_id"] for t in saver.list(_config())]


def _lease(db: Database, fence: int) -> None:
    """The runs table as the runs store keeps it, with the run's lease at ``fence``."""
    with db.write() as connection:
        connection.execute(RUNS_TABLE)
        connection.execute(
            "INSERT INTO runs (run_id, fence) VALUES (?, ?)"
            " ON CONFLICT (run_id) DO UPDATE SET fence = excluded.fence",
            (RUN, fence),
        )


def test_a_fenced_write_without_a_runs_table_is_an_error_not_an_unchecked_write(
    sqlite_db: Database,
) -> None:
    # Given a home whose runs table does not exist (yet)
    saver = SqliteCheckpointSaver(sqlite_db)
    # When a segment stores a checkpoint under its fence, then the saver says it cannot check it
    with pytest.raises(StorageError, match="runs table"):
        _put(saver, 1)
    # And nothing was written
    assert _stored_ids(saver) == []


class _TakeoverDuringWrite(JsonPlusSerializer):
    """LangGraph's serializer, which (once) tries to take the run's lease over from another
    connection while the saver serializes a checkpoint, that is, in the middle of its write."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self._path = path
        self.armed = False
        self.took_over: bool | None = None

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if self.armed:
            self.armed = False
            # timeout=0: a file locked by the writer refuses at once, whatever the machine's speed
            other = sqlite3.connect(self._path, timeout=0, isolation_level=None)
            try:
                other.execute("UPDATE runs SET fence = fence + 1 WHERE run_id = ?", (RUN,))
                self.took_over = True
            except sqlite3.OperationalError:  # "database is locked"
                self.took_over = False
            finally:
                other.close()
        return super().dumps_typed(obj)


def test_a_takeover_cannot_slip_between_the_fence_check_and_the_write(
    sqlite_db: Database,
) -> None:
    # Given a segment holding fence 1, whose serializer tries a takeover mid-write
    _lease(sqlite_db, 1)
    serde = _TakeoverDuringWrite(sqlite_db.path)
    saver = SqliteCheckpointSaver(sqlite_db, serde=serde)
    serde.armed = True
    # When the segment stores a checkpoint under its fence
    with contextlib.suppress(LeaseLostError):  # the takeover came first: the write is refused
        _put(saver, 1)
    # Then either the takeover happened or the checkpoint was stored, never both
    assert serde.took_over is not None
    assert serde.took_over != bool(_stored_ids(saver))


def test_writing_while_iterating_a_listing_is_stored_at_once(sqlite_db: Database) -> None:
    # Given a run with two checkpoints, listed by one saver, and another process's saver
    saver = SqliteCheckpointSaver(sqlite_db)
    other = SqliteCheckpointSaver(Database(sqlite_db.path))
    _put(saver, None)
    _put(saver, None)
    listing = saver.list(_config())
    next(listing)
    # When the same thread stores a checkpoint before the listing is exhausted
    written = _put(saver, None)
    # Then the other process sees it at once (the write did not wait for the listing to end)
    assert written in _stored_ids(other)
    assert len(list(listing)) == 1


# --- two processes ---------------------------------------------------------------------------


@pytest.fixture
def two_processes() -> Iterator[tuple[ProcessPoolExecutor, ProcessPoolExecutor]]:
    """Two processes, fresh interpreters (the sandboxes are forked from a clean server)."""
    context = multiprocessing.get_context("spawn")
    first = ProcessPoolExecutor(max_workers=1, mp_context=context)
    second = ProcessPoolExecutor(max_workers=1, mp_context=context)
    yield first, second
    first.shutdown()
    second.shutdown()


def test_of_two_processes_only_the_one_holding_the_current_fence_writes(
    sqlite_db: Database, two_processes: tuple[ProcessPoolExecutor, ProcessPoolExecutor]
) -> None:
    # Given a run whose segment in one process holds fence 1 and stored a checkpoint
    old, new = two_processes
    path = str(sqlite_db.path)
    _lease(sqlite_db, 1)
    assert old.submit(put_checkpoint, path, RUN, 1).result() == "stored"
    # When a segment in another process takes the lease over (fence 2), and both write at once
    _lease(sqlite_db, 2)
    stale = old.submit(put_checkpoint, path, RUN, 1)
    current = new.submit(put_checkpoint, path, RUN, 2)
    # Then the newer segment's checkpoint is stored and the older one's is refused
    assert (stale.result(), current.result()) == ("refused", "stored")
    assert len(_stored_ids(SqliteCheckpointSaver(sqlite_db))) == 2
