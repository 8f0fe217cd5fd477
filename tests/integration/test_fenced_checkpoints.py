"""Fenced checkpoints (RELIABILITY.md "Runs and state", issue 8 item 6), on moto's DynamoDB.

A segment's checkpoint writes carry its lease's fence: once another segment has taken the
lease, the first one cannot write a checkpoint, so the history never forks and no step after
the takeover runs twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from langorch.adapters.dynamodb.checkpointer import DynamoCheckpointSaver
from langorch.adapters.dynamodb.checkpointer._fence import Fence
from langorch.adapters.dynamodb.checkpointer._table import _transaction_chunks, item_size
from langorch.adapters.request_counter import RequestCounter
from langorch.app.definitions import seed_builtins
from langorch.app.runs import LEASE_GRACE_SECONDS, RunSegment, StartRun, run_segment, start_run
from langorch.composition.container import Container
from langorch.config import Settings
from langorch.domain.errors import LeaseHeldError, LeaseLostError
from langorch.llm import LLMRegistry
from tests.fakes.clock import FakeClock
from tests.gated_kinds import (
    GATED_WORKFLOW,
    WAIT_SECONDS,
    GatedKinds,
    paused_at_the_gate,
    registered,
)
from tests.integration.conftest import register_text
from tests.integration.test_checkpointer import TrailState, linear_graph
from tests.workflows import ASK_THEN_DONE

Outcome = list[Any]


@pytest.fixture
def gated() -> Iterator[GatedKinds]:
    """The ``gate`` and ``tally`` kinds, registered for one test."""
    with registered() as kinds:
        yield kinds


@pytest.fixture
def processes(aws: None) -> Callable[[], Container]:
    """Containers over one moto account and one settable clock: each is another Lambda."""
    clock = FakeClock()
    first: list[Container] = []

    def make() -> Container:
        container = Container(Settings(), clock=clock, llm=LLMRegistry(default_provider="offline"))
        if not first:
            container.ensure_resources()
            seed_builtins(container.definitions)
            first.append(container)
        return container

    return make


def _history(container: Container, run_id: str) -> list[tuple[str, str | None]]:
    """(checkpoint id, parent id) of the run's root checkpoints, newest first."""
    config: Any = {"configurable": {"thread_id": run_id, "checkpoint_ns": ""}}
    return [
        (
            t.config["configurable"]["checkpoint_id"],
            t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None,
        )
        for t in container.checkpointer.list(config)
    ]


def test_a_segment_that_lost_its_lease_cannot_write_and_the_history_does_not_fork(
    processes: Callable[[], Container], gated: GatedKinds
) -> None:
    # Given a run whose first segment ran `before` and is paused at the gate, its checkpoint
    # after `before` stored
    paused = paused_at_the_gate(gated, processes)
    setup, run_id = paused.setup, paused.run_id
    # When its lease expires and a second segment takes the run over and runs it to the end
    setup.clock.advance(setup.settings.segment_budget_seconds + LEASE_GRACE_SECONDS + 1)  # type: ignore[attr-defined]
    newer = run_segment(RunSegment(run_id), processes())
    # And then the first segment goes on
    gated.gate.open()
    paused.thread.join(WAIT_SECONDS)

    # Then the newer segment finished the run, and the first one's next write was refused
    assert newer.status == "succeeded"
    [refused] = paused.outcome
    assert isinstance(refused, LeaseLostError), refused
    assert "fence 1" in str(refused)
    # And no side effect ran twice: `before` ran in the first segment, `after` only in the newer
    assert gated.effects == {"before": 1, "after": 1}
    # And the history is one line: every checkpoint's parent is the one stored before it
    history = _history(setup, run_id)
    ids = [checkpoint for checkpoint, _ in history]
    assert [parent for _, parent in history] == [*ids[1:], None]
    assert setup.runs.get_run(run_id).status == "succeeded"


