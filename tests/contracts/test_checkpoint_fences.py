"""Contract of fenced checkpoint writes (RELIABILITY.md "Runs and state": the history never
forks): the in-memory fake, the SQLite saver and the DynamoDB saver on moto pass the same tests.

A segment puts its lease's fence in the config (``configurable["langorch_fence"]``); a write
under it lands only while it is still the run's fence, and is otherwise refused with
``LeaseLostError``, nothing written. A config without a fence writes unchecked. The DynamoDB
saver buffers a task's writes until the next checkpoint, so a stale segment's writes are refused
by the time they are flushed at the latest; the others refuse them at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import operator
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.graph import END, START, StateGraph

from langorch.adapters.dynamodb.checkpointer import DynamoCheckpointSaver
from langorch.adapters.dynamodb.runs import RunsRepository
from langorch.adapters.sqlite._db import Database
from langorch.adapters.sqlite.checkpointer import SqliteCheckpointSaver
from langorch.domain.errors import LeaseLostError
from langorch.domain.runs import PauseRequest
from langorch.engine.segments import FENCE_KEY
from tests.fakes import InMemoryRuns
from tests.fakes.checkpoints import InMemoryCheckpoints
from tests.support.records import a_run

RUN = "run-1"
T0 = datetime(2025, 3, 4, 9, 0, tzinfo=UTC)

Saver = InMemoryCheckpoints | SqliteCheckpointSaver | DynamoCheckpointSaver


@dataclass
class Fenced:
    """A saver whose writes are fenced by a runs store, and that store's lease taking."""

    saver: Saver
    take_over: Callable[[str], int]
    """Gives the run to a new segment (its lease taken, or taken over); returns its fence."""
    pause: Callable[[str], None]
    """An operator asks the (leased) run to pause."""


@pytest.fixture(params=["fake", "sqlite", "dynamodb"])
def fenced(request: pytest.FixtureRequest) -> Fenced:
    if request.param == "fake":
        runs = InMemoryRuns()
        return Fenced(InMemoryCheckpoints(runs), _lease_taker(runs), _pauser(runs))
    if request.param == "sqlite":
        db: Database = request.getfixturevalue("sqlite_db")
        return Fenced(SqliteCheckpointSaver(db), _sqlite_lease_taker(db), _sqlite_pauser(db))
    dynamodb = request.getfixturevalue("dynamodb")
    repository = RunsRepository(dynamodb, "runs")
    repository.create_table()
    saver = DynamoCheckpointSaver(dynamodb, "checkpoints", runs_table="runs", fences=repository)
    saver.setup()
    return Fenced(saver, _lease_taker(repository, saver), _pauser(repository, saver))


def _pauser(
    runs: InMemoryRuns | RunsRepository, saver: Saver | None = None
) -> Callable[[str], None]:
    """An operator's pause as ``pause_run`` asks it: the request, then the checkpointer told."""

    def pause(run_id: str) -> None:
        runs.request_pause(run_id, PauseRequest(by="cli:alice", reason="", at=T0))
        if saver is not None:
            saver.claim_pause(run_id)

    return pause


def _sqlite_pauser(db: Database) -> Callable[[str], None]:
    """A pause as the runs store keeps it: a row of ``run_pauses``."""

    def pause(run_id: str) -> None:
        with db.write() as connection:
            connection.execute(
                "CREATE TABLE IF NOT EXISTS run_pauses"
                " (run_id TEXT PRIMARY KEY, pause TEXT, token TEXT)"
            )
            connection.execute(
                "INSERT INTO run_pauses (run_id, pause) VALUES (?, ?)", (run_id, '{"by": "a"}')
            )

    return pause


def _lease_taker(
    runs: InMemoryRuns | RunsRepository, saver: Saver | None = None
) -> Callable[[str], int]:
    """Each call takes the run's lease after the previous one expired, as a retry does, and
    claims the run's checkpoints for it as a segment does (``run_segment``)."""
    clock = itertools.count(start=1_000, step=1_000)

    def take_over(run_id: str) -> int:
        runs.create_run(a_run(run_id))  # once: the same run id is the same run
        fence = runs.acquire_lease(run_id, "segment", now=next(clock), ttl_seconds=1)
        if saver is not None:
            saver.claim_lease(run_id, fence)
        return fence

    return take_over


