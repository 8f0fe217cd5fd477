"""Recovery: redrive a run from its last good checkpoint or from a step, on the same or a newer
workflow version, in a new Step Functions execution.

:func:`redrive` reopens the run record (a conditional write on its ``attempt``, so of two
concurrent redrives exactly one goes on), rewinds the run's checkpoint history when it goes back
to a step, records the redrive in the timeline and on the record, and starts the execution named
:func:`~langorch.domain.runs.execution_name` ``(run_id, attempt)``. The steps before the redrive
point keep their outputs: the next segment continues from the checkpoint, so they are not run
(and their LLMs not called) again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol

from langorch.domain.errors import ConflictError, DefinitionError, NotFoundError
from langorch.domain.runs import (
    PendingInterrupt,
    Redrive,
    RunRecord,
    RunStatus,
    TimelineEvent,
    TimelineEventType,
    current_execution,
    execution_name,
    reopened,
)

if TYPE_CHECKING:
    from langorch.app.approvals.ports import ApprovalsStore
    from langorch.app.ports import Clock, Executions, Ids, RunsStore
    from langorch.config import Settings
    from langorch.domain.approvals.record import Approval
    from langorch.domain.definitions import BlockDefinition, TaskPlan
    from langorch.domain.version_diff import VersionDiff
    from langorch.engine.compiler import GraphCompiler
    from langorch.engine.rewind import Point

logger = logging.getLogger(__name__)

REDRIVE_IN_PROGRESS = timedelta(seconds=60)
"""A run reopened this recently whose execution does not exist yet is a redrive still under way
(between its record write and its start), not a stranded run: it is not redriven again."""
_REWIND_LEASE_SECONDS = 60.0
_OPEN = frozenset(
    {
        RunStatus.queued,
        RunStatus.running,
        RunStatus.waiting_approval,
        RunStatus.sleeping,
        RunStatus.paused,
    }
)
_ENDED_EXECUTION = frozenset({"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"})

Version = int | Literal["latest"] | None


class RedriveRefusedError(ConflictError):
    """The run cannot be redriven as asked (still running, nothing to go back to, …)."""


class IncompatibleVersionError(DefinitionError):
    """The new version does not fit the run's state; ``problems`` name the field paths."""

    def __init__(self, subject: str, diff: VersionDiff) -> None:
        self.diff = diff
        super().__init__(
            f"{subject} (pass --force to move anyway; it is recorded)", list(diff.problems)
        )


class RecoveryDefinitions(Protocol):
    """The definitions a redrive reads: workflows and their blocks."""

    def get_workflow(self, workflow_id: str, version: int | None = None) -> TaskPlan | None: ...
    def get_block(self, block_id: str, version: int | None = None) -> BlockDefinition | None: ...


class RedriveDeps(Protocol):
    """What :func:`redrive` needs: runs, definitions, executions, the engine and a clock."""

    @property
    def settings(self) -> Settings: ...
    @property
    def runs(self) -> RunsStore: ...
    @property
    def definitions(self) -> RecoveryDefinitions: ...
    @property
    def executions(self) -> Executions: ...
    @property
    def approvals(self) -> ApprovalsStore: ...
    @property
    def compiler(self) -> GraphCompiler: ...
    @property
    def checkpointer(self) -> Any: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def ids(self) -> Ids: ...


@dataclass(frozen=True)
class Redriven:
    """What a redrive did."""

    run_id: str
    attempt: int
    execution_name: str
    started: bool
    """This call reopened the run and started its execution (``False``: another redrive of the
    same attempt did, or there is no state machine and the run is driven locally)."""
    from_step: str | None
    checkpoint_id: str | None
    from_version: int
    to_version: int
    execution_arn: str | None = None
    forced: bool = False
    diff: VersionDiff | None = None
    approval_kept: str | None = None
    """The interrupt id of an approval parked at the redrive point, which stays valid."""
    decision_kept: str | None = None
    """``approved``/``rejected``: the kept approval was decided while the run was stranded,
    and the run's park gets that recorded decision (nobody is asked again)."""
    problems: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        """The redrive as JSON (``--json``)."""
        return {
            "run_id": self.run_id,
            "attempt": self.attempt,
            "execution_name": self.execution_name,
            "execution_arn": self.execution_arn,
            "started": self.started,
            "from_step": self.from_step,
            "checkpoint_id": self.checkpoint_id,
            "from_version": self.from_version,
            "to_version": self.to_version,
            "forced": self.forced,
            "approval_kept": self.approval_kept,
            "decision_kept": self.decision_kept,
            "diff": self.diff.to_dict() if self.diff else None,
        }


