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
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from langorch.console.app import ConsoleApp, headers_for
from langorch.console.http import (
    MAX_FORM_BYTES,
    Request,
    Response,
    Sessions,
    parse_form,
    session_cookie,
    session_of,
)

logger = logging.getLogger(__name__)

DEFAULT_PORT = 8765
DEFAULT_HOST = "127.0.0.1"
_LOOPBACK_OR_ANY = frozenset({"127.0.0.1", "localhost", "0.0.0.0"})  # noqa: S104 - compared


@dataclass
class RunningConsole:
    """A console serving in a background thread."""

    url: str
    stop: Callable[[], None]


def serve_console(
    container: Any, *, target: str, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT
) -> RunningConsole:
    """Start the console in a background thread.

    Args:
        container: the stack's composition root.
        target: how the stack is named on the pages.
        host: the address to bind (127.0.0.1 unless the operator says otherwise).
        port: the port (0: any free one).

    Raises:
        OSError: the port is taken.
    """
    server = ThreadingHTTPServer((host, port), _Handler)
    server.daemon_threads = True
    bound = server.server_address[1]
    # The names the console answers to (the Host header is checked: DNS rebinding).
    names = {host, "127.0.0.1", "localhost"} if host in _LOOPBACK_OR_ANY else {host}
    origins = frozenset(f"http://{name}:{bound}" for name in names)
    app = ConsoleApp(container, target, origins, Sessions())
    server.console_app = app  # type: ignore[attr-defined]
    server.console_hosts = frozenset(f"{name}:{bound}" for name in names)  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, name="langorch-console", daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    return RunningConsole(f"http://{host if host != '0.0.0.0' else '127.0.0.1'}:{bound}", stop)  # noqa: S104


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
            self._send(Response(421, b"wrong host", "text/plain"), head, None)
            return
        length = int(headers.get("content-length") or 0)
        if length > MAX_FORM_BYTES:
            self._send(Response(413, b"too large", "text/plain"), head, None)
            return
        body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        session = session_of(headers)
        new_session = "" if session else Sessions.new_id()
        request = Request(
            method="GET" if head else self.command,
            path=parts.path.rstrip("/") or "/",
            query=parse_qs(parts.query, keep_blank_values=True),
            headers=headers,
            form=parse_form(body) if self.command == "POST" else {},
            session=session or new_session,
        )
        if new_session and self.command == "POST":
            # A POST without a session cookie is refused by the CSRF check, not trusted.
            request = Request(request.method, request.path, request.query, headers, request.form)
        app: ConsoleApp = self.server.console_app  # type: ignore[attr-defined]
        try:
            response = app.handle(request)
        except Exception:
            logger.exception("console: %s %s failed", self.command, parts.path)
            response = Response(
                500, b"the console failed on this request; see its log", "text/plain"
            )
        self._send(response, head, new_session or None)
        logger.info(
            "%s %s %s %.0f ms",
            self.command,
            parts.path,
            response.status,
            (time.monotonic() - began) * 1000,
        )

    def _send(self, response: Response, head: bool, new_session: str | None) -> None:
        self.send_response(response.status)
        for name, value in headers_for(response).items():
            self.send_header(name, value)
        if new_session:
            self.send_header("Set-Cookie", session_cookie(new_session))
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if not head:
            self.wfile.write(response.body)

    def log_message(self, format: str, *args: Any) -> None:
        # The access line is logged above without the query string (filters only, but keep
        # the habit of the gateway: no query strings in logs).
        return
