"""Registered tools (MCP servers) in the definitions table, beside the blocks and workflows:
``toolserver#<name>`` items (:mod:`.registrations`). ``tools add`` again replaces one; runs read
it when a step binds its tools."""

from __future__ import annotations

from langorch.adapters.dynamodb.registrations import Registrations
from langorch.domain.tool_servers import ToolServer


class ToolServersRepository(Registrations[ToolServer]):
    """Registered tools in the definitions table; satisfies ``ToolServerStore``."""

    kind = "toolserver"
    noun = "tool"
    model = ToolServer
