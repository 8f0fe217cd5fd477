"""What ``langorch triggers show WORKFLOW`` says: a workflow's triggers, its flow control, and
what its recent starts became — started, queued (and behind which key), dropped (and why).

Counts are read from the workflow's newest runs (at most :data:`RECENT` of them: one page of the
runs index), and the live queues from the resource locks, so the answer costs a bounded number
of reads however long the workflow has run.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from langorch.domain.concurrency import PREFIX as CONCURRENCY_PREFIX
from langorch.domain.errors import NotFoundError
from langorch.domain.flow_control import (
    NOT_ENFORCED,
    RATE_PREFIX,
    SINGLETON_PREFIX,
    THROTTLE,
    THROTTLE_PREFIX,
)
from langorch.domain.runs import RunStatus

if TYPE_CHECKING:
    from langorch.app.ports import Clock, ResourceLocks, RunsStore, WorkflowSource
    from langorch.domain.definitions import TaskPlan, Trigger

MERGED = ("debounce:", "batch:")
"""The reasons of starts folded into a later run: counted per rule, not listed as drops."""

RECENT = 1000
"""Runs read for the counts (the newest first)."""


class TriggerViewDeps(Protocol):
    """What :func:`show_triggers` reads: definitions, runs and resource locks."""

    @property
    def definitions(self) -> WorkflowSource: ...

    @property
    def runs(self) -> RunsStore: ...

    @property
    def resources(self) -> ResourceLocks: ...

    @property
    def clock(self) -> Clock: ...


@dataclass(frozen=True)
class KeyView:
    """One flow-control key as it stands: ``concurrency:sync:acme`` with 2 held, 5 waiting."""

    resource: str
    limit: int
    held: int
    waiting: int


@dataclass(frozen=True)
class TriggersView:
    """A workflow's triggers, flow control and what its recent starts became."""

    workflow_id: str
    version: int
    triggers: list[dict[str, Any]]
    flow: dict[str, Any]
    """Each flow-control key set, as written, with ``enforced``."""
    runs_read: int
    by_trigger: dict[str, dict[str, int]]
    """Trigger type -> status -> runs (of the ``runs_read`` newest)."""
    dropped: dict[str, int]
    """Why starts were turned away (a cancelled run's ``status_reason`` from flow control)."""
    keys: list[KeyView] = field(default_factory=list)
    missed_slots: int = 0
    """Schedule slots missed while the scheduler was down and not run (``catch_up: latest``
    or ``none``), as recorded on the runs that caught up."""
    merged: dict[str, int] = field(default_factory=dict)
    """Starts folded into another run, by rule (``debounce``: replaced by a later start;
    ``batch``: moved into the next batch run), counted apart from the drops (each reason names
    its run, so listing them as drops would be one line per start)."""
    delayed: dict[str, int] = field(default_factory=dict)
    """Starts delayed past their arrival, by rule (``throttle``), of the ``runs_read`` newest:
    each such run carries its slot in ``trigger.detail``."""


def show_triggers(workflow_id: str, deps: TriggerViewDeps) -> TriggersView:
    """The triggers view of ``workflow_id`` (its latest version).

    Raises:
        NotFoundError: no such workflow.
    """
    plan = deps.definitions.get_workflow(workflow_id)
    if plan is None:
        raise NotFoundError(
            f"workflow {workflow_id} not found; register it with `langorch workflows put`"
        )
    runs = deps.runs.list_runs(workflow_id=workflow_id, limit=RECENT)
    by_trigger: dict[str, Counter[str]] = {}
    dropped: Counter[str] = Counter()
    merged: Counter[str] = Counter()
    delayed: Counter[str] = Counter()
    missed = 0
    for run in runs:
        by_trigger.setdefault(run.trigger.type, Counter())[run.status.value] += 1
        reason = run.status_reason or ""
        if run.status is RunStatus.cancelled and reason.startswith(MERGED):
            merged[reason.split(":", 1)[0]] += 1
        elif run.status is RunStatus.cancelled and _by_flow_control(reason):
            dropped[reason] += 1
        if THROTTLE in run.trigger.detail:
            delayed[THROTTLE] += 1
        caught = run.trigger.detail.get("catch_up")
        if isinstance(caught, dict):
            missed += int(caught.get("skipped", 0))
    return TriggersView(
        workflow_id=plan.plan_id,
        version=plan.version,
        triggers=[_trigger(t) for t in plan.triggers],
        flow=_flow(plan),
        runs_read=len(runs),
        by_trigger={t: dict(sorted(c.items())) for t, c in sorted(by_trigger.items())},
        dropped=dict(dropped),
        keys=_keys(plan.plan_id, deps.resources, deps.clock().timestamp()),
        delayed=dict(delayed),
        missed_slots=missed,
        merged=dict(merged),
    )


def _by_flow_control(reason: str | None) -> bool:
    rules = ("rate limit:", "singleton:", "debounce:", "batch:", "throttle:", "catch_up:")
    return bool(reason) and reason.startswith(rules)  # type: ignore[union-attr]


def _trigger(trigger: Trigger) -> dict[str, Any]:
    return trigger.model_dump(mode="json", exclude_defaults=True) | {"type": trigger.type}


def _flow(plan: TaskPlan) -> dict[str, Any]:
    flow: dict[str, Any] = {}
    for name in (
        "concurrency",
        "priority",
        "rate_limit",
        "throttle",
        "singleton",
        "debounce",
        "batch",
        *NOT_ENFORCED,
    ):
        value = getattr(plan, name)
        if value is None:
            continue
        written = value if isinstance(value, str) else value.model_dump(mode="json")
        enforced = name not in NOT_ENFORCED
        flow[name] = {"spec": written, "enforced": enforced}
    return flow


def _keys(workflow_id: str, resources: ResourceLocks, now: float) -> list[KeyView]:
    kinds = (CONCURRENCY_PREFIX, RATE_PREFIX, THROTTLE_PREFIX, SINGLETON_PREFIX)
    # ... and its triggers' concurrency keys (concurrency:<workflow>@<trigger type>:<key>)
    prefixes = (*(f"{p}{workflow_id}:" for p in kinds), f"{CONCURRENCY_PREFIX}{workflow_id}@")
    views = []
    for state in resources.list():
        if state.name.startswith(prefixes):
            live = state.live(now)
            views.append(KeyView(state.name, state.limit, len(live.leases), len(live.queue)))
    return views
