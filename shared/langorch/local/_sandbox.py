"""Lambda-like sandboxes for the local functions: worker processes, one invocation at a time.

A Lambda sandbox never runs two invocations at once, and the service scales a function by
adding sandboxes. Handlers rely on that: Powertools' event handler keeps the current event in a
module global (``app.current_event``), ``Logger.inject_lambda_context`` appends the context's
keys to the process's formatter. Run in threads of one process, two invocations read each
other's (a webhook answered 403 "forged link" under 100 concurrent clicks).

So each function gets a pool of worker processes (:class:`SandboxPool`), each serving one
invocation at a time and built on demand up to a size, as Lambda scales. Processes rather than
fresh module objects per sandbox: a fresh module still shares every library's globals
(Powertools' logger and metrics, the ``langorch`` caches), and processes also take the handlers
off the emulator's GIL. They are forked from a ``forkserver`` that has imported the handlers
once (a clean single-threaded parent: forking the dev process itself, with the emulator's
threads holding locks, is unsafe), so a new sandbox starts in milliseconds and a cold start is
only what Lambda's is — the handler building its container on the first invocation.

A sandbox gets its event, context and environment over a pipe and answers with the handler's
JSON result or Lambda's error payload, plus the invocation's captured log lines (shipped to
CloudWatch Logs by the dispatcher, in the parent, to the sandbox's own stream: each sandbox has
an id, as a Lambda execution environment has, and a new sandbox a new id). Handlers reach AWS
through the endpoint URL of their settings, wherever the emulator runs.
"""

from __future__ import annotations

import importlib
import json
import logging
import multiprocessing
import os
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, TextIO

_PASSTHROUGH = frozenset({"LANGORCH_OPENAI_API_KEY"})


@dataclass(frozen=True)
class Reply:
    """What one invocation in a sandbox answered."""

    payload: bytes
    function_error: str | None
    lines: list[tuple[int, str]] = field(default_factory=list)
    max_memory_mb: int = 0
    """The sandbox's peak memory so far (``Max Memory Used`` of Lambda's ``REPORT`` line)."""
    log_stream: str = ""
    """The sandbox's log stream, where the invocation's lines belong."""


class SandboxError(Exception):
    """A failure of the sandbox itself (it died, or the invocation timed out), under Lambda's
    error type for it."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


def error_payload(exc: BaseException, error_type: str | None = None) -> bytes:
    """Lambda's error payload for an exception (``errorType`` is its class name)."""
    kind = error_type or getattr(exc, "error_type", None) or type(exc).__name__
    payload = {
        "errorType": kind,
        "errorMessage": str(exc),
        "stackTrace": traceback.format_tb(exc.__traceback__)[-10:],
    }
    return json.dumps(payload).encode("utf-8")


# --------------------------------------------------------------------------------------------
# The parent side: a pool of sandboxes per function
# --------------------------------------------------------------------------------------------


def function_environ(env: Mapping[str, str]) -> dict[str, str]:
    """The whole environment an invocation sees: this process's, the function's on top.

    ``LANGORCH_*`` variables of this process are hidden (the function's settings are what its
    configuration says), except secrets that pass through from the developer's environment.
    """
    base = {
        k: v for k, v in os.environ.items() if not k.startswith("LANGORCH_") or k in _PASSTHROUGH
    }
    return {**base, **env}


PRELOAD = (
    "langorch.local._sandbox",
    "boto3",
    "langorch.composition.embedded",
    "langorch.adapters.sqlite.checkpointer",
    "langorch.engine.compiler",
    "langorch.engine.segments",
    "langorch.domain._jinja_sandbox",  # Jinja2: the templates import it on first use
    "langorch.local.sandbox_warmup",
)
"""Imported once by the fork server, so no sandbox imports them again: what the runner imports on
its first segment (LangGraph, ~2-4 s here) would otherwise be paid by every new sandbox."""

_forkserver_lock = threading.Lock()
_forkserver_preloaded = False


def _context(preload: list[str]) -> Any:
    """The ``forkserver`` context, with ``preload`` imported by the server before it forks."""
    global _forkserver_preloaded
    context = multiprocessing.get_context("forkserver")
    with _forkserver_lock:
        if not _forkserver_preloaded:
            # Honoured only before the server starts (once per process): later pools reuse it.
            context.set_forkserver_preload([*PRELOAD, *preload])
            _forkserver_preloaded = True
    return context


class _Worker:
    def __init__(self, process: Any, connection: Connection) -> None:
        from langorch.local.logs import environment_stream

        self.process = process
        self.connection = connection
        # Lambda names an execution environment's stream after it: one stream per sandbox.
        self.log_stream = environment_stream(uuid.uuid4().hex)

    def stop(self) -> None:
        with suppress(OSError, ValueError):
            self.connection.send(None)
        self.connection.close()
        self.process.join(timeout=2)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=2)


