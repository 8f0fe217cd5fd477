"""``DynamoCheckpointSaver`` under real LangGraph graphs, on moto (PERFORMANCE.md P1, P5;
RELIABILITY.md "Runs and state").

"A fresh process" is simulated by a new saver instance and a newly compiled graph on the same
table and bucket: nothing survives in memory, as after a Lambda cold start.
"""

from __future__ import annotations

import itertools
import logging
import operator
import os
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

import pytest
from botocore.exceptions import ClientError
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, interrupt

from langorch.adapters.dynamodb.checkpointer import DynamoCheckpointSaver
from langorch.adapters.dynamodb.checkpointer._keys import checkpoint_sk
from langorch.adapters.request_counter import RequestCounter
from langorch.domain.errors import CheckpointPayloadMissingError, StorageError

TABLE = "checkpoints"
BUCKET = "checkpoint-payloads"


class TrailState(TypedDict, total=False):
    trail: Annotated[list[str], operator.add]
    chunks: Annotated[list[bytes], operator.add]
    decision: str


Graph = CompiledStateGraph[Any, Any, Any, Any]


@pytest.fixture
def new_saver(dynamodb: Any, s3: Any) -> Callable[..., DynamoCheckpointSaver]:
    """Builds savers on one table and bucket: each call is a fresh process's saver."""
    s3.create_bucket(Bucket=BUCKET)
    DynamoCheckpointSaver(dynamodb, TABLE).setup()

    def build(**options: Any) -> DynamoCheckpointSaver:
        return DynamoCheckpointSaver(dynamodb, TABLE, s3_client=s3, bucket=BUCKET, **options)

    return build


def _thread() -> RunnableConfig:
    return {"configurable": {"thread_id": f"run-{uuid.uuid4().hex[:8]}"}}


def linear_graph(
    saver: DynamoCheckpointSaver,
    steps: int,
    *,
    runs: Counter[str] | None = None,
    fail_once_at: set[str] | None = None,
) -> Graph:
    """``step_0 → … → step_{n-1}``; each appends its name to ``trail``."""

    def make(name: str) -> Callable[[TrailState], TrailState]:
        def node(state: TrailState) -> TrailState:
            if runs is not None:
                runs[name] += 1
            if fail_once_at is not None and name in fail_once_at:
                fail_once_at.discard(name)
                raise RuntimeError(f"{name} crashed")
            return {"trail": [name]}

        return node

    builder = StateGraph(TrailState)
    names = [f"step_{i}" for i in range(steps)]
    for name in names:
        builder.add_node(name, make(name))
    builder.add_edge(START, names[0])
    for left, right in itertools.pairwise(names):
        builder.add_edge(left, right)
    builder.add_edge(names[-1], END)
    return builder.compile(checkpointer=saver)


def approval_graph(saver: DynamoCheckpointSaver) -> Graph:
    """``prepare → approve (interrupt) → finish``."""

    def approve(state: TrailState) -> TrailState:
        decision = interrupt({"question": "ship it?"})
        return {"trail": ["approve"], "decision": str(decision)}

    builder = StateGraph(TrailState)
    builder.add_node("prepare", lambda state: {"trail": ["prepare"]})
    builder.add_node("approve", approve)
    builder.add_node("finish", lambda state: {"trail": ["finish"]})
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "approve")
    builder.add_edge("approve", "finish")
    builder.add_edge("finish", END)
    return builder.compile(checkpointer=saver)


def fan_out_graph(
    saver: DynamoCheckpointSaver, *, runs: Counter[str], fail_once_at: set[str] | None = None
) -> Graph:
    """``start → (left ∥ right) → join``: two nodes in one superstep."""

    def make(name: str) -> Callable[[TrailState], TrailState]:
        def node(state: TrailState) -> TrailState:
            runs[name] += 1
            if fail_once_at is not None and name in fail_once_at:
                fail_once_at.discard(name)
                raise RuntimeError(f"{name} crashed")
            return {"trail": [name]}

        return node

    builder = StateGraph(TrailState)
    for name in ("start", "left", "right", "join"):
        builder.add_node(name, make(name))
    builder.add_edge(START, "start")
    builder.add_edge("start", "left")
    builder.add_edge("start", "right")
    builder.add_edge(["left", "right"], "join")
    builder.add_edge("join", END)
    return builder.compile(checkpointer=saver)


