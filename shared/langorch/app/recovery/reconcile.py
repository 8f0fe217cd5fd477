"""Reconcile runs with their executions: no run stays open after its execution ended.

A run's record normally follows its execution: each segment saves the status, and the state
machine's ``MarkFailed`` ends the record when a segment fails. When even that could not happen
(a record write refused, a function that never ran, an execution stopped from the console),
the record would say ``queued``/``running``/``waiting_approval``/``sleeping``/``paused`` forever.
:func:`reconcile_runs` finds such runs (``DescribeExecution``) and ends them: ``cancelled``
when the execution was stopped (ABORTED: someone stopped it on purpose), else ``failed``
through :func:`~langorch.app.runs.mark_failed` — timeline event and record together, with a
minimal record when the full one cannot be written — naming the execution's status and
cause. An approval the run was parked on is closed, so its emailed links decide nothing; a
decision already recorded on it is kept, and a redrive of the failed run delivers it.

``langorch runs reconcile`` calls it, and the deployed stack every ``reconcile_minutes``
(a Scheduler schedule invoking the trigger function with ``source: langorch.reconcile``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from langorch.app.runs import CloseDeps, close_pending_approval, mark_failed, record_cancelled
from langorch.domain.concurrency import TRIGGER_DETAIL
from langorch.domain.errors import NotFoundError
from langorch.domain.limits import cut
from langorch.domain.runs import RunError, RunRecord, RunStatus, current_execution

if TYPE_CHECKING:
    from langorch.app.ports import Executions, WorkflowSource

logger = logging.getLogger(__name__)

OPEN_STATUSES = (
    RunStatus.queued,
    RunStatus.running,
    RunStatus.waiting_approval,
    RunStatus.sleeping,
    RunStatus.paused,
)
"""The statuses a run can be stranded in: not ended, though its execution may have."""
ENDED_EXECUTION = frozenset({"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"})


START_GRACE_SECONDS = 300.0
"""How old a ``queued`` run with no execution must be before the pass starts one: younger, its
start may still be under way (the trigger writes the record, then starts the execution)."""
NOT_STARTED = "NOT_STARTED"
"""What a repair names as the execution's status when there was none to describe."""


class ReconcileDeps(CloseDeps, Protocol):
    """What :func:`reconcile_runs` needs: the runs, the executions, the approvals, a clock,
    and the workflows (a run queued behind its workflow's ``concurrency`` has no execution on
    purpose)."""

    @property
    def executions(self) -> Executions: ...
    @property
    def definitions(self) -> WorkflowSource: ...


@dataclass(frozen=True)
class Repair:
    """One stranded run: what its record said, how its execution ended, and whether it was fixed."""

    run_id: str
    workflow_id: str
    record_status: str
    execution_status: str
    reason: str
    repaired: bool

    def to_dict(self) -> dict[str, object]:
        """The repair as JSON (``langorch runs reconcile --json``)."""
        return {
            "run_id": self.run_id,
            "workflow_id": self.workflow_id,
            "record_status": self.record_status,
            "execution_status": self.execution_status,
            "reason": self.reason,
            "repaired": self.repaired,
        }


def reconcile_runs(
    deps: ReconcileDeps, *, dry_run: bool = False, limit: int = 1000
) -> list[Repair]:
    """End every open run whose execution has ended (``failed``, with the execution's cause).

    A ``queued`` run that never got an execution (its trigger died or was throttled between
    the record and StartExecution) is given one, once it is older than
    :data:`START_GRACE_SECONDS`; one queued behind its workflow's ``concurrency`` is left to
    its queue. Other runs without an execution are left alone.

    Args:
        deps: the runs, the executions and a clock.
        dry_run: only report what would be repaired.
        limit: at most this many runs read per open status (newest first).

    Returns:
        The stranded runs found, each marked whether this call repaired it.

    Raises:
        StorageError: DynamoDB or Step Functions failed (a later call picks up the rest).
    """
    repairs: list[Repair] = []
    for status in OPEN_STATUSES:
        for run in deps.runs.list_runs(status=status, limit=limit):
            name = current_execution(run)
            try:
                execution = deps.executions.describe(name)
            except NotFoundError:
                if _never_started(run, deps):
                    repairs.append(_start(run, name, deps, dry_run=dry_run))
                continue
            ended = str(execution.get("status", ""))
            if ended not in ENDED_EXECUTION:
                continue
            error = _execution_error(run.status, execution)
            repaired = False if dry_run else _end(run, ended, error, deps)
            repairs.append(
                Repair(
                    run.run_id, run.workflow_id, run.status.value, ended, error.message, repaired
                )
            )
            logger.warning(
                "stranded run repaired" if repaired else "stranded run found",
                extra={
                    "run_id": run.run_id,
                    "workflow_id": run.workflow_id,
                    "record_status": run.status.value,
                    "execution_status": ended,
                },
            )
    return repairs


def _never_started(run: RunRecord, deps: ReconcileDeps) -> bool:
    """A ``queued`` run older than :data:`START_GRACE_SECONDS` with no execution, whose workflow
    queues none behind a ``concurrency`` key (its workflow's or its trigger's): its trigger
    wrote the record and died (or was throttled) before StartExecution."""
    if run.status is not RunStatus.queued:
        return False
    if (deps.clock() - run.created_at).total_seconds() < START_GRACE_SECONDS:
        return False
    if TRIGGER_DETAIL in run.trigger.detail:
        return False  # taken its trigger's concurrency key: it may be queued on purpose
    plan = deps.definitions.get_workflow(run.workflow_id, run.workflow_version)
    return plan is not None and plan.concurrency is None


def _start(run: RunRecord, name: str, deps: ReconcileDeps, *, dry_run: bool) -> Repair:
    """Start the execution a queued run never got (by its name: a start racing it makes one)."""
    started = False
    if not dry_run:
        _, started = deps.executions.start(name, {"run_id": run.run_id, "resume": None})
    logger.warning(
        "run without an execution started" if started else "run without an execution found",
        extra={"run_id": run.run_id, "workflow_id": run.workflow_id},
    )
    reason = "its execution never started; started by runs reconcile"
    return Repair(run.run_id, run.workflow_id, run.status.value, NOT_STARTED, reason, started)


def _end(run: RunRecord, ended: str, error: RunError, deps: ReconcileDeps) -> bool:
    if ended == "ABORTED":
        # Stopped on purpose (the console, an operator's script): a cancellation, not a failure.
        # Woken: the runs next in line for what it held (resources, its concurrency key) go on.
        _, changed = record_cancelled(
            run.run_id, deps, actor="reconcile", reason=error.message, wake=deps.executions
        )
        return changed
    failed = mark_failed(run.run_id, error, deps)
    if failed:
        # A decision recorded while the run was stranded stays, for the park after its redrive.
        close_pending_approval(run.run_id, run.pending, deps, keep_decision=True)
    return failed


def _execution_error(record_status: RunStatus, execution: dict[str, object]) -> RunError:
    status = str(execution.get("status"))
    error = str(execution.get("error") or f"Execution{status.title().replace('_', '')}")
    cause = cut(str(execution.get("cause") or ""), 600)
    message = (
        f"the execution ended {status}"
        + (f" ({error}: {cause})" if cause else f" ({error})")
        + f" while the run record still said {record_status.value}; ended by runs reconcile"
    )
    return RunError(type=error, message=message)