def test_a_second_segment_is_refused_while_the_first_holds_the_lease(
    processes: Callable[[], Container], gated: GatedKinds
) -> None:
    # Given a segment paused mid-run, holding the lease
    first = paused_at_the_gate(gated, processes)
    # When a second segment starts for the same run, then it is refused
    with pytest.raises(LeaseHeldError) as refused:
        run_segment(RunSegment(first.run_id), processes())
    assert not isinstance(refused.value, LeaseLostError)
    # And the first goes on to the end, each side effect once
    gated.gate.open()
    first.thread.join(WAIT_SECONDS)
    assert [r.status for r in first.outcome] == ["succeeded"]
    assert gated.effects == {"before": 1, "after": 1}


@pytest.mark.usefixtures("gated")
def test_a_fenced_superstep_is_one_transaction_and_a_stale_fence_writes_nothing(
    processes: Callable[[], Container],
) -> None:
    # Given a run holding fence 1, and a saver that knows the runs table
    setup = processes()
    register_text(setup, GATED_WORKFLOW)
    run, _ = start_run(StartRun("gated"), setup)
    fence = setup.runs.acquire_lease(run.run_id, "seg", now=0, ttl_seconds=60)
    saver = DynamoCheckpointSaver(
        setup.client("dynamodb"),
        setup.settings.checkpoints_table,
        runs_table=setup.settings.runs_table,
    )
    counter = RequestCounter(setup.client("dynamodb"))
    # When a 10-step graph runs under the run's fence
    config: Any = {"configurable": {"thread_id": run.run_id, "langorch_fence": fence}}
    result = linear_graph(saver, 10).invoke({"trail": []}, config, durability="sync")
    # Then every write was a TransactWriteItems (the fence checked with it; no BatchWriteItem),
    # about one per superstep, within the checkpointer's budget (PERFORMANCE.md P1). Not an
    # exact count: LangGraph hands a task's writes and the next checkpoint to two threads, and
    # writes that arrive after that checkpoint are written on their own.
    assert len(result["trail"]) == 10
    assert set(counter.counts) == {"Query", "TransactWriteItems"}, counter.counts
    assert counter.total / 10 <= 1.5, counter.counts
    # And with a stale fence, nothing is written
    stored = len(list(saver.list({"configurable": {"thread_id": run.run_id}})))
    stale: Any = {"configurable": {"thread_id": run.run_id, "langorch_fence": fence - 1}}
    with pytest.raises(LeaseLostError, match=f"fence {fence - 1}"):
        linear_graph(saver, 3).invoke({"trail": []}, stale, durability="sync")
    assert len(list(saver.list({"configurable": {"thread_id": run.run_id}}))) == stored


