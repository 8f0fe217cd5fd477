"""DynamoDB in a process of its own, beside the local emulator.

Under 100 concurrent runs the emulator's process was the local stack's bottleneck: one core at
100 % while the other idled (the handlers already run in sandbox processes). Python runs one
thread at a time per process, and moto's DynamoDB — about 60 % of the emulator's requests, a
run reads and writes its record, timeline, checkpoints and approvals dozens of times — shared
that one interpreter with Step Functions, Lambda, S3, Logs and the gateway. DynamoDB in moto
needs nothing from the other services (no stream, no Step Functions integration reads it), so
it is served here, by a child process with its own interpreter, on its own port:

- ``start_dynamodb_process`` spawns it (``python -m langorch.local.dynamodb_process``); it binds
  a free port, replays the DynamoDB writes of the shared journal (:mod:`langorch.local.journal`)
  and prints ``ready <port>``. It journals its own writes to the same file (one ``write`` per
  line on an ``O_APPEND`` descriptor: lines from two processes never interleave).
- Our clients reach it through ``Settings.dynamodb_endpoint_url`` (in ``stack.json`` and every
  function's environment); a request that still reaches the emulator's port (``aws
  --endpoint-url``, ``langorch --endpoint-url``) is forwarded here by :class:`DynamoDBForward`,
  so the emulator still answers for every service.
- It stops with its stack, and on its own within a second when the process that started it
  dies (``kill -9`` of ``langorch dev``): it watches its parent, since Linux's parent-death
  signal follows the *thread* that spawned a child, not the process. When it dies under a
  durable stack, the stack starts it again on the same port, from the journal.
"""

from __future__ import annotations

import argparse
import http.client
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from langorch.domain.errors import LangorchError

READY_TIMEOUT = 120.0
"""Seconds to wait for the process to replay its journal and answer (a large home replays for
tens of seconds)."""

PARENT_CHECK_SECONDS = 0.5

MAX_RESTARTS = 5
RESTART_WINDOW_SECONDS = 60
"""A process that dies more than this often in this window is not started again."""

_log = logging.getLogger(__name__)


class DynamoDBProcessError(LangorchError):
    """The local DynamoDB process did not start."""


class DynamoDBProcess:
    """A running ``python -m langorch.local.dynamodb_process``, started again if it dies.

    A durable stack's DynamoDB lives in its journal, so when the process dies under the stack
    (killed, out of memory) it is started again on the same port and replays the journal:
    clients keep their endpoint and see every write that was acknowledged. A stack kept in
    memory only has nothing to replay and is not restarted (its calls then fail, and say so).

    Args:
        state_dir: the stack's state folder (its journal is shared), or None: memory only.
    """

    def __init__(self, state_dir: Path | None) -> None:
        self._state_dir = state_dir
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self.restarts = 0
        self.endpoint_url: str | None = None
        self._process = self._spawn(0)

    @property
    def pid(self) -> int:
        """The process id of the current DynamoDB process."""
        return self._process.pid

    def _spawn(self, port: int) -> subprocess.Popen[str]:
        command = [sys.executable, "-m", __name__, "--parent", str(os.getpid())]
        command += ["--port", str(port)]
        if self._state_dir is not None:
            command += ["--state-dir", str(self._state_dir)]
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
        )

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> str:
        """Wait until it answers; returns its endpoint URL.

        Raises:
            DynamoDBProcessError: it exited or said nothing within ``timeout`` seconds.
        """
        if self.endpoint_url is not None:
            return self.endpoint_url
        port = self._ready_port(self._process, timeout)
        self.endpoint_url = f"http://127.0.0.1:{port}"
        if self._state_dir is not None:
            threading.Thread(
                target=self._watch, args=(port,), name="langorch-dynamodb-watch", daemon=True
            ).start()
        return self.endpoint_url

    def _ready_port(self, process: subprocess.Popen[str], timeout: float) -> int:
        found: list[str] = []
        stream = process.stdout

        def read() -> None:
            found.append(stream.readline().strip() if stream is not None else "")

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout)
        line = found[0] if found else ""
        if not line.startswith("ready "):
            if process is self._process and self.endpoint_url is None:
                self.stop()
            raise DynamoDBProcessError(
                f"the local DynamoDB process did not start within {timeout:.0f} s "
                f"(exit code {process.poll()}); its errors are above"
            )
        return int(line.split()[1])

    def _watch(self, port: int) -> None:
        started: list[float] = []
        while True:
            code = self._process.wait()
            if self._stopping.is_set():
                return
            now = time.monotonic()
            started = [t for t in started if now - t < RESTART_WINDOW_SECONDS] + [now]
            if len(started) > MAX_RESTARTS:
                _log.error(
                    "the local DynamoDB process keeps exiting (code %s, %d times in %d s); "
                    "not starting it again: stop langorch dev and look at its errors above",
                    code,
                    len(started),
                    RESTART_WINDOW_SECONDS,
                )
                return
            _log.warning(
                "the local DynamoDB process exited (code %s); starting it again on port %d "
                "from its journal",
                code,
                port,
            )
            with self._lock:
                if self._stopping.is_set():
                    return
                self._close_stdout()
                self._process = self._spawn(port)
            try:
                self._ready_port(self._process, READY_TIMEOUT)
            except DynamoDBProcessError:
                _log.exception("the local DynamoDB process did not start again")
                return
            self.restarts += 1

    def _close_stdout(self) -> None:
        if self._process.stdout is not None:
            self._process.stdout.close()

    def stop(self) -> None:
        """Stop it (its journal is flushed on the way out); it is not started again."""
        self._stopping.set()
        with self._lock:
            process = self._process
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._close_stdout()