def redrive(
    deps: RedriveDeps,
    run_id: str,
    *,
    from_step: str | None = None,
    version: Version = None,
    reason: str | None = None,
    actor: str | None = None,
    force: bool = False,
) -> Redriven:
    """Continue a failed or stranded run (or, with ``from_step``, any ended run).

    Args:
        deps: the runs, definitions, executions, compiler and checkpointer, a clock and ids.
        run_id: the run.
        from_step: go back to the checkpoint just before this step (``None``: the last good
            checkpoint; for a run whose graph ended, the step it failed at).
        version: the workflow version to continue on (``"latest"``; ``None``: the run's).
        reason: why (kept in the timeline and on the record).
        actor: who (kept likewise).
        force: accept a version move with problems (the problems are recorded).

    Returns:
        What was done; ``started`` is ``False`` when a concurrent redrive of the same attempt
        did it first.

    Raises:
        NotFoundError: the run, the version or the step does not exist.
        RedriveRefusedError: the run is still running, or has nothing to go back to.
        IncompatibleVersionError: the version does not fit the run's state (without ``force``).
        LeaseHeldError: a segment of the run is running right now.
    """
    run = deps.runs.get_run(run_id)
    if _already_redriven(run, from_step, deps):
        return _lost_race(deps, run_id, None)
    old_plan = deps.compiler.workflow(run.workflow_id, run.workflow_version)
    new_plan = target_plan(deps, run, version)
    point = _redrive_point(deps, run, old_plan, from_step)
    diff = None
    if new_plan.version != old_plan.version:
        diff = compare_at(deps, run, old_plan, new_plan, point)
        if diff.problems and not force:
            raise IncompatibleVersionError(
                f"run {run_id} cannot move from {run.workflow_id}@{old_plan.version} "
                f"to @{new_plan.version}",
                diff,
            )
    kept = _kept_approval(deps, run_id, point, diff, new_plan.version)
    parked_step = _parked_step(point)
    if kept is None and parked_step is not None and not point.rewind:
        # A wait, or an approval whose step the new version changed: ask again from its step.
        from_step = parked_step
        point = _redrive_point(deps, run, old_plan, from_step)
    now = deps.clock()
    note = Redrive(
        attempt=run.attempt + 1,
        at=now,
        actor=actor,
        reason=reason,
        from_step=from_step,
        checkpoint_id=point.checkpoint_id if point.rewind else None,
        from_version=old_plan.version,
        to_version=new_plan.version,
        forced=bool(force and diff and diff.problems),
        problems=[str(p) for p in diff.problems] if diff else [],
    )
    pending = _pending(run, point, kept)
    if not deps.runs.reopen_run(
        reopened(run, note, now=now, pending=pending), expected_attempt=run.attempt
    ):
        return _lost_race(deps, run_id, note)
    if point.rewind and point.checkpoint_id is not None:
        _rewind(deps, run, point.checkpoint_id, note)
    _record(deps, run, note, diff, kept)
    _supersede_unkept(deps, run, point, kept, actor)
    name = execution_name(run_id, note.attempt)
    arn, started = None, False
    if deps.settings.state_machine_arn:
        arn, started = deps.executions.start(name, {"run_id": run_id, "resume": None})
    logger.info(
        "run redriven",
        extra={"run_id": run_id, "workflow_id": run.workflow_id, "attempt": note.attempt},
    )
    return Redriven(
        run_id=run_id,
        attempt=note.attempt,
        execution_name=name,
        execution_arn=arn,
        started=started or not deps.settings.state_machine_arn,
        from_step=from_step,
        checkpoint_id=note.checkpoint_id,
        from_version=old_plan.version,
        to_version=new_plan.version,
        forced=note.forced,
        diff=diff,
        approval_kept=kept,
        decision_kept=_recorded_decision(deps, run_id, kept),
        problems=tuple(note.problems),
    )


