"""Local mode: the four Lambda functions run our real handlers, as the Lambda service would.

:class:`Dispatcher` is the local Lambda service. The state machine's Lambda tasks reach it
through the emulator's routing (:func:`langorch.local.emulator.route_lambda_invocations`); the
gateway, the scheduler tick and the bucket watcher through its :meth:`Dispatcher.transport`.
Each invocation runs ``functions/<name>/handler.py`` with a ``LambdaContext``-like object and
answers as Lambda does: the handler's JSON result, or for an exception ``{"errorType": <class
name>, "errorMessage": ...}`` with the function error ``Unhandled`` — so the state machine's
``Retry``/``Catch`` match on ``StorageError``, ``LeaseHeldError``, … exactly as in the cloud.

Where a handler runs: by default in a Lambda-like sandbox (:mod:`langorch.local._sandbox`), a
worker process serving one invocation at a time, a pool of them per function, so no two
invocations share a module global (Powertools' ``app.current_event``, the logger's Lambda
context keys). Settings reach a handler the way they do in Lambda: as the function's
environment variables (``LANGORCH_*``), the sandbox's environment for the invocation. Each
installed dispatcher is a fresh set of sandboxes: the first invocation of each builds the
handler's container (a cold start), so a cached container never outlives its stack.

``isolation="inline"`` runs handlers in this process instead, on the caller's thread, with the
environment applied around the call: for tests with an in-process emulator (``moto.mock_aws``).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from langorch.config import Settings
from langorch.local._invoke import Transport
from langorch.local._sandbox import (
    LocalLambdaContext,
    OutputRouting,
    SandboxError,
    SandboxPool,
    error_payload,
    function_environ,
)

FUNCTIONS: Mapping[str, str] = {
    "trigger": "langorch-trigger",
    "run_segment": "langorch-run-segment",
    "request_approval": "langorch-request-approval",
    "approval_callback": "langorch-approval-callback",
}
"""Handler package (``functions/<package>``) -> the function's name."""

PACKAGE_OF: Mapping[str, str] = {name: package for package, name in FUNCTIONS.items()}

_TIMEOUTS: Mapping[str, int] = {"run_segment": 900}
"""Seconds; a segment may run up to Lambda's limit, the others are quick."""
_DEFAULT_TIMEOUT = 30
DEFAULT_SANDBOXES = 16
"""Concurrent sandboxes per function (started on demand): an invocation mostly waits on the
emulator, so several overlap on two cores. 100 webhook runs with approvals at once (``make
bench-pipeline``, a round after the first): with 8, 210-228 runs/min and click -> resume p95
9-11 s; with 16, 262-267 and 7-8 s; with 32, 269-288 and 7 s but a slower first round (more
cold starts). Each is a process (~100 MB, most of it shared with the fork server), so not
Lambda's thousand."""
_PASSTHROUGH = frozenset({"LANGORCH_OPENAI_API_KEY"})
"""Secrets are never stored in a function's configuration; locally they pass through from the
developer's environment, as nothing else can provide them."""
_SECRET_FIELDS = frozenset({"openai_api_key"})

FUNCTIONS_DIR = Path(__file__).resolve().parents[3] / "functions"
"""``functions/`` of this checkout (``shared/langorch/local`` -> the repository root)."""

INVOCATION_OBSERVERS: list[Callable[[str, Any], None]] = []
"""Told ``(function name, event)`` of every invocation before it runs (the test suite collects
the task tokens the state machine hands out, to prove none leaks into a log, email or page)."""

LogSink = Callable[[str, str, list[tuple[int, str]]], None]
"""Receives ``(function name, log stream, lines)`` after each invocation: the lines it logged
and Lambda's ``REPORT`` line; the stream is its sandbox's (inline: one per invocation)."""


# --------------------------------------------------------------------------------------------
# Creating the functions
# --------------------------------------------------------------------------------------------


def function_environment(settings: Settings) -> dict[str, str]:
    """The ``LANGORCH_*`` variables that give a handler these settings (no secret values)."""
    env: dict[str, str] = {}
    for name, value in settings.model_dump(mode="json").items():
        if value is None or name in _SECRET_FIELDS:
            continue
        text = json.dumps(value) if isinstance(value, list | dict) else str(value)
        env[f"LANGORCH_{name.upper()}"] = text
    return env


