"""The order_status example's MCP server (``examples/order_status/mcp_server.py``), loaded from
its file for tests that need a real MCP server over streamable HTTP."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

SERVER_FILE = Path(__file__).resolve().parents[1] / "examples" / "order_status" / "mcp_server.py"


def load_order_desk() -> ModuleType:
    """The example server's module (``serve(token)``, ``CALLS``)."""
    spec = importlib.util.spec_from_file_location("order_desk_server", SERVER_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
