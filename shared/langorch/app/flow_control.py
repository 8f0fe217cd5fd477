"""The start of a run under its workflow's flow control (:mod:`langorch.domain.flow_control`):
whether a new run may start, is delayed (``throttle``: it waits ``queued`` for its slot), or
is dropped with its reason recorded.

A dropped start is still a run: stored (so a redelivery of the same event dedupes to it and
starts nothing), ended ``cancelled`` with ``status_reason`` saying why, and a ``run_cancelled``
timeline event by ``flow_control`` with the rule's facts — what ``runs list --status
cancelled``, ``langorch triggers show`` and the console read.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from langorch.domain.concurrency import LEASE_SECONDS, RUN_HOLDER
from langorch.domain.flow_control import (
    BATCH,
    BATCH_PREFIX,
    DEBOUNCE,
    DEBOUNCE_PREFIX,
    HOLDS,
    MAX_PERIOD_SECONDS,
    RATE_PREFIX,
    SINGLETON_PREFIX,
    THROTTLE,
    THROTTLE_PREFIX,
    key_resource,
    period_seconds,
)
from langorch.domain.resources import holder_of
from langorch.domain.runs import RunStatus, TimelineEvent, TimelineEventType, transition

if TYPE_CHECKING:
    from langorch.app.ports import Clock, ResourceLocks, RunsStore
    from langorch.domain.definitions import TaskPlan
    from langorch.domain.runs import RunRecord

logger = logging.getLogger(__name__)

ACTOR = "flow_control"
"""Who a dropped start's timeline event names."""


class FlowDeps(Protocol):
    """What deciding a start needs: the runs, the resource locks and a clock."""

    @property
    def runs(self) -> RunsStore: ...

    @property
    def resources(self) -> ResourceLocks: ...

    @property
    def clock(self) -> Clock: ...


Cancel = Callable[[str, str], object]
"""Cancel a run (its id) with a reason, as flow control (``app.runs``' ``cancel_run``)."""


def admit(
    run: RunRecord, plan: TaskPlan, deps: FlowDeps, cancel: Cancel | None = None
) -> RunRecord | None:
    """Apply ``batch``, ``debounce``, ``rate_limit``, ``singleton`` and ``throttle`` to a newly
    created run (``singleton.mode: cancel_running`` cancels the key's running run and lets this
    one start; ``throttle`` may delay it to a later slot, recorded on the run).

    Args:
        run: the run just created.
        plan: its workflow.
        deps: the runs, the resource locks and a clock.
        cancel: cancels a running run (``cancel_running``; ``None``: the new start is dropped).

    Returns:
        ``None`` when the run may go on to start; else the run as dropped (cancelled, with the
        reason on its timeline).

    Raises:
        InputValidationError: a key does not render over the input.
    """
    data = dict(run.input)
    now = deps.clock().timestamp()  # the injected clock: a window a test can move past
    if plan.batch is not None and cancel is not None:
        run = _batch(run, plan, data, now, deps, cancel)
        data = dict(run.input)
    if plan.debounce is not None and cancel is not None:
        run = _debounce(run, plan, data, now, deps, cancel)
    if plan.rate_limit is not None:
        spec = plan.rate_limit
        name = key_resource(RATE_PREFIX, plan.plan_id, spec, data, "rate_limit")
        # Its own holder form (not <run_id>/…): the start counts for the whole period, and
        # giving back a run's leases when it ends must not give this one back.
        holder = f"{run.run_id}:rate"
        period = period_seconds(spec.period)
        if not _take(name, holder, spec.limit, period, now, deps):
            facts = {"rule": "rate_limit", "key": name, "limit": spec.limit, "period": spec.period}
            return _drop(run, f"rate limit: {spec.limit} per {spec.period}", facts, deps)
    if plan.singleton is not None:
        name = key_resource(SINGLETON_PREFIX, plan.plan_id, plan.singleton, data, "singleton")
        holder = holder_of(run.run_id, RUN_HOLDER)
        taken = _take(name, holder, 1, LEASE_SECONDS, now, deps)
        if not taken and plan.singleton.mode == "cancel_running" and cancel is not None:
            taken = _replace_running(run, name, holder, now, deps, cancel)
        if not taken:
            facts = {"rule": "singleton", "key": name, "mode": plan.singleton.mode}
            return _drop(run, "singleton: a run of this key is running", facts, deps)
    if plan.throttle is not None:
        return _throttle(run, plan, data, now, deps)
    return None