class SandboxPool:
    """The sandboxes of one function: started on demand up to ``size``, each one busy at most once.

    Args:
        package: the handler package (``functions/<package>/handler.py``).
        functions_dir: the ``functions`` folder.
        size: the most sandboxes (concurrent invocations) of this function; more wait.
        stdout: the sandboxes' standard output routing (see :class:`OutputRouting`).
        preload: modules the fork server imports once for every sandbox.
    """

    def __init__(
        self,
        package: str,
        functions_dir: Path,
        *,
        size: int,
        stdout: OutputRouting | None = None,
        preload: list[str] | None = None,
    ) -> None:
        self.package = package
        self._functions_dir = functions_dir
        self._size = max(1, size)
        self._stdout = stdout
        self._preload = preload or []
        self._idle: list[_Worker] = []
        self._all: list[_Worker] = []
        self._starting = 0
        self._free = threading.Condition()
        self._closed = False

    def invoke(
        self, event: Any, context: Mapping[str, Any], env: Mapping[str, str], timeout: float
    ) -> Reply:
        """Run one invocation in a free sandbox (waiting for one when all are busy).

        Raises:
            SandboxError: the sandbox died or the invocation outlived ``timeout`` seconds (the
                sandbox is then discarded, as Lambda discards a timed-out one).
        """
        with self._sandbox() as worker:
            try:
                context = {**context, "log_stream_name": worker.log_stream}
                worker.connection.send((event, context, dict(env)))
                if not worker.connection.poll(timeout):
                    self._discard(worker)
                    raise SandboxError(
                        "Sandbox.Timedout", f"Task timed out after {timeout:.2f} seconds"
                    )
                answer: Reply = worker.connection.recv()
            except (EOFError, OSError) as exc:
                self._discard(worker)
                raise SandboxError(
                    "Runtime.ExitError", f"the {self.package} sandbox exited: {exc!r}"
                ) from exc
            return replace(answer, log_stream=worker.log_stream)

    def warm(self) -> None:
        """Start one sandbox ahead of the first invocation (in the caller's thread)."""
        with self._free:
            if self._all or self._starting or self._closed:
                return
            self._starting += 1
        try:
            worker = self._start()
        finally:
            with self._free:
                self._starting -= 1
        with self._free:
            self._all.append(worker)
            self._idle.append(worker)
            self._free.notify()

    @contextmanager
    def _sandbox(self) -> Iterator[_Worker]:
        worker = self._acquire()
        try:
            yield worker
        finally:
            with self._free:
                if worker in self._all and not self._closed:
                    self._idle.append(worker)
                    self._free.notify()

    def _acquire(self) -> _Worker:
        with self._free:
            while True:
                if self._closed:
                    raise SandboxError("Runtime.ExitError", "the local stack is stopping")
                if self._idle:
                    return self._idle.pop()
                if len(self._all) + self._starting < self._size:
                    self._starting += 1
                    break
                self._free.wait()
        try:
            worker = self._start()
        finally:
            with self._free:
                self._starting -= 1
        with self._free:
            self._all.append(worker)
        return worker

    def _start(self) -> _Worker:
        context = _context(self._preload)
        parent, child = context.Pipe()
        process = context.Process(
            target=serve,
            args=(child, self.package, str(self._functions_dir), self._stdout),
            name=f"langorch-sandbox-{self.package}",
            daemon=True,
        )
        process.start()
        child.close()
        return _Worker(process, parent)

    def _discard(self, worker: _Worker) -> None:
        with self._free:
            if worker in self._all:
                self._all.remove(worker)
            self._free.notify()
        worker.process.kill()
        worker.stop()

    def close(self) -> None:
        """Stop every sandbox; invocations still waiting for one fail."""
        with self._free:
            self._closed = True
            workers, self._all, self._idle = list(self._all), [], []
            self._free.notify_all()
        for worker in workers:
            worker.stop()


# --------------------------------------------------------------------------------------------
# The sandbox side
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OutputRouting:
    """Where a sandbox's standard output goes: JSON lines to a file, other lines to the terminal.

    Args:
        json_file: the file JSON lines (Powertools logs, EMF metrics) are appended to.
        echo_json: also write the JSON lines to the terminal (``langorch dev --verbose``).
    """

    json_file: str
    echo_json: bool = False


