"""Local mode: every handler invocation's log lines also land in the emulator's CloudWatch Logs.

In Lambda, whatever a function prints goes to ``/aws/lambda/<function name>``. Locally the
handlers run in this process, so the lines are captured per invocation — a context variable
marks which invocation a record belongs to (it follows asyncio tasks and LangGraph's executor
threads, unlike a thread-local) — and written to the same log group after the invocation, one
stream per invocation as Lambda names them. ``langorch runs logs`` then reads them back exactly
as it reads a deployed stack's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime

from langorch.adapters.logs import CloudWatchLogs
from langorch.domain.errors import StorageError

LOG_RETENTION_DAYS = 14

Lines = list[tuple[int, str]]
"""Captured lines: ``(epoch milliseconds, the formatted JSON line)``."""

_current: ContextVar[Lines | None] = ContextVar("langorch_invocation_lines", default=None)
_install_lock = threading.Lock()
_capture: logging.Handler | None = None

_log = logging.getLogger(__name__)


class _CaptureHandler(logging.Handler):
    """Copies each record of the current invocation, formatted as Powertools formats it."""

    def emit(self, record: logging.LogRecord) -> None:
        lines = _current.get()
        if lines is None:
            return
        try:
            lines.append((int(record.created * 1000), self.format(record)))
        except Exception:  # a logging handler must never break the code that logs
            self.handleError(record)


def _ensure_capture() -> None:
    global _capture
    with _install_lock:
        if _capture is not None:
            return
        from langorch.observability import logger

        powertools = logger()
        handler = _CaptureHandler()
        # The same formatter object, so keys a handler appends show up in the captured line too.
        handler.setFormatter(powertools.registered_formatter)
        logging.getLogger(powertools.name).addHandler(handler)
        _capture = handler


@contextmanager
def captured_lines() -> Iterator[Lines]:
    """Collect the ``langorch`` log lines written inside this block (this context only)."""
    _ensure_capture()
    lines: Lines = []
    token = _current.set(lines)
    try:
        yield lines
    finally:
        _current.reset(token)


def log_group(prefix: str, function_name: str) -> str:
    """The function's log group (``/aws/lambda/<function name>`` with the default prefix)."""
    return f"{prefix}{function_name}"


def invocation_stream(request_id: str, *, now: datetime | None = None) -> str:
    """The stream name Lambda gives an invocation's sandbox: ``YYYY/MM/DD/[$LATEST]<id>``."""
    day = (now or datetime.now(UTC)).strftime("%Y/%m/%d")
    return f"{day}/[$LATEST]{request_id}"


class CloudWatchSink:
    """Writes one invocation's captured lines to its function's log group.

    Args:
        logs: the emulator's CloudWatch Logs.
        prefix: the log group prefix (``settings.log_group_prefix``).
    """

    def __init__(self, logs: CloudWatchLogs, prefix: str) -> None:
        self._logs = logs
        self._prefix = prefix

    def ensure_groups(self, function_names: list[str]) -> None:
        """Create the functions' log groups (with retention, as the deployed stack sets it)."""
        for name in function_names:
            self._logs.ensure_group(
                log_group(self._prefix, name), retention_days=LOG_RETENTION_DAYS
            )

    def __call__(self, function_name: str, request_id: str, lines: Lines) -> None:
        """Ship the lines; a failure is reported, never raised into the invocation's result."""
        try:
            self._logs.put(
                log_group(self._prefix, function_name), invocation_stream(request_id), lines
            )
        except StorageError as exc:
            _log.warning("could not ship %s's log lines: %s", function_name, exc)
