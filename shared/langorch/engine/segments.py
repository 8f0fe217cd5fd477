"""Advance a run's graph by one segment.

A segment runs from the last checkpoint until an approval, a wait, the time budget, the end or a
failure. It resumes exactly what was parked: ``Command(resume={interrupt_id: value})`` addressed
to a pending interrupt — never ``invoke(None)`` while one is pending (LangGraph would answer it
with a stale value), and a resume naming an interrupt the run is not waiting on is an error
(LangGraph would silently ignore it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from langgraph.types import Command

from langorch.domain.errors import ConflictError, StorageError, UnknownInterruptError
from langorch.engine.context import EngineContext

SegmentStatus = Literal[
    "continue", "sleeping", "waiting_resource", "waiting_approval", "paused", "succeeded", "failed"
]


@dataclass(frozen=True)
class Resume:
    """The answer to a parked interrupt."""

    value: Any
    interrupt_id: str | None = None
    """``None``: the run's only pending interrupt (an error when several are pending)."""
    retried: bool = False
    """A retry of a segment whose attempt died after taking the run: that attempt may have
    stored the answer and gone past the interrupt, so none pending means go on, not an error."""


@dataclass
class Advance:
    """What one segment did to the graph."""

    status: SegmentStatus
    events: list[dict[str, Any]] = field(default_factory=list)
    interrupt_id: str | None = None
    request: dict[str, Any] | None = None
    """The parked interrupt's payload (approval request or wait)."""
    outputs: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    values: dict[str, Any] = field(default_factory=dict)


FENCE_KEY = "langorch_fence"
"""Where the segment's lease fence travels in the config; the checkpointer fences its writes
with it (``adapters.dynamodb.checkpointer``), LangGraph passes it to every ``put``."""


def _config(run_id: str, fence: int | None = None) -> dict[str, Any]:
    # thread_id == run_id (001 §8.2). Generous recursion limit: long loops are real workflows;
    # each loop/max_iterations bound keeps them finite.
    configurable: dict[str, Any] = {"thread_id": run_id}
    if fence is not None:
        configurable[FENCE_KEY] = fence
    return {"configurable": configurable, "recursion_limit": 10_000}


async def advance(
    graph: Any,
    ctx: EngineContext,
    *,
    initial: dict[str, Any] | None,
    resume: Resume | None,
    deadline: float,
    max_supersteps: int | None = None,
    fence: int | None = None,
    pause: Callable[[], bool] | None = None,
) -> Advance:
    """Run the graph of ``ctx.run_id`` until it parks, ends, fails, passes ``deadline`` or
    ``max_supersteps``, or is asked to pause.

    Args:
        graph: the compiled graph (with a checkpointer).
        ctx: the runtime context for this segment.
        initial: the first state of the run (used only when no checkpoint exists yet).
        resume: the answer to the pending interrupt, when the run is parked.
        deadline: a ``time.monotonic()`` value; the segment stops at the first superstep
            boundary after it and returns ``continue``.
        max_supersteps: the segment stops after this many supersteps and returns
            ``continue`` (``None``: no such budget); unlike ``deadline``, the same on any
            machine.
        fence: the segment's lease fence; every checkpoint write carries it, so once another
            segment has taken the lease this one cannot write (``None``: unfenced, e.g. tests).
        pause: asked at each superstep boundary whether an operator asked the run to pause;
            when it says so, the segment stops there (the steps of that superstep finished)
            and returns ``paused``, unless the graph parked or ended at that boundary.

    Raises:
        UnknownInterruptError: ``resume`` names no pending interrupt, or the run is parked and
            no resume was given.
        LeaseLostError: another segment took the lease; this one's write was refused.
    """
    config = _config(ctx.run_id, fence)
    snapshot = await graph.aget_state(config)
    if resume is None and snapshot.interrupts:
        # Parked by a segment whose answer was lost (its process died after the checkpoint,
        # before the record): announce that park; nothing runs, nothing answers it.
        return _parked(snapshot, [])
    graph_input = _graph_input(snapshot, resume, ctx.run_id, initial)
    if graph_input is _NOTHING_TO_RUN:
        return _finished(snapshot.values, [])

    events: list[dict[str, Any]] = []
    stopped = False
    pausing = False
    checkpoints = 0
    try:
        async for mode, chunk in graph.astream(
            graph_input,
            config,
            context=ctx,
            stream_mode=["custom", "checkpoints"],
            durability="sync",
        ):
            if mode == "custom":
                events.append(chunk)
                continue
            checkpoints += 1
            # The first checkpoint is where the segment starts (a fresh run's input, or the
            # checkpoint it resumes); each later one ends a superstep this segment ran. Stop at
            # such a boundary once past a budget or asked to pause — only after progress (a
            # pause asked before the segment started was honoured before it).
            ran = checkpoints - 1
            if ran and max_supersteps is not None and ran >= max_supersteps:
                stopped = True  # the checkpoint of this superstep is stored: stop here
                break
            if ran and time.monotonic() > deadline:
                stopped = True
                break
            if ran and pause is not None and pause():
                stopped = pausing = True
                break
    except (StorageError, ConflictError):
        raise  # infrastructure, not the workflow: the segment is retried, the run goes on
    except Exception as exc:
        failed = [e for e in events if e.get("event") == "step_failed"]
        error = (
            dict(failed[-1].get("error") or {})
            if failed
            else {"step_id": None, "type": type(exc).__name__, "message": str(exc)[:1000]}
        )
        return Advance(status="failed", events=events, error=dict(error))

    snapshot = await graph.aget_state(config)
    if snapshot.interrupts:
        return _parked(snapshot, events)
    if stopped and (snapshot.next or snapshot.tasks or _input_lost(snapshot)):
        status: SegmentStatus = "paused" if pausing else "continue"
        return Advance(status=status, events=events, values=dict(snapshot.values))
    return _finished(snapshot.values, events)