def _replace_running(
    run: RunRecord, name: str, holder: str, now: float, deps: FlowDeps, cancel: Cancel
) -> bool:
    """``singleton.mode: cancel_running``: cancel the run holding the key (recorded on its
    timeline and the new run's), then take the key; whether it was taken.

    A start racing another for the freed key may still lose it (and is dropped)."""
    running = [h.rsplit("/", 1)[0] for h in deps.resources.get(name).live(now).leases]
    for old in running:
        cancel(old, f"singleton: replaced by run {run.run_id}")
        deps.resources.release(name, holder_of(old, RUN_HOLDER))  # ended before it held it?
    if not _take(name, holder, 1, LEASE_SECONDS, now, deps):
        return False
    event = TimelineEvent(
        seq=3,  # after run_started (1) and a concurrency wait (2)
        at=deps.clock(),
        type=TimelineEventType.resource_acquired,
        actor=ACTOR,
        detail={"rule": "singleton", "key": name, "mode": "cancel_running", "cancelled": running},
    )
    deps.runs.append_events(run.run_id, [event])
    logger.info("running run replaced", extra={"run_id": run.run_id, "cancelled": running})
    return True


def _debounce(
    run: RunRecord,
    plan: TaskPlan,
    data: dict[str, Any],
    now: float,
    deps: FlowDeps,
    cancel: Cancel,
) -> RunRecord:
    """Hold the run for the debounce period, replacing (cancelling) the key's held run;
    returns the run as stored.

    The key is a lease of one lasting the period: the held run's. A start within it takes the
    key over and carries the count on; after it the key is free and the count starts again.
    """
    assert plan.debounce is not None
    spec = plan.debounce
    name = key_resource(DEBOUNCE_PREFIX, plan.plan_id, spec, data, "debounce")
    period = period_seconds(spec.period)
    holder = holder_of(run.run_id, RUN_HOLDER)
    count = 1
    if not _take(name, holder, 1, period, now, deps):
        for held in deps.resources.get(name).live(now).leases:
            old = held.rsplit("/", 1)[0]
            before = deps.runs.get_run(old).trigger.detail.get(DEBOUNCE, {})
            count = max(count, int(before.get("count", 1)) + 1)
            cancel(old, f"debounce: replaced by run {run.run_id} within {spec.period}")
            deps.resources.release(name, held)
        _take(name, holder, 1, period, now, deps)  # a racing start may win it: both then run
    hold = {"until": now + period, "count": count, "key": name}
    trigger = run.trigger.model_copy(update={"detail": {**run.trigger.detail, DEBOUNCE: hold}})
    holding = run.model_copy(update={"trigger": trigger})
    deps.runs.save_run(holding)
    event = TimelineEvent(
        seq=2,
        at=deps.clock(),
        type=TimelineEventType.wait_started,
        actor=ACTOR,
        detail={"rule": "debounce", "key": name, "period": spec.period, "count": count},
    )
    deps.runs.append_events(run.run_id, [event])
    return holding


def _throttle(
    run: RunRecord, plan: TaskPlan, data: dict[str, Any], now: float, deps: FlowDeps
) -> RunRecord | None:
    """Reserve the run's start slot under ``throttle``: past ``limit`` per ``period`` the run
    is delayed, not dropped — it stays ``queued`` with its slot in ``trigger.detail.throttle``
    (its first segment sleeps until then: the state machine's Wait, as a debounced run's) and
    the reason and slot on its record and timeline. Returns the run as dropped only when the
    slot is more than :data:`MAX_PERIOD_SECONDS` away (a backlog past a week is turned away,
    its reservation kept, so the limit still holds); else ``None``."""
    assert plan.throttle is not None
    spec = plan.throttle
    name = key_resource(THROTTLE_PREFIX, plan.plan_id, spec, data, "throttle")
    # Its own holder form (not <run_id>/…), as rate_limit's: giving back an ended run's leases
    # must not give back its slot, which counts for the whole period.
    holder = f"{run.run_id}:throttle"
    period = period_seconds(spec.period)
    _declare(name, spec.limit, deps)  # what `triggers show` and `resources list` show
    due = deps.resources.reserve(name, holder, now=now, limit=spec.limit, period=period)
    facts: dict[str, Any] = {"rule": "throttle", "key": name, "limit": spec.limit}
    facts |= {"period": spec.period, "delay_seconds": math.ceil(due - now)}
    if due - now > MAX_PERIOD_SECONDS:
        reason = f"throttle: {spec.limit} per {spec.period}, backlog longer than 7d"
        return _drop(run, reason, facts, deps)
    if due <= now:
        return None
    at = datetime.fromtimestamp(due, UTC)
    hold = {"until": due, "key": name, "delay": due - now}
    trigger = run.trigger.model_copy(update={"detail": {**run.trigger.detail, THROTTLE: hold}})
    reason = f"throttle: {spec.limit} per {spec.period}; starts at {at:%Y-%m-%dT%H:%M:%SZ}"
    deps.runs.save_run(run.model_copy(update={"trigger": trigger, "status_reason": reason}))
    event = TimelineEvent(
        seq=deps.runs.next_event_seq(run.run_id),
        at=deps.clock(),
        type=TimelineEventType.resource_waiting,
        actor=ACTOR,
        detail={**facts, "resource": name, "reason": "throttle", "until": at.isoformat()},
    )
    deps.runs.append_events(run.run_id, [event])
    logger.info("start delayed", extra={"run_id": run.run_id, **facts})
    return None


