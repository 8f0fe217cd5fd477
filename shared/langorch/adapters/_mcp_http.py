"""The MCP client's HTTP: one ``httpx2`` client per session, and its timeouts.

Imported by :mod:`langorch.adapters.mcp` when a session opens, never before: ``httpx2`` stays out
of every cold start that calls no registered tool.
"""

from __future__ import annotations

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
) -> httpx2.AsyncClient:
    """The HTTP client of one MCP session.

    Args:
        headers: The registration's headers (credentials: given to the client, nowhere else).
        connect_timeout: Seconds to connect, write a request, or wait for a pooled connection.
        read_timeout: Seconds a response may stay silent.
    """
    return httpx2.AsyncClient(
        headers=headers,
        timeout=httpx2.Timeout(connect_timeout, read=read_timeout),
        verify=_ssl_context(),
    )