_PARKED_STATUS: dict[str, SegmentStatus] = {"wait": "sleeping", "resource": "waiting_resource"}
"""What the state machine does with a parked interrupt, by its kind (else: an approval)."""


def _parked(snapshot: Any, events: list[dict[str, Any]]) -> Advance:
    """The graph waits on its (first) pending interrupt: an approval, a wait or a resource."""
    parked = snapshot.interrupts[0]
    request = dict(parked.value) if isinstance(parked.value, dict) else {"value": parked.value}
    return Advance(
        status=_PARKED_STATUS.get(str(request.get("kind")), "waiting_approval"),
        events=events,
        interrupt_id=parked.id,
        request=request,
        values=dict(snapshot.values),
    )


_NOTHING_TO_RUN = object()
"""What :func:`_graph_input` answers for a run whose graph has already ended."""


def _graph_input(snapshot: Any, resume: Resume | None, run_id: str, initial: Any) -> Any:
    """What to stream into the graph: a resume addressed to the pending interrupt, the run's
    first state, ``None`` to continue, or :data:`_NOTHING_TO_RUN`.

    Raises:
        UnknownInterruptError: ``resume`` names no pending interrupt, or the run is parked and
            no resume was given.
    """
    pending = list(snapshot.interrupts)
    if pending:
        if resume is None:
            ids = ", ".join(i.id for i in pending)
            raise UnknownInterruptError(
                f"run {run_id} is waiting on interrupt {ids}; resume it with a decision"
            )
        target = resume.interrupt_id
        if target is None:
            if len(pending) > 1:
                raise UnknownInterruptError(
                    f"run {run_id} has {len(pending)} pending interrupts; name one"
                )
            target = pending[0].id
        if target not in {i.id for i in pending}:
            raise UnknownInterruptError(
                f"run {run_id} is not waiting on interrupt {target}; "
                f"pending: {', '.join(i.id for i in pending)}"
            )
        return Command(resume={target: resume.value})
    if resume is not None and not resume.retried:
        raise UnknownInterruptError(
            f"run {run_id} is not waiting on interrupt {resume.interrupt_id or '(any)'}"
        )
    if snapshot.created_at is None or _input_lost(snapshot):
        return initial or {}
    if snapshot.next or snapshot.tasks:
        # Continue: after a time-budget stop, or after a fault that stored a task's writes
        # but not the next checkpoint (LangGraph applies them). No interrupt is pending.
        return None
    return _NOTHING_TO_RUN


def _input_lost(snapshot: Any) -> bool:
    """Only the input checkpoint was stored, without the input itself.

    The input's writes travel with the next checkpoint (one request per superstep); when that
    request failed, the run has not started. Its input is deterministic (the run record's), so
    sending it again is safe.
    """
    return (snapshot.metadata or {}).get("source") == "input" and not (
        snapshot.next or snapshot.tasks
    )


def _finished(values: dict[str, Any], events: list[dict[str, Any]]) -> Advance:
    outputs = values.get("outputs") or values.get("shared_context") or {}
    if values.get("status") == "failed":
        message = values.get("last_error") or "the workflow ended as failed"
        return Advance(
            status="failed",
            events=events,
            outputs=dict(outputs),
            error={"step_id": None, "type": "Terminated", "message": message},
            values=dict(values),
        )
    return Advance(status="succeeded", events=events, outputs=dict(outputs), values=dict(values))
