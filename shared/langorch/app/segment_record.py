"""A segment's outcome written down: the run record's new status and the segment's timeline.

:func:`record_segment` turns what the engine answered (parked, slept, continued, ended) into
the run record and the timeline events people read, numbered so segments never collide.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from langorch.domain.approvals.fixes import fix_answer
from langorch.domain.approvals.record import InvalidDecisionError
from langorch.domain.runs import (
    PauseRequest,
    PendingInterrupt,
    RunError,
    RunRecord,
    RunStatus,
    TimelineEvent,
    TimelineEventType,
    TokenUsage,
    paused,
    timeline_cost,
    transition,
)

if TYPE_CHECKING:
    from langorch.app.ports import Clock, Executions, ResourceLocks, RunsStore

logger = logging.getLogger("langorch.app.runs")


class EndDeps(Protocol):
    """What :func:`mark_failed` needs: the runs and a clock."""

    @property
    def runs(self) -> RunsStore: ...
    @property
    def clock(self) -> Clock: ...


class FailDeps(EndDeps, Protocol):
    """What :func:`langorch.app.runs.mark_failed` needs: :class:`EndDeps`, the resource
    locks (a failed run gives back what it held) and the executions (to wake or start the runs
    next in line)."""

    @property
    def resources(self) -> ResourceLocks: ...

    @property
    def executions(self) -> Executions: ...


@dataclass
class SegmentResult:
    """What the state machine branches on (``status``) and what it needs for the branch."""

    run_id: str
    status: str
    segment: int
    seconds: int | None = None
    approval: dict[str, Any] | None = None
    resource: dict[str, Any] | None = None
    """Queued for a resource: its ``name`` and the step's ``holder`` (``AwaitResource``)."""
    outputs: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    workflow_id: str | None = None
    workflow_version: int | None = None
    steps_run: int = 0
    """Steps that finished in this segment (for metrics; not part of the payload)."""
    llm_tokens: int = 0
    """LLM tokens (input + output) this segment's steps used."""
    ended: bool = False
    """This segment ended the run (``False`` when the run had already ended before it)."""
    cost_usd: float = 0.0
    """What the run has cost so far, this segment included (for the ``RunCost`` metric)."""

    def to_dict(self) -> dict[str, Any]:
        """The Step Functions payload (JSON-serialisable)."""
        data: dict[str, Any] = {
            "run_id": self.run_id,
            "status": self.status,
            "segment": self.segment,
        }
        if self.seconds is not None:
            data["seconds"] = self.seconds
        if self.approval is not None:
            data["approval"] = self.approval
        if self.resource is not None:
            data["resource"] = self.resource
        if self.error is not None:
            data["error"] = self.error
        return data


def record_segment(
    run: RunRecord,
    result: Any,
    deps: EndDeps,
    fence: int,
    started_at: datetime,
    parked: PendingInterrupt | None,
    answer: Any,
    *,
    pause: PauseRequest | None = None,
) -> SegmentResult:
    """Write the segment's outcome: the record's new status and the segment's timeline.

    Args:
        run: the run as the segment started it (``running``).
        result: what the engine answered (``engine.segments.Advance``).
        deps: the runs and a clock.
        fence: the segment's lease fence (its last write gives the lease back).
        started_at: when the segment started.
        parked: the interrupt the segment resumed, if any.
        answer: the answer it resumed it with.
        pause: the pause request the segment stopped for (``result.status == "paused"``).
    """
    now = deps.clock()
    events = engine_timeline(run, result.events, started_at)
    resumed = _resumed_event(run, started_at, parked, answer)
    if resumed is not None:
        events.insert(1, resumed)
    status = result.status
    spent = timeline_cost(events)
    if spent:
        run = run.model_copy(update={"cost_usd": round(run.cost_usd + spent, 9)})
    if result.request:
        # What an approval shows is bounded where the run stores it (record and Step Functions
        # payload alike): long values are cut with a marker, never a record that cannot be saved.
        from langorch.domain.limits import bounded_request

        result.request = bounded_request(dict(result.request))
    run, closing = _ended(run, result, now, pause)
    if not result.events and run.is_terminal and _finished_by_previous(run, deps):
        closing = []  # that segment's run_finished stands: a run ends once on its timeline
    events.extend(closing)
    # One write: the record, the lease given back and the segment's timeline.
    deps.runs.save_run(run, fence=fence, release=True, events=numbered(run, events))
    logger.info(
        "segment ended",
        extra={
            "run_id": run.run_id,
            "workflow_id": run.workflow_id,
            "workflow_version": run.workflow_version,
            "segment": run.segment,
            "status": status,
        },
    )
    return SegmentResult(
        run_id=run.run_id,
        status=status,
        segment=run.segment,
        seconds=(
            (result.request or {}).get("seconds")
            if status in ("sleeping", "waiting_resource")
            else None
        ),
        approval=(
            {**(result.request or {}), "interrupt_id": result.interrupt_id}
            if status == "waiting_approval"
            else None
        ),
        resource=_queued_for(run, result) if status == "waiting_resource" else None,
        outputs=run.outputs,
        error=run.error.model_dump() if status == "failed" and run.error else None,
        workflow_id=run.workflow_id,
        workflow_version=run.workflow_version,
        steps_run=sum(1 for e in events if e.type == TimelineEventType.step_finished),
        llm_tokens=sum(e.tokens.input + e.tokens.output for e in events if e.tokens),
        ended=run.is_terminal,
        cost_usd=run.cost_usd,
    )