class LineRouter:
    """A text stream that sends each whole line to the terminal or to the JSON log file.

    A line that starts with ``{`` is a machine's (a log record, a metric): it goes to the file,
    and to the terminal as well when ``echo_json``. Any other line (the outbox's link notice, a
    ``print``) is for the person at the terminal.
    """

    def __init__(self, terminal: TextIO, json_file: TextIO, *, echo_json: bool = False) -> None:
        self._terminal = terminal
        self._file = json_file
        self._echo = echo_json
        self._pending = ""
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            self._pending += text
            *whole, self._pending = self._pending.split("\n")
            for line in whole:
                self._route(line)
        return len(text)

    def _route(self, line: str) -> None:
        if line.lstrip().startswith("{"):
            self._file.write(line + "\n")
            self._file.flush()
            if not self._echo:
                return
        self._terminal.write(line + "\n")
        self._terminal.flush()

    def flush(self) -> None:
        with self._lock:
            self._file.flush()
            self._terminal.flush()

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:
        return "utf-8"


def route_output(routing: OutputRouting) -> LineRouter:
    """Replace this process's ``sys.stdout`` (and log handlers writing to it) with a router."""
    previous = sys.stdout
    Path(routing.json_file).parent.mkdir(parents=True, exist_ok=True)
    json_file = open(routing.json_file, "a", encoding="utf-8")  # noqa: SIM115 - the process's
    router = LineRouter(sys.__stdout__ or previous, json_file, echo_json=routing.echo_json)
    # Powertools' handler holds the stream it was built with (at import, in the fork server).
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    for each in loggers:
        for handler in getattr(each, "handlers", []):
            if isinstance(handler, logging.StreamHandler) and handler.stream in (
                previous,
                sys.__stdout__,
            ):
                handler.setStream(router)
    sys.stdout = router  # type: ignore[assignment]
    return router


def _apply_environment(env: Mapping[str, str], applied: dict[str, str]) -> None:
    if env == applied:
        return
    os.environ.clear()
    os.environ.update(env)
    applied.clear()
    applied.update(env)


def serve(
    connection: Connection, package: str, functions_dir: str, routing: OutputRouting | None
) -> None:
    """A sandbox's life: answer invocations one at a time until told to stop (``None``)."""
    import signal

    from langorch.local.logs import captured_lines, max_memory_used_mb

    # Ctrl-C in the terminal reaches every process of the group; the stack stops its sandboxes
    # itself (``None``), so a sandbox ignores it instead of printing a traceback per worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if routing is not None:
        route_output(routing)
    root = str(Path(functions_dir).parent)
    if root not in sys.path:
        sys.path.append(root)
    applied: dict[str, str] = {}
    handler: Any = None
    while True:
        try:
            request = connection.recv()
        except (EOFError, OSError):
            return
        if request is None:
            return
        event, context_fields, env = request
        _apply_environment(env, applied)
        lines: list[tuple[int, str]] = []
        try:
            if handler is None:
                handler = _load(Path(functions_dir).name, package)
            context = _context_from(context_fields)
            with captured_lines() as lines:
                result = handler(event, context)
            reply = Reply(json.dumps(result, default=str).encode("utf-8"), None, lines)
        except Exception as exc:  # the Lambda runtime turns any exception into this shape
            reply = Reply(error_payload(exc), "Unhandled", lines)
        reply = replace(reply, max_memory_mb=max_memory_used_mb())
        sys.stdout.flush()
        connection.send(reply)


def _load(functions_package: str, package: str) -> Any:
    name = f"{functions_package}.{package}.handler"
    if name not in sys.modules:
        importlib.invalidate_caches()  # a handler written after the sandbox started
    try:
        module = importlib.import_module(name)
    except Exception as exc:
        raise SandboxError(
            "Runtime.ImportModuleError", f"Unable to import module 'handler': {exc}"
        ) from exc
    handler = getattr(module, "handler", None) or getattr(module, "lambda_handler", None)
    if not callable(handler):
        raise SandboxError(
            "Runtime.HandlerNotFound", f"functions/{package}/handler.py has no handler()"
        )
    return handler


def _context_from(fields: Mapping[str, Any]) -> Any:
    return LocalLambdaContext(**fields)


@dataclass
class LocalLambdaContext:
    """What Lambda passes as ``context`` (the attributes Powertools and handlers read)."""

    function_name: str
    invoked_function_arn: str
    aws_request_id: str
    log_group_name: str
    log_stream_name: str
    memory_limit_in_mb: int = 1024
    function_version: str = "$LATEST"
    timeout_seconds: int = 30
    _started: float = field(default_factory=time.monotonic)

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds until the function's timeout."""
        left = self.timeout_seconds - (time.monotonic() - self._started)
        return max(0, int(left * 1000))