def growing_graph(saver: DynamoCheckpointSaver, steps: int) -> Graph:
    """One node looping ``steps`` times, adding 1 KB of incompressible state each time."""

    def grow(state: TrailState) -> TrailState:
        return {"chunks": [os.urandom(1024)]}

    def more(state: TrailState) -> str:
        return "grow" if len(state.get("chunks", [])) < steps else END

    builder = StateGraph(TrailState)
    builder.add_node("grow", grow)
    builder.add_edge(START, "grow")
    builder.add_conditional_edges("grow", more, ["grow", END])
    return builder.compile(checkpointer=saver)


# --------------------------------------------------------------------------- request budget


@pytest.mark.parametrize("steps", [10, 50])
def test_sync_durable_run_makes_at_most_1_5_requests_per_superstep(
    new_saver: Callable[..., DynamoCheckpointSaver], dynamodb: Any, steps: int
) -> None:
    # Given a linear graph of `steps` nodes on a fresh thread
    graph = linear_graph(new_saver(), steps)
    counter = RequestCounter(dynamodb)

    # When it runs to the end, durable after every step
    result = graph.invoke({"trail": []}, _thread(), durability="sync")

    # Then it made at most 1.5 DynamoDB requests per superstep
    assert len(result["trail"]) == steps
    assert counter.total / steps <= 1.5, counter.counts


def test_every_superstep_is_durable_when_the_step_completes(
    new_saver: Callable[..., DynamoCheckpointSaver],
) -> None:
    # Given a linear graph whose nodes read the stored state of the thread while running
    saver = new_saver()
    seen: list[int] = []
    config = _thread()
    reader = new_saver()

    def node(state: TrailState) -> TrailState:
        stored = reader.get_tuple(config)
        seen.append(len(stored.checkpoint["channel_values"].get("trail", [])) if stored else -1)
        return {"trail": ["x"]}

    builder = StateGraph(TrailState)
    for i in range(5):
        builder.add_node(f"n{i}", node)
    builder.add_edge(START, "n0")
    for i in range(4):
        builder.add_edge(f"n{i}", f"n{i + 1}")
    builder.add_edge("n4", END)
    graph = builder.compile(checkpointer=saver)

    # When it runs with durability "sync"
    graph.invoke({"trail": []}, config, durability="sync")

    # Then another process saw every previous step stored before the next one started
    assert seen == [0, 1, 2, 3, 4]


# --------------------------------------------------------------------------- resume


def test_a_fresh_process_resumes_from_the_last_checkpoint(
    new_saver: Callable[..., DynamoCheckpointSaver],
) -> None:
    # Given a 10-step run that crashed in step 6
    runs: Counter[str] = Counter()
    config = _thread()
    with pytest.raises(RuntimeError, match="step_6 crashed"):
        linear_graph(new_saver(), 10, runs=runs, fail_once_at={"step_6"}).invoke(
            {"trail": []}, config, durability="sync"
        )

    # When a fresh process resumes the thread
    result = linear_graph(new_saver(), 10, runs=runs).invoke(None, config, durability="sync")

    # Then it finishes, and only the crashed step ran twice
    assert result["trail"] == [f"step_{i}" for i in range(10)]
    assert runs == Counter({f"step_{i}": 2 if i == 6 else 1 for i in range(10)})


def test_an_interrupt_is_resumed_by_a_fresh_process(
    new_saver: Callable[..., DynamoCheckpointSaver],
) -> None:
    # Given a run parked on an approval interrupt
    config = _thread()
    parked = approval_graph(new_saver()).invoke({"trail": []}, config, durability="sync")
    assert parked["__interrupt__"][0].value == {"question": "ship it?"}

    # When a fresh process resumes it with a decision
    result = approval_graph(new_saver()).invoke(Command(resume="yes"), config, durability="sync")

    # Then the run finishes with that decision, and nothing before the approval ran again
    assert result["decision"] == "yes"
    assert result["trail"] == ["prepare", "approve", "finish"]


