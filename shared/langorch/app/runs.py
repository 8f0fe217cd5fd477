"""Use-cases for runs: start one (idempotently), run one segment, drive a run to its end locally.

``run_segment`` is what the ``run_segment`` Lambda calls once per Step Functions iteration: it
takes the run's lease (one writer per run), advances the graph by one segment, records the
timeline and the run's new status, and returns what the state machine branches on.

Each use-case names the ports it needs in a small ``Protocol`` (``StartDeps``, ``LaunchDeps``,
``SegmentDeps``, ``EndDeps``, ``CancelDeps``): the container satisfies them in the handlers,
the fakes of ``tests/fakes`` in the use-case tests.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from langorch.app.segment_record import (
    FailDeps,
    SegmentResult,
    closing_seq,
    parked_again,
    record_segment,
)
from langorch.app.tasks import SideEffectDeps
from langorch.app.traces import SegmentTrace
from langorch.domain.errors import (
    RecordTooLargeError,
    RunNotFinishedError,
    UnknownInterruptError,
)
from langorch.domain.inputs import ensure_valid_input, with_defaults
from langorch.domain.limits import ensure_input_fits
from langorch.domain.runs import (
    PauseRequest,
    PendingInterrupt,
    RunError,
    RunRecord,
    RunStatus,
    RunTrigger,
    TimelineEvent,
    TimelineEventType,
    current_execution,
    dedupe_run_id,
    minimal_failed,
    new_run_id,
    transition,
)

if TYPE_CHECKING:
    from langorch.app.approvals.ports import ApprovalsStore
    from langorch.app.ports import (
        AgentStore,
        BudgetCounters,
        Clock,
        Executions,
        Ids,
        ResourceLocks,
        RunsStore,
        WorkflowSource,
    )
    from langorch.app.traces import RunTraces
    from langorch.config import Settings
    from langorch.domain.budgets import BudgetSpec
    from langorch.domain.concurrency import ConcurrencySpec
    from langorch.domain.definitions import TaskPlan
    from langorch.domain.model_limits import ModelLimits
    from langorch.domain.prices import PriceTable
    from langorch.domain.tool_policies import ToolPolicy
    from langorch.engine.compiler import GraphCompiler
    from langorch.engine.context import (
        ArtifactWriter,
        Downloader,
        EngineContext,
        FileReader,
        HttpCaller,
        LLMInvoker,
        Memory,
    )

logger = logging.getLogger(__name__)

LEASE_GRACE_SECONDS = 120.0
"""A lease outlives the segment's budget by this much, so a crashed segment's lease expires."""


# --------------------------------------------------------------------------------------------
# The ports each use-case needs
# --------------------------------------------------------------------------------------------


class StartDeps(Protocol):
    """What :func:`start_run` needs: the workflows, the runs, a clock and ids."""

    @property
    def definitions(self) -> WorkflowSource: ...
    @property
    def runs(self) -> RunsStore: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def ids(self) -> Ids: ...


class CloseDeps(FailDeps, Protocol):
    """What ending a run from outside needs besides a stop: :class:`FailDeps`, the approvals."""

    @property
    def approvals(self) -> ApprovalsStore: ...


class CancelDeps(CloseDeps, Protocol):
    """What :func:`cancel_run` needs: :class:`CloseDeps`, the settings and the executions."""

    @property
    def settings(self) -> Settings: ...
    @property
    def executions(self) -> Executions: ...


class LaunchDeps(StartDeps, CancelDeps, Protocol):
    """What :func:`launch_run` needs: :class:`StartDeps`, the executions and the resource
    locks (a workflow's ``concurrency`` is a lease on one), and what cancelling a run needs
    (``singleton: cancel_running``, ``debounce`` and ``batch`` replace a run by the new one)."""

    @property
    def resources(self) -> ResourceLocks: ...


class Checkpoints(Protocol):
    """The part of the checkpointer a segment drives itself: write what it buffered, and
    learn of an operator's pause from its fenced writes."""

    def flush(self) -> None:
        """Store every buffered checkpoint write."""
        ...

    def pause_seen(self, run_id: str) -> bool:
        """Whether a fenced checkpoint write of the run found a pause standing since the last
        call (forgotten by this one)."""
        ...

    def starts_empty(self, run_id: str, fence: int) -> None:
        """Note that the run's thread has no checkpoint, as its segment under ``fence`` knows:
        the segment's first read needs no request (a saver without reads to save ignores it)."""
        ...

    def claim_lease(self, run_id: str, fence: int) -> None:
        """The segment took the run's lease under ``fence``: from now on, the checkpoint
        writes of the segment that held it before are refused (a saver that checks the fence
        in each write's own transaction has nothing to do)."""
        ...


class SegmentDeps(SideEffectDeps, Protocol):
    """What :func:`run_segment` and :func:`drive` need: the runs, the engine and its ports
    (with :class:`~langorch.app.tasks.SideEffectDeps`: recorded calls and tools)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def runs(self) -> RunsStore: ...
    @property
    def compiler(self) -> GraphCompiler: ...
    @property
    def checkpointer(self) -> Checkpoints: ...
    @property
    def llm(self) -> LLMInvoker: ...
    @property
    def memory(self) -> Memory: ...
    @property
    def http(self) -> HttpCaller | None: ...
    @property
    def files(self) -> FileReader: ...
    @property
    def artifact_writer(self) -> ArtifactWriter: ...
    @property
    def download(self) -> Downloader | None: ...
    @property
    def approvals(self) -> ApprovalsStore: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def ids(self) -> Ids: ...
    @property
    def resources(self) -> ResourceLocks: ...
    @property
    def executions(self) -> Executions: ...
    @property
    def agents(self) -> AgentStore: ...
    @property
    def prices(self) -> PriceTable: ...
    @property
    def budgets(self) -> BudgetCounters: ...
    @property
    def deployment_tool_policies(self) -> list[ToolPolicy]: ...
    @property
    def traces(self) -> RunTraces: ...


# --------------------------------------------------------------------------------------------
# Starting a run
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StartRun:
    """Start a run of a workflow (latest version unless pinned)."""

    workflow_id: str
    input: dict[str, Any] = field(default_factory=dict)
    version: int | None = None
    dedupe_key: str | None = None
    trigger: str = "manual"
    trigger_detail: dict[str, Any] = field(default_factory=dict)
    user_id: str = "default"
    trigger_concurrency: ConcurrencySpec | None = None
    """The ``concurrency`` of the trigger that starts it: a key of its own, held with the
    workflow's (both limits hold)."""


Slot = tuple[str, int, str]
"""A ``concurrency`` key a run must hold to start: its resource, its limit, the run's holder."""


def start_run(cmd: StartRun, deps: StartDeps) -> tuple[RunRecord, bool]:
    """Create the run record; a repeated dedupe key returns the existing run and ``False``.

    Raises:
        NotFoundError: the workflow (version) does not exist.
        InputValidationError: the input does not fit the workflow's inputs schema, or is larger
            than :data:`~langorch.domain.limits.MAX_INPUT_BYTES` (the run could not carry it).
    """
    run, created, _, _ = _create_run(cmd, deps)
    return run, created


def _create_run(cmd: StartRun, deps: StartDeps) -> tuple[RunRecord, bool, list[Slot], TaskPlan]:
    """:func:`start_run`, the ``concurrency:`` keys the run needs a lease on, in the order it
    takes them (its trigger's, then its workflow's), and the workflow."""
    plan = deps.definitions.get_workflow(cmd.workflow_id, cmd.version)
    if plan is None:
        from langorch.domain.errors import NotFoundError

        # Versions start at 1: a version 1 without an active one means only drafts are stored.
        if cmd.version is None and deps.definitions.get_workflow(cmd.workflow_id, 1) is not None:
            raise NotFoundError(
                f"workflow {cmd.workflow_id} has no active version, only drafts: activate one "
                f"with `langorch workflows promote {cmd.workflow_id} --version N` "
                f"(`langorch workflows history {cmd.workflow_id}` lists them)"
            )
        at = f"@{cmd.version}" if cmd.version else ""
        raise NotFoundError(
            f"workflow {cmd.workflow_id}{at} not found; register it with `langorch workflows put`"
        )
    data = with_defaults(plan, cmd.input)
    ensure_input_fits(plan.plan_id, data)
    ensure_valid_input(plan, data)
    run_id = dedupe_run_id(cmd.dedupe_key) if cmd.dedupe_key else new_run_id(deps.ids)
    slots, detail = _slots(cmd, plan, data, run_id)
    now = deps.clock()
    run = RunRecord(
        run_id=run_id,
        workflow_id=plan.plan_id,
        workflow_version=plan.version,
        status=RunStatus.queued,
        trigger=RunTrigger(type=cmd.trigger, detail=detail),  # type: ignore[arg-type]
        dedupe_key=cmd.dedupe_key,
        input=data,
        user_id=cmd.user_id,
        created_at=now,
        updated_at=now,
    )
    stored, created = deps.runs.create_run(run)
    if created:
        deps.runs.append_events(
            run_id,
            [
                TimelineEvent(
                    seq=1,
                    at=now,
                    type=TimelineEventType.run_started,
                    detail={"workflow": f"{plan.plan_id}@{plan.version}", "trigger": cmd.trigger},
                )
            ],
        )
    logger.info(
        "run started" if created else "duplicate start ignored",
        extra={"run_id": run_id, "workflow_id": plan.plan_id, "workflow_version": plan.version},
    )
    return stored, created, slots, plan


def _slots(
    cmd: StartRun, plan: TaskPlan, data: dict[str, Any], run_id: str
) -> tuple[list[Slot], dict[str, Any]]:
    """The keys the run takes (its trigger's ``concurrency``, then its workflow's) and its
    trigger detail (naming the trigger's key, given back when the run ends)."""
    from langorch.domain.concurrency import (
        TRIGGER_DETAIL,
        resource_name,
        run_holder,
        trigger_resource,
    )
    from langorch.domain.flow_control import priority_of

    detail = dict(cmd.trigger_detail)
    if plan.concurrency is None and cmd.trigger_concurrency is None:
        return [], detail
    priority_of(plan.plan_id, plan.priority, data)  # a bad one refuses the start, not a run
    slots: list[Slot] = []
    workflows = None
    if plan.concurrency is not None:
        workflows = resource_name(plan.plan_id, plan.concurrency, data)
    if cmd.trigger_concurrency is not None:
        spec = cmd.trigger_concurrency
        name = trigger_resource(plan.plan_id, cmd.trigger, spec, data)
        detail[TRIGGER_DETAIL] = name
        slots.append((name, spec.limit, run_holder(run_id, then=workflows)))
    if plan.concurrency is not None and workflows is not None:
        slots.append((workflows, plan.concurrency.limit, run_holder(run_id)))
    return slots, detail


def launch_run(cmd: StartRun, deps: LaunchDeps) -> tuple[RunRecord, bool]:
    """Start a run end to end: the run record, then its execution (named by the run id).

    Both halves are idempotent, so a duplicate or retried event — even one that arrives after
    the record was written but before the execution started — starts exactly one execution.

    Returns:
        The run and whether this call created it.
    """
    run, created, slots, plan = _create_run(cmd, deps)
    if created and (dropped := _admit(run, plan, deps)) is not None:
        return dropped, created  # rate_limit / singleton / throttle: recorded, not started
    if not created and run.is_terminal:
        return run, created  # a late duplicate of an ended (or dropped) run starts nothing
    if slots and not _concurrency_turn(run, created, slots, plan, deps):
        return run, created
    # The execution ARN derives from the run id; it is not written back to the record, which
    # the first segment may already be changing.
    arn, started = deps.executions.start(run.run_id, {"run_id": run.run_id, "resume": None})
    run = run.model_copy(update={"execution_arn": arn})
    logger.info(
        "run launched" if started else "execution already exists",
        extra={"run_id": run.run_id, "workflow_id": run.workflow_id},
    )
    return run, created


def _admit(run: RunRecord, plan: TaskPlan, deps: LaunchDeps) -> RunRecord | None:
    """The run as dropped by its workflow's flow control, or ``None`` (it may start)."""
    if not (plan.rate_limit or plan.singleton or plan.debounce or plan.batch or plan.throttle):
        return None
    from langorch.app.flow_control import ACTOR, admit

    def cancel(run_id: str, reason: str) -> object:
        return cancel_run(run_id, deps, actor=ACTOR, reason=reason)

    return admit(run, plan, deps, cancel)


def _ensure_limit(resource: str, limit: int, deps: LaunchDeps) -> None:
    # The workflow's limit is the resource's: set once, and again when a new version changes it.
    state = deps.resources.get(resource)
    if not state.declared or state.limit != limit:
        deps.resources.set_limit(resource, limit)


def _concurrency_turn(
    run: RunRecord, created: bool, slots: list[Slot], plan: TaskPlan, deps: LaunchDeps
) -> bool:
    """Whether the run may start now under its trigger's and its workflow's ``concurrency``
    (taken in that order); if not, it waits ``queued`` in the first full key's queue (no
    execution, no Lambda) until a run of that key ends
    (:func:`langorch.app.resources.start_next_runs`), ahead of the queued runs of a lower
    ``priority``."""
    from langorch.domain.concurrency import LEASE_SECONDS, WAIT_SECONDS
    from langorch.domain.flow_control import priority_of

    if run.is_terminal:
        return False  # a late duplicate of an ended run: its lease is given back, take none
    priority = priority_of(plan.plan_id, plan.priority, dict(run.input))
    for resource, limit, holder in slots:
        _ensure_limit(resource, limit, deps)
        grant = deps.resources.acquire(
            resource,
            holder,
            now=time.time(),  # lease times are the resource locks' wall clock, as the engine's
            lease_seconds=LEASE_SECONDS,
            wait_seconds=WAIT_SECONDS,
            priority=priority,
        )
        if not grant.acquired:
            _queued(run, created, resource, grant.position, priority, deps)
            return False
    return True


def _queued(
    run: RunRecord, created: bool, resource: str, position: int, priority: int, deps: LaunchDeps
) -> None:
    """Record why a run waits for a ``concurrency`` key (once, when it was created)."""
    if created:
        deps.runs.append_events(
            run.run_id,
            [
                TimelineEvent(
                    seq=2,
                    at=deps.clock(),
                    type=TimelineEventType.resource_waiting,
                    detail={
                        "resource": resource,
                        "position": position,
                        "reason": "concurrency",
                        "priority": priority,
                    },
                )
            ],
        )
    logger.info(
        "run queued for concurrency",
        extra={"run_id": run.run_id, "resource": resource, "position": position},
    )


@dataclass(frozen=True)
class RunSegment:
    """Advance a run by one segment, optionally answering its parked interrupt."""

    run_id: str
    resume: Any = None
    interrupt_id: str | None = None
    owner: str | None = None


def run_segment(cmd: RunSegment, deps: SegmentDeps) -> SegmentResult:
    """Run one segment of a run under its lease.

    Raises:
        LeaseHeldError: another segment of this run is running.
        LeaseLostError: another segment took the lease while this one ran; its checkpoint
            writes are fenced, so it wrote nothing after that.
        UnknownInterruptError: the resume names no pending interrupt.
    """
    from langorch.engine.segments import Resume, advance

    run = deps.runs.get_run(cmd.run_id)
    if run.is_terminal:
        return SegmentResult(
            run.run_id,
            run.status.value,
            run.segment,
            outputs=run.outputs,
            error=run.error.model_dump() if run.error else None,
            workflow_id=run.workflow_id,
            workflow_version=run.workflow_version,
        )
    from langorch.app.flow_control import held, hold_wait

    debounced = held(run)
    if debounced and (wait := hold_wait(run, deps.clock().timestamp())) > 0:
        # Debounced, batched or throttled: asleep until its hold is over (a later start of a
        # debounce or batch key cancels it).
        return SegmentResult(run.run_id, "sleeping", run.segment, seconds=wait)
    if cmd.resume == {"woke": True} and run.pending is None and run.segment == 0 and debounced:
        cmd = replace(cmd, resume=None)  # woke from the hold's sleep: the first segment
    if run.status is RunStatus.queued and run.pending is not None and cmd.resume is None:
        from langorch.app.repark import repark  # a redrive kept the parked approval

        lease = deps.settings.segment_budget_seconds + LEASE_GRACE_SECONDS
        return repark(run, deps, owner=cmd.owner or deps.ids(), lease_seconds=lease)
    resolved = False  # whether a timed-out approval's answer was resolved already
    if run.pause is not None or run.status is RunStatus.paused:
        if cmd.resume is not None:
            _check_resume(run, cmd)
            cmd, resolved = _after_timeout(run, cmd, deps), True  # resolved before it is held
        from langorch.app.pause import before_segment  # an operator's pause (issue 28)

        went = before_segment(run, cmd.resume, deps, owner=cmd.owner or deps.ids())
        if isinstance(went, SegmentResult):
            return went
        # A held answer was resolved when it arrived.
        resolved = resolved or went is not cmd.resume
        cmd = replace(cmd, resume=went)
    if cmd.resume is None and run.pending is not None and cmd.interrupt_id is None:
        return parked_again(run, deps.clock())  # a restart re-announces the park
    _check_resume(run, cmd)
    if not resolved:
        cmd = _after_timeout(run, cmd, deps)
    budget = deps.settings.segment_budget_seconds
    started_at = deps.clock()
    parked = run.pending
    # A resume for a run running and parked on nothing can only be the state machine's retry
    # of an attempt that died after taking the run (a crashed sandbox, Runtime.ExitError): the
    # graph knows whether it still waits on that interrupt.
    retried = parked is None and run.status is RunStatus.running
    run = transition(run, RunStatus.running, now=started_at)
    if run.trace_context is None and (context := deps.traces.new_context()) is not None:
        # Its first traced segment: every later one continues this trace (stored just below).
        run = run.model_copy(update={"trace_context": context})
    # One write takes the lease and stores the run as running.
    fence = deps.runs.acquire_lease(
        run.run_id,
        cmd.owner or deps.ids(),
        now=started_at.timestamp(),
        ttl_seconds=budget + LEASE_GRACE_SECONDS,
        saving=run,
    )
    if fence == 1 and run.forked_from is None:
        # The run's first lease, and no fork copied a checkpoint in: every checkpoint write is
        # fenced, so its thread is empty and the segment's first read asks nothing.
        deps.checkpointer.starts_empty(run.run_id, fence)
    else:
        # A segment may have held the lease before: its next checkpoint write is refused.
        deps.checkpointer.claim_lease(run.run_id, fence)
    released = False
    try:
        interrupt_id = cmd.interrupt_id
        if cmd.resume is not None and interrupt_id is None and parked is not None:
            interrupt_id = parked.interrupt_id
        resume = Resume(cmd.resume, interrupt_id, retried) if cmd.resume is not None else None
        plan = deps.compiler.workflow(run.workflow_id, run.workflow_version)
        graph = deps.compiler.compile(plan)
        ctx = _engine_context(run, plan, deps)
        initial = {
            "run_id": run.run_id,
            "agent_id": run.workflow_id,
            "user_id": run.user_id or "default",
            "shared_context": dict(run.input),
            "status": "running",
        }
        asked = _PauseWatch(deps.runs, deps.checkpointer, run.run_id)
        result = asyncio.run(
            advance(
                graph,
                ctx,
                initial=initial,
                resume=resume,
                deadline=time.monotonic() + budget,
                max_supersteps=deps.settings.segment_budget_supersteps,
                fence=fence,
                pause=asked,
            )
        )
        deps.checkpointer.flush()
        # Its last write gives the lease back too.
        ended = record_segment(
            run, result, deps, fence, started_at, parked, cmd.resume, pause=asked.request
        )
        released = True
        trace = SegmentTrace(run, result.events, started_at, deps.clock(), ended.status)
        deps.traces.segment(trace)
    finally:
        if not released:
            deps.checkpointer.flush()
            deps.runs.release_lease(cmd.run_id, fence)
    if ended.status in ("succeeded", "failed"):
        _end_concurrency(run, plan, deps)
    if ended.status in ("succeeded", "failed") and plan.singleton is not None:
        from langorch.app.flow_control import release_singleton

        release_singleton(run, plan, deps.resources)
    if ended.status == "paused":
        ended.seconds = deps.settings.pause_recheck_seconds  # AwaitResume's look again
    if ended.status in ("waiting_approval", "sleeping", "waiting_resource"):
        # A pause asked after this segment's last look pauses the park it left now.
        from langorch.app.pause import settle_pause

        if deps.runs.pause_of(run.run_id) is not None:
            settle_pause(run.run_id, deps)
    return ended


def _end_concurrency(run: RunRecord, plan: Any, deps: SegmentDeps) -> None:
    """Give back the run's ``concurrency`` leases (its workflow's, its trigger's) and start the
    runs of those keys next in line: the workflow's first (they already hold their trigger's
    key), then the trigger's (which then take the workflow's key, or queue for it)."""
    from langorch.app.resources import start_next_runs
    from langorch.domain.concurrency import TRIGGER_DETAIL, resource_name, run_holder

    workflows = None
    if plan.concurrency is not None:
        workflows = resource_name(plan.plan_id, plan.concurrency, dict(run.input))
        deps.resources.release(workflows, run_holder(run.run_id))
    triggers = run.trigger.detail.get(TRIGGER_DETAIL)
    if isinstance(triggers, str):
        deps.resources.release(triggers, run_holder(run.run_id, then=workflows))
    for name in (workflows, triggers):
        if isinstance(name, str):
            start_next_runs(name, deps.resources, deps.executions)


class _PauseWatch:
    """Whether an operator asked the run to pause, asked at each step boundary; the request it
    last saw is kept for the timeline.

    An operator's pause leaves a marker in the slot the segment's next checkpoint write takes
    (``adapters.dynamodb.checkpointer``; the SQLite saver checks the pause in its write's own
    transaction), so a boundary costs no request of its own: the request is read only once a
    write found a marker. A pause asked while a step runs is therefore
    seen by the write of that step's superstep, and the segment stops at that boundary, as
    before, with the step's checkpoint stored.
    """

    def __init__(self, runs: RunsStore, checkpoints: Checkpoints, run_id: str) -> None:
        self._runs = runs
        self._checkpoints = checkpoints
        self._run_id = run_id
        self.request: PauseRequest | None = None

    def __call__(self) -> bool:
        if not self._checkpoints.pause_seen(self._run_id):
            return False
        self.request = self._runs.pause_of(self._run_id)  # None: lifted since the write
        return self.request is not None


def _after_timeout(run: RunRecord, cmd: RunSegment, deps: SegmentDeps) -> RunSegment:
    """The answer of an approval whose task timed out: a decision recorded in time but lost on
    its way to the task stands over the timeout (else the approval closes as expired)."""
    if not (isinstance(cmd.resume, dict) and cmd.resume.get("decision") == "timed_out"):
        return cmd
    if run.pending is None:
        return cmd
    from langorch.app.approvals.decisions import resume_after_timeout

    answer = resume_after_timeout(
        run.run_id, run.pending.interrupt_id, approvals=deps.approvals, clock=deps.clock
    )
    return replace(cmd, resume=answer)


def _domains(domains: list[str] | None) -> tuple[str, ...] | None:
    return None if domains is None else tuple(domains)


def _engine_context(run: RunRecord, plan: Any, deps: SegmentDeps) -> EngineContext:
    """What the steps of this segment reach the world through (LangGraph's runtime context)."""
    from langorch.app.agent_calls import AgentCalls, SecretValues
    from langorch.app.resources import WakingLocks
    from langorch.app.step_tools import RecordedSideEffects
    from langorch.engine.context import EngineContext

    return EngineContext(
        run_id=run.run_id,
        workflow_id=run.workflow_id,
        workflow_version=run.workflow_version,
        user_id=run.user_id or "default",
        llm=deps.llm,
        memory=deps.memory if plan.memory or _uses_memory(plan) else None,
        http=deps.http,
        http_allowed_domains=_domains(deps.settings.http_allowed_domains),
        files=deps.files,
        artifacts=deps.artifact_writer,
        download=deps.download,
        subflows=deps.compiler.subflow,
        side_effects=RecordedSideEffects.of_run(run.run_id, deps),
        default_provider=deps.settings.default_llm_provider,
        default_model=deps.settings.default_llm_model,
        default_approvers=list(deps.settings.default_approvers),
        segment=run.segment,
        resources=WakingLocks(deps.resources, deps.executions),
        resource_lease_seconds=deps.settings.segment_budget_seconds + LEASE_GRACE_SECONDS,
        model_limits=_model_limits(deps.settings.model_limits),
        actions=AgentCalls.of(deps),
        secrets=SecretValues(deps.secrets),
        redacted=_sensitive(plan),
        prices=deps.prices.merged(plan.prices),
        spent_usd=run.cost_usd,
        budget=_budget(plan, deps.settings.default_approvers),
        budget_counters=deps.budgets if plan.budget else None,
        budget_periods=plan.budget.periods(run.workflow_id, deps.clock()) if plan.budget else [],
        tool_policies=_tool_policies(plan.tool_policies, plan, deps.settings.default_approvers),
        deployment_tool_policies=_tool_policies(
            deps.deployment_tool_policies, plan, deps.settings.default_approvers
        ),
        default_max_tokens=deps.settings.default_llm_max_tokens,
    )


def _model_limits(raw: dict[str, Any]) -> ModelLimits | None:
    """The deployment's ``model_limits`` (checked when the settings were read)."""
    if not raw:
        return None
    from langorch.domain.model_limits import ModelLimits

    return ModelLimits.parse(raw)


def _tool_policies(
    rules: list[ToolPolicy] | None, plan: Any, default_approvers: list[str]
) -> list[ToolPolicy]:
    """Tool-call rules (the workflow's or the deployment's), each with its approvers resolved
    (its own, the workflow's, the deployment's)."""
    approvers = list(plan.approvers or default_approvers)
    return [
        rule if rule.approvers else rule.model_copy(update={"approvers": approvers})
        for rule in rules or ()
    ]


def _budget(plan: Any, default_approvers: list[str]) -> BudgetSpec | None:
    """The workflow's budget with its approvers resolved: its own, the workflow's, the
    deployment's."""
    budget: BudgetSpec | None = plan.budget
    if budget is None or budget.approvers:
        return budget
    approvers = list(plan.approvers or default_approvers)
    return budget.model_copy(update={"approvers": approvers})


def _sensitive(plan: Any) -> frozenset[str]:
    """A CKP procedure's sensitive variables (shown nowhere; see ``EngineContext.redacted``)."""
    if not getattr(plan, "ckp", None):
        return frozenset()
    import json

    from langorch.domain.ckp.compiler import sensitive_variables

    return sensitive_variables(json.loads(plan.ckp))


def _check_resume(run: RunRecord, cmd: RunSegment) -> None:
    """Refuse a segment that would answer the wrong interrupt, before anything changes."""
    pending = run.pending
    if cmd.resume is None and pending is not None:
        raise UnknownInterruptError(
            f"run {run.run_id} is parked on {pending.kind} {pending.interrupt_id}; "
            "resume it with the decision"
        )
    if cmd.resume is not None and pending is None and run.status is not RunStatus.running:
        # (Running: the retry of an attempt that died holding the run, see run_segment.)
        raise UnknownInterruptError(f"run {run.run_id} is not waiting on any interrupt")
    if (
        cmd.interrupt_id is not None
        and pending is not None
        and (cmd.interrupt_id != pending.interrupt_id)
    ):
        raise UnknownInterruptError(
            f"run {run.run_id} is not waiting on interrupt {cmd.interrupt_id}; "
            f"it waits on {pending.interrupt_id}"
        )


def _uses_memory(plan: Any) -> bool:
    return any(
        (s.kind and s.kind.value in ("query_memory", "save_memory"))
        or s.block_id in ("query_memory", "save_memory")
        for s in plan.steps
    )


# --------------------------------------------------------------------------------------------
# Ending a run from outside a segment: the state machine's catch-all, an operator's cancel
# --------------------------------------------------------------------------------------------


def mark_failed(run_id: str, error: RunError, deps: FailDeps) -> bool:
    """End the run ``failed`` with ``error``, unless it has already ended.

    The state machine calls this (``MarkFailed``) when a segment failed past its retries or
    returned something it cannot route. Step Functions retries the call, so it is idempotent:
    a run that already ended — succeeded, failed or cancelled — keeps its status and record.

    Args:
        run_id: the run.
        error: why it failed (shown by ``langorch runs show``).
        deps: the runs, a clock and the resource locks.

    Returns:
        Whether this call failed the run.

    Raises:
        NotFoundError: the run does not exist.
        StorageError: DynamoDB failed (the state machine retries).
    """
    from langorch.app.resources import release_ended_run
    from langorch.domain.errors import ConflictError

    run = deps.runs.get_run(run_id)
    # Before the terminal check: a retried call whose first try failed the run and then
    # stopped still gives the leases back (releasing is idempotent).
    release_ended_run(run_id, deps.resources, wake=deps.executions)
    if run.is_terminal:
        return False
    # The first cause, not the last retry's symptom (the state machine passes the latter).
    from langorch.app.run_failures import first_cause

    error = first_cause(deps.runs.get_timeline(run_id)) or error
    now = deps.clock()
    failed = transition(run, RunStatus.failed, now=now, error=error, reason=error.message)
    # The event first: if the status write then fails, the retry rewrites the same event.
    deps.runs.append_events(
        run_id,
        [
            TimelineEvent(
                seq=closing_seq(run),
                at=now,
                type=TimelineEventType.run_finished,
                segment=run.segment,
                step_id=error.step_id,
                error=error,
                detail={"status": "failed"},
            )
        ],
    )
    try:
        # No fence: a segment that crashed may still hold the lease; its later writes are
        # refused because the run has ended.
        deps.runs.save_run(failed)
    except ConflictError:
        return False  # it ended between the read and the write: that ending stands
    except RecordTooLargeError as exc:
        # The full record cannot be stored (the reason the run failed, often): the smallest
        # terminal record still can, so the run never stays non-terminal.
        logger.error("run record too large; writing a minimal failed record", exc_info=exc)
        try:
            deps.runs.save_run(minimal_failed(run, error, now=now))
        except ConflictError:
            return False
    logger.error(
        "run failed",
        extra={
            "run_id": run_id,
            "workflow_id": run.workflow_id,
            "workflow_version": run.workflow_version,
            "segment": run.segment,
            "error_type": error.type,
            "error_message": error.message[:500],
        },
    )
    return True


def cancel_run(
    run_id: str,
    deps: CancelDeps,
    *,
    actor: str = "operator",
    reason: str = "cancelled by an operator",
) -> tuple[RunRecord, bool]:
    """Cancel a run: status ``cancelled``, its execution stopped, a pending approval closed.

    The record is changed first, so a segment running meanwhile is refused when it saves and
    a later segment ends at once. The execution stopped is the one the record names when the
    cancel lands (a hand-over to the next execution meanwhile makes the cancel read it again).
    Cancelling a cancelled run again repeats the (idempotent) stop, in case an earlier call was
    cut short before it.

    Args:
        run_id: the run.
        deps: the runs, the executions and the approvals.
        actor: who cancelled (kept in the timeline).
        reason: why (kept as the run's status reason and the execution's stop cause).

    Returns:
        The run as it is now, and whether this call cancelled it.

    Raises:
        NotFoundError: the run does not exist.
        StorageError: DynamoDB or Step Functions failed.
    """
    run, changed = record_cancelled(run_id, deps, actor=actor, reason=reason, wake=deps.executions)
    if run.status is RunStatus.cancelled and deps.settings.state_machine_arn:
        # The current execution: a redriven run's is named by its attempt.
        deps.executions.stop(current_execution(run), reason)
    return run, changed


def record_cancelled(
    run_id: str, deps: CloseDeps, *, actor: str, reason: str, wake: Executions | None = None
) -> tuple[RunRecord, bool]:
    """End the run ``cancelled`` and close the approval it was parked on; stop nothing.

    :func:`cancel_run` stops the execution after this; ``runs reconcile`` calls it alone for
    a run whose execution was already stopped from outside langorch.

    Args:
        run_id: the run.
        deps: the runs, the approvals and a clock.
        actor: who cancelled (kept in the timeline).
        reason: why (kept as the run's status reason).
        wake: the executions, to wake the runs queued behind a resource the run gives back
            (``None``: they wake when their park times out).

    Returns:
        The run as it is now, and whether this call cancelled it.

    Raises:
        NotFoundError: the run does not exist.
        ConflictError: the run kept moving to new executions while being cancelled.
        StorageError: DynamoDB failed.
    """
    run, parked, changed = _cancelled_record(run_id, deps, actor=actor, reason=reason)
    if run.status is not RunStatus.cancelled:
        return run, False  # it had already succeeded or failed: nothing to close
    close_pending_approval(run_id, parked, deps)
    from langorch.app.resources import release_ended_run

    release_ended_run(run_id, deps.resources, wake=wake)
    logger.info(
        "run cancelled" if changed else "run was already cancelled",
        extra={"run_id": run_id, "workflow_id": run.workflow_id, "actor": actor},
    )
    return run, changed


CANCEL_ATTEMPTS = 4
"""How often a cancel reads the run again when it moved meanwhile (a hand-over to the next
execution happens once per thousands of history events: a second read settles it)."""


def _cancelled_record(
    run_id: str, deps: CloseDeps, *, actor: str, reason: str
) -> tuple[RunRecord, PendingInterrupt | None, bool]:
    """Write the run ``cancelled`` with its timeline event, in the execution it was read in.

    The write is conditional on that execution (``in_execution``): a hand-over landing between
    the read and the write names the next execution, and an unconditional write would put the
    one read back (the record would name an execution that is ending, and the cancel would
    stop that one while the next one runs on). Refused, the run is read again: it has ended,
    or it is cancelled in the execution it is in now.

    Returns:
        The run as it is now, what it was parked on when last read before it ended (another
        cancel landing meanwhile cleared it), and whether this call cancelled it.

    Raises:
        ConflictError: the run moved to another execution at each of :data:`CANCEL_ATTEMPTS`
            reads.
    """
    from langorch.domain.errors import ConflictError

    parked: PendingInterrupt | None = None
    for _ in range(CANCEL_ATTEMPTS):
        run = deps.runs.get_run(run_id)
        if run.is_terminal:
            return run, parked or run.pending, False
        parked = run.pending
        now = deps.clock()
        ended = TimelineEvent(
            seq=closing_seq(run),
            at=now,
            type=TimelineEventType.run_cancelled,
            segment=run.segment,
            actor=actor,
            detail={"reason": reason[:200]},
        )
        cancelled = transition(run, RunStatus.cancelled, now=now, reason=reason)
        try:
            deps.runs.save_run(cancelled, events=[ended], in_execution=current_execution(run))
        except ConflictError:
            continue  # it ended, or moved to its next execution, since it was read
        return cancelled, run.pending, True
    raise ConflictError(
        f"run {run_id} moved to another execution each of the {CANCEL_ATTEMPTS} times it was "
        "read to be cancelled; cancel it again"
    )


def close_pending_approval(
    run_id: str, parked: PendingInterrupt | None, deps: CloseDeps, *, keep_decision: bool = False
) -> None:
    """Close the approval an ended run was parked on, so its links no longer decide anything.

    Args:
        run_id: the run, which has ended.
        parked: what it was parked on (nothing to do unless an approval).
        deps: the approvals and a clock.
        keep_decision: leave a decision recorded but not delivered for the run's redrive.
    """
    if parked is None or parked.kind != "approval":
        return
    from langorch.app.approvals.decisions import (
        close_for_ended_run,  # the lifecycle table's "cancel"
    )

    close_for_ended_run(
        run_id,
        parked.interrupt_id,
        approvals=deps.approvals,
        clock=deps.clock,
        keep_decision=keep_decision,
    )


# --------------------------------------------------------------------------------------------
# Driving a run on this machine (no Step Functions): `langorch runs start --local`, tests
# --------------------------------------------------------------------------------------------

ApprovalAnswer = Callable[[dict[str, Any]], dict[str, Any]]
PAUSE_POLL_SECONDS = 1.0
"""How often a run driven in this process looks whether its pause was lifted."""


def drive(
    run_id: str,
    deps: SegmentDeps,
    *,
    on_approval: ApprovalAnswer,
    sleep: Callable[[float], None] = time.sleep,
    max_segments: int = 1_000,
) -> SegmentResult:
    """Run segments until the run ends, answering approvals and sleeping through waits.

    This is the state machine's loop in-process: ``continue`` runs again, ``sleeping`` sleeps,
    ``waiting_approval`` asks ``on_approval`` for the decision, ``paused`` (an operator's pause
    of a run on a stack's stores) waits until ``langorch runs resume`` lifts it.
    """
    result = run_segment(RunSegment(run_id), deps)
    for _ in range(max_segments):
        if result.status == "continue":
            result = run_segment(RunSegment(run_id), deps)
        elif result.status in ("sleeping", "waiting_resource"):
            sleep(float(result.seconds or 0))
            result = run_segment(RunSegment(run_id, resume={"woke": True}), deps)
        elif result.status == "waiting_approval":
            decision = on_approval(result.approval or {})
            result = run_segment(RunSegment(run_id, resume=decision), deps)
        elif result.status == "paused":
            # The state machine's AwaitResume, in-process: wait until a resume lifts the pause.
            while deps.runs.pause_of(run_id) is not None:
                sleep(PAUSE_POLL_SECONDS)
            result = run_segment(RunSegment(run_id), deps)
        else:
            return result
    raise RunNotFinishedError(f"run {run_id} did not finish within {max_segments} segments")
