"""The resource gate (seed 001 §7b): a step that names a ``resource`` runs only holding a lease,
and a step that calls a model runs holding a slot of that model (``model_limits``, issue 33).

Before the step's first attempt the gate asks for a lease (``ctx.resources``, a conditional
write). When the resource is full the run keeps its place in the resource's FIFO queue and
parks like a ``wait`` step — an interrupt of kind ``resource``; the segment ends
``waiting_resource`` and the state machine's ``AwaitResource`` holds a task token, with no
Lambda running, until a release wakes it (or
:data:`~langorch.domain.resources.POLL_SECONDS` pass). Woken, the step asks again; while it is
not its turn it parks again, each time as a fresh task, so a long wait never piles interrupts
onto one task.

A step whose LLM calls go to a model the deployment limits (:mod:`langorch.domain.model_limits`)
is gated the same way on ``model:<provider>:<model>`` (and ``model:<provider>``), whose limit is
the configured ``concurrency``: the queue, the lease, its expiry and the wake-up are the
resource's. A model's ``rate`` is kept first, before any slot is held: the call reserves its
start (``ResourceLocks.reserve``) and, when that is later than now, the run sleeps until then
(a ``wait``: Step Functions waits, no Lambda runs) and asks again as a fresh task.

The leases are given back when the step ends: succeeded, or failed past its retries (a retry
keeps them). A holder that dies keeps them only until they expire; the next acquirer reclaims
them.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from langgraph.errors import GraphInterrupt
from langgraph.types import Command, interrupt

from langorch.domain.errors import StepFailedError
from langorch.domain.resources import POLL_SECONDS, WAITER_SECONDS, holder_of
from langorch.engine.context import EngineContext
from langorch.engine.kinds.base import StepSpec

if TYPE_CHECKING:
    from langorch.domain.model_limits import ModelSlot

logger = logging.getLogger(__name__)

Emit = Callable[[Any], None]
Event = Callable[..., dict[str, Any]]


def enter(
    spec: StepSpec, ctx: EngineContext, attempt: int, emit: Emit, event: Event, *, visit: int = 0
) -> Command[Any] | None:
    """Keep the step's model rates, then hold its resource and its model slots — or park the
    run until it is this step's turn.

    Args:
        visit: how many times the step finished before (a model's rate reserves each call's
            start apart: a later visit or attempt is another call).

    Returns:
        ``None``: every lease is held, run the step. A ``Command``: woken while still queued
        (or from a rate's sleep), go round again as a fresh task (the caller returns it).

    Raises:
        GraphInterrupt: a resource or model is full, or the rate puts the call later; the run
            parks (the caller lets it bubble up).
        StepFailedError: no resource locks are configured for this segment.
        StorageError: the store failed; the segment is retried.
    """
    slots = _model_slots(spec, ctx)
    names = [n for n in [spec.step.resource] if n is not None]
    names += [slot.name for slot in slots if slot.concurrency is not None]
    if not names and not slots:
        return None
    if ctx.resources is None:
        raise StepFailedError(
            f"step {spec.step_id} needs resource {(names or [slots[0].name])[0]!r}, but this "
            "deployment has no resource locks wired (EngineContext.resources)"
        )
    for slot in slots:
        if slot.rate is not None and _later(spec, ctx, slot, attempt, visit, emit, event):
            return Command(goto=[spec.step_id])  # slept until its start: ask again
    limits = {slot.name: slot.concurrency for slot in slots if slot.concurrency is not None}
    for name in names:
        if name in limits:
            ctx.resources.ensure_limit(name, limits[name])
        if not _hold(name, spec, ctx, attempt, emit, event):
            return Command(goto=[spec.step_id])  # woken while still queued: ask again
    return None


def _hold(
    name: str, spec: StepSpec, ctx: EngineContext, attempt: int, emit: Emit, event: Event
) -> bool:
    """Hold a lease on ``name``: ``True``; woken while still queued: ``False``.

    Raises:
        GraphInterrupt: the resource is full; the run parks.
    """
    assert ctx.resources is not None
    grant = ctx.resources.acquire(
        name,
        holder_of(ctx.run_id, spec.step_id),
        now=time.time(),
        lease_seconds=ctx.resource_lease_seconds,
        wait_seconds=WAITER_SECONDS,
    )
    log = {"run_id": ctx.run_id, "step_id": spec.step_id, "resource": name}
    if grant.reclaimed:
        logger.warning(
            "expired resource leases reclaimed", extra={**log, "holders": list(grant.reclaimed)}
        )
    if grant.acquired:
        if attempt == 1:  # a retry keeps (and refreshes) the lease it took
            emit(event("resource_acquired", spec, resource=name, lease=grant.number))
            logger.info("resource acquired", extra={**log, "lease": grant.number})
        return True
    try:
        interrupt(
            {
                "kind": "resource",
                "step_id": spec.step_id,
                "resource": name,
                "position": grant.position,
                "seconds": POLL_SECONDS,
            }
        )
    except GraphInterrupt:
        # Parking now (not replaying an interrupt already answered): say so once.
        emit(event("resource_waiting", spec, resource=name, position=grant.position))
        logger.info("waiting for resource", extra={**log, "position": grant.position})
        raise
    return False


def _later(
    spec: StepSpec,
    ctx: EngineContext,
    slot: ModelSlot,
    attempt: int,
    visit: int,
    emit: Emit,
    event: Event,
) -> bool:
    """Reserve this call's start under ``slot``'s rate; when that is later than now, sleep until
    then (a ``wait``). ``False``: it may start now; ``True``: it slept (go round again).

    Raises:
        GraphInterrupt: the call must wait for its start; the run sleeps.
    """
    assert ctx.resources is not None and slot.rate is not None
    now = time.time()
    # One reservation per call: a retry or a later visit of the step is another call.
    holder = f"{holder_of(ctx.run_id, spec.step_id)}#{visit}.{attempt}"
    due = ctx.resources.reserve(
        slot.rate_name, holder, now=now, limit=slot.rate.calls, period=slot.rate.period
    )
    if due <= now:
        return False
    seconds = max(1, math.ceil(due - now))
    try:
        interrupt(
            {
                "kind": "wait",
                "step_id": spec.step_id,
                "seconds": seconds,
                "reason": "rate",
                "resource": slot.name,
            }
        )
    except GraphInterrupt:
        emit(event("resource_waiting", spec, resource=slot.name, parked_seconds=seconds))
        logger.info(
            "waiting for a model's rate",
            extra={"run_id": ctx.run_id, "step_id": spec.step_id, "resource": slot.name,
                   "seconds": seconds, "rate": slot.rate.text},
        )  # fmt: skip
        raise
    return True


def leave(spec: StepSpec, ctx: EngineContext, emit: Emit, event: Event) -> None:
    """Give the step's leases back (it finished, or failed past its retries)."""
    if ctx.resources is None:
        return
    names = [n for n in [spec.step.resource] if n is not None]
    names += [slot.name for slot in _model_slots(spec, ctx) if slot.concurrency is not None]
    for name in names:
        if ctx.resources.release(name, holder_of(ctx.run_id, spec.step_id)):
            emit(event("resource_released", spec, resource=name))
            logger.info(
                "resource released",
                extra={"run_id": ctx.run_id, "step_id": spec.step_id, "resource": name},
            )


def _model_slots(spec: StepSpec, ctx: EngineContext) -> list[ModelSlot]:
    """The model limits the step's LLM calls are held to (none: it calls no model, or the
    deployment limits none)."""
    if not ctx.model_limits:
        return []
    from langorch.engine.kinds.llm import model_of

    called = model_of(spec, ctx)
    return ctx.model_limits.slots(*called) if called is not None else []
