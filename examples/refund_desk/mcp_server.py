"""The refund desk: a small MCP tool server shipped with the ``refund_desk`` example.

It serves two tools over streamable HTTP (the official ``mcp`` SDK's ``MCPServer``):
``look_up_order`` (an order's total and what was refunded) and ``issue_refund`` (refunds an
amount of an order, once per idempotency of the call: langorch records it, so a replay or a
restart never sends it again). Requests must carry ``Authorization: Bearer <token>``;
``runs start --local`` and ``langorch dev`` start it with a fresh token and register it as the
tool ``refunds`` with the rules and prices of ``tools.yaml`` (README, "Cost, budgets and
policies").

Run it alone with ``python examples/refund_desk/mcp_server.py --port 8766 --token s3cret``.
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
    "R-1001": {"total": 1200.0, "customer": "Ana", "item": "espresso machine"},
    "R-1002": {"total": 80.0, "customer": "Ben", "item": "milk frother"},
}

CALLS: Counter[str] = Counter()
"""How often each tool ran in this process (tests check a refund is made once)."""

REFUNDED: dict[str, float] = {}
"""What each order has been refunded."""


def build_app(token: str | None) -> Any:
    """The ASGI app: the MCP endpoint at ``/mcp``, refusing requests without the bearer token."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    # At its default level MCPServer would make every library of the process log to the terminal.
    server = MCPServer(
        "refund-desk", instructions="Look up orders, issue refunds.", log_level="WARNING"
    )

    def _order(order_id: str) -> dict[str, Any]:
        order = ORDERS.get(order_id.strip().upper())
        if order is None:
            raise ToolError(f"no order {order_id!r}; known orders: {', '.join(sorted(ORDERS))}")
        return order

    @server.tool()
    def look_up_order(order_id: str) -> str:
        """An order's customer, item, total and what was refunded, by order id (e.g. R-1001)."""
        CALLS["look_up_order"] += 1
        order = _order(order_id)
        refunded = REFUNDED.get(order_id, 0.0)
        return (
            f"order {order_id}: {order['item']} for {order['customer']}, total "
            f"${order['total']:.2f}, refunded so far ${refunded:.2f}"
        )

    @server.tool()
    def issue_refund(order_id: str, amount: float, reason: str) -> str:
        """Refund ``amount`` US dollars of an order, with the reason the customer gave."""
        CALLS["issue_refund"] += 1
        order = _order(order_id)
        refunded = REFUNDED.get(order_id, 0.0)
        if amount <= 0 or refunded + amount > order["total"]:
            raise ToolError(
                f"cannot refund ${amount:.2f}: order {order_id} totals ${order['total']:.2f} and "
                f"${refunded:.2f} was refunded already"
            )
        REFUNDED[order_id] = refunded + amount
        number = CALLS["issue_refund"]
        return f"refunded ${amount:.2f} on order {order_id} ({reason}); refund #{number}"

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
    """Start the refund desk on 127.0.0.1 (``port`` 0: a free one) in a background thread."""
    return Running(build_app(token), port=port)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument("--token", help="require Authorization: Bearer TOKEN")
    options = parser.parse_args()
    running = serve(options.token, options.port)
    print(f"refund desk at {running.url}")
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        running.stop()