@pytest.mark.usefixtures("gated")
def test_under_one_fence_the_newest_checkpoint_is_not_read_again_and_matches_a_fresh_read(
    processes: Callable[[], Container],
) -> None:
    # Given a segment that ran 3 supersteps under its run's fence
    setup, run, fence, saver, config = _segment_under_fence(processes)
    linear_graph(saver, 3).invoke({"trail": []}, config, durability="sync")
    counter = RequestCounter(setup.client("dynamodb"))
    # When it reads the newest checkpoint twice (the state after the run, LangGraph's own read)
    first, second = saver.get_tuple(config), saver.get_tuple(config)
    # Then neither read made a request, and both equal what another process reads
    assert counter.total == 0, counter.counts
    fresh = _fenced_saver(setup).get_tuple({"configurable": {"thread_id": run.run_id}})
    assert first is not None and second is not None and fresh is not None
    for tuple_ in (first, second):
        assert tuple_.config == fresh.config
        assert tuple_.checkpoint == fresh.checkpoint
        assert tuple_.metadata == fresh.metadata
        assert tuple_.parent_config == fresh.parent_config
        assert tuple_.pending_writes == fresh.pending_writes == []
    # And once a write of that checkpoint is stored, the next read asks DynamoDB and sees it
    saver.put_writes(first.config, [("__interrupt__", "parked")], "task-1")
    stored = saver.get_tuple(config)
    assert counter.counts["Query"] >= 1
    assert stored is not None and stored.pending_writes == [("task-1", "__interrupt__", "parked")]
    # And the next fence (this process's next segment: nobody took the lease in between)
    # trusts that view, with the write it stored
    counter.reset()
    saver.get_tuple(config)
    assert counter.total == 0, counter.counts
    setup.runs.release_lease(run.run_id, fence)
    newer = setup.runs.acquire_lease(run.run_id, "seg-2", now=1, ttl_seconds=60)
    counter.reset()
    same = saver.get_tuple({"configurable": {"thread_id": run.run_id, "langorch_fence": newer}})
    assert counter.total == 0, counter.counts
    assert same is not None and same.pending_writes == stored.pending_writes
    # And a fence further on (a lease taken elsewhere meanwhile) reads again
    setup.runs.release_lease(run.run_id, newer)
    elsewhere = setup.runs.acquire_lease(run.run_id, "elsewhere", now=2, ttl_seconds=60)
    setup.runs.release_lease(run.run_id, elsewhere)
    latest = setup.runs.acquire_lease(run.run_id, "seg-3", now=3, ttl_seconds=60)
    again = saver.get_tuple({"configurable": {"thread_id": run.run_id, "langorch_fence": latest}})
    assert counter.counts["Query"] >= 1
    assert again is not None and again.pending_writes == stored.pending_writes


@pytest.mark.usefixtures("gated")
def test_under_one_fence_a_thread_without_checkpoints_is_read_once_until_it_writes(
    processes: Callable[[], Container],
) -> None:
    # Given a new run's first segment under its fence: the thread has no checkpoint yet
    setup, run, _, saver, config = _segment_under_fence(processes)
    counter = RequestCounter(setup.client("dynamodb"))
    # When it reads the newest checkpoint three times (the state before, LangGraph's own read)
    reads = [saver.get_tuple(config) for _ in range(3)]
    # Then one Query found none, and the later reads asked nothing
    assert reads == [None, None, None]
    assert counter.counts == {"Query": 1}, counter.counts
    # And once the segment stores its first checkpoint, a read returns it without a Query
    result = linear_graph(saver, 2).invoke({"trail": []}, config, durability="sync")
    counter.reset()
    stored = saver.get_tuple(config)
    assert result["trail"] and stored is not None
    assert counter.total == 0, counter.counts
    fresh = _fenced_saver(setup).get_tuple({"configurable": {"thread_id": run.run_id}})
    assert fresh is not None and stored.checkpoint == fresh.checkpoint


def _segment_under_fence(
    processes: Callable[[], Container],
) -> tuple[Container, Any, int, DynamoCheckpointSaver, Any]:
    """A new gated run whose segment holds the lease: the container, run, fence, a fenced
    saver and the segment's config."""
    setup = processes()
    register_text(setup, GATED_WORKFLOW)
    run, _ = start_run(StartRun("gated"), setup)
    fence = setup.runs.acquire_lease(run.run_id, "seg", now=0, ttl_seconds=60)
    config: Any = {"configurable": {"thread_id": run.run_id, "langorch_fence": fence}}
    return setup, run, fence, _fenced_saver(setup), config


def _fenced_saver(container: Container) -> DynamoCheckpointSaver:
    return DynamoCheckpointSaver(
        container.client("dynamodb"),
        container.settings.checkpoints_table,
        runs_table=container.settings.runs_table,
    )


def _stored(container: Container, thread_id: str) -> int:
    pages = (
        container.client("dynamodb")
        .get_paginator("query")
        .paginate(
            TableName=container.settings.checkpoints_table,
            KeyConditionExpression="PK = :pk",
            ExpressionAttributeValues={":pk": {"S": thread_id}},
            Select="COUNT",
        )
    )
    return sum(page["Count"] for page in pages)


