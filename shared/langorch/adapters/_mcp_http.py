"""The MCP client's HTTP: one ``httpx2`` client per session, its timeouts and its byte cap.

Imported by :mod:`langorch.adapters.mcp` when a session opens, never before: ``httpx2`` stays out
of every cold start that calls no registered tool.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2

_SSL_CONTEXT: Any = None
"""httpx2's default TLS context, built once per process: building it (the system trust store)
takes 200-400 ms, which every step's first tool call would otherwise pay."""


def _ssl_context() -> Any:
    global _SSL_CONTEXT
    if _SSL_CONTEXT is None:
        _SSL_CONTEXT = httpx2.create_ssl_context()
    return _SSL_CONTEXT


def http_client(
    headers: dict[str, str],
    *,
    connect_timeout: float,
    read_timeout: float,
    max_answer_bytes: int,
    on_refused: Callable[[], None],
) -> httpx2.AsyncClient:
    """The HTTP client of one MCP session.

    Args:
        headers: The registration's headers (credentials: given to the client, nowhere else).
        connect_timeout: Seconds to connect, write a request, or wait for a pooled connection.
        read_timeout: Seconds a response may stay silent.
        max_answer_bytes: Bytes of one answer read before it is refused.
        on_refused: Called when an answer is refused for its size.
    """

    async def cap(response: httpx2.Response) -> None:
        # Answers to requests (POST) are read whole by the SDK; the long-lived GET stream is
        # read event by event, each bounded by the SDK's own max_sse_event_size.
        if response.request.method == "POST":
            response.stream = CappedBody(response.stream, max_answer_bytes, on_refused)

    return httpx2.AsyncClient(
        # Uncompressed, so the bytes counted are the bytes kept (a compressed answer could
        # expand far past the cap after it is counted).
        headers={"Accept-Encoding": "identity", **headers},
        timeout=httpx2.Timeout(connect_timeout, read=read_timeout),
        verify=_ssl_context(),
        event_hooks={"response": [cap]},
    )


class CappedBody(httpx2.AsyncByteStream):
    """A response body refused as soon as more than ``limit`` bytes of it arrive.

    The refusal is an ``httpx2.StreamError``: the SDK turns a body it cannot read into an error
    answer to the one request that asked for it, and its session goes on.
    """

    def __init__(self, body: Any, limit: int, on_refused: Callable[[], None]) -> None:
        self._body = body
        self._limit = limit
        self._on_refused = on_refused

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        async for chunk in self._body:
            read += len(chunk)
            if read > self._limit:
                self._on_refused()
                raise httpx2.StreamError(f"the answer is larger than {self._limit:,} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._body.aclose()
