"""How a run's failure keeps its first cause: notes left by failed segment attempts.

The ``run_segment`` function notes why an attempt failed (:func:`note_segment_error`) before
Step Functions retries it; a retry often fails differently, because the first attempt wrote
part of its work. :func:`~langorch.app.runs.mark_failed` then reports :func:`first_cause` —
in the record, the timeline and the log alike — rather than the last retry's symptom.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from langorch.domain.runs import RunError, TimelineEvent, TimelineEventType

if TYPE_CHECKING:
    from langorch.app.ports import Clock, RunsStore

logger = logging.getLogger(__name__)


class NoteDeps(Protocol):
    """What :func:`note_segment_error` needs: the runs and a clock."""

    @property
    def runs(self) -> RunsStore: ...
    @property
    def clock(self) -> Clock: ...


SEGMENT_ERROR = "error"
"""``detail.status`` of the ``segment_ended`` event a failed segment attempt leaves."""


def note_segment_error(run_id: str, exc: BaseException, deps: NoteDeps) -> None:
    """Keep why a segment attempt failed in the timeline, before Step Functions retries it.

    A retry of a failed segment often fails differently (its first attempt wrote part of its
    work): :func:`mark_failed` then reports the first cause kept here, not the retry's symptom.
    Best effort: if the note itself cannot be written, the error goes on as it was.

    Args:
        run_id: the run whose segment failed.
        exc: what it raised.
        deps: the runs and a clock.
    """
    from langorch.domain.errors import LangorchError, LeaseHeldError

    if isinstance(exc, LeaseHeldError):
        return  # another segment holds the run: not a failure of the run
    error = RunError(type=type(exc).__name__, message=str(exc) or type(exc).__name__)
    try:
        run = deps.runs.get_run(run_id)
        if run.is_terminal:
            return
        seq = deps.runs.next_event_seq(run_id)
        event = TimelineEvent(
            seq=seq,
            at=deps.clock(),
            type=TimelineEventType.segment_ended,
            segment=run.segment,
            error=error,
            detail={"status": SEGMENT_ERROR},
        )
        deps.runs.append_events(run_id, [event])
    except (LangorchError, ValueError) as failed:
        logger.warning("could not note the segment's error", extra={"reason": str(failed)[:200]})
    logger.error(
        "segment failed",
        extra={"run_id": run_id, "error_type": error.type, "error_message": error.message[:500]},
    )


def first_cause(timeline: list[TimelineEvent]) -> RunError | None:
    """The first error of the run's current streak of failed segment attempts, if any.

    Walks the segments back from the latest: every segment with a noted error belongs to the
    streak; the first one without ended well, and the streak starts after it.
    """
    noted: dict[int, list[RunError]] = {}
    segments: list[int] = []
    for event in timeline:
        if event.segment is None:
            continue
        if event.segment not in noted:
            noted[event.segment] = []
            segments.append(event.segment)
        failed = event.type is TimelineEventType.segment_ended and event.error is not None
        if failed and event.detail.get("status") == SEGMENT_ERROR and event.error is not None:
            noted[event.segment].append(event.error)
    cause: RunError | None = None
    for segment in reversed(segments):
        if not noted[segment]:
            break
        cause = noted[segment][0]
    return cause
