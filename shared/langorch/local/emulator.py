"""The local stack's AWS emulator: moto, as published and pinned, playing Step Functions.

Our stores are our own (SQLite, :mod:`langorch.composition.embedded`); the one AWS behaviour the
local stack runs on moto is the run state machine: moto's Step Functions interpreter executes the
package's ASL file (``statemachine.asl.json``), parks approvals on task tokens, times them out and
retries and catches as the service does. It runs in the ``langorch dev`` process, moto's own WSGI
app served as moto's ``ThreadedMotoServer`` serves it, so the CLI, the console and the sandboxes
reach it over HTTP like AWS. Its port accepts connections from the first instant; moto and its
interpreter (seconds of CPU to import) warm up behind it, and Step Functions calls wait at a gate
until the run state machine exists (:class:`Emulator`): ``langorch dev`` is ready before that.

Without Docker, moto cannot run Lambda code, and the interpreter's Lambda tasks must reach our
handlers, and moto's ``StopExecution`` leaves a task-token wait pending where Step Functions
ends the execution. Those are the only places the local stack steps into a dependency's
behaviour, and this table is the only list of them; each row has a canary test that fails loudly
when the dependency changes under it (``tests/integration/test_emulator_canary.py``).

=====================================  ===========================================================
what                                   why, and how
=====================================  ===========================================================
The interpreter's ``lambda:Invoke``    moto's interpreter invokes a Lambda task with a client
calls (``before-send.lambda.Invoke``   from boto3's default session; without Docker moto would
on boto3's default session)            only echo the payload. A handler on botocore's documented
                                       ``before-send`` event (registered first, so it answers
                                       before moto's own stubber) hands the request to the
                                       dispatcher and returns Lambda's answer: the handler's JSON,
                                       or its error payload with ``X-Amz-Function-Error``. Nothing
                                       of moto is replaced. Canary: an execution of a one-task
                                       machine reaches the dispatcher, in server mode and under
                                       ``mock_aws``; an invocation that is not the
                                       interpreter's (another service, another operation) is
                                       left alone.
``Execution.stop`` of moto's Step      moto marks a stopped execution's program stopped but
Functions backend                      leaves a pending ``waitForTaskToken`` wait alone: the
(:func:`stop_ends_task_waits`)         execution reads ``RUNNING`` until the task's timeout (up to
                                       a year) and takes ``SendTaskSuccess`` for a token nothing
                                       waits on — an approver was told "You approved" while the
                                       decision went nowhere (issue 35). Step Functions ends the
                                       execution ``ABORTED`` at once and refuses its tokens; after
                                       moto's own stop, each pending wait of the execution is told
                                       its consumer left and woken, so moto ends it ``ABORTED`` and
                                       refuses the token. Canary: a stopped execution waiting on
                                       a token ends ``ABORTED`` and ``SendTaskSuccess`` to its
                                       token is refused; the names it reaches are checked when it
                                       is installed (:class:`EmulatorError` naming what moved).
=====================================  ===========================================================
"""

from __future__ import annotations

import io
import json
import logging
import re
import socket
import threading
import urllib.request
from collections.abc import Callable, Iterator
from importlib import import_module
from typing import Any
from urllib.parse import unquote, urlsplit

from langorch.domain.errors import LangorchError
from langorch.local._invoke import Transport

logger = logging.getLogger(__name__)

EXECUTION_CONFIG: dict[str, Any] = {
    "stepfunctions": {"execute_state_machine": True},
    "lambda": {"use_docker": False},
}
"""moto's documented config that makes it run state machines (``mock_aws(config=...)``
in-process, ``POST /moto-api/config`` to a server)."""

_INVOKE_PATH = re.compile(r"^/2015-03-31/functions/(?P<name>[^/]+)/invocations$")
_SYNCHRONOUS = {b"RequestResponse", "RequestResponse", None}


class PortBusyError(LangorchError):
    """A port the local stack needs is taken by another process."""


class EmulatorError(LangorchError):
    """The emulator does not behave as the local stack needs (see the table in this module)."""


class _Body(io.BytesIO):
    """A response body botocore can both read and stream."""

    def stream(self, **_: Any) -> Iterator[bytes]:
        chunk = self.read()
        while chunk:
            yield chunk
            chunk = self.read()


