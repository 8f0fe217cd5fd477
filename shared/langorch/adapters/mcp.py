"""MCP tool servers over streamable HTTP, through the official ``mcp`` SDK's client.

Imported only when a step binds a registered tool: the SDK (and its HTTP client) stay out of
every other cold start. One :class:`McpConnection` serves one attempt of one step: it connects
on first use, lists the server's tools once, and is closed when the attempt ends.

Each phase has its own bound. Connecting (the HTTP connection and the MCP handshake) and listing
the tools take at most ``connect_timeout``; a call takes at most the timeout its caller gives it
(``tool_call_timeout_seconds``), which the HTTP read timeout follows, a little longer, so that
the call's own timeout (told to the model) fires first.

The SDK's session runs in a task of its own. Its transport lives in an anyio task group whose
cancel scope, when one request fails (a dropped connection, a read timeout), cancels everything
inside it: held open across a step's code, that scope cancelled the step itself, with a
``CancelledError`` no ``except Exception`` sees, and the whole run failed. In its own task, such a
failure ends the session only: the call waiting on it gets the SDK's error ("Connection closed"),
which the step tells the model, and the next call opens a new session.

Answers are read with a byte cap (:data:`MAX_ANSWER_BYTES`): a tool answering 50 MB is refused
after the first MiB, not held whole in memory to be cut to the model's 4,000 characters.

Header values (credentials) are given to the HTTP client and nowhere else: they are not kept
on this object's ``repr``, not logged, and not part of any error message. A server that cannot be
connected to, or that refuses them (401, 403), raises :class:`ToolServerUnreachableError`: the
request did not run there, and the caller may read the credentials afresh and connect again.

A call given an idempotency key carries it in the request's ``_meta``
(``langorch/idempotency-key``) and in the ``Idempotency-Key`` header: the same key on every
retry and replay of that call, so a server that remembers it can answer a repeat without
repeating the effect.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from langorch.domain.tool_servers import (
    IDEMPOTENCY_META_KEY,
    ToolServerError,
    ToolServerUnreachableError,
)
from langorch.llm.toolbox import ToolSpec

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_SECONDS = 10.0
"""Connecting (HTTP and the MCP handshake) and listing a server's tools; a call has its own."""

DEFAULT_CALL_TIMEOUT_SECONDS = 30.0
"""A call's bound when the caller sets none (``tool_call_timeout_seconds``' default)."""

READ_TIMEOUT_MARGIN_SECONDS = 5.0
"""How much longer than a call may take an HTTP response may stay silent: the call's own
timeout fires first; this one only ends a response nobody waits for any more."""

CLOSE_TIMEOUT_SECONDS = 5.0
"""Closing a session (the DELETE that ends it on the server): a dead server is not waited for."""

MAX_ANSWER_BYTES = 1024 * 1024
"""Bytes of one answer read before it is refused: the model is told 4,000 characters of a
tool's output, and the SDK bounds each event of a streamed answer to the same 1 MiB."""


