"""Pausing and resuming a run as an operator (``langorch runs pause | resume``, the console).

A pause is a *request* kept beside the run's record (``RunsStore.request_pause``), so any
process may ask while a segment runs and the segment's own writes never drop it. The run
honours it at its next step boundary: the current step finishes, the segment returns ``paused``
and the state machine parks on a task token (``AwaitResume``), with no Lambda running, until a
resume wakes it — the same parking machinery approvals and resource queues use. A task token
rather than a Choice and Wait loop: a resume takes effect at once (not at the next poll), a
paused run costs nothing while it waits, and the Wait's polling would need a Lambda invocation
per interval for as long as the run is paused. ``AwaitResume`` still times out
(``pause_recheck_seconds``) into one more look, in case a wake-up was lost.

A run parked on an approval or a wait pauses at once and keeps its park: the approval stays
open and the wait goes on, each on its own timer. An answer that arrives while paused (a
decision, the end of a wait, a timeout) wakes the execution as usual; its segment keeps the
answer on the record (``RunRecord.held``) and parks on the pause. The resume hands it to the
run; a resume before anything arrived puts the run back on its park.

Races are settled by the store: a pause of a run that has ended is refused (the end wins, and
the pause says the run ended); a second pause keeps the first request; of ``park_paused`` and
``lift_pause`` exactly one sees the other, so an execution that parks while a resume lifts the
pause wakes itself. Every write of the record is made under the run's lease.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from langorch.app.segment_record import (
    SEGMENT_SEQ_SPAN,
    SegmentResult,
    parked_again,
    paused_event,
    timeline_event,
)
from langorch.domain.errors import ConflictError, LeaseHeldError, TaskClosedError
from langorch.domain.runs import (
    PauseRequest,
    RunRecord,
    RunStatus,
    TimelineEvent,
    TimelineEventType,
    holding,
    paused,
    unpaused,
)

if TYPE_CHECKING:
    from langorch.app.ports import Clock, Executions, Ids, RunsStore
    from langorch.config import Settings

logger = logging.getLogger(__name__)

OPERATOR_LEASE_SECONDS = 30.0
"""How long an operator's pause or resume holds the run's lease (a few writes)."""
OUTSIDE_SEQ = SEGMENT_SEQ_SPAN // 2
"""Events written between segments (a pause or resume of a parked run) are numbered from here
in the current segment's range: after every event a segment numbers, before its closing slot."""
WOKEN = {"resumed": True}
"""What an execution parked on a pause is woken with (the next segment reads the record)."""


class PauseDeps(Protocol):
    """What pausing needs: the runs, a clock, ids (lease owners) and the settings."""

    @property
    def runs(self) -> RunsStore: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def ids(self) -> Ids: ...
    @property
    def settings(self) -> Settings: ...


class PauseMarks(Protocol):
    """The checkpointer's part in a pause: tell a running segment at its next write."""

    def claim_pause(self, run_id: str) -> None:
        """The run was asked to pause: its running segment's next checkpoint write learns of
        it (a saver that checks the pause in each write's own transaction does nothing)."""
        ...


class AskDeps(PauseDeps, Protocol):
    """What asking for a pause needs besides: the checkpointer, which tells the segment."""

    @property
    def checkpointer(self) -> PauseMarks: ...


class ResumeDeps(PauseDeps, Protocol):
    """What resuming needs besides: the executions (to wake one parked on the pause)."""

    @property
    def executions(self) -> Executions: ...


@dataclass(frozen=True)
class Paused:
    """What ``runs pause`` did: the run as it is now, and whether this call asked."""

    run: RunRecord
    asked: bool
    """``False``: a request stood already (the first asker's stands), or the run had ended."""

    @property
    def state(self) -> str:
        """``paused`` (it has stopped), ``pausing`` (its current step is finishing) or
        ``ended`` (it ended first: the end wins)."""
        if self.run.is_terminal:
            return "ended"
        return "paused" if self.run.status is RunStatus.paused else "pausing"


@dataclass(frozen=True)
class Resumed:
    """What ``runs resume`` did: the run as it is now, and whether this call resumed it."""

    run: RunRecord
    resumed: bool
    """``False``: it was not paused (nor asked to), or it had ended."""


# --------------------------------------------------------------------------------------------
# The operator's side
# --------------------------------------------------------------------------------------------


