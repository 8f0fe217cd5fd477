"""Use-cases for resource locks (seed 001 §7b): declare a resource's limit, list resources, and
give back what a run held or queued for when it ends outside a segment (failed, cancelled).

Taking and giving back a lease around a step is the engine's (``engine/resources.py``); these
are the operator's and the run's end.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from langorch.domain.concurrency import LEASE_SECONDS, WAIT_SECONDS, run_holder, run_of, then_of
from langorch.domain.concurrency import PREFIX as CONCURRENCY_PREFIX
from langorch.domain.errors import DefinitionError, TaskClosedError
from langorch.domain.resources import (
    WAITER_SECONDS,
    Grant,
    QueueFullError,
    check_limit,
    check_name,
    check_not_reserved,
    tokens_to_wake,
)

if TYPE_CHECKING:
    from langorch.app.ports import Executions, ResourceLocks
    from langorch.domain.resources import ResourceState

logger = logging.getLogger(__name__)


class ResourceDeps(Protocol):
    """What the resource use-cases need: the resource locks."""

    @property
    def resources(self) -> ResourceLocks: ...


@dataclass(frozen=True)
class ResourceView:
    """A resource as ``langorch resources list`` shows it, at one moment."""

    name: str
    limit: int
    declared: bool
    held_by: tuple[str, ...]
    """Holders (``run_id/step_id``) of unexpired leases."""
    queued: tuple[str, ...]
    """Waiting holders, first in line first."""


def declare_resource(name: str, limit: int, deps: ResourceDeps) -> ResourceState:
    """Set ``name``'s ``concurrency_limit`` for this deployment.

    Lowering the limit takes no lease away: holders keep theirs, and no new one is granted
    until fewer than ``limit`` are held.

    Raises:
        DefinitionError: the name or the limit is invalid (with the field and a hint).
        StorageError: the store failed.
    """
    problems = [*check_name(name, "name"), *check_limit(limit, "limit")]
    problems += check_not_reserved(name, "name")
    if problems:
        raise DefinitionError(f"resource {name}", problems)
    deps.resources.set_limit(name, limit)
    logger.info("resource declared", extra={"resource": name, "limit": limit})
    return deps.resources.get(name)


def list_resources(deps: ResourceDeps, *, now: float) -> list[ResourceView]:
    """Every resource declared or used, with its live leases and queue at ``now``."""
    views = []
    for state in deps.resources.list():
        live = state.live(now)
        views.append(
            ResourceView(
                name=state.name,
                limit=state.limit,
                declared=state.declared,
                held_by=tuple(sorted(live.leases)),
                queued=tuple(w.holder for w in live.queue),
            )
        )
    return views


WOKE = {"woke": True}
"""What a parked run is woken with (the same answer as the end of a ``wait``)."""


def wake_next(name: str, resources: ResourceLocks, executions: Executions) -> int:
    """Wake the parked runs whose turn it now is on ``name``; how many were woken.

    A token whose task has closed (woken twice, timed out into its own retry, run ended) is
    skipped: the run is already on its way or gone.
    """
    woken = 0
    for token in tokens_to_wake(resources.get(name), time.time()):
        try:
            executions.send_success(token, WOKE)
            woken += 1
        except TaskClosedError:
            continue
    if woken:
        logger.info("parked runs woken", extra={"resource": name, "woken": woken})
    return woken


class WakingLocks:
    """The resource locks a segment's steps use: a release wakes the next parked run(s)."""

    def __init__(self, resources: ResourceLocks, executions: Executions) -> None:
        self._resources = resources
        self._executions = executions
        self._limits: dict[str, int] = {}

    def acquire(
        self, name: str, holder: str, *, now: float, lease_seconds: float, wait_seconds: float
    ) -> Grant:
        """Take a lease, or queue (see :meth:`ResourceLocks.acquire`)."""
        return self._resources.acquire(
            name, holder, now=now, lease_seconds=lease_seconds, wait_seconds=wait_seconds
        )

    def release(self, name: str, holder: str) -> bool:
        """Give back the lease, then wake whoever's turn it is."""
        released = self._resources.release(name, holder)
        if released:
            wake_next(name, self._resources, self._executions)
        return released

    def reserve(self, name: str, holder: str, *, now: float, limit: int, period: float) -> float:
        """Reserve a start under a rate (see :meth:`ResourceLocks.reserve`)."""
        return self._resources.reserve(name, holder, now=now, limit=limit, period=period)

    def ensure_limit(self, name: str, limit: int) -> None:
        """Store ``limit`` as the resource's limit unless it is already (read once per
        resource by this segment: the settings, not an operator, own a model's limit; a
        raised limit wakes the runs it now lets in)."""
        if self._limits.get(name) == limit:
            return
        state = self._resources.get(name)
        if not state.declared or state.limit != limit:
            self._resources.set_limit(name, limit)
            if state.limit < limit:
                wake_next(name, self._resources, self._executions)
        self._limits[name] = limit


