"""Plain HTTP on this machine: requests to a server (the local stack's gateway, a loopback test
server) as a browser or a webhook sender makes them, one connection a request, nothing retried;
and the small JSON servers tests stand up as the peers they call."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit


class JsonHandler(BaseHTTPRequestHandler):
    """A quiet request handler for a test's peer: it reads bodies and answers JSON."""

    def body(self) -> bytes:
        """The request's body (``Content-Length`` bytes)."""
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def send_json(self, status: int, answer: Any) -> None:
        """Answer ``status`` with ``answer``: bytes as they are, anything else as JSON."""
        data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Say nothing: pytest shows what a failing test needs."""


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve ``handler`` on a free loopback port for the block.

    Args:
        handler: The request handler class.

    Yields:
        The server's base URL, ``http://127.0.0.1:<port>``.
    """
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def request(
    url: str,
    method: str = "GET",
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    *,
    timeout: float = 60.0,
) -> tuple[int, bytes]:
    """Send one request; its status and body.

    Args:
        url: Where to, query string included.
        method: The HTTP method.
        body: What to send, if anything.
        headers: Its headers.
        timeout: Seconds a hung server may take before the test fails (a deadline, not a pace).
    """
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=timeout)
    try:
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        connection.request(method, target, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()
