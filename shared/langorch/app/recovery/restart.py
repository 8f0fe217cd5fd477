"""After the local stack restarts: every run that was in flight gets an execution again.

The local stack keeps its tables, objects and secrets across a stop or a crash, but not its Step
Functions executions (they lived in the emulator's threads; replaying their requests would run
their steps twice). A run's state is in our own tables — the record, its pending interrupt, its
checkpoints — so :func:`recover_in_flight` gives every open run a new execution, which continues
from there:

- a run parked on an approval parks again on the same approval (its first segment announces the
  park, see :func:`~langorch.app.runs.parked_again`): the new task token replaces the old one,
  the emailed links keep working, and no approver is emailed twice;
- a sleeping run sleeps the rest of its wait, then wakes;
- a queued or running run continues from its last checkpoint (LangGraph does not run a finished
  superstep again; a step cut off mid-way runs again, as after a Lambda crash — its side effects
  carry idempotency keys);
- a run waiting in a workflow's ``concurrency`` queue is left queued: it never had an execution,
  and starts when a run of its key ends.

Nothing is doubled: a run whose execution exists is left alone, so calling this twice starts
nothing twice.

Why not the recovery use-case's redrive (branch ``recovery``): a restart is not a new attempt —
the run's execution was lost, not ended — so the same execution is started again under its own
name and the record, timeline and checkpoints are not touched. A redrive also asks a wait again
from its step (its whole duration), where a restart must wake the run at its time, and it
compiles each run's graph, which a start-up with many runs in flight cannot afford. The name
started again is the current attempt's (``current_execution(run)``), so a run lost
after a redrive gets its redrive's execution back.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from langorch.app.recovery.reconcile import OPEN_STATUSES
from langorch.app.runs import LEASE_GRACE_SECONDS
from langorch.domain.concurrency import PREFIX as CONCURRENCY_PREFIX
from langorch.domain.concurrency import run_of
from langorch.domain.errors import NotFoundError
from langorch.domain.runs import RunStatus, current_execution

if TYPE_CHECKING:
    from langorch.app.ports import Clock, Executions, ResourceLocks, RunsStore
    from langorch.config import Settings

logger = logging.getLogger(__name__)

RESTART_OWNER = "local-restart"


class RestartDeps(Protocol):
    """What :func:`recover_in_flight` needs: the runs, the executions, settings and a clock."""

    @property
    def settings(self) -> Settings: ...
    @property
    def runs(self) -> RunsStore: ...
    @property
    def executions(self) -> Executions: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def resources(self) -> ResourceLocks: ...


@dataclass(frozen=True)
class Recovered:
    """One run given a new execution."""

    run_id: str
    status: str
    """What its record said (``waiting_approval``, ``sleeping``, ``running``, ``queued``)."""


def recover_in_flight(deps: RestartDeps, *, limit: int = 1000) -> list[Recovered]:
    """Start an execution for every open run that has none.

    Only for a stack whose executions all ended with its process (the local stack on start):
    a lease still held in the runs table then belongs to a segment that no longer runs, so it is
    taken over (its fence moves on, as when a lease expires) and given back.

    Args:
        deps: the runs, the executions, settings (the segment budget) and a clock.
        limit: at most this many runs read per open status.

    Returns:
        The runs that were given an execution.

    Raises:
        StorageError: DynamoDB or Step Functions failed (calling again picks up the rest).
    """
    recovered: list[Recovered] = []
    waiting = _queued_for_concurrency(deps)
    for status in OPEN_STATUSES:
        for run in deps.runs.list_runs(status=status, limit=limit):
            if run.status is RunStatus.queued and run.run_id in waiting:
                continue  # it never had an execution: it starts when its key's turn comes
            name = current_execution(run)  # the current attempt's
            try:
                deps.executions.describe(name)
                continue  # it has one: nothing was lost
            except NotFoundError:
                pass
            _take_over_lease(deps, run.run_id)
            deps.executions.start(name, {"run_id": run.run_id, "resume": None})
            recovered.append(Recovered(run.run_id, run.status.value))
            logger.info(
                "run in flight recovered",
                extra={"run_id": run.run_id, "workflow_id": run.workflow_id, "status": status},
            )
    return recovered


def _queued_for_concurrency(deps: RestartDeps) -> set[str]:
    """Runs waiting in a workflow's ``concurrency`` queue: queued with no execution on purpose."""
    now = time.time()
    return {
        run_of(waiter.holder)
        for state in deps.resources.list()
        if state.name.startswith(CONCURRENCY_PREFIX)
        for waiter in state.live(now).queue
    }


def _take_over_lease(deps: RestartDeps, run_id: str) -> None:
    # Acquiring "as of" the moment any lease taken before the restart has expired: the lease's
    # own expiry rule (and its fence) then applies, with no store method that ignores it.
    longest = deps.settings.segment_budget_seconds + LEASE_GRACE_SECONDS
    fence = deps.runs.acquire_lease(
        run_id, RESTART_OWNER, now=deps.clock().timestamp() + longest + 1, ttl_seconds=1
    )
    deps.runs.release_lease(run_id, fence)
