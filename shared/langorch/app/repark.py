"""The first segment after a redrive that kept an approval: park on it again, run nothing.

:func:`~langorch.app.recovery.redrive.redrive` reopens a run whose approval stays valid with that
approval still in ``pending``; the new execution's first segment lands here instead of running
the graph (whose checkpoint still holds the interrupt).
"""

from __future__ import annotations

from langorch.app.segment_record import EndDeps, SegmentResult, numbered, timeline_event
from langorch.domain.runs import RunRecord, RunStatus, TimelineEventType, transition


def repark(run: RunRecord, deps: EndDeps, *, owner: str, lease_seconds: float) -> SegmentResult:
    """Park the run on the approval its redrive kept, without running the graph.

    The segment answers ``waiting_approval`` with the same interrupt, so the new execution's
    ``AwaitApproval`` task asks for the same approval (its id derives from the run and the
    interrupt): the approvers' links stay valid and no second email goes out; only the task
    token is the new execution's.

    Args:
        run: the reopened run (``queued``, its kept approval in ``pending``).
        deps: the runs and a clock.
        owner: who takes the run's lease for the write.
        lease_seconds: how long the lease lasts.
    """
    pending = run.pending
    if pending is None:
        raise ValueError(f"run {run.run_id} has no kept approval to park on")
    fence = deps.runs.acquire_lease(
        run.run_id, owner, now=deps.clock().timestamp(), ttl_seconds=lease_seconds
    )
    try:
        now = deps.clock()
        parked = transition(
            transition(run, RunStatus.running, now=now),
            RunStatus.waiting_approval,
            now=now,
            pending=pending,
        )
        event = timeline_event(
            parked,
            now,
            TimelineEventType.approval_requested,
            step_id=pending.request.get("step_id"),
            detail={"approvers": pending.request.get("approvers", []), "kept_by_redrive": True},
        )
        deps.runs.append_events(run.run_id, numbered(parked, [event]), fence=fence)
        deps.runs.save_run(parked, fence=fence)
    finally:
        deps.runs.release_lease(run.run_id, fence)
    return SegmentResult(
        run_id=run.run_id,
        status="waiting_approval",
        segment=parked.segment,
        approval={**pending.request, "interrupt_id": pending.interrupt_id},
        workflow_id=run.workflow_id,
        workflow_version=run.workflow_version,
    )
