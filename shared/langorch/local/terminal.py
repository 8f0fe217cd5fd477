"""What ``langorch dev`` shows a person: one short line per event, not the functions' JSON.

The functions' structured log lines (Powertools JSON, EMF metrics) go to a file under the home
(:class:`~langorch.local._sandbox.OutputRouting`); ``langorch dev --verbose`` shows them too.
The terminal gets a line per event a person follows — a run started, a segment done, an
approval asked or decided, a run finished or failed with its reason — read from the same log
records each invocation ships to CloudWatch Logs (:class:`TerminalSink` is a dispatcher log
sink), and the outbox's approval-link notice, printed by the function that sends the email.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

Lines = list[tuple[int, str]]

_SEGMENT_STATUS = {
    "continue": "segment {segment} done, continuing",
    "sleeping": "sleeping",
    "waiting_approval": "waiting for approval",
    "succeeded": "finished: succeeded",
    "cancelled": "cancelled",
}
"""A segment's status -> what the run's line says (``failed`` has its own record, with why)."""


def _run(fields: Mapping[str, Any]) -> str:
    workflow = fields.get("workflow_id")
    run = str(fields.get("run_id") or "run ?")
    return run + (f" ({workflow})" if workflow else "")


def _segment_ended(fields: Mapping[str, Any]) -> str | None:
    status = str(fields.get("status") or "")
    if status == "failed":
        return None  # "run failed" says it, with the reason
    said = _SEGMENT_STATUS.get(status, status or "segment done")
    return f"{_run(fields)} {said.format(segment=fields.get('segment', '?'))}"


def _run_failed(fields: Mapping[str, Any]) -> str:
    reason = f"{fields.get('error_type', 'Error')}: {fields.get('error_message', '')}".strip()
    return f"{_run(fields)} failed: {_short(reason)}"


def _segment_failed(fields: Mapping[str, Any]) -> str:
    reason = f"{fields.get('error_type', 'Error')}: {fields.get('error_message', '')}".strip()
    return f"{_run(fields)} segment failed (retried or failed by the state machine): " + _short(
        reason
    )


def _approval_requested(fields: Mapping[str, Any]) -> str:
    return f"{_run(fields)} asks for approval {fields.get('approval_id', '?')}"


def _approval_decided(fields: Mapping[str, Any]) -> str:
    return f"{_run(fields)} approval {fields.get('approval_id', '?')} {fields.get('decision', '')}"


def _webhook_rejected(fields: Mapping[str, Any]) -> str:
    return (
        f"webhook for {fields.get('workflow_id', '?')} refused ({fields.get('status', '?')}): "
        f"{_short(str(fields.get('reason', '')))}"
    )


_EVENTS: Mapping[str, Callable[[Mapping[str, Any]], str | None]] = {
    "run started": lambda f: f"{_run(f)} started",
    "segment ended": _segment_ended,
    "run failed": _run_failed,
    "segment failed": _segment_failed,
    "approval requested": _approval_requested,
    "approval decided": _approval_decided,
    "approval timed out": lambda f: f"{_run(f)} approval {f.get('approval_id', '?')} timed out",
    "run cancelled": lambda f: f"{_run(f)} cancelled",
    "webhook rejected": _webhook_rejected,
}
"""Log message -> its human line (messages not listed are left to the JSON log file)."""


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