def _queued_for(run: RunRecord, result: Any) -> dict[str, Any]:
    """What ``AwaitResource`` passes to ``park``: the resource and the step's holder."""
    from langorch.domain.resources import holder_of

    request = result.request or {}
    return {
        "name": request.get("resource"),
        "holder": holder_of(run.run_id, str(request.get("step_id"))),
    }


def bounded_outputs(
    outputs: dict[str, Any], limit: int | None = None
) -> tuple[dict[str, Any], bool]:
    """Outputs small enough for the run record, and whether they had to be summarised.

    The full outputs always stay in the run's last checkpoint.
    """
    import json

    from langorch.domain.limits import MAX_OUTPUTS_BYTES, json_shape_problem
    from langorch.domain.runs import summarize_outputs

    if json_shape_problem(outputs) is None:  # else no JSON reader on the path may read them
        text = json.dumps(outputs, default=str)
        if len(text.encode("utf-8")) <= (MAX_OUTPUTS_BYTES if limit is None else limit):
            return json.loads(text), False
    return dict(summarize_outputs(outputs)), True


_ENGINE_EVENTS = {
    "step_started": TimelineEventType.step_started,
    "step_finished": TimelineEventType.step_finished,
    "step_failed": TimelineEventType.step_failed,
    "step_retried": TimelineEventType.step_retried,
    "tool_called": TimelineEventType.tool_called,
    "tool_call_denied": TimelineEventType.tool_call_denied,
    "tool_policy_shadow": TimelineEventType.tool_policy_shadow,
    "resource_waiting": TimelineEventType.resource_waiting,
    "resource_acquired": TimelineEventType.resource_acquired,
    "resource_released": TimelineEventType.resource_released,
    "loop_limit_reached": TimelineEventType.loop_limit_reached,
}
_DETAIL = (
    "kind",
    "attempt",
    "branch",
    "routed_to",
    "tool",
    "args",
    "outcome",
    "tool_error",
    "replayed",
    "idempotency_key",
    "resource",
    "position",
    "lease",
    "request",
    "max_iterations",
    "max_loops",
    "ran",
    "dropped",
    "total",
    "action_step",
    "batch",
    "fix",
    "cost_usd",
    "rule",
    "policy_of",
    "decided_by",
    "parked_seconds",
)
"""What of an engine event the timeline keeps in ``detail`` (``action_step``, ``batch``: a CKP
step's id and the size of the agent call it was part of; ``parked_seconds``: how long a step
the model throttled parked its run before calling again)."""


def timeline_event(
    run: RunRecord, at: datetime, type_: TimelineEventType, **fields: Any
) -> TimelineEvent:
    return TimelineEvent(seq=1, at=at, type=type_, segment=run.segment, **fields)


def engine_timeline(
    run: RunRecord, events: list[dict[str, Any]], started: datetime
) -> list[TimelineEvent]:
    timeline = [timeline_event(run, started, TimelineEventType.segment_started)]
    for event in events:
        type_ = _ENGINE_EVENTS.get(str(event.get("event")))
        if type_ is None:
            continue
        tokens = event.get("tokens")
        error = event.get("error")
        detail = {k: event[k] for k in _DETAIL if k in event}
        timeline.append(
            TimelineEvent(
                seq=1,
                at=datetime.fromisoformat(event["at"]),
                type=type_,
                step_id=event.get("step_id"),
                segment=run.segment,
                duration_ms=event.get("duration_ms"),
                tokens=TokenUsage(**tokens) if tokens else None,
                outputs_summary=event.get("outputs_summary"),
                error=RunError(
                    **{
                        k: error[k]
                        for k in ("step_id", "type", "message", "attempts")
                        if k in error
                    }
                )
                if error
                else None,
                detail=detail,
            )
        )
    return timeline