def _put_items(run_id: str, count: int, payload: int) -> list[dict[str, Any]]:
    return [
        {
            "PK": {"S": run_id},
            "SK": {"S": f"C#x#{i:04d}"},
            "k": {"S": "c"},
            "p": {"B": b"x" * payload},
        }
        for i in range(count)
    ]


@pytest.mark.usefixtures("gated")
def test_a_superstep_too_big_for_one_transaction_is_chunked_each_chunk_fenced(
    processes: Callable[[], Container],
) -> None:
    # Given a run holding fence 1, and a superstep of 150 items (more than 99 puts) of 30 KB
    # (4.5 MB, more than a transaction's 4 MB)
    setup = processes()
    register_text(setup, GATED_WORKFLOW)
    run, _ = start_run(StartRun("gated"), setup)
    fence = setup.runs.acquire_lease(run.run_id, "seg", now=0, ttl_seconds=60)
    saver = _fenced_saver(setup)
    counter = RequestCounter(setup.client("dynamodb"))
    items = _put_items(run.run_id, 150, 30_000)
    # When they are written under the fence
    saver.table.write_fenced(items, Fence(setup.settings.runs_table, run.run_id, fence), what="t")
    # Then it took two transactions, each within DynamoDB's limits, and all items landed
    assert counter.counts == {"TransactWriteItems": 2}
    assert _stored(setup, run.run_id) == 150
    # And under a stale fence, no chunk lands
    stale = Fence(setup.settings.runs_table, "run-other", 7)
    with pytest.raises(LeaseLostError):
        saver.table.write_fenced(_put_items("run-other", 150, 30_000), stale, what="t")
    assert _stored(setup, "run-other") == 0


def test_chunks_keep_the_last_item_last_and_stay_within_the_limits() -> None:
    # Given 250 small items, and 12 items of 390 KB
    small = _put_items("r", 250, 10)
    big = _put_items("r", 12, 390_000)
    # When they are cut into transactions
    small_chunks = _transaction_chunks(small)
    big_chunks = _transaction_chunks(big)
    # Then no chunk has more than 99 puts or 3.5 MB, order is kept, the last item is last
    assert [len(c) for c in small_chunks] == [52, 99, 99]
    assert [len(c) for c in big_chunks] == [4, 8]
    for chunks, items in ((small_chunks, small), (big_chunks, big)):
        assert [i for c in chunks for i in c] == items
        assert all(sum(item_size(i) for i in c) <= 3_500_000 for c in chunks)


@pytest.mark.usefixtures("gated")
def test_an_interrupt_written_after_the_lease_was_lost_is_refused(
    processes: Callable[[], Container],
) -> None:
    # Given a graph that parks at an interrupt, whose lease is taken over just before it parks
    setup = processes()
    register_text(setup, GATED_WORKFLOW)
    run, _ = start_run(StartRun("gated"), setup)
    fence = setup.runs.acquire_lease(run.run_id, "seg", now=0, ttl_seconds=60)

    def approve(state: dict[str, Any]) -> dict[str, Any]:
        setup.runs.acquire_lease(run.run_id, "newer", now=61, ttl_seconds=60)
        interrupt({"question": "ship it?"})
        return {"trail": ["approve"]}

    builder = StateGraph(TrailState)
    builder.add_node("approve", approve)
    builder.add_edge(START, "approve")
    builder.add_edge("approve", END)
    saver = _fenced_saver(setup)
    graph = builder.compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": run.run_id, "langorch_fence": fence}}
    # When it runs, then the interrupt's write (stored at once, no put follows) is refused
    with pytest.raises(LeaseLostError):
        graph.invoke({"trail": []}, config, durability="sync")
    # And nothing of it was stored: the run is not parked, and nothing is left to flush
    assert not graph.get_state(config).interrupts
    saver.flush()


