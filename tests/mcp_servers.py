"""Misbehaving MCP servers for tests: real ``MCPServer`` apps over streamable HTTP, like the
order desk (``tests/order_desk.py``), whose tools are slow, vanish mid-answer or answer too much.

* ``wait_for_release``: answers only once the test calls :meth:`SlowDesk.release` (a tool
  slower than any timeout a test sets, without a sleep).
* ``hang_up``: the server drops the connection halfway through the answer, as a server that
  crashes mid-reply does.
* ``flood``: answers ``megabytes`` MiB of text. Run it in its own process (``python -m
  tests.mcp_servers``, which prints its URL) when a test measures the client's memory.

And a well-behaved one, :class:`KeyedDesk`, whose ``place_order`` remembers the idempotency key
of each call (as a server that can answer a repeat without repeating the effect does) and keeps
every key it is sent.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from mcp.server.mcpserver import Context

from langorch.domain.tool_servers import IDEMPOTENCY_HEADER, IDEMPOTENCY_META_KEY
from tests.order_desk import load_order_desk

HANG_UP = "the server hangs up halfway through this answer"


class SlowDesk:
    """The app and what its tools saw.

    Attributes:
        app: The ASGI app (serve it with :func:`serve`).
        started: Set when ``wait_for_release`` starts running.
    """

    def __init__(self) -> None:
        from mcp.server.mcpserver import MCPServer

        self._gate = threading.Event()
        self.started = threading.Event()
        # WARNING: as in the order desk, MCPServer's default level would configure the root
        # logger at INFO for the whole test process.
        server = MCPServer("slow-desk", log_level="WARNING")
        gate, started = self._gate, self.started

        @server.tool()
        async def wait_for_release(order_id: str) -> str:
            """An order's status, once the test releases it."""
            import anyio

            started.set()
            # In a worker thread: the server's event loop goes on serving other requests.
            await anyio.to_thread.run_sync(gate.wait, abandon_on_cancel=True)
            return f"order {order_id}: released"

        @server.tool()
        def hang_up() -> str:
            """Answers, but the connection drops halfway through the answer."""
            return HANG_UP

        @server.tool()
        def flood(megabytes: int) -> str:
            """``megabytes`` MiB of text."""
            return "x" * (megabytes * 1024 * 1024)

        app = server.streamable_http_app(stateless_http=True, json_response=True)
        self.app = _HangsUp(app)

    def release(self) -> None:
        """Let every waiting ``wait_for_release`` answer."""
        self._gate.set()


class _HangsUp:
    """Sends only the first bytes of any answer that carries :data:`HANG_UP`, then drops the
    connection (the Content-Length promised more)."""

    def __init__(self, app: Any) -> None:
        self._app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        start: dict[str, Any] = {}

        async def maybe_hang_up(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                start.update(message)  # held back until the body shows what it is
                return
            body = message.get("body", b"")
            if start and HANG_UP.encode() in body:
                await send(start)
                start.clear()
                await send({"type": "http.response.body", "body": body[:20], "more_body": True})
                raise ConnectionAbortedError("hanging up mid-answer, as asked")
            if start:
                await send(start)
                start.clear()
            await send(message)

        await self._app(scope, receive, maybe_hang_up)


class KeyedDesk:
    """An order desk that places each order once per idempotency key.

    Args:
        hold: Each call that places an order holds its answer until :meth:`release` (the order
            is placed, the caller has not heard yet: a crash now leaves its outcome unknown).

    Attributes:
        app: The ASGI app (serve it with :func:`serve`).
        seen: Every ``place_order`` call: ``(order_id, key in _meta, key in the header)``.
        placed: Orders placed (a call whose key was seen before places nothing).
        holding: Set once a call holds its answer.
    """

    def __init__(self, *, hold: bool = False) -> None:
        from mcp.server.mcpserver import MCPServer

        self.seen: list[tuple[str, str | None, str | None]] = []
        self.placed: list[str] = []
        self.holding = threading.Event()
        self._gate = threading.Event()
        if not hold:
            self._gate.set()
        self._answers: dict[str, str] = {}
        answers = self._answers
        server = MCPServer("keyed-desk", log_level="WARNING")

        @server.tool()
        async def place_order(order_id: str, ctx: Context) -> str:
            """Place an order; a repeat of a call answers as the first did."""
            # Context is imported at the module's top: the SDK reads this signature's
            # annotations from the module's globals.
            import anyio

            key = (ctx.request_context.meta or {}).get(IDEMPOTENCY_META_KEY)
            header = (ctx.headers or {}).get(IDEMPOTENCY_HEADER.lower())
            self.seen.append((order_id, key, header))
            if key is not None and key in answers:
                return answers[key]
            self.placed.append(order_id)
            answer = f"order {order_id} placed as #{len(self.placed)}"
            if key is not None:
                answers[key] = answer
            self.holding.set()
            # In a worker thread: the server's event loop goes on serving other requests.
            await anyio.to_thread.run_sync(self._gate.wait, abandon_on_cancel=True)
            return answer

        self.app = server.streamable_http_app(stateless_http=True, json_response=True)

    def release(self) -> None:
        """Let every held answer (and every later one) go."""
        self._gate.set()

    def clear(self) -> None:
        """Forget every call and every key, as a new server would (the tests' run ids repeat)."""
        self.seen.clear()
        self.placed.clear()
        self._answers.clear()


def serve(app: Any) -> Any:
    """Serve ``app`` on 127.0.0.1 in a thread (the order desk's runner): ``.url``, ``.stop()``."""
    return load_order_desk().Running(app)


@contextmanager
def serving(desk: Any) -> Iterator[Any]:
    """Serve ``desk`` (a ``SlowDesk``, a ``KeyedDesk``) for the block: the running server
    (``.url``), with the desk itself as ``.desk``."""
    running = serve(desk.app)
    running.desk = desk
    try:
        yield running
    finally:
        running.stop()


if __name__ == "__main__":
    running = serve(SlowDesk().app)
    print(running.url, flush=True)
    sys.stdin.read()  # until the test closes our stdin
    running.stop()
