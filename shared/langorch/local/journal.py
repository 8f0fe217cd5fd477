"""Durable local state: a journal of the emulator's successful writes, replayed on start.

moto keeps every service in process memory, so ``langorch dev`` lost its tables, objects and
secrets on every stop or crash. This module keeps them as a journal of **AWS API requests**:

- :class:`JournaledApp` wraps moto's WSGI application. A request that writes to a persisted
  service (DynamoDB, S3, Secrets Manager, EventBridge Scheduler, CloudWatch Logs) and succeeds
  (2xx) is appended to ``<home>/state/emulator.journal`` — one JSON line with the WSGI
  environment and the body — *before* its response goes back to the caller. Reads and refused
  writes (a failed condition, a missing item) are not journaled, so replaying reproduces exactly
  the writes that took effect, in the order they took effect (one lock per service spans the
  apply and the append).
- :func:`replay` feeds the journal back into a fresh moto application on start, in-process
  (no HTTP), before anything else can reach the emulator.

Why requests and not pickled backends (moto's maintainers' suggestion): the AWS wire format is
stable across moto versions, pickles are not (a moto upgrade would make a home unreadable), and a
request is a few hundred bytes where a snapshot of a table is the whole table. Why not moto's
Recorder: it records a request before applying it (failed conditions too), replays over HTTP and
records every service — replaying Step Functions' ``StartExecution`` would start runs again.
Step Functions, Lambda, IAM, SES and EventBridge rules are therefore **not** journaled: the stack
provisions them again on every start (idempotently), and runs that were in flight are recovered
from our own tables (the run record and its checkpoints), not from moto's executions.

Durability: a write's line is in the file before its caller gets an answer, so a write a
caller saw acknowledged survives ``SIGKILL`` (it is in the kernel's page cache); a background
thread ``fsync``s every :data:`FSYNC_INTERVAL` seconds, bounding what a power cut may lose.
Lines reach the file in the order their writes took effect: each is queued under the service's
lock, and whoever writes next writes everything queued, in order, with one ``write`` on an
``O_APPEND`` descriptor (a group commit: the system call, which lets other threads run, is
outside the service's lock, where it held up every other write). A crash loses at most the
newest lines, none of them acknowledged. A torn last line (power cut mid-write) is skipped on
replay with a warning.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

JOURNAL_FORMAT = "langorch-emulator-journal/1"
FSYNC_INTERVAL = 0.5
"""Seconds between fsyncs of the journal: the most a power cut (not a crash) may lose."""

PERSISTED_SERVICES = frozenset({"dynamodb", "s3", "secretsmanager", "scheduler", "logs"})
"""Services whose writes are journaled (SigV4 credential scope names)."""

READ_OPERATIONS = ("Get", "Describe", "List", "Query", "Scan", "BatchGet", "TransactGet", "Filter")
"""Prefixes of JSON-protocol operations that change nothing (``X-Amz-Target``)."""

WRITE_METHODS = frozenset({"PUT", "POST", "DELETE", "PATCH"})
"""Methods that write, for REST services (S3, Scheduler)."""

_SKIPPED_ENVIRON = ("wsgi.", "werkzeug.")

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def service_of(environ: dict[str, Any]) -> str | None:
    """The AWS service a request is signed for (SigV4 ``Credential=key/date/region/service/…``)."""
    auth = str(environ.get("HTTP_AUTHORIZATION") or "")
    marker = "Credential="
    start = auth.find(marker)
    if start < 0:
        return None
    scope = auth[start + len(marker) :].split(",")[0].split("/")
    return scope[3] if len(scope) >= 5 else None


def is_write(environ: dict[str, Any]) -> bool:
    """Whether a request to a persisted service may change its state."""
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:
        operation = str(target).rsplit(".", 1)[-1]
        return not operation.startswith(READ_OPERATIONS)
    return str(environ.get("REQUEST_METHOD", "GET")).upper() in WRITE_METHODS


class Journal:
    """An append-only file of journaled requests, one JSON line each.

    Args:
        path: the journal file (created with its folder, readable by its owner only).
        header: the first line of a new journal (format and the moto version that wrote it).
    """

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        new = not path.exists() or path.stat().st_size == 0
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._dirty = threading.Event()
        self._closed = threading.Event()
        self._queued: list[bytes] = []
        self._queued_count = 0  # lines ever queued; the last one's number is its ticket
        self._written_count = 0  # lines ever written
        self._queue_lock = threading.Lock()  # held for a list append, never for a system call
        self._write_lock = threading.Lock()  # one writer at a time, so lines keep their order
        if new:
            self.append(header)
            os.fsync(self._fd)
        self._syncer = threading.Thread(target=self._sync_loop, name="langorch-journal-fsync")
        self._syncer.daemon = True
        self._syncer.start()

    @staticmethod
    def encode(entry: dict[str, Any]) -> bytes:
        """An entry's line (encode before taking a lock: it takes a while for a large body)."""
        return (json.dumps(entry, separators=(",", ":")) + "\n").encode("utf-8")

    def append(self, entry: dict[str, Any]) -> None:
        """Write one entry; it survives a crash of this process once this returns."""
        self.written(self.queue(self.encode(entry)))

    def queue(self, line: bytes) -> int:
        """Queue a line behind every line queued before it; its ticket for :meth:`written`."""
        with self._queue_lock:
            self._queued.append(line)
            self._queued_count += 1
            return self._queued_count

    def written(self, ticket: int) -> None:
        """Return once the line of ``ticket`` (and every line before it) is in the file."""
        with self._write_lock:
            if self._written_count >= ticket:
                return  # another caller's write carried it
            with self._queue_lock:
                lines, self._queued = self._queued, []
                upto = self._queued_count
            # One write on an O_APPEND descriptor: another process's lines never interleave.
            os.write(self._fd, b"".join(lines))
            self._written_count = upto
        self._dirty.set()

    def _sync_loop(self) -> None:
        while not self._closed.wait(FSYNC_INTERVAL):
            if self._dirty.is_set():
                self._dirty.clear()
                os.fsync(self._fd)

    def close(self) -> None:
        """Flush to disk and close."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._syncer.join()
        self.written(self._queued_count)  # lines queued by writers still on their way
        os.fsync(self._fd)
        os.close(self._fd)


def open_journal(path: Path) -> Journal:
    """The journal at ``path``, opened for appending (a new one starts with its header)."""
    import moto

    return Journal(path, {"format": JOURNAL_FORMAT, "moto": moto.__version__})


def read_entries(path: Path) -> Iterator[dict[str, Any]]:
    """The journal's request entries, oldest first (a torn last line is skipped)."""
    if not path.exists():
        return
    with path.open("rb") as handle:
        lines = handle.read().split(b"\n")
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            entry = json.loads(raw)
        except ValueError:
            logger.warning("journal %s: line %d is torn; skipped", path, number)
            continue
        if "environ" in entry:
            yield entry