def test_an_interrupt_inside_a_subgraph_is_resumed_by_a_fresh_process(
    new_saver: Callable[..., DynamoCheckpointSaver],
) -> None:
    # Given a parent graph whose child subgraph parks on an interrupt (namespace "child:<task>")
    def build(saver: BaseCheckpointSaver[Any]) -> Graph:
        child = StateGraph(TrailState)
        child.add_node("ask", lambda s: {"decision": str(interrupt("ok?")), "trail": ["ask"]})
        child.add_edge(START, "ask")
        parent = StateGraph(TrailState)
        parent.add_node("before", lambda s: {"trail": ["before"]})
        parent.add_node("child", child.compile())
        parent.add_node("after", lambda s: {"trail": ["after"]})
        parent.add_edge(START, "before")
        parent.add_edge("before", "child")
        parent.add_edge("child", "after")
        return parent.compile(checkpointer=saver)

    config = _thread()
    build(new_saver()).invoke({"trail": []}, config, durability="sync")

    # When a fresh process resumes it
    result = build(new_saver()).invoke(Command(resume="approved"), config, durability="sync")

    # Then the subgraph continues where it parked and the parent finishes, exactly as on
    # LangGraph's in-memory saver
    reference = build(InMemorySaver())
    reference.invoke({"trail": []}, config, durability="sync")
    expected = reference.invoke(Command(resume="approved"), config, durability="sync")
    assert result["decision"] == "approved"
    assert result == expected


# --------------------------------------------------------------------------- parallel branches


def test_parallel_branches_are_checkpointed_in_one_superstep(
    new_saver: Callable[..., DynamoCheckpointSaver],
) -> None:
    # Given a graph with two branches running in the same superstep
    runs: Counter[str] = Counter()
    config = _thread()

    # When it runs
    fan_out_graph(new_saver(), runs=runs).invoke({"trail": []}, config, durability="sync")

    # Then a fresh process reads the final state with both branches' output, and the checkpoint
    # the branches started from holds one stored write per branch
    saver = new_saver()
    latest = saver.get_tuple(config)
    assert latest is not None
    assert sorted(latest.checkpoint["channel_values"]["trail"]) == sorted(
        ["start", "left", "right", "join"]
    )
    fork = next(t for t in saver.list(config) if t.metadata.get("step") == 1)
    writers = {task_id for task_id, channel, _ in fork.pending_writes or [] if channel == "trail"}
    assert len(writers) == 2


def test_a_failed_branch_keeps_its_sibling_s_completed_write(
    new_saver: Callable[..., DynamoCheckpointSaver],
) -> None:
    # Given a run where the right branch crashed while the left one completed
    runs: Counter[str] = Counter()
    config = _thread()
    with pytest.raises(RuntimeError, match="right crashed"):
        fan_out_graph(new_saver(), runs=runs, fail_once_at={"right"}).invoke(
            {"trail": []}, config, durability="sync"
        )

    # When a fresh process resumes the thread
    result = fan_out_graph(new_saver(), runs=runs).invoke(None, config, durability="sync")

    # Then only the crashed branch runs again
    assert sorted(result["trail"]) == sorted(["start", "left", "right", "join"])
    assert runs == Counter({"start": 1, "left": 1, "right": 2, "join": 1})