# --------------------------------------------------------------------------------------------
# What may be redriven, and from where
# --------------------------------------------------------------------------------------------


def _already_redriven(run: RunRecord, from_step: str | None, deps: RedriveDeps) -> bool:
    """Whether a redrive of the run is already under way (its execution running or starting).

    Raises:
        RedriveRefusedError: the run may not be redriven now (see :func:`redrive`).
    """
    if run.status is RunStatus.failed:
        return False
    if run.status in (RunStatus.succeeded, RunStatus.cancelled):
        if from_step is None:
            raise RedriveRefusedError(
                f"run {run.run_id} {run.status.value}; only a failed run continues from its "
                "last checkpoint — name a step with --from to run it again from there"
            )
        return False
    # Open: redrivable only when its execution has ended (or never existed): stranded.
    if not deps.settings.state_machine_arn:
        return False  # driven on this machine: no execution to ask; the lease guards it
    name = current_execution(run)
    try:
        status = str(deps.executions.describe(name).get("status", ""))
    except NotFoundError:
        # Reopened a moment ago and not started yet: another redrive is between its two writes.
        last = run.redrives[-1].at if run.redrives else None
        return last is not None and deps.clock() - last < REDRIVE_IN_PROGRESS
    if status in _ENDED_EXECUTION:
        return False
    if run.attempt > 0:
        return True  # a redrive's execution is running: this one is the same redrive again
    raise RedriveRefusedError(
        f"run {run.run_id} is {run.status.value} and its execution {name} is {status}; "
        f"wait for it, or `langorch runs cancel {run.run_id}` first"
    )


@dataclass(frozen=True)
class RedrivePoint:
    """Where a redrive (or a fork) continues from."""

    checkpoint_id: str | None
    rewind: bool
    """The run goes back to ``checkpoint_id`` (a copy becomes the head); else it continues
    from its head as it is."""
    state: dict[str, Any]
    due: tuple[str, ...]
    ran: tuple[str, ...]
    interrupts: tuple[Any, ...]


def _redrive_point(
    deps: RedriveDeps, run: RunRecord, plan: TaskPlan, from_step: str | None
) -> RedrivePoint:
    from langorch.engine import rewind

    graph = deps.compiler.compile(plan)
    current = asyncio.run(rewind.head(graph, run.run_id))
    if current is None and run.segment > 0:
        raise RedriveRefusedError(
            f"run {run.run_id} ran {run.segment} segment(s) but has no checkpoint left (they "
            "expire after the stack's checkpoint TTL): it cannot continue where it stopped; "
            f"start a new run of {run.workflow_id} instead"
        )
    target = from_step
    if target is None:
        if current is None or not current.ended:
            return _as_point(current, rewind=False)  # continue from the head as it is
        target = run.error.step_id if run.error else None
        if target is None:
            raise RedriveRefusedError(
                f"run {run.run_id}'s graph ended and its error names no step; "
                "name the step to go back to with --from"
            )
    if target not in {s.step_id for s in plan.steps}:
        raise NotFoundError(
            f"workflow {plan.plan_id}@{plan.version} has no step {target!r}; "
            f"its steps: {', '.join(s.step_id for s in plan.steps)}"
        )
    found = asyncio.run(rewind.before_step(graph, run.run_id, target))
    if found is None or found.checkpoint_id is None:
        ran = ", ".join(found.ran) if found else "none"
        raise NotFoundError(
            f"run {run.run_id} never reached step {target!r}, so there is no checkpoint "
            f"before it; steps that were due: {ran}"
        )
    return _as_point(found, rewind=True)


def _as_point(point: Point | None, *, rewind: bool) -> RedrivePoint:
    if point is None:
        return RedrivePoint(None, False, {}, (), (), ())
    return RedrivePoint(
        point.checkpoint_id,
        rewind,
        dict(point.values),
        point.next,
        point.ran,
        point.interrupts,
    )


def target_plan(deps: RedriveDeps, run: RunRecord, version: Version) -> TaskPlan:
    """The workflow version a redrive or fork moves ``run`` onto (``NotFoundError``: none)."""
    if version is None:
        return deps.compiler.workflow(run.workflow_id, run.workflow_version)
    plan = deps.definitions.get_workflow(run.workflow_id, None if version == "latest" else version)
    if plan is None:
        raise NotFoundError(
            f"workflow {run.workflow_id}@{version} not found; "
            f"see `langorch workflows show {run.workflow_id}`"
        )
    return plan