@dataclass
class JournaledApp:
    """moto's WSGI app, with each successful write to a persisted service journaled.

    Args:
        app: moto's ``DomainDispatcherApplication``.
        journal: where writes go (``None``: journal nothing, e.g. while replaying).
    """

    app: WSGIApp
    journal: Journal | None = None

    def __post_init__(self) -> None:
        self._locks = {service: threading.Lock() for service in PERSISTED_SERVICES}

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        service = service_of(environ)
        if self.journal is None or service not in PERSISTED_SERVICES or not is_write(environ):
            return self.app(environ, start_response)
        body = _read_body(environ)
        status: list[str] = []

        def capture(code: str, headers: Any, exc_info: Any = None) -> Any:
            status.append(code)
            return start_response(code, headers, exc_info)

        line = self.journal.encode(_entry(environ, body))
        ticket = None
        # The lock spans apply + queue, so the journal's order is the order writes took effect.
        with self._locks[service]:
            response = self.app(environ, capture)
            if status and status[0][:1] == "2":
                ticket = self.journal.queue(line)
        if ticket is not None:
            self.journal.written(ticket)  # in the file before the caller gets its answer
        return response


def _read_body(environ: dict[str, Any]) -> bytes:
    stream = environ.get("wsgi.input")
    if stream is None:
        return b""
    length = environ.get("CONTENT_LENGTH")
    if length:
        body = stream.read(int(length))
    elif environ.get("wsgi.input_terminated"):
        body = stream.read()  # chunked: werkzeug de-chunks and ends the stream
    else:
        body = b""
    environ["wsgi.input"] = io.BytesIO(body)
    return bytes(body)


def _entry(environ: dict[str, Any], body: bytes) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    for key, value in environ.items():
        if key.startswith(_SKIPPED_ENVIRON) or key == "HTTP_TRANSFER_ENCODING":
            continue
        if isinstance(value, str | int | float | bool) or (
            isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
        ):
            kept[key] = value
    kept["CONTENT_LENGTH"] = str(len(body))
    return {"environ": kept, "body": base64.b64encode(body).decode("ascii")}


def replay(app: WSGIApp, entries: Iterable[dict[str, Any]]) -> tuple[int, int]:
    """Apply journaled requests to ``app`` in order, in this process.

    Returns:
        How many were applied and how many the emulator refused (logged; a refusal means the
        journal and the emulator disagree, e.g. after a moto upgrade changed a behaviour).
    """
    applied = refused = 0
    for entry in entries:
        environ = dict(entry["environ"])
        body = base64.b64decode(entry.get("body") or "")
        environ.update(
            {
                "wsgi.input": io.BytesIO(body),
                "wsgi.errors": io.StringIO(),
                "wsgi.url_scheme": environ.get("wsgi.url_scheme", "http"),
                "wsgi.version": (1, 0),
                "wsgi.multithread": False,
                "wsgi.multiprocess": False,
                "wsgi.run_once": False,
            }
        )
        status: list[str] = []

        def capture(code: str, headers: Any, exc_info: Any = None, _s: list[str] = status) -> Any:
            _s.append(code)
            return lambda data: None

        response = app(environ, capture)
        for _chunk in response:
            pass
        close = getattr(response, "close", None)
        if close is not None:
            close()
        if status and status[0][:1] == "2":
            applied += 1
        else:
            refused += 1
            logger.warning(
                "journal replay: %s %s was refused (%s)",
                environ.get("REQUEST_METHOD"),
                environ.get("PATH_INFO"),
                status[0] if status else "no status",
            )
    return applied, refused