def test_a_branch_finishing_after_its_sibling_parked_is_not_run_again(
    new_saver: Callable[..., DynamoCheckpointSaver],
) -> None:
    # Given a superstep where the left branch parks on an interrupt at once and the right one
    # finishes afterwards (no checkpoint follows an interrupt to carry its write)
    runs: Counter[str] = Counter()

    def build(saver: DynamoCheckpointSaver) -> Graph:
        def left(state: TrailState) -> TrailState:
            runs["left"] += 1
            return {"decision": str(interrupt("ok?")), "trail": ["left"]}

        def right(state: TrailState) -> TrailState:
            runs["right"] += 1
            time.sleep(0.2)
            return {"trail": ["right"]}

        builder = StateGraph(TrailState)
        builder.add_node("left", left)
        builder.add_node("right", right)
        builder.add_edge(START, "left")
        builder.add_edge(START, "right")
        return builder.compile(checkpointer=saver)

    config = _thread()
    build(new_saver()).invoke({"trail": []}, config, durability="sync")

    # When a fresh process resumes the run
    result = build(new_saver()).invoke(Command(resume="yes"), config, durability="sync")

    # Then the right branch's finished work was kept, not redone
    assert sorted(result["trail"]) == ["left", "right"]
    assert runs == Counter({"left": 2, "right": 1})


def test_a_write_to_an_older_checkpoint_is_stored_at_once(
    new_saver: Callable[..., DynamoCheckpointSaver], dynamodb: Any
) -> None:
    # Given a saver that stored two checkpoints of a thread
    saver = new_saver()
    first = saver.put(_thread(), empty_checkpoint(), {"step": 0}, {})
    saver.put(first, empty_checkpoint(), {"step": 1}, {})
    counter = RequestCounter(dynamodb)

    # When a write for the older one arrives (no coming put() would carry it)
    saver.put_writes(first, [("trail", ["late"])], "task-1")

    # Then it is stored at once and a fresh process sees it
    assert counter.counts == {"BatchWriteItem": 1}
    stored = new_saver().get_tuple(first)
    assert stored is not None
    assert stored.pending_writes == [("task-1", "trail", ["late"])]


def test_buffered_writes_are_visible_to_their_saver_and_stored_by_flush(
    new_saver: Callable[..., DynamoCheckpointSaver], dynamodb: Any
) -> None:
    # Given a saver holding a task's write in its buffer
    saver = new_saver()
    stored = saver.put(_thread(), empty_checkpoint(), {"step": 0}, {})
    counter = RequestCounter(dynamodb)
    saver.put_writes(stored, [("trail", ["a"])], "task-1")
    assert counter.counts == {}
    assert saver.get_tuple(stored).pending_writes == [("task-1", "trail", ["a"])]  # type: ignore[union-attr]
    counter.reset()

    # When it is flushed
    saver.flush()

    # Then one request stored it, and a fresh process sees it
    assert counter.counts == {"BatchWriteItem": 1}
    assert new_saver().get_tuple(stored).pending_writes == [("task-1", "trail", ["a"])]  # type: ignore[union-attr]


# --------------------------------------------------------------------------- large state


@pytest.mark.slow
def test_a_state_growing_1kb_per_step_for_400_steps_completes_and_reads_back(
    new_saver: Callable[..., DynamoCheckpointSaver], s3: Any
) -> None:
    # Given a run that adds 1 KB of incompressible state per step
    config = _thread()
    graph = growing_graph(new_saver(), 400)

    # When it runs 400 steps, durable after each
    result = graph.invoke({"chunks": []}, {**config, "recursion_limit": 1000}, durability="sync")

    # Then the state outgrew a DynamoDB item, yet nothing went to S3 (each superstep stored
    # only its new chunk), and a fresh process reads it back whole
    assert s3.list_objects_v2(Bucket=BUCKET)["KeyCount"] == 0
    stored = new_saver().get_tuple(config)
    assert stored is not None
    assert stored.checkpoint["channel_values"]["chunks"] == result["chunks"]
    assert len(result["chunks"]) == 400


def _checkpoint_item_sizes(dynamodb: Any, thread_id: str) -> list[int]:
    """Stored bytes of a thread's checkpoint items, oldest first (payload plus attributes)."""
    items = dynamodb.query(
        TableName=TABLE,
        KeyConditionExpression="PK = :pk",
        FilterExpression="k = :c",
        ExpressionAttributeValues={":pk": {"S": thread_id}, ":c": {"S": "c"}},
        ConsistentRead=True,
    )["Items"]
    return [sum(len(name) + len(next(iter(v.values()))) for name, v in i.items()) for i in items]