def test_the_state_machine_retries_a_segment_that_lost_its_lease_like_one_refused() -> None:
    # Given the run state machine's definition (Step Functions matches errors by class name)
    import json
    from importlib.resources import files

    definition = json.loads(files("langorch").joinpath("statemachine.asl.json").read_text())
    retried = {
        name for rule in definition["States"]["RunSegment"]["Retry"] for name in rule["ErrorEquals"]
    }
    # Then a lost lease is retried as a held one is (the retry finds the newer segment's run)
    assert {"LeaseHeldError", "LeaseLostError"} <= retried
    assert issubclass(LeaseLostError, LeaseHeldError)


STEPS_10 = "workflows:\n  - plan_id: ten\n    memory: false\n    steps:\n" + "".join(
    f"      - {{step_id: s{i}, kind: transform, {after}transform: {{x{i}: '{i}'}}}}\n"
    for i, after in ((i, f"depends_on: [s{i - 1}], " if i > 1 else "") for i in range(1, 11))
)


def _one_segment_of_a_new_ten_step_run(
    processes: Callable[[], Container],
) -> tuple[Container, Any, Any, RequestCounter]:
    """A new 10-step run nobody asked to pause, run to its end by one segment, its DynamoDB
    requests counted (the workflow compiled before, as in a warm Lambda)."""
    setup = processes()
    register_text(setup, STEPS_10)
    run, _ = start_run(StartRun("ten"), setup)
    setup.compiler.workflow(run.workflow_id, run.workflow_version)
    counter = RequestCounter(setup.client("dynamodb"))
    return setup, run, run_segment(RunSegment(run.run_id), setup), counter


def test_a_segment_learns_of_no_pause_without_reading_the_run_at_each_step_boundary(
    processes: Callable[[], Container],
) -> None:
    # Given a 10-step run nobody asked to pause, when one segment runs it to its end
    _, _, result, counter = _one_segment_of_a_new_ten_step_run(processes)
    # Then the run was read once, when the segment started: its 11 step boundaries learnt
    # that no pause stood from the fenced checkpoint writes they made anyway
    assert result.status == "succeeded"
    assert counter.counts["TransactWriteItems"] >= 11, counter.counts
    assert counter.counts["GetItem"] == 1, counter.counts


def test_a_new_runs_segment_makes_two_requests_besides_its_supersteps_and_reads_no_checkpoint(
    processes: Callable[[], Container],
) -> None:
    # Given a new 10-step run (12 checkpoints: its input, __start__'s and one per step), when
    # one segment runs it to its end
    setup, run, result, counter = _one_segment_of_a_new_ten_step_run(processes)
    # Then it read the run, took the lease (a transaction: the run item and its fence item),
    # wrote 11 transactions of checkpoints (the input checkpoint went with __start__'s) and the
    # record with its timeline in one conditional update: no Query
    assert result.status == "succeeded"
    assert counter.counts == {"GetItem": 1, "TransactWriteItems": 12, "UpdateItem": 1}
    assert len(_history(setup, run.run_id)) == 12
    # And another process reads the same end state
    fresh = _fenced_saver(setup).get_tuple({"configurable": {"thread_id": run.run_id}})
    assert fresh is not None and fresh.checkpoint["channel_values"]["shared_context"]["x10"] == 10


def test_resuming_our_own_interrupt_in_this_process_reads_no_checkpoint(
    processes: Callable[[], Container],
) -> None:
    # Given a run parked on an approval by a segment of this process
    setup = processes()
    register_text(setup, ASK_THEN_DONE)
    run, _ = start_run(StartRun("gated"), setup)
    parked = run_segment(RunSegment(run.run_id), setup)
    assert parked.status == "waiting_approval"
    counter = RequestCounter(setup.client("dynamodb"))
    # When the same process resumes it (nobody took the lease in between)
    done = run_segment(RunSegment(run.run_id, resume={"decision": "approved"}), setup)
    # Then it went on from the checkpoint it remembered, without reading the checkpoints
    assert done.status == "succeeded" and done.outputs["ok"] == 1
    assert "Query" not in counter.counts, counter.counts


