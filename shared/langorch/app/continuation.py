"""Continue-as-new: a long run goes on in a fresh execution before its history is full.

A Standard execution fails at 25,000 history events. A segment is told the events its execution
has so far (the state machine carries the count, ``$.events``); when the next round might not
fit (:class:`~langorch.domain.history.HistoryBudget`), the segment runs nothing and hands the
run over instead: the run record names the next execution (``continued``, so cancel, reconcile
and the CLI address it), the timeline says where it continued, and the new execution starts
with the same resume the old one was given. The old execution ends (``ContinuedAsNew``).

An operator's cancel races the hand-over; whatever the order, the run ends cancelled with no
execution left running. The cancel writes only while the record names the execution it read
(``in_execution``): one that read the record before the hand-over wrote it reads it again, and
stops the execution named there. The hand-over writes only a run that has not ended (the store
refuses to write an unended run over a ``cancelled`` one) and hands over nothing once it has. A
cancel between the record write and the start finds no execution to stop: the hand-over reads
the record again after the start and stops the new execution of a cancelled run.

A hand-over happens only on entry to ``RunSegment``, never while the run is parked: a pending
approval's (or resource's, or pause's) task token belongs to the execution that parked it, and
its answer arrives there first, then travels on in the resume. Nothing in the checkpoint
changes: the new execution's first segment goes on from the last one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from langorch.domain.errors import ConflictError
from langorch.domain.history import CONTINUED, STARTED_EVENTS, HistoryBudget
from langorch.domain.runs import (
    RunRecord,
    RunStatus,
    TimelineEvent,
    TimelineEventType,
    current_execution,
)

if TYPE_CHECKING:
    from langorch.app.ports import Clock, Executions, RunsStore
    from langorch.app.runs import RunSegment, SegmentDeps
    from langorch.app.segment_record import SegmentResult
    from langorch.config import Settings

logger = logging.getLogger(__name__)

HANDOVER_LEASE_SECONDS = 60.0
"""How long the hand-over holds the run's lease: one record write and one timeline write."""


class ContinueDeps(Protocol):
    """What a hand-over needs."""

    @property
    def settings(self) -> Settings: ...
    @property
    def runs(self) -> RunsStore: ...
    @property
    def executions(self) -> Executions: ...
    @property
    def clock(self) -> Clock: ...


@dataclass(frozen=True)
class CountedSegment:
    """A segment, with the history events its execution has so far."""

    segment: RunSegment
    events: int = STARTED_EVENTS
    execution: str | None = None
    """The execution asking (``None``: the run's current one)."""


def counted_segment(cmd: CountedSegment, deps: SegmentDeps) -> tuple[SegmentResult, int]:
    """Run the segment, or hand the run to a fresh execution when the history is nearly full.

    Returns:
        What the state machine branches on, and the events its execution will have when the
        round this answer starts reaches ``RunSegment`` again.
    """
    from langorch.app.runs import run_segment

    budget = HistoryBudget.shipped(deps.settings.execution_history_limit)
    if budget.due(cmd.events):
        handed = continue_as_new(cmd, deps)
        return handed, cmd.events + budget.round(CONTINUED)
    result = run_segment(cmd.segment, deps)
    return result, cmd.events + budget.round(result.status)


def continue_as_new(cmd: CountedSegment, deps: ContinueDeps) -> SegmentResult:
    """Hand the run to its next execution, which goes on from the last checkpoint.

    Idempotent: the state machine's retry of a hand-over whose record write landed finds the
    run already handed over and starts the same execution (by name: the start of a running
    execution with the same input starts nothing new).

    Returns:
        The ``continued`` answer (``ContinuedAsNew`` ends the old execution).
    """
    from langorch.app.segment_record import SegmentResult

    run = deps.runs.get_run(cmd.segment.run_id)
    asking = cmd.execution or current_execution(run)
    if asking == current_execution(run) and not run.is_terminal:
        run = _record_handover(run, asking, cmd.events, deps)
    name = current_execution(run)
    payload: dict[str, Any] = {"run_id": run.run_id, "resume": cmd.segment.resume}
    deps.executions.start(name, payload)
    _stop_if_cancelled(run.run_id, name, deps)
    logger.info(
        "run continued in a fresh execution",
        extra={"run_id": run.run_id, "execution": name, "events": cmd.events},
    )
    return SegmentResult(
        run.run_id,
        CONTINUED,
        run.segment,
        workflow_id=run.workflow_id,
        workflow_version=run.workflow_version,
    )


def _stop_if_cancelled(run_id: str, name: str, deps: ContinueDeps) -> None:
    """Stop the execution just started when the run was cancelled meanwhile.

    Between the record naming the next execution and its start, an operator's cancel finds
    the record naming an execution that does not exist yet, and stops nothing. Read after the
    start, the record tells: either the cancel's write came first and is seen here, or it came
    after the start, and the cancel's own stop finds the execution. Either way it is stopped.
    """
    run = deps.runs.get_run(run_id)
    if run.status is RunStatus.cancelled:
        deps.executions.stop(name, run.status_reason or "cancelled by an operator")
        logger.info(
            "run cancelled during its hand-over: the next execution is stopped",
            extra={"run_id": run_id, "execution": name},
        )


def _record_handover(run: RunRecord, asking: str, events: int, deps: ContinueDeps) -> RunRecord:
    """Name the next execution on the record and the timeline (under the run's lease, so no
    segment or decision writes the record meanwhile)."""
    now = deps.clock()
    fence = deps.runs.acquire_lease(
        run.run_id, f"{asking}/continue", now=now.timestamp(), ttl_seconds=HANDOVER_LEASE_SECONDS
    )
    try:
        run = deps.runs.get_run(run.run_id)  # as it is under the lease (a decision may have landed)
        if current_execution(run) != asking or run.is_terminal:
            return run  # handed over by an attempt that lost its answer, or cancelled
        handed = run.model_copy(update={"continued": run.continued + 1, "updated_at": now})
        name = current_execution(handed)
        handed = handed.model_copy(update={"execution_arn": _arn_like(run.execution_arn, name)})
        try:
            deps.runs.save_run(handed, fence=fence)
        except ConflictError:
            # A cancel (which takes no lease) landed since the read: the run stays where it was.
            return deps.runs.get_run(run.run_id)
        event = TimelineEvent(
            seq=deps.runs.next_event_seq(run.run_id),
            at=now,
            type=TimelineEventType.run_continued,
            segment=run.segment,
            detail={"from": asking, "to": name, "events": events},
        )
        deps.runs.append_events(run.run_id, [event], fence=fence)
    finally:
        deps.runs.release_lease(run.run_id, fence)
    return handed


def _arn_like(arn: str | None, name: str) -> str | None:
    """The ARN of execution ``name`` beside ``arn`` (same state machine)."""
    if not arn:
        return None
    return arn.rsplit(":", 1)[0] + f":{name}"