def route_lambda_invocations(transport: Transport) -> Callable[[], None]:
    """Answer every synchronous ``lambda:Invoke`` made with boto3's default session through
    ``transport`` (the row of this module's table).

    Registered on the default session as it is when this is called: under ``mock_aws``, call it
    inside the mock (moto gives the mock a default session of its own).

    Returns:
        A function that removes the handler.
    """
    import boto3
    from botocore.awsrequest import AWSResponse, HTTPHeaders

    session = boto3.DEFAULT_SESSION
    if session is None:
        boto3.setup_default_session()
        session = boto3.DEFAULT_SESSION
    if session is None:  # pragma: no cover - setup_default_session always sets one
        raise EmulatorError("boto3 has no default session to route Lambda invocations on")

    def answer(request: Any, **_: Any) -> Any:
        found = _INVOKE_PATH.match(urlsplit(request.url).path)
        if found is None or request.headers.get("X-Amz-Invocation-Type") not in _SYNCHRONOUS:
            return None
        body = request.body.read() if hasattr(request.body, "read") else request.body
        payload, error = transport(unquote(found.group("name")), bytes(body or b""))
        headers = [("X-Amz-Executed-Version", "$LATEST"), ("Content-Length", str(len(payload)))]
        if error:
            headers.append(("X-Amz-Function-Error", error))
        return AWSResponse(request.url, 200, HTTPHeaders.from_pairs(headers), _Body(payload))

    events = session.events
    events.register_first("before-send.lambda.Invoke", answer, unique_id="langorch-lambda")
    return lambda: events.unregister("before-send.lambda.Invoke", unique_id="langorch-lambda")


def stop_ends_task_waits() -> Callable[[], None]:
    """Let ``StopExecution`` end an execution that waits on a task token, as Step Functions does
    (the second row of this module's table).

    Returns:
        A function that undoes it.

    Raises:
        EmulatorError: moto no longer has what this reaches (its version moved under the lock).
    """
    try:
        from moto.stepfunctions.parser.asl.eval.callback.callback import (
            CallbackConsumerLeft,
            CallbackOutcomeSuccess,
        )
        from moto.stepfunctions.parser.backend.execution import Execution
    except ImportError as exc:
        raise EmulatorError(
            f"moto's Step Functions interpreter moved ({exc}): update stop_ends_task_waits in "
            "langorch/local/emulator.py and its table for this moto version"
        ) from exc
    original = Execution.stop

    def stop(self: Any, stop_date: Any, error: str | None, cause: str | None) -> None:
        original(self, stop_date, error, cause)
        worker = getattr(self, "exec_worker", None)
        if worker is None:
            return
        try:
            waits = list(worker.env.callback_pool_manager._pool.items())
        except AttributeError as exc:  # the canary test fails on this too
            raise EmulatorError(
                f"moto's execution worker changed ({exc}): update stop_ends_task_waits"
            ) from exc
        for token, endpoint in waits:
            endpoint.report(CallbackConsumerLeft())
            # Wakes the wait only: the stopped program takes no further state (a failure
            # outcome would be caught, or turn the execution FAILED instead of ABORTED).
            endpoint.notify(CallbackOutcomeSuccess(token, "{}"))

    Execution.stop = stop  # type: ignore[method-assign]

    def undo() -> None:
        Execution.stop = original  # type: ignore[method-assign]

    return undo


def ensure_port_free(port: int, *, what: str, option: str) -> None:
    """Fail at once, naming the option to change, when ``port`` is taken.

    Raises:
        PortBusyError: something listens on (or holds) 127.0.0.1:``port``.
    """
    with socket.socket() as sock:
        # As the servers bind: a port left in TIME_WAIT by a stopped stack is free to reuse.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            raise PortBusyError(
                f"cannot start {what} on 127.0.0.1:{port}: {exc.strerror or exc} (another "
                f"`langorch dev`?); stop what uses it or pick another port with {option} PORT"
            ) from exc


GATE_WAIT_SECONDS = 20.0
"""How long a Step Functions call waits at the gate before it is answered 503 (retried by the
SDKs): less than the clients' 30 s read timeout, so a call never times out while it waits."""

MACHINE_SETUP = frozenset(
    {"CreateStateMachine", "UpdateStateMachine", "ListStateMachines", "DescribeStateMachine"}
)
"""The Step Functions operations that pass the gate: what creates the run state machine."""


class ExecutionsGate:
    """WSGI middleware in front of moto's app: a Step Functions call waits (never fails) until
    the run state machine exists and the gate is opened; every other call passes.

    Args:
        app: moto's WSGI app.
        wait_seconds: how long one call waits before it is answered 503, which the SDKs retry
            (see :data:`GATE_WAIT_SECONDS`).
    """

    def __init__(self, app: Callable[..., Any], wait_seconds: float = GATE_WAIT_SECONDS) -> None:
        self._app = app
        self._wait_seconds = wait_seconds
        self._opened = threading.Event()
        self._failure: str | None = None

    def open(self, failure: str | None = None) -> None:
        """Let the waiting calls through (or answer them ``failure``: the warm-up failed)."""
        self._failure = failure
        self._opened.set()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        service, _, operation = environ.get("HTTP_X_AMZ_TARGET", "").partition(".")
        if service == "AWSStepFunctions" and operation not in MACHINE_SETUP:
            opened = self._opened.wait(self._wait_seconds)
            if not opened or self._failure:
                reason = self._failure or "the run state machine is warming up: try again"
                body = json.dumps({"__type": "ServiceUnavailable", "message": reason}).encode()
                headers = [
                    ("Content-Type", "application/x-amz-json-1.0"),
                    ("Content-Length", str(len(body))),
                ]
                start_response("503 Service Unavailable", headers)
                return [body]
        return self._app(environ, start_response)


