"""Local mode: every handler invocation's log lines also land in the local log store.

In Lambda, whatever a function prints goes to ``/aws/lambda/<function name>``, one stream per
execution environment (``YYYY/MM/DD/[$LATEST]<id>``), and the service adds a ``REPORT`` line per
invocation. Locally the handlers' lines are captured per invocation — a context variable marks
which invocation a record belongs to (it follows asyncio tasks and LangGraph's executor threads,
unlike a thread-local) — and handed to :class:`CloudWatchSink`, which writes them to the same
log group: to the stream of the sandbox that ran the invocation (one per sandbox process, see
:mod:`langorch.local._sandbox`), or — handlers run inline — to one stream per invocation.

Shipping is off the invocation's path, as Lambda's is: the sink only queues the lines, and one
thread writes everything pending, in as few writes as CloudWatch's limits allow (the local store,
:class:`~langorch.adapters.sqlite.logs.SqliteLogs`, takes the same calls). ``langorch runs logs``
then reads them back as it reads a deployed stack's, a few milliseconds later at most;
:meth:`CloudWatchSink.flush` waits for what is queued, and stopping the stack flushes first.
"""

from __future__ import annotations

import logging
import math
import resource
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from langorch.adapters.log_lines import Event
from langorch.adapters.logs import put_batches
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
    """The stream of one inline invocation: ``YYYY/MM/DD/[$LATEST]<request id>``."""
    return environment_stream(request_id, now=now)


def environment_stream(environment_id: str, *, now: datetime | None = None) -> str:
    """The stream name Lambda gives an execution environment: ``YYYY/MM/DD/[$LATEST]<id>``.

    Args:
        environment_id: the environment's id (a sandbox's 32 hex digits).
        now: when the environment started (default: now).
    """
    day = (now or datetime.now(UTC)).strftime("%Y/%m/%d")
    return f"{day}/[$LATEST]{environment_id}"


def report_line(
    request_id: str, duration_ms: float, *, memory_size_mb: int, max_memory_used_mb: int
) -> tuple[int, str]:
    """The ``REPORT`` line Lambda writes after each invocation, stamped now.

    Not JSON, so ``langorch runs logs`` (which matches lines on their ``run_id`` field) leaves
    it out; it is there for whoever reads the function's streams.
    """
    text = (
        f"REPORT RequestId: {request_id}\tDuration: {duration_ms:.2f} ms\t"
        f"Billed Duration: {max(1, math.ceil(duration_ms))} ms\t"
        f"Memory Size: {memory_size_mb} MB\tMax Memory Used: {max_memory_used_mb} MB"
    )
    return int(time.time() * 1000), text


def max_memory_used_mb() -> int:
    """This process's peak resident memory in MB (what ``REPORT`` says of a sandbox)."""
    # ru_maxrss is in kilobytes on Linux, in bytes on macOS.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak / (1024 * 1024 if sys.platform == "darwin" else 1024))


@dataclass
class _Pending:
    """Lines waiting to be written to one stream, and the :meth:`CloudWatchSink.__call__` calls
    (their sequence numbers) they came from."""

    group: str
    stream: str
    events: Lines
    calls: set[int]
    attempts: int = 0


class LogWriter(Protocol):
    """What the sink writes with (CloudWatch Logs' calls)."""

    def ensure_group(self, group: str, *, retention_days: int | None = None) -> None: ...
    def create_stream(self, group: str, stream: str) -> None: ...
    def put_batch(self, group: str, stream: str, batch: Sequence[Event]) -> None: ...