def _sqlite_lease_taker(db: Database) -> Callable[[str], int]:
    """The lease as the runs table keeps it: each taking increments the run's fence (the
    runs store's own SQLite adapter is not here yet, only its ``runs.fence`` column)."""
    with db.write() as connection:
        connection.execute(
            "CREATE TABLE IF NOT EXISTS runs"
            " (run_id TEXT PRIMARY KEY, fence INTEGER NOT NULL DEFAULT 0)"
        )

    def take_over(run_id: str) -> int:
        with db.write() as connection:
            connection.execute(
                "INSERT INTO runs (run_id, fence) VALUES (?, 1)"
                " ON CONFLICT (run_id) DO UPDATE SET fence = fence + 1",
                (run_id,),
            )
            row = connection.execute("SELECT fence FROM runs WHERE run_id = ?", (run_id,))
            return int(row.fetchone()[0])

    return take_over


def _config(fence: int | None = None, checkpoint_id: str | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": RUN, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    if fence is not None:
        configurable[FENCE_KEY] = fence
    return {"configurable": configurable}


def _put(saver: BaseCheckpointSaver[Any], fence: int | None) -> str:
    """Store a new checkpoint of the run under ``fence``; returns its id."""
    checkpoint = empty_checkpoint()
    stored = saver.put(_config(fence), checkpoint, {"source": "loop", "step": 0}, {})
    return str(stored["configurable"]["checkpoint_id"])


def _stored_ids(saver: BaseCheckpointSaver[Any]) -> list[str]:
    return [t.config["configurable"]["checkpoint_id"] for t in saver.list(_config())]


# --- checkpoints ---------------------------------------------------------------------------


def test_a_checkpoint_under_the_run_s_fence_is_stored(fenced: Fenced) -> None:
    # Given a segment holding the run's lease
    fence = fenced.take_over(RUN)
    # When it stores a checkpoint under its fence
    checkpoint_id = _put(fenced.saver, fence)
    # Then the checkpoint is the run's newest
    newest = fenced.saver.get_tuple(_config())
    assert newest is not None and newest.config["configurable"]["checkpoint_id"] == checkpoint_id


def test_a_checkpoint_under_a_stale_fence_is_refused_and_nothing_is_stored(
    fenced: Fenced,
) -> None:
    # Given a segment whose lease another segment has taken over
    stale = fenced.take_over(RUN)
    fenced.take_over(RUN)
    # When the first one stores a checkpoint under its fence, then it is refused
    with pytest.raises(LeaseLostError, match=f"fence {stale}"):
        _put(fenced.saver, stale)
    # And nothing was stored
    assert _stored_ids(fenced.saver) == []


def test_a_fenced_write_for_a_run_without_a_lease_is_refused(fenced: Fenced) -> None:
    # Given a run no segment ever leased (another run has a lease)
    fence = fenced.take_over("run-other")
    # When a checkpoint of it is stored under a fence, then it is refused, nothing stored
    with pytest.raises(LeaseLostError):
        _put(fenced.saver, fence)
    assert _stored_ids(fenced.saver) == []


# --- task writes ---------------------------------------------------------------------------


def test_writes_under_the_run_s_fence_are_stored(fenced: Fenced) -> None:
    # Given a segment holding the lease, with a checkpoint stored
    fence = fenced.take_over(RUN)
    checkpoint_id = _put(fenced.saver, fence)
    # When a task's writes are stored under its fence (and the segment flushes)
    fenced.saver.put_writes(_config(fence, checkpoint_id), [("trail", "a")], "task-1")
    fenced.saver.flush()
    # Then they are the checkpoint's pending writes
    stored = fenced.saver.get_tuple(_config(checkpoint_id=checkpoint_id))
    assert stored is not None and stored.pending_writes == [("task-1", "trail", "a")]


def test_writes_under_a_stale_fence_are_refused_and_nothing_is_stored(fenced: Fenced) -> None:
    # Given a segment that stored a checkpoint, then lost its lease to another
    stale = fenced.take_over(RUN)
    checkpoint_id = _put(fenced.saver, stale)
    fenced.take_over(RUN)
    # When it stores a task's writes under its fence, then they are refused by the flush at
    # the latest
    with pytest.raises(LeaseLostError, match=f"fence {stale}"):
        fenced.saver.put_writes(_config(stale, checkpoint_id), [("trail", "a")], "task-1")
        fenced.saver.flush()
    # And none was stored
    stored = fenced.saver.get_tuple(_config(checkpoint_id=checkpoint_id))
    assert stored is not None and stored.pending_writes == []


# --- an operator's pause, seen by the checkpoint write ------------------------------------


def test_a_checkpoint_under_a_standing_pause_is_stored_and_the_pause_is_seen_once(
    fenced: Fenced,
) -> None:
    # Given a segment holding the lease of a run an operator asked to pause
    fence = fenced.take_over(RUN)
    fenced.pause(RUN)
    # When it stores a checkpoint under its fence
    checkpoint_id = _put(fenced.saver, fence)
    # Then the checkpoint is stored (the superstep is not lost) and the pause is seen, once
    assert _stored_ids(fenced.saver) == [checkpoint_id]
    assert fenced.saver.pause_seen(RUN)
    assert not fenced.saver.pause_seen(RUN)


def test_a_checkpoint_without_a_pause_reports_none(fenced: Fenced) -> None:
    # Given a segment holding the lease of a run nobody asked to pause
    fence = fenced.take_over(RUN)
    # When it stores a checkpoint under its fence, then no pause is seen
    _put(fenced.saver, fence)
    assert not fenced.saver.pause_seen(RUN)


def test_a_stale_fence_under_a_standing_pause_is_still_refused(fenced: Fenced) -> None:
    # Given a segment whose lease was taken over, on a run asked to pause
    stale = fenced.take_over(RUN)
    fenced.take_over(RUN)
    fenced.pause(RUN)
    # When it stores a checkpoint, then it is refused as lease lost, nothing stored
    with pytest.raises(LeaseLostError, match=f"fence {stale}"):
        _put(fenced.saver, stale)
    assert _stored_ids(fenced.saver) == []


# --- unfenced ------------------------------------------------------------------------------


def test_unfenced_configs_write_whoever_holds_the_lease(fenced: Fenced) -> None:
    # Given a run whose lease a segment holds
    fence = fenced.take_over(RUN)
    # When a checkpoint and writes are stored with no fence in the config
    checkpoint_id = _put(fenced.saver, None)
    fenced.saver.put_writes(_config(checkpoint_id=checkpoint_id), [("trail", "a")], "task-1")
    fenced.saver.flush()
    # Then both are stored, unchecked
    stored = fenced.saver.get_tuple(_config(fence))
    assert stored is not None and stored.config["configurable"]["checkpoint_id"] == checkpoint_id
    assert stored.pending_writes == [("task-1", "trail", "a")]


# --- a graph, as a segment runs it ---------------------------------------------------------


class TrailState(TypedDict, total=False):
    trail: Annotated[list[str], operator.add]


def _graph(saver: BaseCheckpointSaver[Any], steps: int) -> Any:
    builder = StateGraph(TrailState)
    previous = START
    for n in range(steps):
        builder.add_node(f"step_{n}", lambda _, name=f"step_{n}": {"trail": [name]})
        builder.add_edge(previous, f"step_{n}")
        previous = f"step_{n}"
    builder.add_edge(previous, END)
    return builder.compile(checkpointer=saver)


def test_a_graph_under_the_run_s_fence_runs_to_the_end_in_one_line_of_history(
    fenced: Fenced,
) -> None:
    # Given a segment holding the lease
    fence = fenced.take_over(RUN)
    # When it runs a 3-step graph asynchronously, as the engine does
    result = asyncio.run(
        _graph(fenced.saver, 3).ainvoke({"trail": []}, _config(fence), durability="sync")
    )
    # Then every step ran, and each checkpoint's parent is the one stored before it
    assert result["trail"] == ["step_0", "step_1", "step_2"]
    history = [
        (t.config, t.parent_config) for t in fenced.saver.list({"configurable": {"thread_id": RUN}})
    ]
    ids = [config["configurable"]["checkpoint_id"] for config, _ in history]
    parents = [parent["configurable"]["checkpoint_id"] if parent else None for _, parent in history]
    assert parents == [*ids[1:], None]


def test_a_graph_under_a_stale_fence_stores_nothing(fenced: Fenced) -> None:
    # Given a segment whose lease was taken over before it started its graph
    stale = fenced.take_over(RUN)
    fenced.take_over(RUN)
    # When it runs the graph as the engine does, then its first write is refused
    with pytest.raises(LeaseLostError):
        asyncio.run(
            _graph(fenced.saver, 3).ainvoke({"trail": []}, _config(stale), durability="sync")
        )
    # And nothing of it was stored, even after the segment's closing flush (the DynamoDB saver
    # may still hold some of its writes: that flush refuses them too)
    with contextlib.suppress(LeaseLostError):
        fenced.saver.flush()
    assert _stored_ids(fenced.saver) == []