def compare_at(
    deps: RedriveDeps, run: RunRecord, old: TaskPlan, new: TaskPlan, point: RedrivePoint
) -> VersionDiff:
    """Compare ``old`` and ``new`` for ``run`` continuing from ``point`` (its state there)."""
    from langorch.domain.version_diff import compare_versions
    from langorch.engine.compiler import resolve_blocks

    # Only the two reads, not the store handed on whole: what a redrive may call stays what
    # the operators' policy grants (tests/infra derive it from this code).
    lookup = _Reads(deps.definitions.get_block, deps.definitions.get_workflow)

    state = point.state.get("shared_context") or {}
    # Steps whose results the run holds: a remaining step may read them as <step_id>.output.
    results = dict.fromkeys(point.state.get("results") or {})
    ran = set(point.ran) - set(point.due)
    remaining = [s.step_id for s in new.steps if s.step_id in point.due or s.step_id not in ran]
    remaining += [
        s for s in point.due if s not in remaining and s in {x.step_id for x in old.steps}
    ]
    return compare_versions(
        old,
        resolve_blocks(old, lookup),
        new,
        resolve_blocks(new, lookup),
        state={**results, **run.input, **state},
        remaining=remaining,
        lookup=lookup,
    )


def _pending(run: RunRecord, point: RedrivePoint, kept: str | None) -> PendingInterrupt | None:
    """The approval the run parks on again after the redrive (same id, so the same links)."""
    if kept is None:
        return None
    if run.pending is not None and run.pending.interrupt_id == kept:
        return run.pending
    from langorch.domain.limits import bounded_request

    value = next(i.value for i in point.interrupts if str(i.id) == kept)
    return PendingInterrupt(
        interrupt_id=kept, kind="approval", request=bounded_request(dict(value))
    )


@dataclass(frozen=True)
class _Reads:
    """A ``DefinitionLookup`` made of the definitions store's two reads."""

    block: Callable[[str, int | None], BlockDefinition | None]
    workflow: Callable[[str, int | None], TaskPlan | None]

    def get_block(self, block_id: str, version: int | None = None) -> BlockDefinition | None:
        return self.block(block_id, version)

    def get_workflow(self, workflow_id: str, version: int | None = None) -> TaskPlan | None:
        return self.workflow(workflow_id, version)


def _parked_step(point: RedrivePoint) -> str | None:
    for interrupt in point.interrupts:
        value = getattr(interrupt, "value", None)
        if isinstance(value, dict) and value.get("step_id"):
            return str(value["step_id"])
    return None


def _kept_approval(
    deps: RedriveDeps, run_id: str, point: RedrivePoint, diff: VersionDiff | None, version: int
) -> str | None:
    """The approval parked at the redrive point, if it stays valid: its step unchanged by the
    new version, and the approval still open on the workflow version it was asked on (or never
    requested: it will be, under the same id), or decided while the run was stranded and never
    delivered: the park hands the run that recorded decision instead of asking again. A closed
    one (timed out, cancelled by ``runs reconcile``) is asked again, and so is an open one asked
    on another version (:func:`_supersede_unkept` closes it)."""
    from langorch.app.approvals.driver import newest_at
    from langorch.domain.approvals.lifecycle import State, state_of

    for interrupt in point.interrupts:
        value = getattr(interrupt, "value", None)
        if not isinstance(value, dict) or value.get("kind", "approval") != "approval":
            continue  # a wait or a resource queue place is asked again from its step
        step_id = value.get("step_id")
        if diff is not None and step_id in (*diff.changed, *diff.removed):
            return None
        _, approval = newest_at(deps.approvals, run_id, str(interrupt.id))
        kept = (State.pending, State.decided)
        state = state_of(approval, now=deps.clock()) if approval is not None else None
        if approval is not None and state not in kept:
            return None
        if approval is not None and state is State.pending and _asked_on(approval) != version:
            return None  # an undecided question about another version: asked again
        return str(interrupt.id)
    return None


