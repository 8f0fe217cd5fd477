"""The resource gate (seed 001 §7b): a step that names a ``resource`` runs only holding a lease.

Before the step's first attempt the gate asks for a lease (``ctx.resources``, a conditional
write). When the resource is full the run keeps its place in the resource's FIFO queue and
parks like a ``wait`` step — an interrupt of kind ``resource``; the segment ends
``waiting_resource`` and the state machine's ``AwaitResource`` holds a task token, with no
Lambda running, until a release wakes it (or
:data:`~langorch.domain.resources.POLL_SECONDS` pass). Woken, the step asks again; while it is
not its turn it parks again, each time as a fresh task, so a long wait never piles interrupts
onto one task.

The lease is given back when the step ends: succeeded, or failed past its retries (a retry
keeps it). A holder that dies keeps it only until it expires; the next acquirer reclaims it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from langgraph.errors import GraphInterrupt
from langgraph.types import Command, interrupt

from langorch.domain.errors import StepFailedError
from langorch.domain.resources import POLL_SECONDS, WAITER_SECONDS, holder_of
from langorch.engine.context import EngineContext
from langorch.engine.kinds.base import StepSpec

logger = logging.getLogger(__name__)

Emit = Callable[[Any], None]
Event = Callable[..., dict[str, Any]]


def enter(
    spec: StepSpec, ctx: EngineContext, attempt: int, emit: Emit, event: Event
) -> Command[Any] | None:
    """Hold the step's resource, or park the run until it is this step's turn.

    Returns:
        ``None``: the lease is held, run the step. A ``Command``: woken while still queued,
        go round again as a fresh task (the caller returns it).

    Raises:
        GraphInterrupt: the resource is full; the run parks (the caller lets it bubble up).
        StepFailedError: no resource locks are configured for this segment.
        StorageError: the store failed; the segment is retried.
    """
    name = spec.step.resource
    if name is None:
        return None
    if ctx.resources is None:
        raise StepFailedError(
            f"step {spec.step_id} needs resource {name!r}, but this deployment has no resource "
            "locks wired (EngineContext.resources)"
        )
    holder = holder_of(ctx.run_id, spec.step_id)
    grant = ctx.resources.acquire(
        name,
        holder,
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
        return None
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
    return Command(goto=[spec.step_id])


def leave(spec: StepSpec, ctx: EngineContext, emit: Emit, event: Event) -> None:
    """Give the step's lease back (it finished, or failed past its retries)."""
    name = spec.step.resource
    if name is None or ctx.resources is None:
        return
    if ctx.resources.release(name, holder_of(ctx.run_id, spec.step_id)):
        emit(event("resource_released", spec, resource=name))
        logger.info(
            "resource released",
            extra={"run_id": ctx.run_id, "step_id": spec.step_id, "resource": name},
        )