# --------------------------------------------------------------------------------------------
# Invoking: the dispatcher
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Invocation:
    """What one handler call answered: the payload and, for an exception, the error kind."""

    payload: bytes
    function_error: str | None = None


class _ScopedEnviron:
    """Applies a function's environment for the length of its invocations.

    The process environment is shared, so it is set while at least one invocation runs and
    restored after the last one; the CLI and tests in the same process see their own
    environment otherwise. Every function of one local stack has the same ``LANGORCH_*``
    values, so overlapping invocations agree.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._saved: dict[str, str | None] = {}

    @contextmanager
    def applied(self, env: Mapping[str, str]) -> Iterator[None]:
        with self._lock:
            if self._depth == 0:
                hidden = {
                    k for k in os.environ if k.startswith("LANGORCH_") and k not in _PASSTHROUGH
                }
                self._saved = {k: os.environ.get(k) for k in hidden | set(env)}
                for key in hidden - set(env):
                    del os.environ[key]
                os.environ.update(env)
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0:
                    for key, value in self._saved.items():
                        if value is None:
                            os.environ.pop(key, None)
                        else:
                            os.environ[key] = value


class Dispatcher:
    """Routes the emulator's Lambda invocations to ``functions/<package>/handler.py``.

    Args:
        functions_dir: the ``functions`` package folder (default: this checkout's).
        log_sink: gets each invocation's captured log lines (local CloudWatch Logs).
        environment: the functions' environment for calls that bypass the emulator.
        isolation: ``"process"`` (Lambda-like sandboxes, the default) or ``"inline"`` (this
            process, for an in-process emulator only; see the module's docstring).
        sandboxes: the most concurrent sandboxes of each function; more invocations wait.
        output: where the sandboxes' standard output goes (default: this process's).
    """

    def __init__(
        self,
        *,
        functions_dir: Path = FUNCTIONS_DIR,
        log_sink: LogSink | None = None,
        environment: Mapping[str, str] | None = None,
        isolation: Literal["process", "inline"] = "process",
        sandboxes: int = DEFAULT_SANDBOXES,
        output: OutputRouting | None = None,
    ) -> None:
        self._functions_dir = functions_dir
        self._log_sink = log_sink
        self._isolation = isolation
        self._sandboxes = sandboxes
        self._output = output
        self._pools: dict[str, SandboxPool] = {}
        self._modules: dict[str, ModuleType] = {}
        self._load_lock = threading.Lock()
        self._environ = _ScopedEnviron()
        self.environment: dict[str, str] = dict(environment or {})
        """The environment for calls that do not come through the emulator (``call``)."""
        self._undo: Callable[[], None] | None = None

    # -- installing ---------------------------------------------------------------------------

    def install(self) -> Dispatcher:
        """Become the Lambda service of boto3's default session (the state machine
        interpreter's: see :mod:`langorch.local.emulator`); undo with :meth:`uninstall`."""
        from langorch.local.emulator import route_lambda_invocations

        if self._undo is not None:
            return self
        self._undo = route_lambda_invocations(self.transport())
        if self._isolation == "process":
            # The fork server imports the handlers once (~2-3 s): off the path to "ready".
            threading.Thread(target=self._warm, name="langorch-warm-sandboxes", daemon=True).start()
        return self

    def _warm(self) -> None:
        for package in FUNCTIONS:
            try:
                self._pool(package).warm()
            except (OSError, SandboxError, ValueError):
                return  # stopped meanwhile, or nothing to warm: the first invocation starts one

    def uninstall(self) -> None:
        """Stop answering invocations and close the sandboxes."""
        if self._undo is not None:
            self._undo()
            self._undo = None
        with self._load_lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()

    def __enter__(self) -> Dispatcher:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    # -- invoking -----------------------------------------------------------------------------

    def transport(self) -> Transport:
        """``(function name or ARN, payload) -> (answer, function error)``: one synchronous
        invocation with the function's environment and timeout, as ``lambda:Invoke`` does."""

        def invoke(function: str, payload: bytes) -> tuple[bytes, str | None]:
            name = function.rsplit(":function:", 1)[-1].split(":", 1)[0]
            package = PACKAGE_OF.get(name)
            timeout = _TIMEOUTS.get(package or "", _DEFAULT_TIMEOUT)
            arn = function if function.startswith("arn:") else ""
            answer = self.invoke(name, _event_of(payload), arn=arn, timeout=timeout)
            return answer.payload, answer.function_error

        return invoke

    def invoke(
        self,
        function_name: str,
        event: Any,
        *,
        arn: str = "",
        env: Mapping[str, str] | None = None,
        timeout: int = _DEFAULT_TIMEOUT,
        context: Any = None,
    ) -> Invocation:
        """One Lambda invocation, answered as the Lambda service answers it.

        Returns:
            The handler's result as JSON, or — when it raised — Lambda's error payload with
            ``"Unhandled"`` as the function error.
        """
        for observe in INVOCATION_OBSERVERS:
            observe(function_name, event)
        context = context or _fresh_context(function_name, arn, timeout)
        if self._isolation == "inline":
            try:
                result = self._call_inline(function_name, event, context, env)
            except Exception as exc:  # the Lambda runtime turns any exception into this shape
                return Invocation(_error_payload(exc), function_error="Unhandled")
            return Invocation(json.dumps(result, default=str).encode("utf-8"))
        started = time.monotonic()
        try:
            reply = self._pool(_package_of(function_name)).invoke(
                event,
                _context_fields(context, timeout),
                function_environ(self.environment if env is None else env),
                timeout=float(getattr(context, "timeout_seconds", timeout) or timeout),
            )
        except (_RuntimeError, SandboxError) as exc:
            return Invocation(_error_payload(exc), function_error="Unhandled")
        self._ship(
            function_name, reply.log_stream, context, reply.lines, started, reply.max_memory_mb
        )
        return Invocation(reply.payload, reply.function_error)

    def call(
        self,
        function_name: str,
        event: Any,
        context: Any = None,
        *,
        arn: str = "",
        env: Mapping[str, str] | None = None,
        timeout: int = _DEFAULT_TIMEOUT,
    ) -> Any:
        """Run the function's handler on ``event`` and return its result.

        The function's environment is the invocation's and its log lines go to the log sink.

        Args:
            function_name: one of :data:`FUNCTIONS`' names.
            event: the decoded event.
            context: the Lambda context (default: a fresh one for this invocation).
            arn: the function's ARN (for a fresh context).
            env: the function's environment variables (default: :attr:`environment`).
            timeout: the function's timeout in seconds (for a fresh context).

        Raises:
            Exception: inline, what the handler raised; in a sandbox, a ``_RuntimeError`` with
                the error type and message Lambda reports.
        """
        context = context or _fresh_context(function_name, arn, timeout)
        if self._isolation == "inline":
            return self._call_inline(function_name, event, context, env)
        answer = self.invoke(function_name, event, env=env, timeout=timeout, context=context)
        payload = json.loads(answer.payload) if answer.payload else None
        if answer.function_error:
            detail = payload if isinstance(payload, dict) else {}
            raise _RuntimeError(
                str(detail.get("errorType", "Unhandled")), str(detail.get("errorMessage", ""))
            )
        return payload

    def _call_inline(
        self, function_name: str, event: Any, context: Any, env: Mapping[str, str] | None
    ) -> Any:
        from langorch.local.logs import captured_lines, invocation_stream, max_memory_used_mb

        request_id = str(getattr(context, "aws_request_id", "") or uuid.uuid4())
        lines: list[tuple[int, str]] = []
        started = time.monotonic()
        try:
            with self._environ.applied(self.environment if env is None else env):
                handler = self._handler(function_name)
                with captured_lines() as lines:
                    return handler(event, context)
        finally:
            stream = invocation_stream(request_id)
            self._ship(function_name, stream, context, lines, started, max_memory_used_mb())

    def _ship(
        self,
        function_name: str,
        stream: str,
        context: Any,
        lines: list[tuple[int, str]],
        started: float,
        max_memory_mb: int,
    ) -> None:
        """Hand the invocation's lines and its ``REPORT`` line to the log sink."""
        if self._log_sink is None:
            return
        from langorch.local.logs import report_line

        report = report_line(
            str(getattr(context, "aws_request_id", "") or "-"),
            (time.monotonic() - started) * 1000,
            memory_size_mb=int(getattr(context, "memory_limit_in_mb", 1024)),
            max_memory_used_mb=max_memory_mb,
        )
        self._log_sink(function_name, stream, [*lines, report])

    def _pool(self, package: str) -> SandboxPool:
        with self._load_lock:
            pool = self._pools.get(package)
            if pool is None:
                pool = SandboxPool(
                    package,
                    self._functions_dir,
                    size=self._sandboxes,
                    stdout=self._output,
                    preload=self._preload(),
                )
                self._pools[package] = pool
            return pool

    def _preload(self) -> list[str]:
        root = str(self._functions_dir.parent)
        if root not in sys.path:
            # functions/ is not an installed package: it ships as Lambda code assets.
            sys.path.append(root)
        return [
            f"{self._functions_dir.name}.{package}.handler"
            for package in FUNCTIONS
            if (self._functions_dir / package / "handler.py").is_file()
        ]

    def _handler(self, function_name: str) -> Callable[[Any, Any], Any]:
        package = _package_of(function_name)
        module = self._module(package)
        handler = getattr(module, "handler", None) or getattr(module, "lambda_handler", None)
        if not callable(handler):
            raise _RuntimeError(
                "Runtime.HandlerNotFound", f"functions/{package}/handler.py has no handler()"
            )
        return handler  # type: ignore[no-any-return]

    def _module(self, package: str) -> ModuleType:
        with self._load_lock:
            if package in self._modules:
                return self._modules[package]
            name = f"{self._functions_dir.name}.{package}.handler"
            if not (self._functions_dir / package / "handler.py").is_file():
                raise _RuntimeError(
                    "Runtime.ImportModuleError",
                    f"Unable to import module 'handler': functions/{package}/handler.py "
                    "does not exist yet",
                )
            root = str(self._functions_dir.parent)
            if root not in sys.path:
                # functions/ is not an installed package: it ships as Lambda code assets.
                sys.path.append(root)
            try:
                loaded = sys.modules.get(name)
                # A new dispatcher is a new set of sandboxes: re-run the module (a cold start).
                module = (
                    importlib.reload(loaded)
                    if loaded is not None
                    else importlib.import_module(name)
                )
            except Exception as exc:
                raise _RuntimeError(
                    "Runtime.ImportModuleError", f"Unable to import module 'handler': {exc}"
                ) from exc
            self._modules[package] = module
            return module


class _RuntimeError(Exception):
    """A failure of the (emulated) Lambda runtime itself, reported under Lambda's error type."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


def _package_of(function_name: str) -> str:
    package = PACKAGE_OF.get(function_name)
    if package is None:
        raise _RuntimeError(
            "Runtime.HandlerNotFound", f"{function_name} is not a langorch function"
        )
    return package


def _fresh_context(function_name: str, arn: str, timeout: int) -> LocalLambdaContext:
    from langorch.local.logs import invocation_stream, log_group

    request_id = str(uuid.uuid4())
    return LocalLambdaContext(
        function_name=function_name,
        invoked_function_arn=arn,
        aws_request_id=request_id,
        log_group_name=log_group("/aws/lambda/", function_name),
        log_stream_name=invocation_stream(request_id),
        timeout_seconds=timeout,
    )


def _context_fields(context: Any, timeout: int) -> dict[str, Any]:
    """What a sandbox needs to rebuild ``context`` (a context object does not cross processes)."""
    return {
        "function_name": str(context.function_name),
        "invoked_function_arn": str(getattr(context, "invoked_function_arn", "")),
        "aws_request_id": str(context.aws_request_id),
        "log_group_name": str(getattr(context, "log_group_name", "")),
        "log_stream_name": str(getattr(context, "log_stream_name", "")),
        "memory_limit_in_mb": int(getattr(context, "memory_limit_in_mb", 1024)),
        "function_version": str(getattr(context, "function_version", "$LATEST")),
        "timeout_seconds": int(getattr(context, "timeout_seconds", timeout) or timeout),
    }


def _event_of(body: Any) -> Any:
    if isinstance(body, bytes):
        body = body.decode("utf-8")
    if not body:
        return {}
    if isinstance(body, str):
        try:
            return json.loads(body)
        except ValueError:
            return body
    return body


def _error_payload(exc: Exception) -> bytes:
    return error_payload(exc)