class Emulator:
    """moto's server on a port that accepts connections from the start, warmed up later.

    Importing moto's server and its Step Functions interpreter costs seconds of CPU (most of it
    moto's EC2 and Batch models, which the interpreter's task states import); ``langorch dev`` is
    ready without waiting for them. The port is bound and listening at once (connections
    queue); :meth:`warm` imports moto, serves moto's own WSGI app on that socket, then imports
    the interpreter and installs the stop fix (this module's table). Step Functions calls wait
    at a gate until :meth:`open_executions` — after the run state machine exists — so a run
    started the moment the stack is ready waits for it and does not fail.

    Raises:
        PortBusyError: something already listens on ``port``.
    """

    def __init__(self, port: int) -> None:
        self.port = port
        self.endpoint = f"http://127.0.0.1:{port}"
        self._socket = _listen(port)
        self._gate: ExecutionsGate | None = None
        self._server: Any = None
        self._serving: threading.Thread | None = None
        self._undos: list[Callable[[], None]] = []

    def warm(self) -> None:
        """Serve moto on the port and import its interpreter (seconds of CPU; run it in a
        thread of its own). Step Functions calls still wait at the gate afterwards.

        Raises:
            EmulatorError: moto could not be served.
        """
        try:
            self._serve()
        except OSError as exc:
            raise EmulatorError(f"the AWS emulator did not start: {exc}") from exc
        try:
            import_module("moto.stepfunctions.parser.models")  # what StartExecution imports
            self._undos.append(stop_ends_task_waits())
        except EmulatorError:
            logger.exception("stopped executions will not end their approval waits")

    def _serve(self) -> None:
        # Served as moto's ThreadedMotoServer serves it (the same app, handler and werkzeug
        # server), on the socket bound at start and behind the gate; nothing of moto replaced.
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        # One access-log line per AWS call drowns what the developer wants to see.
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self._gate = ExecutionsGate(DomainDispatcherApplication(create_backend_app))
        server = make_server(
            "127.0.0.1",
            self.port,
            self._gate,
            threaded=True,
            request_handler=MotoRequestHandler,
            fd=self._socket.fileno(),
        )
        self._server = server
        self._serving = threading.Thread(
            target=server.serve_forever, name="langorch-emulator", daemon=True
        )
        self._serving.start()
        _post(f"{self.endpoint}/moto-api/reset", b"")
        _post(f"{self.endpoint}/moto-api/config", json.dumps(EXECUTION_CONFIG).encode("utf-8"))

    def open_executions(self, failure: str | None = None) -> None:
        """Let Step Functions calls through the gate (``failure``: answer them that instead)."""
        if self._gate is not None:
            self._gate.open(failure)

    def stop(self) -> None:
        """Stop serving and clear what moto held (its backends are this process's memory, and
        a later emulator in this process must not see this one's executions)."""
        if self._server is not None:
            self.open_executions("the AWS emulator is stopping")
            try:
                _post(f"{self.endpoint}/moto-api/reset", b"")
            except OSError:
                logger.warning("could not reset the emulator on port %d", self.port)
            self._server.shutdown()
            self._server.server_close()
        if self._serving is not None:
            self._serving.join(timeout=5)
        self._socket.close()
        while self._undos:
            self._undos.pop()()


def _listen(port: int) -> socket.socket:
    """A socket listening on 127.0.0.1:``port`` (connections queue until it is served).

    Raises:
        PortBusyError: the port is taken.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # As a server binds: a port left in TIME_WAIT by a stopped stack is free to reuse.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen(1024)
    except OSError as exc:
        sock.close()
        raise PortBusyError(
            f"cannot start the AWS emulator on 127.0.0.1:{port}: {exc.strerror or exc} "
            "(another `langorch dev`?); stop what uses it or pick another port with "
            "--emulator-port PORT"
        ) from exc
    return sock


def start_emulator(port: int) -> Emulator:
    """Bind moto's port, 127.0.0.1:``port``, for an :class:`Emulator` executing state machines.

    Returns at once, the port accepting connections (they wait); :meth:`Emulator.warm` serves
    them, and :meth:`Emulator.open_executions` lets Step Functions calls through once the state
    machines they need exist.

    Raises:
        PortBusyError: something already listens on ``port``.
    """
    return Emulator(port)


def _post(url: str, body: bytes) -> None:
    request = urllib.request.Request(  # noqa: S310 - the local emulator's own endpoint
        url, data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        response.read()