def _finished_by_previous(run: RunRecord, deps: EndDeps) -> bool:
    """Whether the previous segment already finished the run on its timeline.

    A segment with nothing left to run follows one that finished the graph and appended its
    ``run_finished`` but was stopped (a crash, ``langorch dev`` killed) before its record said
    so. Read only then: one Query, never on a segment that ran a step.
    """
    previous = run.segment - 1
    return any(
        e.type is TimelineEventType.run_finished and e.seq // SEGMENT_SEQ_SPAN == previous
        for e in deps.runs.get_timeline(run.run_id)
    )


SEGMENT_SEQ_SPAN = 1_000_000
"""Each segment numbers its events in its own range: ``segment * SEGMENT_SEQ_SPAN + i``."""


def numbered(run: RunRecord, events: list[TimelineEvent]) -> list[TimelineEvent]:
    # Sequence numbers grow across segments without reading the timeline back: the segment
    # number is the high part.
    base = run.segment * SEGMENT_SEQ_SPAN
    return [e.model_copy(update={"seq": base + i + 1}) for i, e in enumerate(events)]


def closing_seq(run: RunRecord) -> int:
    # The last slot of the current segment's range (see _numbered): after every event of the
    # segment, and the same on a retry, so a repeated call replaces its event, never adds one.
    return (run.segment + 1) * SEGMENT_SEQ_SPAN - 1


def _resumed_event(
    run: RunRecord, started_at: datetime, parked: PendingInterrupt | None, answer: Any
) -> TimelineEvent | None:
    """What the segment resumed from: the approval's decision, or the end of a wait."""
    if parked is not None and parked.kind == "approval" and isinstance(answer, dict):
        detail = {
            "decision": answer.get("decision"),
            "comment": str(answer.get("comment") or "")[:500],
        }
        if parked.request.get("fix"):
            detail["fix"] = fix_said(answer)
        detail.update(edits_kept(answer.get("edits")))
        return TimelineEvent(
            seq=1,
            at=started_at,
            segment=run.segment,
            type=(
                TimelineEventType.approval_timed_out
                if answer.get("decision") == "timed_out"
                else TimelineEventType.approval_decided
            ),
            step_id=parked.request.get("step_id"),
            actor=answer.get("approver"),
            detail=detail,
        )
    elif parked is not None and parked.kind == "wait":
        return timeline_event(
            run,
            started_at,
            TimelineEventType.wait_finished,
            step_id=parked.request.get("step_id"),
        )
    return None


def _ended(
    run: RunRecord, result: Any, now: datetime, pause: PauseRequest | None
) -> tuple[RunRecord, list[TimelineEvent]]:
    """The record after the segment's outcome, and the timeline events that outcome adds."""
    events: list[TimelineEvent] = []
    status = result.status
    if status == "paused":
        if pause is None:  # lifted as the segment stopped: the next segment goes on
            return run.model_copy(update={"updated_at": now}), events
        run = paused(run, pause, now=now)
        events.append(paused_event(run, pause, now))
    elif status == "waiting_approval":
        pending = PendingInterrupt(
            interrupt_id=result.interrupt_id, kind="approval", request=result.request or {}
        )
        run = transition(run, RunStatus.waiting_approval, now=now, pending=pending)
        events.append(
            timeline_event(
                run,
                now,
                TimelineEventType.approval_requested,
                step_id=(result.request or {}).get("step_id"),
                detail=_requested(result.request or {}),
            )
        )
    elif status in ("sleeping", "waiting_resource"):
        request = result.request or {}
        # Queued for a resource: the engine's resource_waiting event already says so.
        queued = status == "waiting_resource"
        if not queued:
            # When it is due, kept with it: a pause, a resume or a restart changes the record,
            # never the wait's end.
            due = now + timedelta(seconds=float(request.get("seconds") or 0))
            request = {**request, "due": due.isoformat()}
        pending = PendingInterrupt(
            interrupt_id=result.interrupt_id,
            kind="resource" if queued else "wait",
            request=request,
        )
        run = transition(run, RunStatus.sleeping, now=now, pending=pending)
        if not queued:
            events.append(
                timeline_event(
                    run,
                    now,
                    TimelineEventType.wait_started,
                    step_id=(result.request or {}).get("step_id"),
                    detail={"seconds": (result.request or {}).get("seconds")},
                )
            )
    elif status == "continue":
        run = run.model_copy(update={"updated_at": now})
    elif status == "succeeded":
        run = transition(run, RunStatus.succeeded, now=now)
        outputs, truncated = bounded_outputs(result.outputs)
        run = run.model_copy(update={"outputs": outputs, "outputs_truncated": truncated})
        events.append(
            timeline_event(run, now, TimelineEventType.run_finished, detail={"status": "succeeded"})
        )
    else:
        error = RunError(
            step_id=(result.error or {}).get("step_id"),
            type=(result.error or {}).get("type", "Error"),
            message=(result.error or {}).get("message", "failed"),
        )
        run = transition(run, RunStatus.failed, now=now, error=error, reason=error.message)
        events.append(
            timeline_event(
                run, now, TimelineEventType.run_finished, detail={"status": "failed"}, error=error
            )
        )
    return run, events