def pause_run(run_id: str, deps: AskDeps, *, actor: str, reason: str = "") -> Paused:
    """Ask the run to pause: a parked run pauses at once, a running one at its next step
    boundary. Idempotent: a second pause keeps the first request.

    Args:
        run_id: the run.
        deps: the runs, a clock, ids and the settings.
        actor: who asks (``cli:alice``, ``console:ana``), kept on the timeline.
        reason: why, kept on the timeline and as the run's status reason.

    Returns:
        The run and whether this call asked; :attr:`Paused.state` says where it is.

    Raises:
        NotFoundError: no such run.
        StorageError: the store failed.
    """
    run = deps.runs.get_run(run_id)
    if run.is_terminal:
        return Paused(run, asked=False)
    request = PauseRequest(by=actor, reason=reason.strip(), at=deps.clock())
    try:
        run, asked = deps.runs.request_pause(run_id, request)
    except ConflictError:
        return Paused(deps.runs.get_run(run_id), asked=False)  # it ended first: the end wins
    # After the request stands, so the segment that learns of it reads it; each ask tells the
    # segment again (a pause asked twice reaches a segment the first telling missed).
    deps.checkpointer.claim_pause(run_id)
    logger.info(
        "pause requested" if asked else "pause already requested",
        extra={"run_id": run_id, "workflow_id": run.workflow_id, "actor": actor},
    )
    return Paused(settle_pause(run_id, deps) or run, asked)


def settle_pause(run_id: str, deps: PauseDeps) -> RunRecord | None:
    """Pause a parked run now, if a pause stands: its approval or wait stays as it is.

    Called by ``runs pause``, and by a segment after it parked the run (a pause asked while it
    ran may have come after its last look).

    Returns:
        The run as it is now; ``None`` when a segment holds the run (that segment honours the
        pause itself, at its next step boundary or when it parks).
    """

    def pause_parked(run: RunRecord, now: Any) -> tuple[RunRecord, list[TimelineEvent]] | None:
        if run.pause is None or run.status not in (RunStatus.waiting_approval, RunStatus.sleeping):
            return None
        stopped = paused(run, run.pause, now=now)
        return stopped, [paused_event(stopped, run.pause, now)]

    return _under_lease(run_id, deps, f"pause:{deps.ids()}", pause_parked)


def resume_run(run_id: str, deps: ResumeDeps, *, actor: str, reason: str = "") -> Resumed:
    """Lift the run's pause: it goes on from where it stopped, with any answer that arrived
    meanwhile, or back to the approval or wait it was paused in. Idempotent.

    Args:
        run_id: the run.
        deps: the runs, the executions, a clock, ids and the settings.
        actor: who resumes, kept on the timeline.
        reason: why, kept on the timeline.

    Returns:
        The run and whether this call resumed it.

    Raises:
        NotFoundError: no such run.
        StorageError: the store or Step Functions failed (resuming again finishes the job).
    """
    run = deps.runs.get_run(run_id)
    if run.is_terminal:
        return Resumed(run, resumed=False)
    lifted, token = deps.runs.lift_pause(run_id)
    if lifted is None and run.status is not RunStatus.paused:
        return Resumed(run, resumed=False)  # not paused, nor asked to be

    def back_on_its_way(run: RunRecord, now: Any) -> tuple[RunRecord, list[TimelineEvent]] | None:
        events = [_resumed_event(run, actor, reason, lifted, now)] if lifted else []
        if run.status is RunStatus.paused and run.pending is not None and run.held is None:
            return unpaused(run, now=now), events  # nothing arrived: its park still waits
        # Paused at a step boundary, or holding an answer: the execution parked on the pause
        # goes on (woken below); its next segment moves the record.
        return (run, events) if events else None

    now_run = _under_lease(run_id, deps, f"resume:{deps.ids()}", back_on_its_way)
    if now_run is None:
        # A segment holds the run (it was still running, or is keeping an answer): it sees the
        # pause lifted, or parks and finds it lifted. The resume is still on the timeline.
        if lifted:
            current = deps.runs.get_run(run_id)
            event = _resumed_event(current, actor, reason, lifted, deps.clock())
            seq = _outside_seq(current, deps.runs)
            deps.runs.append_events(run_id, [event.model_copy(update={"seq": seq})])
        now_run = deps.runs.get_run(run_id)
    if token is not None:
        # Closed: woken already, or a token of an earlier pause; nothing waits on it.
        with contextlib.suppress(TaskClosedError):
            deps.executions.send_success(token, WOKEN)
    logger.info(
        "run resumed" if lifted else "run was not paused",
        extra={"run_id": run_id, "workflow_id": run.workflow_id, "actor": actor},
    )
    return Resumed(now_run, resumed=lifted is not None)


