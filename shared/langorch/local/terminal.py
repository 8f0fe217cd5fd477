"""What ``langorch dev`` shows a person: one short line per event, not the functions' JSON.

The functions' structured log lines (Powertools JSON, EMF metrics) go to a file under the home
(:class:`~langorch.local._sandbox.OutputRouting`); ``langorch dev --verbose`` shows them too.
The terminal gets a line per event a person follows, from two sources:

- **the runs' timelines** (:class:`TimelineFollower`): a run started, an approval asked, decided
  or timed out, a wait (and what a step waits for: a resource, a model's slot or rate), a run
  finished, failed (and why: the step and the error) or cancelled (and by whom) — whichever
  process did it: a function, ``langorch runs start`` or ``cancel`` in another terminal, the
  console;
- **the functions' log records** (:class:`TerminalSink`, a dispatcher log sink) for what is on
  no timeline: a segment that failed and will be retried, a webhook refused at the door.

The outbox's approval-link notice is printed by the function that sends the email.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

from langorch.domain.model_limits import describe_wait
from langorch.domain.runs import TimelineEvent, TimelineEventType

Lines = list[tuple[int, str]]


def _run(fields: Mapping[str, Any]) -> str:
    workflow = fields.get("workflow_id")
    run = str(fields.get("run_id") or "run ?")
    return run + (f" ({workflow})" if workflow else "")


def _segment_failed(fields: Mapping[str, Any]) -> str:
    reason = f"{fields.get('error_type', 'Error')}: {fields.get('error_message', '')}".strip()
    return f"{_run(fields)} segment failed (retried or failed by the state machine): " + _short(
        reason
    )


def _webhook_rejected(fields: Mapping[str, Any]) -> str:
    return (
        f"webhook for {fields.get('workflow_id', '?')} refused ({fields.get('status', '?')}): "
        f"{_short(str(fields.get('reason', '')))}"
    )


_EVENTS: Mapping[str, Callable[[Mapping[str, Any]], str | None]] = {
    "segment failed": _segment_failed,
    "webhook rejected": _webhook_rejected,
}
"""Log message -> its human line, for what no timeline records (the rest of the story is the
timelines': :class:`TimelineFollower`; messages not listed are left to the JSON log file)."""


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def human_line(fields: Mapping[str, Any]) -> str | None:
    """The line a person reads for one structured log record, or ``None`` (not an event).

    Args:
        fields: the record as Powertools writes it (``message``, ``run_id``, ``status``, …).
    """
    describe = _EVENTS.get(str(fields.get("message", "")))
    return None if describe is None else describe(fields)


class TerminalSink:
    """A dispatcher log sink: prints the human line of each event an invocation logged.

    Args:
        out: the terminal (default ``sys.stdout`` at the time of writing).
    """

    def __init__(self, out: TextIO | None = None) -> None:
        self._out = out
        self._lock = threading.Lock()

    def __call__(self, function_name: str, request_id: str, lines: Lines) -> None:
        """Print the lines for ``lines``' events, stamped with their local time."""
        said: list[str] = []
        for millis, text in lines:
            try:
                fields = json.loads(text)
            except ValueError:
                continue
            if not isinstance(fields, dict):
                continue
            line = human_line(fields)
            if line is not None:
                stamp = datetime.fromtimestamp(millis / 1000, UTC).astimezone()
                said.append(f"{stamp:%H:%M:%S}  {line}")
        if said:
            out = self._out or sys.stdout
            with self._lock:
                out.write("\n".join(said) + "\n")
                out.flush()


def both(*sinks: Callable[[str, str, Lines], None]) -> Callable[[str, str, Lines], None]:
    """One log sink that hands each invocation's lines to every sink in turn."""

    def sink(function_name: str, request_id: str, lines: Lines) -> None:
        for each in sinks:
            each(function_name, request_id, lines)

    return sink


def timeline_line(run_id: str, workflow_id: str, event: TimelineEvent) -> str | None:
    """The line a person reads for one timeline event, or ``None`` (not one they follow)."""
    run = f"{run_id} ({workflow_id})"
    detail = event.detail
    kind = event.type
    if kind is TimelineEventType.run_started:
        return f"{run} started" + (f" by {event.actor}" if event.actor else "")
    fix = detail.get("fix")
    if kind is TimelineEventType.approval_requested:
        asks = "a fix of its failed step" if isinstance(fix, dict) else "approval"
        return f"{run} asks for {asks} at {event.step_id}"
    if kind is TimelineEventType.approval_decided:
        who = f" by {event.actor}" if event.actor else ""
        if isinstance(fix, dict):
            via = f" ({fix['via']})" if fix.get("via") else ""
            return f"{run} {event.step_id} fix: {fix.get('choice')}{who}{via}"
        return f"{run} {event.step_id} {detail.get('decision', 'decided')}{who}"
    if kind is TimelineEventType.approval_timed_out:
        return f"{run} approval at {event.step_id} timed out"
    if kind is TimelineEventType.wait_started:
        return f"{run} sleeping at {event.step_id}"
    if kind is TimelineEventType.resource_waiting:
        said = describe_wait(
            str(detail.get("resource")), detail.get("position"), detail.get("parked_seconds")
        )
        return f"{run} {said} at {event.step_id}"
    if kind is TimelineEventType.run_cancelled:
        who = f" by {event.actor}" if event.actor else ""
        reason = f": {_short(str(detail['reason']))}" if detail.get("reason") else ""
        return f"{run} cancelled{who}{reason}"
    if kind in (TimelineEventType.run_paused, TimelineEventType.run_resumed):
        verb = "paused" if kind is TimelineEventType.run_paused else "resumed"
        who = f" by {event.actor}" if event.actor else ""
        reason = f": {_short(str(detail['reason']))}" if detail.get("reason") else ""
        where = f" (waiting at {event.step_id})" if event.step_id else ""
        return f"{run} {verb}{who}{where}{reason}"
    if kind is TimelineEventType.run_redriven:
        return f"{run} redriven" + (f" by {event.actor}" if event.actor else "")
    if kind is TimelineEventType.run_finished:
        if event.error is None and detail.get("status", "succeeded") == "succeeded":
            return f"{run} finished: succeeded"
        error = event.error
        where = f" at {error.step_id}" if error is not None and error.step_id else ""
        why = f"{error.type}: {error.message}" if error is not None else "no reason recorded"
        return f"{run} failed{where}: {_short(why)}"
    return None


class TimelineFollower:
    """Prints a line for each timeline event a person follows, of every run, as it is stored.

    Args:
        runs: the local runs store (:meth:`~langorch.adapters.sqlite.runs.SqliteRuns.
            events_after`).
        out: the terminal (default ``sys.stdout`` at the time of writing).
    """

    def __init__(self, runs: Any, out: TextIO | None = None) -> None:
        self._runs = runs
        self._out = out
        self._position = runs.events_end()  # what happened before this start is history
        self._seen: dict[tuple[str, int], None] = {}
        self.stopped = threading.Event()

    def pump(self) -> list[str]:
        """Print what was stored since the last call; the lines printed."""
        said: list[str] = []
        while True:
            events, self._position = self._runs.events_after(self._position)
            for run_id, workflow_id, event in events:
                if (run_id, event.seq) in self._seen:
                    continue  # a replayed segment stored it again
                self._seen[(run_id, event.seq)] = None
                line = timeline_line(run_id, workflow_id, event)
                if line is not None:
                    said.append(f"{event.at.astimezone():%H:%M:%S}  {line}")
            while len(self._seen) > 10_000:
                self._seen.pop(next(iter(self._seen)))
            if not events:
                break
        if said:
            out = self._out or sys.stdout
            out.write("\n".join(said) + "\n")
            out.flush()
        return said

    def run(self, interval: float) -> None:
        """Follow every ``interval`` seconds until :attr:`stopped` is set."""
        while not self.stopped.is_set():
            try:
                self.pump()
            except Exception:  # a line missed is better than a terminal that stops talking
                logging.getLogger(__name__).exception("cannot read the runs' timelines")
            self.stopped.wait(interval)

    def __call__(self) -> None:
        """Stop following (the follower is its own stop function)."""
        self.stopped.set()


def start_following(runs: Any, *, interval: float = 0.25) -> TimelineFollower:
    """Follow the runs' timelines in a background thread; returns the follower (call to stop)."""
    follower = TimelineFollower(runs)
    threading.Thread(
        target=follower.run, args=(interval,), name="langorch-terminal", daemon=True
    ).start()
    return follower