@pytest.mark.slow
def test_a_superstep_stores_only_what_changed_so_its_bytes_stay_flat_as_the_state_grows(
    new_saver: Callable[..., DynamoCheckpointSaver], dynamodb: Any
) -> None:
    # Given a run that adds 1 KB of incompressible state per step, for 200 steps
    config = _thread()
    growing_graph(new_saver(), 200).invoke(
        {"chunks": []}, {**config, "recursion_limit": 1000}, durability="sync"
    )
    # When the checkpoints it stored are weighed
    sizes = _checkpoint_item_sizes(dynamodb, config["configurable"]["thread_id"])
    # Then the checkpoint of step 200 weighs what the one of step 10 did (within 20 %), not
    # 20 times as much: each holds that step's new kilobyte, not the whole state
    assert len(sizes) == 202
    assert 0.8 <= sizes[200] / sizes[10] <= 1.2, (sizes[10], sizes[200])
    assert sizes[200] < 2 * 1024


def test_a_run_stored_whole_before_deltas_resumes_and_reads_back(
    new_saver: Callable[..., DynamoCheckpointSaver],
) -> None:
    # Given a run whose checkpoints were stored whole, as before deltas (3 of 6 steps done:
    # its items rewritten in that format, under the same keys)
    config = _thread()
    thread_id = config["configurable"]["thread_id"]
    with pytest.raises(RuntimeError, match="step_3 crashed"):
        linear_graph(new_saver(), 6, fail_once_at={"step_3"}).invoke(
            {"trail": []}, config, durability="sync"
        )
    saver = new_saver()
    for tup in reversed(list(saver.list(config))):
        parent = tup.parent_config or {"configurable": {"thread_id": thread_id}}
        item = saver.codec.checkpoint_item(
            {"configurable": {**parent["configurable"], "checkpoint_ns": ""}},
            tup.checkpoint,
            tup.metadata,
        )
        assert "dv" not in item  # the whole-checkpoint format
        saver.table.write_items([item], what="an old checkpoint")
    # When a fresh process resumes it to its end
    result = linear_graph(new_saver(), 6).invoke(None, config, durability="sync")
    # Then it went on from step 3, and its newest checkpoint (changes since the old one) reads
    # back whole in yet another process, as do the old ones
    assert result["trail"] == [f"step_{n}" for n in range(6)]
    newest = saver.table.latest_group(thread_id, "")
    assert newest is not None and "dv" in newest[0]
    [base] = saver.table.checkpoint_range(
        thread_id, *[checkpoint_sk("", newest[0]["base"]["S"])] * 2
    )
    assert "dv" not in base  # the changes are on top of an old, whole checkpoint
    history = list(new_saver().list(config))
    assert history[0].checkpoint["channel_values"]["trail"] == result["trail"]
    trails = [t.checkpoint["channel_values"].get("trail", []) for t in reversed(history)]
    assert trails == sorted(trails, key=len) and result["trail"][:3] in trails


def test_a_deleted_s3_payload_is_a_loud_error(
    new_saver: Callable[..., DynamoCheckpointSaver], s3: Any
) -> None:
    # Given a run whose checkpoints are all offloaded to S3, and the newest payload deleted
    config = _thread()
    linear_graph(new_saver(offload_threshold_bytes=1), 3).invoke(
        {"trail": []}, config, durability="sync"
    )
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]]
    newest = max(k for k in keys if k.endswith("/checkpoint"))
    s3.delete_object(Bucket=BUCKET, Key=newest)

    # When a fresh process reads the thread
    # Then it fails naming the missing payload, instead of falling back to an older checkpoint
    with pytest.raises(CheckpointPayloadMissingError, match="missing"):
        new_saver().get_tuple(config)


def test_resuming_a_run_whose_payload_is_gone_fails_instead_of_replaying(
    new_saver: Callable[..., DynamoCheckpointSaver], s3: Any
) -> None:
    # Given a parked run whose newest checkpoint payload was deleted from S3
    config = _thread()
    approval_graph(new_saver(offload_threshold_bytes=1)).invoke(
        {"trail": []}, config, durability="sync"
    )
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]]
    s3.delete_object(Bucket=BUCKET, Key=max(k for k in keys if k.endswith("/checkpoint")))

    # When a fresh process resumes it
    # Then the resume fails loudly
    with pytest.raises(CheckpointPayloadMissingError):
        approval_graph(new_saver()).invoke(Command(resume="yes"), config, durability="sync")