@dataclass(frozen=True)
class ParkForResource:
    """Keep the task token a run queued for a resource waits on (the state machine's
    ``AwaitResource``)."""

    run_id: str
    resource: str
    holder: str
    task_token: str


class ParkDeps(ResourceDeps, Protocol):
    """What :func:`park_for_resource` needs: the resource locks and the executions."""

    @property
    def executions(self) -> Executions: ...


def park_for_resource(cmd: ParkForResource, deps: ParkDeps) -> bool:
    """Store the token with the run's place in the queue, so a release can wake it.

    If a slot freed between the segment that queued the run and this call, nobody will wake
    it: it is woken at once (the conditional write orders this against every release).

    Returns:
        Whether the run was woken at once.
    """
    turn = deps.resources.park(
        cmd.resource, cmd.holder, cmd.task_token, now=time.time(), wait_seconds=WAITER_SECONDS
    )
    logger.info(
        "parked for resource",
        extra={"run_id": cmd.run_id, "resource": cmd.resource, "its_turn": turn},
    )
    if turn:
        try:
            deps.executions.send_success(cmd.task_token, WOKE)
        except TaskClosedError:
            return False
    return turn


def release_ended_run(
    run_id: str, resources: ResourceLocks, *, wake: Executions | None = None
) -> list[str]:
    """Give back every lease and queue place of a run that ended outside a segment.

    A run failed by the state machine (its segment crashed while a step held a lease) or
    cancelled while queued would otherwise block the runs behind it until its lease or its
    place expired.

    Args:
        run_id: the run.
        resources: the resource locks.
        wake: the executions, to wake the runs whose turn it now is (``None``: they wake when
            their park times out), and to start the runs queued behind a workflow's
            ``concurrency`` (``None``: they start when another run of their key ends).

    Returns:
        The resources it held or queued for.
    """
    touched = resources.release_run(run_id)
    if wake is not None:
        for name in touched:
            if name.startswith(CONCURRENCY_PREFIX):
                start_next_runs(name, resources, wake)
            else:
                wake_next(name, resources, wake)
    if touched:
        logger.info("resources released", extra={"run_id": run_id, "resources": touched})
    return touched


def start_next_runs(name: str, resources: ResourceLocks, executions: Executions) -> list[str]:
    """Start the runs queued on a ``concurrency:`` resource whose turn it now is, in order.

    Each is granted its lease first, then its execution is started (named by the run id, so a
    second releaser racing this one starts nothing twice: the grant is kept, the start is
    idempotent). A crash between the two leaves a run holding a lease it does not use until a
    redelivery of its start, or the lease's expiry (``LEASE_SECONDS``).

    Returns:
        The run ids started.
    """
    started: list[str] = []
    now = time.time()
    for waiter in resources.get(name).live(now).queue:
        grant = resources.acquire(
            name, waiter.holder, now=now, lease_seconds=LEASE_SECONDS, wait_seconds=WAIT_SECONDS
        )
        if not grant.acquired:
            break
        run_id = run_of(waiter.holder)
        then = then_of(waiter.holder)
        if then is not None and not _take_next(then, run_id, waiter.priority, resources, now):
            continue  # holds its trigger's key, and now waits in its workflow's queue
        executions.start(run_id, {"run_id": run_id, "resume": None})
        started.append(run_id)
    if started:
        logger.info("queued runs started", extra={"resource": name, "runs": started})
    return started


def _take_next(name: str, run_id: str, priority: int, resources: ResourceLocks, now: float) -> bool:
    """A run granted its trigger's key takes its workflow's (``name``), or queues for it (the
    workflow's next end starts it); whether it holds it."""
    try:
        grant = resources.acquire(
            name,
            run_holder(run_id),
            now=now,
            lease_seconds=LEASE_SECONDS,
            wait_seconds=WAIT_SECONDS,
            priority=priority,
        )
    except QueueFullError:
        # It keeps its trigger's slot but has no place: it starts on a redelivery of its start
        # (launch_run takes both keys again), or when that slot's lease expires.
        logger.error("workflow queue full", extra={"run_id": run_id, "resource": name})
        return False
    return grant.acquired