def _asked_on(approval: Approval) -> int | None:
    """The workflow version an approval was asked on (``None``: not recorded)."""
    return approval.asked.workflow_version if approval.asked is not None else None


def _supersede_unkept(
    deps: RedriveDeps, run: RunRecord, point: RedrivePoint, kept: str | None, actor: str | None
) -> None:
    """Supersede each open approval the run was parked on that the redrive does not keep: the
    run asks its question again, so the old links must say so and decide nothing."""
    from langorch.app.approvals.driver import supersede

    parked = {str(i.id) for i in point.interrupts if _is_approval(getattr(i, "value", None))}
    if run.pending is not None and run.pending.kind == "approval":
        parked.add(run.pending.interrupt_id)
    for interrupt_id in sorted(parked - {kept} if kept else parked):
        if supersede(
            run.run_id, interrupt_id, approvals=deps.approvals, clock=deps.clock, actor=actor
        ):
            logger.info(
                "approval superseded by the redrive",
                extra={"run_id": run.run_id, "interrupt_id": interrupt_id},
            )


def _is_approval(value: Any) -> bool:
    return isinstance(value, dict) and value.get("kind", "approval") == "approval"


def _recorded_decision(deps: RedriveDeps, run_id: str, kept: str | None) -> str | None:
    """The decision recorded on the kept approval and not delivered yet, if any."""
    from langorch.app.approvals.driver import newest_at

    approval = newest_at(deps.approvals, run_id, kept)[1] if kept else None
    return approval.status.value if approval is not None and approval.is_undelivered else None


# --------------------------------------------------------------------------------------------
# Writing it down
# --------------------------------------------------------------------------------------------


def _lost_race(deps: RedriveDeps, run_id: str, note: Redrive | None) -> Redriven:
    """Another redrive reopened the run first: report what it did, start nothing."""
    current = deps.runs.get_run(run_id)
    last = current.redrives[-1] if current.redrives else note
    if last is None:
        raise RedriveRefusedError(f"run {run_id} has no redrive to report")
    logger.info("concurrent redrive lost", extra={"run_id": run_id, "attempt": current.attempt})
    return Redriven(
        run_id=run_id,
        attempt=current.attempt,
        execution_name=current_execution(current),
        started=False,
        from_step=last.from_step,
        checkpoint_id=last.checkpoint_id,
        from_version=last.from_version,
        to_version=last.to_version,
        forced=last.forced,
    )


def _rewind(deps: RedriveDeps, run: RunRecord, checkpoint_id: str, note: Redrive) -> None:
    """Make the checkpoint before the step the run's newest, under the run's lease."""
    from langorch.engine.rewind import copy_to_head

    fence = deps.runs.acquire_lease(
        run.run_id,
        f"redrive-{note.attempt}",
        now=deps.clock().timestamp(),
        ttl_seconds=_REWIND_LEASE_SECONDS,
    )
    try:
        copy_to_head(
            deps.checkpointer,
            source_thread=run.run_id,
            checkpoint_id=checkpoint_id,
            target_thread=run.run_id,
            fence=fence,
            metadata={"langorch_redrive": note.attempt},
        )
    finally:
        deps.runs.release_lease(run.run_id, fence)


def _record(
    deps: RedriveDeps, run: RunRecord, note: Redrive, diff: VersionDiff | None, kept: str | None
) -> None:
    detail: dict[str, Any] = {
        "attempt": note.attempt,
        "from_step": note.from_step,
        "checkpoint_id": note.checkpoint_id,
        "version": f"{note.from_version} -> {note.to_version}",
        "reason": (note.reason or "")[:200],
    }
    if diff is not None:
        detail["changed"] = list(diff.changed)[:10]
        detail["added"] = list(diff.added)[:10]
        detail["removed"] = list(diff.removed)[:10]
    if note.forced:
        detail["forced"] = [p[:120] for p in note.problems[:5]]
    if kept:
        detail["approval_kept"] = kept
    deps.runs.append_events(
        run.run_id,
        [
            TimelineEvent(
                seq=deps.runs.next_event_seq(run.run_id),
                at=note.at,
                type=TimelineEventType.run_redriven,
                segment=run.segment,
                step_id=note.from_step,
                actor=note.actor,
                detail=detail,
            )
        ],
    )