def test_a_lease_taken_elsewhere_between_segments_makes_the_next_one_read_again(
    processes: Callable[[], Container],
) -> None:
    # Given a run parked on an approval by a segment of this process
    setup = processes()
    register_text(setup, ASK_THEN_DONE)
    run, _ = start_run(StartRun("gated"), setup)
    run_segment(RunSegment(run.run_id), setup)
    # And another process that took and gave back the run's lease since (it may have written)
    other = setup.runs.acquire_lease(run.run_id, "elsewhere", now=0, ttl_seconds=60)
    setup.runs.release_lease(run.run_id, other)
    counter = RequestCounter(setup.client("dynamodb"))
    # When this process resumes it
    done = run_segment(RunSegment(run.run_id, resume={"decision": "approved"}), setup)
    # Then it read the newest checkpoint from the table instead of trusting its memory
    assert done.status == "succeeded"
    assert counter.counts["Query"] >= 1, counter.counts


@pytest.mark.usefixtures("gated")
def test_a_held_input_checkpoint_is_stored_by_a_flush_or_before_a_read_by_id(
    processes: Callable[[], Container],
) -> None:
    # Given a segment under its fence whose graph stored only its input checkpoint so far
    setup, run, _, saver, config = _segment_under_fence(processes)
    checkpoint = {**_empty_checkpoint(), "id": "1f000000-0000-6000-8000-000000000001"}
    held = saver.put(config, checkpoint, {"source": "input", "step": -1}, {})
    # Then nothing was written yet, and a read of the newest serves it from memory
    assert _stored(setup, run.run_id) == 0
    assert saver.get_tuple(config) is not None
    # When the segment reads it by id, then it is stored first
    assert saver.get_tuple(held) is not None
    assert _stored(setup, run.run_id) == 1
    # And a held checkpoint the segment stops after is stored by its flush
    second = {**_empty_checkpoint(), "id": "1f000000-0000-6000-8000-000000000002"}
    saver.put(held, second, {"source": "input", "step": -1}, {})
    saver.flush()
    assert _stored(setup, run.run_id) == 2


def _empty_checkpoint() -> Any:
    from langgraph.checkpoint.base import empty_checkpoint

    return empty_checkpoint()


def test_a_supersteps_fence_check_reads_a_small_fence_item_not_the_run_with_its_input(
    processes: Callable[[], Container],
) -> None:
    # Given a 10-step run started with 20 KB of input (its run item holds all of it)
    setup = processes()
    register_text(setup, STEPS_10.replace("memory: false", "memory: false\n    inputs_schema: {}"))
    run, _ = start_run(StartRun("ten", input={"notes": "n" * 20_000}), setup)
    checked: list[dict[str, Any]] = []

    def note_checks(params: dict[str, Any], **_: Any) -> None:
        actions = params["TransactItems"]
        checked.extend(entry["ConditionCheck"] for entry in actions if "ConditionCheck" in entry)

    setup.client("dynamodb").meta.events.register(
        "provide-client-params.dynamodb.TransactWriteItems", note_checks
    )
    # When a segment runs it to its end
    assert run_segment(RunSegment(run.run_id), setup).status == "succeeded"
    # Then every superstep's check read the run's fence item, a few dozen bytes (two write
    # units a check, where the run item would bill two per KB: 40 here). At least one check a
    # superstep: LangGraph hands a task's writes to the saver from a background thread, and
    # writes that reach it after the next checkpoint are stored at once, with a check of their own
    assert len(checked) >= 11
    keys = {(c["Key"]["pk"]["S"], c["Key"]["sk"]["S"]) for c in checked}
    assert keys == {(f"run#{run.run_id}", "fence")}
    item = setup.client("dynamodb").get_item(
        TableName=setup.settings.runs_table, Key=checked[0]["Key"], ConsistentRead=True
    )["Item"]
    assert set(item) == {"pk", "sk", "fence"}
