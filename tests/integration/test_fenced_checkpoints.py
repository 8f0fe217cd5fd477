"""Fenced checkpoints (RELIABILITY.md "Runs and state", issue 8 item 6), on moto's DynamoDB.

A segment's checkpoint writes carry its lease's fence: once another segment has taken the
lease, the first one cannot write a checkpoint, so the history never forks and no step after
the takeover runs twice.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from langorch.adapters.dynamodb.checkpoint_slots import FREE, slot_prefix
from langorch.adapters.dynamodb.checkpointer import DynamoCheckpointSaver
from langorch.adapters.dynamodb.checkpointer._slotting import SLOT_BYTES, item_size, pack
from langorch.adapters.request_counter import RequestCounter
from langorch.app.definitions import seed_builtins
from langorch.app.runs import LEASE_GRACE_SECONDS, RunSegment, StartRun, run_segment, start_run
from langorch.composition.container import Container
from langorch.config import Settings
from langorch.domain.errors import LeaseHeldError, LeaseLostError
from langorch.domain.runs import PauseRequest
from langorch.engine.rewind import copy_to_head
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
def test_a_fenced_superstep_is_one_put_item_and_a_stale_fence_writes_nothing(
    processes: Callable[[], Container],
) -> None:
    # Given a run holding fence 1, and a saver that knows the runs table
    setup = processes()
    register_text(setup, GATED_WORKFLOW)
    run, _ = start_run(StartRun("gated"), setup)
    fence = setup.runs.acquire_lease(run.run_id, "seg", now=0, ttl_seconds=60)
    saver = _fenced_saver(setup)
    counter = RequestCounter(setup.client("dynamodb"))
    # When a 10-step graph runs under the run's fence
    config: Any = {"configurable": {"thread_id": run.run_id, "langorch_fence": fence}}
    result = linear_graph(saver, 10).invoke({"trail": []}, config, durability="sync")
    # Then every write was one PutItem of the thread's next slot (no transaction, no batch), about
    # one per superstep; the reads are the first one's (the thread, and the run's fence once,
    # since fence 1 leaves no marker). Not an exact count: LangGraph hands a task's writes and
    # the next checkpoint to two threads, and writes that arrive after that checkpoint are
    # written on their own.
    assert len(result["trail"]) == 10
    assert set(counter.counts) == {"Query", "GetItem", "PutItem"}, counter.counts
    assert counter.counts["GetItem"] == 1
    assert 11 <= counter.counts["PutItem"] <= 15, counter.counts
    assert counter.total / 10 <= 1.8, counter.counts
    # And with a stale fence, nothing is written
    stored = _stored(setup, run.run_id)
    stale: Any = {"configurable": {"thread_id": run.run_id, "langorch_fence": fence - 1}}
    with pytest.raises(LeaseLostError, match=f"fence {fence - 1}"):
        linear_graph(saver, 3).invoke({"trail": []}, stale, durability="sync")
    assert _stored(setup, run.run_id) == stored


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
    under_fence: Any = {"configurable": {**first.config["configurable"], "langorch_fence": fence}}
    saver.put_writes(under_fence, [("__interrupt__", "parked")], "task-1")
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
    first = saver.get_tuple(config)
    asked = dict(counter.counts)
    counter.reset()
    later = [saver.get_tuple(config) for _ in range(2)]
    # Then the first read found none (its slots, the layout before slots, and the run's fence
    # once: fence 1 leaves no marker to find), and the later reads asked nothing
    assert first is None and later == [None, None]
    assert asked == {"Query": 2, "GetItem": 1}, asked
    assert counter.total == 0, counter.counts
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
        fences=container.runs,
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


def _big_write(run_id: str, n: int, payload: int) -> dict[str, Any]:
    return {
        "PK": {"S": run_id},
        "SK": {"S": f"C##c1#W#task-{n}#r"},
        "k": {"S": "w"},
        "ns": {"S": ""},
        "cid": {"S": "c1"},
        "p": {"B": b"x" * payload},
    }


def test_a_superstep_too_big_for_one_item_takes_several_slots_the_checkpoint_first() -> None:
    # Given a superstep of 5 writes of 150 KB and its checkpoint: more than one item holds
    writes = [_big_write("r", n, 150_000) for n in range(5)]
    checkpoint = {**_big_write("r", 9, 10), "k": {"S": "c"}, "cid": {"S": "c2"}}
    # When it is packed into slot items
    slots = pack([*writes, checkpoint])
    # Then the checkpoint takes a slot of its own, first (a write never lands below the
    # checkpoint it belongs to), the writes fill the slots after it, each under the limit
    assert [slot["k"]["S"] for slot in slots] == ["c", "w", "w", "w"]
    assert all(item_size(slot) <= SLOT_BYTES for slot in slots)
    carried = [e["M"]["SK"]["S"] for slot in slots for e in slot.get("ws", {}).get("L", [])]
    assert carried == [w["SK"]["S"] for w in writes]
    # And a small superstep is one slot: the checkpoint carrying its writes
    [one] = pack([_big_write("r", 0, 100), checkpoint])
    assert one["k"]["S"] == "c" and len(one["ws"]["L"]) == 1


@pytest.mark.usefixtures("gated")
def test_a_superstep_over_one_item_is_written_slot_by_slot_and_a_stale_fence_writes_none(
    processes: Callable[[], Container],
) -> None:
    # Given a segment holding fence 1 whose superstep has 4 writes of 150 KB (600 KB)
    setup, run, fence, saver, config = _segment_under_fence(processes)
    first = saver.put(config, _empty_checkpoint(), {"source": "loop", "step": 0}, {})
    under_fence: Any = {"configurable": {**first["configurable"], "langorch_fence": fence}}
    big = secrets.token_urlsafe(110_000)  # incompressible: ~150 KB stored
    for n in range(4):
        saver.put_writes(under_fence, [(f"k{n}", big)], f"task-{n}")
    counter = RequestCounter(setup.client("dynamodb"))
    # When its checkpoint is stored
    second = {**_empty_checkpoint(), "id": "1f000000-0000-6000-8000-000000000009"}
    saver.put(under_fence, second, {"source": "loop", "step": 1}, {})
    # Then it took one PutItem per slot and every write reads back with the checkpoint before
    assert set(counter.counts) == {"PutItem"} and counter.counts["PutItem"] >= 3
    stored = _fenced_saver(setup).get_tuple(first)
    assert stored is not None and len(stored.pending_writes) == 4
    # And under a stale fence, once a newer lease claimed the thread, none of it lands
    before = _stored(setup, run.run_id)
    setup.runs.release_lease(run.run_id, fence)
    newer = setup.runs.acquire_lease(run.run_id, "newer", now=1, ttl_seconds=60)
    setup.checkpointer.claim_lease(run.run_id, newer)  # as the newer segment does
    third = {**_empty_checkpoint(), "id": "1f000000-0000-6000-8000-00000000000a"}
    after_second: Any = {
        "configurable": {**under_fence["configurable"], "checkpoint_id": second["id"]}
    }
    with pytest.raises(LeaseLostError):
        for n in range(4):
            saver.put_writes(after_second, [(f"k{n}", big)], f"task-{n}")
        saver.put(after_second, third, {"source": "loop", "step": 2}, {})
    assert _stored(setup, run.run_id) == before + 1  # the newer lease's marker only


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
        newer = setup.runs.acquire_lease(run.run_id, "newer", now=61, ttl_seconds=60)
        setup.checkpointer.claim_lease(run.run_id, newer)  # as the newer segment does
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
    assert counter.counts["PutItem"] >= 11, counter.counts
    assert counter.counts["GetItem"] == 1, counter.counts


def test_a_new_runs_segment_makes_two_requests_besides_its_supersteps_and_reads_no_checkpoint(
    processes: Callable[[], Container],
) -> None:
    # Given a new 10-step run (12 checkpoints: its input, __start__'s and one per step), when
    # one segment runs it to its end
    setup, run, result, counter = _one_segment_of_a_new_ten_step_run(processes)
    # Then it read the run, took the lease (one UpdateItem: the first lease leaves no marker),
    # wrote 11 checkpoint slots (the input checkpoint went with __start__'s), one PutItem each,
    # and the record with its timeline in one conditional update: no Query, no transaction
    assert result.status == "succeeded"
    assert counter.counts == {"GetItem": 1, "UpdateItem": 2, "PutItem": 11}
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


def test_a_supersteps_write_bills_its_own_item_only(
    processes: Callable[[], Container],
) -> None:
    # Given a 10-step run started with 20 KB of input (its run item holds all of it)
    setup = processes()
    register_text(setup, STEPS_10.replace("memory: false", "memory: false\n    inputs_schema: {}"))
    run, _ = start_run(StartRun("ten", input={"notes": "n" * 20_000}), setup)
    puts: list[dict[str, Any]] = []

    def note_puts(params: dict[str, Any], **_: Any) -> None:
        puts.append(params)

    events = setup.client("dynamodb").meta.events
    events.register("provide-client-params.dynamodb.PutItem", note_puts)
    # When a segment runs it to its end
    assert run_segment(RunSegment(run.run_id), setup).status == "succeeded"
    # Then every superstep was one PutItem of the checkpoints table, only onto a free slot: no
    # transaction bills it twice, and nothing reads the run item with its input
    slots = [p for p in puts if p["TableName"] == setup.settings.checkpoints_table]
    assert len(slots) >= 11
    assert {p["ConditionExpression"] for p in slots} == {FREE}
    assert all(p["Item"]["SK"]["S"].startswith(slot_prefix("")) for p in slots)


@pytest.mark.usefixtures("gated")
def test_an_operators_pause_is_seen_by_the_next_checkpoint_write_which_still_lands(
    processes: Callable[[], Container],
) -> None:
    # Given a segment under its fence that stored a checkpoint
    setup, run, fence, saver, config = _segment_under_fence(processes)
    first = saver.put(config, _checkpoint(1), {"source": "loop", "step": 0}, {})
    assert not saver.pause_seen(run.run_id)
    # When an operator asks the run to pause, and the segment stores its next checkpoint
    setup.runs.request_pause(run.run_id, PauseRequest(by="cli:alice", at=setup.clock()))
    setup.checkpointer.claim_pause(run.run_id)  # as pause_run tells it
    counter = RequestCounter(setup.client("dynamodb"))
    second = saver.put(_fenced(first, fence), _checkpoint(2), {"source": "loop", "step": 1}, {})
    # Then that write found the pause marker in its slot and landed in the next one (two
    # PutItems, no read), and the segment learns of the pause, once
    assert counter.counts == {"PutItem": 2}, counter.counts
    assert saver.pause_seen(run.run_id)
    assert not saver.pause_seen(run.run_id)
    # And the write after it finds no pause: one PutItem
    counter.reset()
    saver.put(_fenced(second, fence), _checkpoint(3), {"source": "loop", "step": 2}, {})
    assert counter.counts == {"PutItem": 1}, counter.counts
    assert not saver.pause_seen(run.run_id)
    # And the history is one line
    history = _history(setup, run.run_id)
    assert [parent for _, parent in history] == [*[c for c, _ in history][1:], None]


def test_a_run_stored_before_slots_resumes_under_a_fence_into_slots_and_rewinds(
    processes: Callable[[], Container],
) -> None:
    # Given a run parked on an approval by a segment that stored its checkpoints in the layout
    # before slots (the saver without a runs table writes it: one item per checkpoint and per
    # task's writes, keyed by checkpoint id)
    old = processes()
    register_text(old, ASK_THEN_DONE)
    old.__dict__["checkpointer"] = DynamoCheckpointSaver(
        old.client("dynamodb"), old.settings.checkpoints_table
    )
    run, _ = start_run(StartRun("gated"), old)
    assert run_segment(RunSegment(run.run_id), old).status == "waiting_approval"
    parked = _history(old, run.run_id)
    assert _slots(old, run.run_id) == 0
    # When another process resumes it
    newer = processes()
    done = run_segment(RunSegment(run.run_id, resume={"decision": "approved"}), newer)
    # Then it went on from the old checkpoint, writing slots, in one line of history
    assert done.status == "succeeded" and done.outputs["ok"] == 1
    assert _slots(newer, run.run_id) > 0
    history = _history(newer, run.run_id)
    assert history[-len(parked) :] == parked
    assert [parent for _, parent in history] == [*[c for c, _ in history][1:], None]
    # And a rewind to an old checkpoint makes a copy of it the newest, under a lease
    target = parked[0][0]
    fence = newer.runs.acquire_lease(
        run.run_id, "rewind", now=newer.clock().timestamp(), ttl_seconds=60
    )
    copied = copy_to_head(
        newer.checkpointer,
        source_thread=run.run_id,
        checkpoint_id=target,
        target_thread=run.run_id,
        fence=fence,
    )
    newer.runs.release_lease(run.run_id, fence)
    head = processes().checkpointer.get_tuple({"configurable": {"thread_id": run.run_id}})
    source = newer.checkpointer.get_tuple(
        {"configurable": {"thread_id": run.run_id, "checkpoint_ns": "", "checkpoint_id": target}}
    )
    assert head is not None and source is not None
    assert head.config["configurable"]["checkpoint_id"] == copied
    assert head.checkpoint["channel_values"] == source.checkpoint["channel_values"]


def _checkpoint(n: int) -> Any:
    return {**_empty_checkpoint(), "id": f"1f000000-0000-6000-8000-{n:012d}"}


def _fenced(config: Any, fence: int) -> Any:
    return {"configurable": {**config["configurable"], "langorch_fence": fence}}


def _slots(container: Container, thread_id: str) -> int:
    response = container.client("dynamodb").query(
        TableName=container.settings.checkpoints_table,
        KeyConditionExpression="PK = :pk AND begins_with(SK, :slots)",
        ExpressionAttributeValues={":pk": {"S": thread_id}, ":slots": {"S": slot_prefix("")}},
        Select="COUNT",
    )
    return int(response["Count"])