# --------------------------------------------------------------------------------------------
# The run's side: what a segment does about a pause, and the park on it
# --------------------------------------------------------------------------------------------


class SegmentPauseDeps(PauseDeps, Protocol):
    """What a segment's pause handling needs (the segment's own ports)."""


def before_segment(
    run: RunRecord, resume: Any, deps: SegmentPauseDeps, *, owner: str
) -> SegmentResult | Any:
    """What a segment does about a pause before it runs a step.

    Args:
        run: the run as the segment read it.
        resume: the answer the segment brings (``None``: none).
        deps: the segment's ports.
        owner: the segment's lease owner (a retry of the segment takes its lease back).

    Returns:
        The :class:`SegmentResult` to answer the state machine with (the run stays paused), or
        the answer to run the segment with (the held answer of a resumed run, else ``resume``).

    Raises:
        LeaseHeldError: another segment holds the run (the state machine retries).
    """
    pause = run.pause
    if run.status is RunStatus.paused and pause is None:
        return _resumed(run, resume, deps, owner=owner)
    if pause is None or not _honours_now(run, resume):
        return resume
    if resume is not None and run.pending is not None and run.held is None:
        kept = _keep(run, pause, resume, deps, owner=owner)
        return _parked_on_pause(kept, deps.settings)
    if run.pending is not None and run.held is None:
        # A new execution of a run paused on a park it still waits for (the local stack
        # restarted): park on the same approval or wait again; the record stays paused.
        stopped = _stop(run, pause, deps, owner=owner)
        return parked_again(stopped, deps.clock())
    return _parked_on_pause(_stop(run, pause, deps, owner=owner), deps.settings)


def _honours_now(run: RunRecord, resume: Any) -> bool:
    if run.status is RunStatus.running and resume is not None:
        return False  # a retry of an attempt that died mid-segment: its boundaries honour it
    # A redriven run's kept approval parks first (repark); the pause then settles on it.
    return not (run.status is RunStatus.queued and run.pending is not None)


def _resumed(run: RunRecord, resume: Any, deps: SegmentPauseDeps, *, owner: str) -> Any:
    """A run whose pause was lifted: go on with what it held, or back to its park."""
    if resume is not None or run.held is not None:
        return resume if resume is not None else run.held
    if run.pending is None:
        return None  # paused at a step boundary: the segment goes on from its checkpoint

    def back(current: RunRecord, now: Any) -> tuple[RunRecord, list[TimelineEvent]] | None:
        if current.status is not RunStatus.paused or current.held is not None:
            return None
        return unpaused(current, now=now), []

    back_on_park = _under_lease(run.run_id, deps, owner, back, raising=True)
    assert back_on_park is not None  # raising: a held lease raised
    return parked_again(back_on_park, deps.clock())


def _keep(
    run: RunRecord, pause: PauseRequest, answer: Any, deps: SegmentPauseDeps, *, owner: str
) -> RunRecord:
    """Keep the answer that arrived while paused (pausing the run first if it was parked)."""

    def keep(current: RunRecord, now: Any) -> tuple[RunRecord, list[TimelineEvent]] | None:
        events: list[TimelineEvent] = []
        if current.status is not RunStatus.paused:
            current = paused(current, pause, now=now)
            events.append(paused_event(current, pause, now))
        if current.held is not None:
            return (current, events) if events else None  # the first answer stands
        held = answer if isinstance(answer, dict) else {"value": answer}
        return holding(current, dict(held), now=now), events

    kept = _under_lease(run.run_id, deps, owner, keep, raising=True)
    assert kept is not None
    logger.info("answer held while paused", extra={"run_id": run.run_id})
    return kept


def _stop(run: RunRecord, pause: PauseRequest, deps: SegmentPauseDeps, *, owner: str) -> RunRecord:
    """Pause the run before its segment runs anything (a no-op if it is paused already)."""

    def stop(current: RunRecord, now: Any) -> tuple[RunRecord, list[TimelineEvent]] | None:
        if current.status is RunStatus.paused or current.is_terminal:
            return None
        stopped = paused(current, pause, now=now)
        return stopped, [paused_event(stopped, pause, now)]

    stopped = _under_lease(run.run_id, deps, owner, stop, raising=True)
    assert stopped is not None
    return stopped


