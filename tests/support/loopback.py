"""Plain HTTP to a server on this machine (the local stack's gateway, a loopback test server),
as a browser or a webhook sender makes it: one connection a request, nothing retried."""

from __future__ import annotations

import http.client
from urllib.parse import urlsplit


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