def _batch(
    run: RunRecord,
    plan: TaskPlan,
    data: dict[str, Any],
    now: float,
    deps: FlowDeps,
    cancel: Cancel,
) -> RunRecord:
    """Take the key's open batch over: its items plus this start's input become this run's
    input, the run that held it is cancelled; held until the batch's timeout, or run now
    (closing the batch) when it is full. Returns the run as stored."""
    assert plan.batch is not None
    spec = plan.batch
    name = key_resource(BATCH_PREFIX, plan.plan_id, spec, data, "batch")
    timeout = period_seconds(spec.timeout)
    holder = holder_of(run.run_id, RUN_HOLDER)
    items: list[Any] = []
    until = now + timeout
    if not _take(name, holder, 1, timeout, now, deps):
        for held in deps.resources.get(name).live(now).leases:
            old = deps.runs.get_run(held.rsplit("/", 1)[0])
            items = list(old.input.get("items", []))
            until = float(old.trigger.detail.get(BATCH, {}).get("until", until))
            cancel(old.run_id, f"batch: moved into run {run.run_id} ({len(items)} items)")
            deps.resources.release(name, held)
        _take(name, holder, 1, max(1.0, until - now), now, deps)
    items.append(data)
    full = len(items) >= spec.max_size
    if full:
        deps.resources.release(name, holder)  # closed: the next start opens a new batch
    hold = {"until": now if full else until, "count": len(items), "key": name}
    trigger = run.trigger.model_copy(update={"detail": {**run.trigger.detail, BATCH: hold}})
    batched = run.model_copy(update={"trigger": trigger, "input": {"items": items}})
    deps.runs.save_run(batched)
    event = TimelineEvent(
        seq=2,
        at=deps.clock(),
        type=TimelineEventType.wait_started,
        actor=ACTOR,
        detail={"rule": "batch", "key": name, "count": len(items), "full": full},
    )
    deps.runs.append_events(run.run_id, [event])
    return batched


def held(run: RunRecord) -> bool:
    """Whether flow control holds the run's first segment (debounce, batch or throttle)."""
    return any(key in run.trigger.detail for key in HOLDS)


def hold_wait(run: RunRecord, now: float) -> int:
    """Seconds a debounced, batch or throttled run still sleeps before its first segment
    (0: it may run)."""
    if run.segment > 0 or run.status is not RunStatus.queued:
        return 0
    holds = [run.trigger.detail.get(key) for key in HOLDS]
    until = max((float(h.get("until", 0)) for h in holds if isinstance(h, dict)), default=0.0)
    return max(0, math.ceil(until - now))


def release_singleton(run: RunRecord, plan: TaskPlan, resources: ResourceLocks) -> None:
    """Give back the run's ``singleton`` lease (it ended), so the key's next start runs."""
    if plan.singleton is None:
        return
    name = key_resource(
        SINGLETON_PREFIX, plan.plan_id, plan.singleton, dict(run.input), "singleton"
    )
    resources.release(name, holder_of(run.run_id, RUN_HOLDER))


def _take(name: str, holder: str, limit: int, lease: float, now: float, deps: FlowDeps) -> bool:
    """Take one of the key's ``limit`` leases for ``lease`` seconds; never queue."""
    _declare(name, limit, deps)
    grant = deps.resources.acquire(name, holder, now=now, lease_seconds=lease, wait_seconds=0)
    if not grant.acquired:
        deps.resources.release(name, holder)  # leave the queue: a dropped start waits for nothing
    return grant.acquired


def _declare(name: str, limit: int, deps: FlowDeps) -> None:
    """Set the key's limit: once, and again when a new workflow version changes it."""
    state = deps.resources.get(name)
    if not state.declared or state.limit != limit:
        deps.resources.set_limit(name, limit)


def _drop(run: RunRecord, reason: str, facts: dict[str, Any], deps: FlowDeps) -> RunRecord:
    at = deps.clock()
    dropped = transition(run, RunStatus.cancelled, now=at, reason=reason)
    deps.runs.save_run(dropped)
    event = TimelineEvent(
        seq=2, at=at, type=TimelineEventType.run_cancelled, actor=ACTOR, detail=facts
    )
    deps.runs.append_events(run.run_id, [event])
    logger.info("start dropped", extra={"run_id": run.run_id, **facts})
    return dropped