@dataclass
class _Session:
    """One SDK session, held open by its own task until ``closing`` is set."""

    closing: asyncio.Event = field(default_factory=asyncio.Event)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the handshake succeeded (``client``) or failed (``failure``)."""
    client: Any = None
    failure: BaseException | None = None
    task: asyncio.Task[None] | None = None
    denied: int = 0
    """Answers refusing the credentials (401, 403): a call compares before and after."""
    denied_status: int = 0

    def note_denied(self, status: int) -> None:
        self.denied += 1
        self.denied_status = status


class McpConnection:
    """A client session with one MCP server.

    Args:
        name: The registration's name (for messages).
        url: The streamable-HTTP endpoint.
        headers: Request headers (secret values: never logged).
        call_timeout: Seconds a call may take (the caller bounds each call by it too).
        connect_timeout: Seconds for connecting and for listing the tools.
        max_answer_bytes: Bytes of one answer read before it is refused.
    """

    def __init__(
        self,
        name: str,
        url: str,
        headers: dict[str, str],
        *,
        call_timeout: float = DEFAULT_CALL_TIMEOUT_SECONDS,
        connect_timeout: float = CONNECT_TIMEOUT_SECONDS,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
    ) -> None:
        self.name = name
        self._url = url
        self._headers = headers
        self._call_timeout = call_timeout
        self._connect_timeout = connect_timeout
        self._max_answer_bytes = max_answer_bytes
        self._session: _Session | None = None
        self._refused = 0
        """Answers refused for their size (a call compares before and after)."""

    def __repr__(self) -> str:
        return f"McpConnection({self.name!r}, {self._url!r})"

    async def _connected(self) -> Any:
        if self._ended():
            # The SDK's first import takes seconds on a cold, busy host: not the server's time
            # to answer, so it is done before the connect timeout starts.
            await asyncio.to_thread(_load_sdk)
        session = self._session
        if session is None or self._ended():
            # First use, or the last session ended (its server hung up): open one.
            session = self._session = _Session()
            session.task = asyncio.create_task(self._hold(session), name=f"mcp:{self.name}")
        try:
            async with asyncio.timeout(self._connect_timeout):
                await session.ready.wait()
        except TimeoutError as exc:
            await self.aclose()
            raise ToolServerError(
                f"tool {self.name}: its MCP server at {self._url} did not answer within "
                f"{self._connect_timeout:g} s; check that it runs and `langorch tools show "
                f"{self.name}`"
            ) from exc
        if session.client is None:
            from langorch.adapters._mcp_http import unreachable

            if session.denied:
                raise self._denied(session)
            cannot = ToolServerUnreachableError if unreachable(session.failure) else ToolServerError
            raise cannot(
                f"tool {self.name}: cannot connect to its MCP server at {self._url} "
                f"({type(session.failure).__name__}); check that it runs and `langorch tools "
                f"show {self.name}`"
            ) from session.failure
        return session.client

    def _denied(self, session: _Session) -> ToolServerUnreachableError:
        return ToolServerUnreachableError(
            f"tool {self.name}: its MCP server at {self._url} refused the credentials (HTTP "
            f"{session.denied_status}); check the secrets its headers name (`langorch tools "
            f"show {self.name}`)"
        )

    def _ended(self) -> bool:
        """No session is open or opening."""
        session = self._session
        return session is None or session.task is None or session.task.done()

    async def _hold(self, session: _Session) -> None:
        """The session's own task: the SDK's task group lives, fails and ends here."""
        from mcp.client.client import Client
        from mcp.client.streamable_http import streamable_http_client

        from langorch.adapters._mcp_http import http_client

        http = http_client(
            self._headers,
            connect_timeout=self._connect_timeout,
            read_timeout=self._call_timeout + READ_TIMEOUT_MARGIN_SECONDS,
            max_answer_bytes=self._max_answer_bytes,
            on_refused=self._note_refused,
            on_denied=session.note_denied,
        )
        transport = streamable_http_client(
            self._url, http_client=http, max_sse_event_size=self._max_answer_bytes
        )
        try:
            async with http, Client(transport) as client:
                session.client = client
                session.ready.set()
                await session.closing.wait()
        except Exception as exc:
            # Before the handshake: the caller raises it. After: a call waiting on this
            # session got the SDK's error already; the next call opens a new session.
            session.failure = exc
            logger.info(
                "MCP session ended",
                extra={"tool_server": self.name, "error_type": type(exc).__name__},
            )
        finally:
            session.client = None
            session.ready.set()

    def _note_refused(self) -> None:
        self._refused += 1

    async def list_tools(self) -> list[ToolSpec]:
        """The server's tools (every page), within the connect timeout."""
        client = await self._connected()
        specs: list[ToolSpec] = []
        cursor: str | None = None
        try:
            async with asyncio.timeout(self._connect_timeout):
                while True:
                    page = await client.list_tools(cursor=cursor)
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
        except Exception as exc:
            within = f" within {self._connect_timeout:g} s" if isinstance(exc, TimeoutError) else ""
            raise ToolServerError(
                f"tool {self.name}: its MCP server at {self._url} did not list its tools"
                f"{within} ({type(exc).__name__})"
            ) from exc

    async def call(
        self, tool: str, args: dict[str, Any], *, timeout: float, key: str | None = None
    ) -> tuple[str, bool]:
        """Call ``tool``; returns ``(text, is_error)`` as the server answered.

        Args:
            tool: The server's tool.
            args: Its arguments.
            timeout: Seconds the call may take.
            key: The call's idempotency key, sent in ``_meta`` and as a header.

        Raises:
            TimeoutError: no answer within ``timeout`` seconds.
            ToolServerUnreachableError: the server cannot be reached, or refused the
                credentials (the call did not run there).
            ToolServerError: the answer was larger than ``max_answer_bytes``.
            Exception: the transport failed (the caller tells the model).
        """
        from mcp.shared.exceptions import MCPError
        from mcp_types import REQUEST_TIMEOUT

        client = await self._connected()
        session = self._session
        assert session is not None  # opened by _connected
        refused, denied = self._refused, session.denied
        meta = {IDEMPOTENCY_META_KEY: key} if key is not None else None
        try:
            result = await client.call_tool(tool, args, read_timeout_seconds=timeout, meta=meta)
        except MCPError as exc:
            if self._refused > refused:
                raise ToolServerError(
                    f"tool {tool} answered more than {self._max_answer_bytes:,} bytes, which "
                    "is more than a step reads; ask it for less"
                ) from exc
            if session.denied > denied:
                raise self._denied(session) from exc
            if exc.code == REQUEST_TIMEOUT:
                raise TimeoutError(f"tool {tool} did not answer within {timeout:g} s") from exc
            raise
        return _text(result), bool(result.is_error)

    async def aclose(self) -> None:
        """Close the session (a DELETE ends it on the server); safe to call twice."""
        session, self._session = self._session, None
        if session is None or session.task is None:
            return
        session.closing.set()
        try:
            await asyncio.wait({session.task}, timeout=CLOSE_TIMEOUT_SECONDS)
        finally:
            # Not closed in time (a dead server's DELETE), or our caller is being cancelled:
            # the session's task is not left behind.
            if not session.task.done():
                session.task.cancel()


def _load_sdk() -> None:
    """Import the SDK (in a worker thread: the first import takes seconds)."""
    import mcp.client.client
    import mcp.client.streamable_http  # noqa: F401

    import langorch.adapters._mcp_http  # noqa: F401


def _text(result: Any) -> str:
    parts: list[str] = []
    for block in result.content or []:
        text = getattr(block, "text", None)
        parts.append(text if isinstance(text, str) else f"[{getattr(block, 'type', 'content')}]")
    if not parts and result.structured_content is not None:
        return json.dumps(result.structured_content, sort_keys=True, default=str)
    return "\n".join(parts)