def _requested(request: dict[str, Any]) -> dict[str, Any]:
    """What ``approval_requested`` keeps: who was asked, the round, and for a fix the error."""
    detail = {"approvers": request.get("approvers", []), "iteration": request.get("iteration")}
    fix = request.get("fix")
    if isinstance(fix, dict):
        detail["fix"] = {
            "error": f"{fix.get('error_type', 'Error')}: {fix.get('error_message', '')}"[:500]
        }
    return detail


MAX_EDITS_BYTES = 16_384
"""The most of an approval's edits a decision's timeline event keeps (the replay gate serves
them again); larger edits are named in ``edits_unkept`` instead."""


def edits_kept(edits: Any) -> dict[str, Any]:
    """What a decision's timeline event keeps of the person's edits: ``edits`` (the values, so
    a replay applies them again) and ``edits_unkept`` (keys whose values are not kept:
    secret-looking ones, as the timeline's summaries hide them, or all past
    :data:`MAX_EDITS_BYTES`)."""
    import json

    from langorch.domain.runs import looks_secret

    if not isinstance(edits, dict) or not edits:
        return {}
    kept = {str(k): v for k, v in edits.items() if not looks_secret(str(k))}
    unkept = sorted(str(k) for k in edits if str(k) not in kept)
    if len(json.dumps(kept, default=str).encode("utf-8")) > MAX_EDITS_BYTES:
        kept, unkept = {}, sorted(str(k) for k in edits)
    said: dict[str, Any] = {"edits": kept} if kept else {}
    if unkept:
        said["edits_unkept"] = unkept
    return said


def fix_said(answer: dict[str, Any]) -> dict[str, Any]:
    """A fix's answer as the timeline keeps it: the choice and the channel (who is the
    event's actor); a malformed answer is kept as the decision it came with."""
    try:
        fixed = fix_answer(answer)
    except InvalidDecisionError:
        return {"choice": str(answer.get("decision"))}
    said: dict[str, Any] = {"choice": fixed.choice}
    if fixed.via:
        said["via"] = fixed.via
    return said


def paused_event(run: RunRecord, pause: PauseRequest, now: Any) -> TimelineEvent:
    """``run_paused``: who asked and why, and what the run was waiting on, if anything."""
    detail: dict[str, Any] = {"reason": pause.reason} if pause.reason else {}
    step_id = None
    if run.pending is not None:
        detail["while"] = {"approval": "waiting_approval", "wait": "sleeping"}.get(
            run.pending.kind, "waiting_resource"
        )
        step_id = run.pending.request.get("step_id")
    return timeline_event(
        run, now, TimelineEventType.run_paused, step_id=step_id, actor=pause.by, detail=detail
    )


def parked_again(run: RunRecord, now: datetime) -> SegmentResult:
    """Announce a parked run's park again, for a segment that brings no answer.

    That segment is the execution of a parked run started again after the local stack restarted
    (its executions were lost with the emulator's process), or a retried invocation whose first
    answer was lost. Either way the execution must wait on the same interrupt: the same
    approval (its id derives from the run and the interrupt, so its emailed links stay valid and
    the new task token replaces the old one), or the rest of the same wait. Nothing runs,
    nothing is written.
    """
    pending = run.pending
    assert pending is not None  # the caller checked
    request = dict(pending.request)
    status = RunStatus.waiting_approval if pending.kind == "approval" else RunStatus.sleeping
    seconds = None
    if status is RunStatus.sleeping:
        seconds = max(0, math.ceil((_due(run, request) - now).total_seconds()))
    logger.info(
        "parked run announced again",
        extra={"run_id": run.run_id, "status": status.value, "interrupt_id": pending.interrupt_id},
    )
    return SegmentResult(
        run_id=run.run_id,
        status=status.value,
        segment=run.segment,
        seconds=seconds,
        approval=(
            {**request, "interrupt_id": pending.interrupt_id}
            if status is RunStatus.waiting_approval
            else None
        ),
        outputs=run.outputs,
        workflow_id=run.workflow_id,
        workflow_version=run.workflow_version,
    )


def _due(run: RunRecord, request: dict[str, Any]) -> datetime:
    """When a parked wait ends: as kept with it, else (a record from before that) its park,
    the record's last change, plus its seconds."""
    if isinstance(request.get("due"), str):
        return datetime.fromisoformat(request["due"])
    return run.updated_at + timedelta(seconds=float(request.get("seconds") or 0))