def start_dynamodb_process(state_dir: Path | None) -> DynamoDBProcess:
    """Spawn the process (it starts while the caller goes on; see ``wait_ready``)."""
    return DynamoDBProcess(state_dir)


# --------------------------------------------------------------------------------------------
# The emulator's side: requests for DynamoDB that reach its port
# --------------------------------------------------------------------------------------------


class DynamoDBForward:
    """WSGI middleware: DynamoDB requests go to the DynamoDB process, the rest to ``app``.

    Forwarded as received (method, path, headers, body): the signature still verifies, and the
    answer comes back as the process gave it. One keep-alive connection per emulator thread.
    """

    def __init__(self, app: Callable[..., Iterable[bytes]], endpoint: Callable[[], str | None]):
        self._app = app
        self._endpoint = endpoint
        self._local = threading.local()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        from langorch.local.journal import service_of

        endpoint = self._endpoint()
        if endpoint is None or service_of(environ) != "dynamodb":
            return self._app(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        headers = {
            key[5:].replace("_", "-").title(): str(value)
            for key, value in environ.items()
            if key.startswith("HTTP_") and key not in ("HTTP_CONNECTION", "HTTP_HOST")
        }
        if environ.get("CONTENT_TYPE"):
            headers["Content-Type"] = environ["CONTENT_TYPE"]
        headers["Host"] = str(environ.get("HTTP_HOST") or "")
        path = environ.get("PATH_INFO", "/") + (
            "?" + environ["QUERY_STRING"] if environ.get("QUERY_STRING") else ""
        )
        response = self._send(endpoint, environ["REQUEST_METHOD"], path, body, headers)
        data = response.read()
        kept = [
            (name, value)
            for name, value in response.getheaders()
            if name.lower() not in ("connection", "transfer-encoding", "keep-alive")
        ]
        start_response(f"{response.status} {response.reason}", kept)
        return [data]

    def _send(
        self, endpoint: str, method: str, path: str, body: bytes, headers: dict[str, str]
    ) -> http.client.HTTPResponse:
        for attempt in (1, 2):
            connection = getattr(self._local, "connection", None)
            if connection is None:
                port = int(endpoint.rsplit(":", 1)[1])
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
                self._local.connection = connection
            try:
                connection.request(method, path, body=body, headers=headers)
                return connection.getresponse()
            except (ConnectionError, http.client.HTTPException):
                connection.close()
                self._local.connection = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")


# --------------------------------------------------------------------------------------------
# The process itself
# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Serve moto's DynamoDB on a free port until SIGTERM/SIGINT or the parent's death."""
    parser = argparse.ArgumentParser(prog="python -m langorch.local.dynamodb_process")
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--port", type=int, default=0, help="0: a free one")
    parser.add_argument("--state-dir", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="dynamodb: %(message)s")

    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    from langorch.local.dynamodb_lean import (
        LeanDynamoDB,
        cache_action_names,
        lean_request_handler,
        read_update_expressions_once,
    )
    from langorch.local.emulator import (
        keep_alive_handler,
        local_dynamodb,
        route_outside_the_lock,
        wide_listen_backlog,
    )
    from langorch.local.journal import JournaledApp, open_journal, read_entries, replay, service_of

    local_dynamodb()
    cache_action_names()
    read_update_expressions_once()
    wide_listen_backlog()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    moto_app = LeanDynamoDB(route_outside_the_lock(DomainDispatcherApplication(create_backend_app)))
    app = JournaledApp(moto_app)
    if args.state_dir is not None:
        path = args.state_dir / "emulator.journal"
        entries = (e for e in read_entries(path) if service_of(e["environ"]) == "dynamodb")
        replay(moto_app, entries)
        app.journal = open_journal(path)
    handler = lean_request_handler(keep_alive_handler())
    stopping = threading.Event()

    def orphan_guard(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        # Once the stack's process is gone (kill -9), its sandboxes may still call: a write
        # acknowledged now could land in the journal after a new stack replayed it, and be
        # lost (or an idempotency key missed). Refuse every call from that moment.
        if os.getppid() != args.parent:
            stopping.set()
            start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
            return [b"the local stack that started this DynamoDB process has stopped"]
        return app(environ, start_response)

    server = make_server(
        "127.0.0.1", args.port, orphan_guard, threaded=True, request_handler=handler
    )

    def stop(*_: Any) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    # Ctrl-C reaches the whole process group; the stack stops this process after its own
    # shutdown, which may still read and write.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=server.serve_forever, name="dynamodb", daemon=True).start()
    print(f"ready {server.server_port}", flush=True)
    while not stopping.wait(PARENT_CHECK_SECONDS):
        if os.getppid() != args.parent:
            break  # the stack's process died (kill -9): nothing will stop this one
    server.shutdown()
    if app.journal is not None:
        app.journal.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
