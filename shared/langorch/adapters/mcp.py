"""MCP tool servers over streamable HTTP, through the official ``mcp`` SDK's client.

Imported only when a step binds a registered tool: the SDK (and its HTTP client) stay out of
every other cold start. One :class:`McpConnection` serves one attempt of one step: it connects
on first use, lists the server's tools once, and is closed when the attempt ends.

Header values (credentials) are given to the HTTP client and nowhere else: they are not kept
on this object's ``repr``, not logged, and not part of any error message.
"""

from __future__ import annotations

import contextlib
import json
from contextlib import AsyncExitStack
from typing import Any

from langorch.domain.tool_servers import ToolServerError
from langorch.llm.toolbox import ToolSpec

CONNECT_TIMEOUT_SECONDS = 10.0
"""Connecting and listing a server's tools; a call has its own timeout."""

_SSL_CONTEXT: Any = None
"""httpx2's default TLS context, built once per process: building it (the system trust store)
takes 200-400 ms, which every step's first tool call would otherwise pay."""


def _ssl_context() -> Any:
    global _SSL_CONTEXT
    if _SSL_CONTEXT is None:
        import httpx2

        _SSL_CONTEXT = httpx2.create_ssl_context()
    return _SSL_CONTEXT


class McpConnection:
    """A client session with one MCP server.

    Args:
        name: The registration's name (for messages).
        url: The streamable-HTTP endpoint.
        headers: Request headers (secret values: never logged).
        timeout: Seconds for connecting and listing.
    """

    def __init__(
        self,
        name: str,
        url: str,
        headers: dict[str, str],
        *,
        timeout: float = CONNECT_TIMEOUT_SECONDS,
    ) -> None:
        self.name = name
        self._url = url
        self._headers = headers
        self._timeout = timeout
        self._stack: AsyncExitStack | None = None
        self._client: Any = None

    def __repr__(self) -> str:
        return f"McpConnection({self.name!r}, {self._url!r})"

    async def _connected(self) -> Any:
        if self._client is not None:
            return self._client
        import httpx2
        from mcp.client.client import Client
        from mcp.client.streamable_http import streamable_http_client

        stack = AsyncExitStack()
        try:
            http = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers=self._headers,
                    timeout=httpx2.Timeout(self._timeout),
                    verify=_ssl_context(),
                )
            )
            self._client = await stack.enter_async_context(
                Client(streamable_http_client(self._url, http_client=http))
            )
        except BaseException as exc:
            await stack.aclose()
            if isinstance(exc, Exception):
                raise ToolServerError(
                    f"tool {self.name}: cannot connect to its MCP server at {self._url} "
                    f"({type(exc).__name__}); check that it runs and `langorch tools show "
                    f"{self.name}`"
                ) from exc
            raise
        self._stack = stack
        return self._client

    async def list_tools(self) -> list[ToolSpec]:
        """The server's tools (every page)."""
        client = await self._connected()
        specs: list[ToolSpec] = []
        cursor: str | None = None
        while True:
            try:
                page = await client.list_tools(cursor=cursor)
            except Exception as exc:
                raise ToolServerError(
                    f"tool {self.name}: its MCP server at {self._url} did not list its tools "
                    f"({type(exc).__name__})"
                ) from exc
            specs += [
                ToolSpec(
                    name=tool.name,
                    description=tool.description or tool.title or tool.name,
                    parameters=dict(tool.input_schema or {"type": "object"}),
                )
                for tool in page.tools
            ]
            cursor = page.next_cursor
            if not cursor:
                return specs

    async def call(self, tool: str, args: dict[str, Any], *, timeout: float) -> tuple[str, bool]:
        """Call ``tool``; returns ``(text, is_error)`` as the server answered.

        Raises:
            Exception: the transport failed (the caller tells the model).
        """
        client = await self._connected()
        result = await client.call_tool(tool, args, read_timeout_seconds=timeout)
        return _text(result), bool(result.is_error)

    async def aclose(self) -> None:
        """Close the session (a DELETE ends it on the server)."""
        stack, self._stack, self._client = self._stack, None, None
        if stack is not None:
            # Closing a dead server's session: nothing is left to do.
            with contextlib.suppress(Exception):
                await stack.aclose()


def _text(result: Any) -> str:
    parts: list[str] = []
    for block in result.content or []:
        text = getattr(block, "text", None)
        parts.append(text if isinstance(text, str) else f"[{getattr(block, 'type', 'content')}]")
    if not parts and result.structured_content is not None:
        return json.dumps(result.structured_content, sort_keys=True, default=str)
    return "\n".join(parts)
