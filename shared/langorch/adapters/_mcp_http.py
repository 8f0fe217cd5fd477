"""The MCP client's HTTP: one ``httpx2`` client per session, its timeouts, its byte cap, the
idempotency key's header and what tells an unreachable or refusing server apart.

Imported by :mod:`langorch.adapters.mcp` when a session opens, never before: ``httpx2`` stays out
of every cold start that calls no registered tool.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2

from langorch.domain.tool_servers import IDEMPOTENCY_HEADER, IDEMPOTENCY_META_KEY

DENIED = frozenset({401, 403})
"""Statuses of a server that refused the request's credentials (the request did not run)."""

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
    on_denied: Callable[[int], None],
) -> httpx2.AsyncClient:
    """The HTTP client of one MCP session.

    Args:
        headers: The registration's headers (credentials: given to the client, nowhere else).
        connect_timeout: Seconds to connect, write a request, or wait for a pooled connection.
        read_timeout: Seconds a response may stay silent.
        max_answer_bytes: Bytes of one answer read before it is refused.
        on_refused: Called when an answer is refused for its size.
        on_denied: Called with the status when the server refuses the credentials (401, 403).
    """

    async def cap(response: httpx2.Response) -> None:
        if response.status_code in DENIED:
            on_denied(response.status_code)
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
        event_hooks={"request": [stamp_key], "response": [cap]},
    )


async def stamp_key(request: httpx2.Request) -> None:
    """Copy a call's idempotency key from its message's ``_meta`` into a header.

    The key travels in MCP's request metadata, where a tool reads it; the header serves what
    sits in front of the tool (a gateway, a proxy, a server that deduplicates before it parses
    MCP). Taken from the message itself, the two can never disagree. The SDK sends messages from
    its session's own task, so this is the one place that sees both the message and its request.
    """
    if request.method != "POST" or IDEMPOTENCY_META_KEY.encode() not in request.content:
        return
    message = json.loads(request.content)
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    key = meta.get(IDEMPOTENCY_META_KEY) if isinstance(meta, dict) else None
    if isinstance(key, str):
        request.headers[IDEMPOTENCY_HEADER] = key


def unreachable(failure: BaseException | None) -> bool:
    """Whether ``failure`` (an SDK session's, often an exception group) is a connection that
    could not be made: the request never reached the server."""
    pending: list[BaseException] = [failure] if failure is not None else []
    seen: set[int] = set()
    while pending:
        exc = pending.pop()
        if id(exc) in seen:
            continue
        seen.add(id(exc))
        if isinstance(exc, httpx2.ConnectError):
            return True
        if isinstance(exc, BaseExceptionGroup):
            pending += exc.exceptions
        pending += [e for e in (exc.__cause__, exc.__context__) if e is not None]
    return False


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
