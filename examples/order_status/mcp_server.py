"""The order desk: a small MCP tool server shipped with the ``order_status`` example.

It serves two tools over streamable HTTP (the official ``mcp`` SDK's ``MCPServer``):
``lookup_order`` (an order's status and items) and ``estimate_delivery`` (minutes until an order
arrives). Requests must carry ``Authorization: Bearer <token>``; ``langorch dev`` starts it with
a fresh token, stores ``{"value": "Bearer <token>"}`` in the local Secrets Manager and registers
the server as the tool ``orders`` (README, "Tools over MCP").

Run it alone with ``python examples/order_status/mcp_server.py --port 8765 --token s3cret``.
"""

from __future__ import annotations

import argparse
import hmac
import socket
import threading
import time
from collections import Counter
from typing import Any

ORDERS: dict[str, dict[str, Any]] = {
    "A100": {"status": "out for delivery", "items": ["pad thai", "spring rolls"], "eta": 12},
    "A101": {"status": "being prepared", "items": ["margherita"], "eta": 35},
    "A102": {"status": "delivered", "items": ["ramen"], "eta": 0},
}

CALLS: Counter[str] = Counter()
"""How often each tool ran in this process (tests check that a replay does not call again)."""


def build_app(token: str | None) -> Any:
    """The ASGI app: the MCP endpoint at ``/mcp``, refusing requests without the bearer token."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    # WARNING: MCPServer configures the root logger at its level (basicConfig); at its default,
    # INFO, every library of the process that starts it (langorch dev) would log to the terminal.
    server = MCPServer("order-desk", instructions="Look up food orders.", log_level="WARNING")

    @server.tool()
    def lookup_order(order_id: str) -> str:
        """An order's status and items, by order id (e.g. A100)."""
        CALLS["lookup_order"] += 1
        order = ORDERS.get(order_id.strip().upper())
        if order is None:
            raise ToolError(f"no order {order_id!r}; known orders: {', '.join(sorted(ORDERS))}")
        return f"order {order_id}: {order['status']}; items: {', '.join(order['items'])}"

    @server.tool()
    def estimate_delivery(order_id: str) -> int:
        """Minutes until the order arrives (0 when delivered)."""
        CALLS["estimate_delivery"] += 1
        order = ORDERS.get(order_id.strip().upper())
        if order is None:
            raise ToolError(f"no order {order_id!r}")
        return int(order["eta"])

    app = server.streamable_http_app(stateless_http=True, json_response=True)
    return app if token is None else _BearerOnly(app, token)


class _BearerOnly:
    """Answers 401 to any request without ``Authorization: Bearer <token>``."""

    def __init__(self, app: Any, token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await self._app(scope, receive, send)


class Running:
    """A server running in a thread of this process."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0) -> None:
        import uvicorn

        self._socket = socket.socket()
        self._socket.bind((host, port))
        self.url = f"http://{host}:{self._socket.getsockname()[1]}/mcp"
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"the MCP server at {self.url} did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        """Stop serving and wait for the thread."""
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()


def serve(token: str | None, port: int = 0) -> Running:
    """Start the order desk on 127.0.0.1 (``port`` 0: a free one) in a background thread."""
    return Running(build_app(token), port=port)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--token", help="require Authorization: Bearer TOKEN")
    options = parser.parse_args()
    running = serve(options.token, options.port)
    print(f"order desk at {running.url}")
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        running.stop()
