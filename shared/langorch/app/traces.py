"""The port a run's traces go out through: one trace per run, across its segments.

A run lasts many segments over days, each in its own Lambda invocation, so no span stays open
across them. The run gets a W3C trace context when its first segment starts
(:meth:`RunTraces.new_context`), stored with the run record (``trace_context``); each segment
hands what it did to :meth:`RunTraces.segment`, which turns it into spans under that context
(the adapter is :mod:`langorch.adapters.otel`). With tracing off (the default: X-Ray through
Powertools only), :data:`NO_TRACES` does nothing and nothing of OpenTelemetry is imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from langorch.domain.runs import RunRecord


@dataclass(frozen=True)
class SegmentTrace:
    """What one segment of a run did, as its spans need it."""

    run: RunRecord
    """The run as the segment started it (its ``trace_context`` set)."""
    events: list[dict[str, Any]]
    """The engine's events of the segment (``step_started``, ``tool_called``, …)."""
    started: datetime
    ended: datetime
    status: str
    """What the segment ended as (``waiting_approval``, ``succeeded``, ``failed``, …)."""


class RunTraces(Protocol):
    """Where the spans of runs go."""

    def new_context(self) -> str | None:
        """A new trace context (a W3C ``traceparent``) for a run; ``None``: not tracing."""
        ...

    def segment(self, trace: SegmentTrace) -> None:
        """Export the spans of one segment (never raises: a trace must not fail a run)."""
        ...


class _NoTraces:
    """Tracing off: no context, no spans."""

    def new_context(self) -> str | None:
        return None

    def segment(self, trace: SegmentTrace) -> None:
        return None


NO_TRACES: RunTraces = _NoTraces()
"""The traces of a process that does not export OpenTelemetry spans."""