def test_a_run_with_every_payload_offloaded_parks_and_resumes(
    new_saver: Callable[..., DynamoCheckpointSaver], s3: Any
) -> None:
    # Given savers that offload every checkpoint and write payload to S3
    config = _thread()
    approval_graph(new_saver(offload_threshold_bytes=1)).invoke(
        {"trail": []}, config, durability="sync"
    )

    # When a fresh process resumes the parked run
    result = approval_graph(new_saver(offload_threshold_bytes=1)).invoke(
        Command(resume="yes"), config, durability="sync"
    )

    # Then it reads every payload back from S3 and finishes
    assert result["trail"] == ["prepare", "approve", "finish"]
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]]
    assert any("/writes/" in key for key in keys)


def test_setup_with_ttl_enables_expiry_and_stamps_items(
    new_saver: Callable[..., DynamoCheckpointSaver], dynamodb: Any
) -> None:
    # Given a saver with a TTL of one day
    saver = new_saver(ttl_seconds=86_400)

    # When it sets up the table and stores a checkpoint
    saver.setup()
    before = int(time.time())
    saver.put(_thread(), empty_checkpoint(), {"step": 0}, {})

    # Then the table expires items on "ttl", and the item expires about a day from now
    ttl = dynamodb.describe_time_to_live(TableName=TABLE)["TimeToLiveDescription"]
    assert (ttl["TimeToLiveStatus"], ttl["AttributeName"]) == ("ENABLED", "ttl")
    (item,) = dynamodb.scan(TableName=TABLE)["Items"]
    assert before + 86_400 <= int(item["ttl"]["N"]) <= int(time.time()) + 86_400


def test_an_aws_error_becomes_a_storage_error(dynamodb: Any) -> None:
    # Given a saver whose table does not exist
    saver = DynamoCheckpointSaver(dynamodb, "no-such-table")

    # When it reads
    # Then the ClientError surfaces as the named StorageError, naming the table
    with pytest.raises(StorageError, match="no-such-table") as caught:
        saver.get_tuple(_thread())
    assert isinstance(caught.value.__cause__, ClientError)


# --------------------------------------------------------------------------- logging


def test_a_run_logs_nothing_at_info(
    new_saver: Callable[..., DynamoCheckpointSaver], caplog: pytest.LogCaptureFixture
) -> None:
    # Given a graph on the saver
    graph = linear_graph(new_saver(), 5)

    # When it runs with INFO logging captured
    with caplog.at_level(logging.INFO, logger="langorch"):
        graph.invoke({"trail": []}, _thread(), durability="sync")

    # Then the saver wrote no INFO (or louder) line
    assert [r for r in caplog.records if r.name.startswith("langorch")] == []


def test_a_copied_checkpoint_whose_values_differ_under_the_same_versions_is_stored_as_is(
    new_saver: Callable[..., DynamoCheckpointSaver],
) -> None:
    # Given a stored checkpoint, and a copy of it with an edited value but the same channel
    # versions (as a fork or a redrive with edits makes one: engine.rewind.copy_to_head)
    saver, config = new_saver(), _thread()
    first = empty_checkpoint()
    first["channel_values"] = {"trail": ["a"]}
    first["channel_versions"] = {"trail": 1}
    stored = saver.put(config, first, {"source": "loop", "step": 0}, {"trail": 1})
    edited = empty_checkpoint()
    edited["channel_values"] = {"trail": ["a", "edited"]}
    edited["channel_versions"] = {"trail": 1}
    # When the copy is stored as the child of the first
    saver.put(stored, edited, {"source": "fork", "step": 1}, {"trail": 1})
    # Then a fresh process reads the edited value back
    newest = new_saver().get_tuple(config)
    assert newest is not None and newest.checkpoint["channel_values"]["trail"] == ["a", "edited"]
