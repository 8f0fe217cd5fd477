"""``langorch console``'s HTTP server: the standard library's threading server on 127.0.0.1.

One request, one thread; a page is read from the stores and rendered on that thread. The
standard library's server is enough for one operator's browser (no new dependency); what
matters here is what :mod:`.http` checks.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from langorch.console.app import ConsoleApp, headers_for
from langorch.console.http import (
    MAX_FORM_BYTES,
    SESSION_COOKIE,
    TOKEN_PARAM,
    Request,
    Response,
    Sessions,
    parse_form,
    session_of,
)
from langorch.console.operator import Operator, operator_of

logger = logging.getLogger(__name__)

DEFAULT_PORT = 8765
DEFAULT_HOST = "127.0.0.1"
_LOOPBACK_OR_ANY = frozenset({"127.0.0.1", "localhost", "0.0.0.0"})  # noqa: S104 - compared


@dataclass
class RunningConsole:
    """A console serving in a background thread.

    Attributes:
        url: its address (every page answers "open the start-up link" without a session).
        stop: stops it.
        startup_url: ``url`` with the start-up token, to print once for its operator (never to
            log): opening it signs a browser in.
        operator: who it acts for.
    """

    url: str
    stop: Callable[[], None]
    startup_url: str = field(repr=False, default="")
    operator: Operator | None = None


def serve_console(
    container: Any,
    *,
    target: str,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    operator: Operator | None = None,
) -> RunningConsole:
    """Start the console in a background thread.

    Args:
        container: the stack's composition root.
        target: how the stack is named on the pages.
        host: the address to bind (127.0.0.1 unless the operator says otherwise).
        port: the port (0: any free one).
        operator: who it acts for (default: the OS user locally, the IAM principal against a
            stack; see :func:`~langorch.console.operator.operator_of`).

    Raises:
        OSError: the port is taken.
        OperatorError: the IAM principal cannot be read.
    """
    operator = operator or operator_of(container)
    server = ThreadingHTTPServer((host, port), _Handler)
    server.daemon_threads = True
    bound = server.server_address[1]
    # The names the console answers to (the Host header is checked: DNS rebinding).
    names = {host, "127.0.0.1", "localhost"} if host in _LOOPBACK_OR_ANY else {host}
    origins = frozenset(f"http://{name}:{bound}" for name in names)
    sessions = Sessions()
    app = ConsoleApp(
        container, target, origins, operator, sessions, cookie=f"{SESSION_COOKIE}_{bound}"
    )
    server.console_app = app  # type: ignore[attr-defined]
    server.console_hosts = frozenset(f"{name}:{bound}" for name in names)  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, name="langorch-console", daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    url = f"http://{host if host != '0.0.0.0' else '127.0.0.1'}:{bound}"  # noqa: S104
    return RunningConsole(url, stop, f"{url}/?{TOKEN_PARAM}={sessions.startup_token}", operator)


class _Handler(BaseHTTPRequestHandler):
    server_version = "langorch-console"
    sys_version = ""
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._answer()

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def do_POST(self) -> None:
        self._answer()

    def _answer(self, head: bool = False) -> None:
        began = time.monotonic()
        headers = {k.lower(): v for k, v in self.headers.items()}
        if headers.get("host", "") not in self.server.console_hosts:  # type: ignore[attr-defined]
            # Another name for 127.0.0.1 (DNS rebinding) gets nothing.
            self._send(Response(421, b"wrong host", "text/plain"), head)
            return
        length = int(headers.get("content-length") or 0)
        if length > MAX_FORM_BYTES:
            self._send(Response(413, b"too large", "text/plain"), head)
            return
        body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        app: ConsoleApp = self.server.console_app  # type: ignore[attr-defined]
        request = Request(
            method="GET" if head else self.command,
            path=parts.path.rstrip("/") or "/",
            query=parse_qs(parts.query, keep_blank_values=True),
            headers=headers,
            form=parse_form(body) if self.command == "POST" else {},
            session=session_of(headers, app.cookie),
        )
        try:
            response = app.handle(request)
        except Exception:
            logger.exception("console: %s %s failed", self.command, parts.path)
            response = Response(
                500, b"the console failed on this request; see its log", "text/plain"
            )
        self._send(response, head)
        logger.info(
            "%s %s %s %.0f ms",
            self.command,
            parts.path,
            response.status,
            (time.monotonic() - began) * 1000,
        )

    def _send(self, response: Response, head: bool) -> None:
        self.send_response(response.status)
        for name, value in headers_for(response).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if not head:
            self.wfile.write(response.body)

    def log_message(self, format: str, *args: Any) -> None:
        # The access line is logged above without the query string: the start-up URL's carries
        # the token, and the gateway's habit holds anyway (no query strings in logs).
        return