class CloudWatchSink:
    """The dispatcher's log sink: writes each invocation's captured lines to its function's log
    group, in the background.

    A call only queues the lines. One thread takes everything pending, groups it by stream,
    creates each stream once and writes its events in as few PutLogEvents calls as the limits
    allow (:func:`~langorch.adapters.logs.put_batches`). A failed write is warned about and
    tried again, up to ``attempts`` times, then dropped with a warning; it never reaches an
    invocation, and never holds up the other streams' lines.

    Args:
        logs: where the lines go (the local store's :class:`~langorch.adapters.sqlite.logs.
            SqliteLogs`, or CloudWatch Logs: both take these calls).
        prefix: the log group prefix (``settings.log_group_prefix``).
        background: ``False`` writes on the caller's thread before returning (an in-process
            emulator, whose readers expect the lines the moment an invocation returns).
        attempts: how many times a stream's lines are tried before they are dropped.
        retry_after: seconds between a failed write and the next try.
    """

    def __init__(
        self,
        logs: LogWriter,
        prefix: str,
        *,
        background: bool = True,
        attempts: int = 3,
        retry_after: float = 0.5,
    ) -> None:
        self._logs = logs
        self._prefix = prefix
        self._background = background
        self._attempts = max(1, attempts)
        self._retry_after = retry_after
        self._created: set[tuple[str, str]] = set()
        self._pending: list[_Pending] = []
        self._unwritten: set[int] = set()
        self._calls = 0
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def ensure_groups(self, function_names: list[str]) -> None:
        """Create the functions' log groups (with retention, as the deployed stack sets it)."""
        for name in function_names:
            self._logs.ensure_group(
                log_group(self._prefix, name), retention_days=LOG_RETENTION_DAYS
            )

    def __call__(self, function_name: str, stream: str, lines: Lines) -> None:
        """Queue an invocation's lines for ``stream`` of the function's group.

        Never raises: a failure to write is reported as a warning.
        """
        if not lines:
            return
        group = log_group(self._prefix, function_name)
        with self._changed:
            queued = self._background and not self._closed
            if queued:
                call, self._calls = self._calls, self._calls + 1
                self._pending.append(_Pending(group, stream, list(lines), {call}))
                self._unwritten.add(call)
                self._start()
                self._changed.notify_all()
        if not queued:  # inline, or after close: write now, once
            pending = _Pending(group, stream, list(lines), set(), attempts=self._attempts - 1)
            self._write([pending])

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every line queued before this call is written (or dropped).

        Returns:
            ``False`` when ``timeout`` seconds passed first.
        """
        with self._changed:
            target = self._calls
            return self._changed.wait_for(
                lambda: all(call >= target for call in self._unwritten), timeout
            )

    def close(self, timeout: float = 30.0) -> None:
        """Write what is queued and stop the thread (later lines are written synchronously)."""
        with self._changed:
            self._closed = True
            thread = self._thread
            self._changed.notify_all()
        if thread is not None:
            thread.join(timeout)
        with self._changed:
            left = sum(len(p.events) for p in self._pending)
        if left:
            _log.warning("stopped before shipping %d log lines: they are dropped", left)

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="langorch-log-shipper", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: bool(self._pending) or self._closed)
                if not self._pending:
                    return  # closed, and nothing left
                taken, self._pending = self._pending, []
            try:
                retry = self._write(taken)
            except Exception as exc:  # the thread outlives any surprise; the lines are lost
                _log.warning("the log shipper failed: %s", exc)
                retry = []
            with self._changed:
                self._pending[:0] = retry
                kept = {call for p in retry for call in p.calls}
                self._unwritten -= {call for p in taken for call in p.calls} - kept
                self._changed.notify_all()
                if retry and not self._closed:
                    self._changed.wait(self._retry_after)  # new lines or close end the pause

    def _write(self, taken: list[_Pending]) -> list[_Pending]:
        """Write ``taken``, one stream after another; returns what is to be tried again."""
        streams: dict[tuple[str, str], _Pending] = {}
        for each in taken:
            merged = streams.get((each.group, each.stream))
            if merged is None:
                streams[(each.group, each.stream)] = _Pending(
                    each.group, each.stream, list(each.events), set(each.calls), each.attempts
                )
            else:
                merged.events.extend(each.events)
                merged.calls |= each.calls
                merged.attempts = max(merged.attempts, each.attempts)
        retry: list[_Pending] = []
        for pending in streams.values():
            left = self._write_stream(pending)
            if left is not None:
                retry.append(left)
        return retry

    def _write_stream(self, pending: _Pending) -> _Pending | None:
        key = (pending.group, pending.stream)
        batches = list(put_batches(pending.events))
        written = 0
        try:
            if key not in self._created:
                self._logs.create_stream(*key)
                self._created.add(key)
            for batch in batches:
                self._logs.put_batch(pending.group, pending.stream, batch)
                written += 1
        except StorageError as exc:
            # Only the batches not written yet are tried again: no line is written twice.
            left = [event for batch in batches[written:] for event in batch]
            attempts = pending.attempts + 1
            if attempts >= self._attempts:
                _log.warning("dropped %d log lines: %s", len(left), exc)
                return None
            _log.warning("could not ship %d log lines (will try again): %s", len(left), exc)
            return _Pending(pending.group, pending.stream, left, pending.calls, attempts)
        return None