def _parked_on_pause(run: RunRecord, settings: Settings) -> SegmentResult:
    """Answer ``paused``: the state machine parks on the pause (``AwaitResume``)."""
    return SegmentResult(
        run_id=run.run_id,
        status="paused" if not run.is_terminal else run.status.value,
        segment=run.segment,
        seconds=settings.pause_recheck_seconds,
        outputs=run.outputs,
        workflow_id=run.workflow_id,
        workflow_version=run.workflow_version,
    )


def paused_result(run: RunRecord, settings: Settings) -> SegmentResult:
    """What a segment that stopped at a step boundary for a pause answers."""
    return _parked_on_pause(run, settings)


@dataclass(frozen=True)
class ParkOnPause:
    """The ``AwaitResume`` task: keep the token the execution waits on while paused."""

    run_id: str
    task_token: str


class ParkDeps(Protocol):
    """What :func:`park_on_pause` needs: the runs and the executions."""

    @property
    def runs(self) -> RunsStore: ...
    @property
    def executions(self) -> Executions: ...


def park_on_pause(cmd: ParkOnPause, deps: ParkDeps) -> bool:
    """Keep the token with the pause, so a resume can wake the execution.

    If the pause was lifted between the segment that paused and this call, nobody will wake
    it: it is woken at once (the store orders this against every ``lift_pause``).

    Returns:
        Whether it was woken at once.
    """
    if deps.runs.park_paused(cmd.run_id, cmd.task_token):
        logger.info("parked on the pause", extra={"run_id": cmd.run_id})
        return False
    try:
        deps.executions.send_success(cmd.task_token, WOKEN)
    except TaskClosedError:
        return False
    logger.info("pause lifted before the park; woken at once", extra={"run_id": cmd.run_id})
    return True


# --------------------------------------------------------------------------------------------
# Timeline and lease
# --------------------------------------------------------------------------------------------


def _resumed_event(
    run: RunRecord, actor: str, reason: str, lifted: PauseRequest | None, now: Any
) -> TimelineEvent:
    detail: dict[str, Any] = {"reason": reason.strip()} if reason.strip() else {}
    if lifted is not None and run.status is not RunStatus.paused:
        detail["before_it_paused"] = True  # its step was still finishing
    return timeline_event(run, now, TimelineEventType.run_resumed, actor=actor, detail=detail)


def _outside_seq(run: RunRecord, runs: RunsStore) -> int:
    """The ``seq`` of the next event written between segments (see :data:`OUTSIDE_SEQ`)."""
    return max(runs.next_event_seq(run.run_id), run.segment * SEGMENT_SEQ_SPAN + OUTSIDE_SEQ)


Change = Callable[[RunRecord, Any], "tuple[RunRecord, list[TimelineEvent]] | None"]


def _under_lease(
    run_id: str, deps: PauseDeps, owner: str, change: Change, *, raising: bool = False
) -> RunRecord | None:
    """Read the run under its lease, apply ``change`` and write what it returns.

    ``change(run, now)`` answers the new record and its timeline events, or ``None`` (nothing
    to write). A run that ended meanwhile keeps its ending.

    Returns:
        The run as it is now; ``None`` when a segment holds the lease (unless ``raising``).
    """
    now = deps.clock()
    lease = deps.settings.segment_budget_seconds if raising else OPERATOR_LEASE_SECONDS
    try:
        fence = deps.runs.acquire_lease(run_id, owner, now=now.timestamp(), ttl_seconds=lease)
    except LeaseHeldError:
        if raising:
            raise
        return None
    released = False
    try:
        run = deps.runs.get_run(run_id)
        changed = change(run, now)
        if changed is None or run.is_terminal:
            return run
        new, events = changed
        if events:
            first = _outside_seq(run, deps.runs)
            numbered = [e.model_copy(update={"seq": first + i}) for i, e in enumerate(events)]
            deps.runs.append_events(run_id, numbered, fence=fence)
        try:
            deps.runs.save_run(new, fence=fence, release=True)
        except ConflictError:
            return deps.runs.get_run(run_id)  # it ended meanwhile: that ending stands
        released = True
        return new
    finally:
        if not released:
            deps.runs.release_lease(run_id, fence)


__all__ = [
    "ParkOnPause",
    "Paused",
    "Resumed",
    "before_segment",
    "park_on_pause",
    "pause_run",
    "paused_result",
    "resume_run",
    "settle_pause",
]
