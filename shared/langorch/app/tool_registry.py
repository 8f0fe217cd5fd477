"""Use-cases of the tool registry: ``langorch tools add | list | show | remove``.

A registered tool is an MCP server (streamable HTTP) a block names in ``tools_required``. Its
header credentials stay in Secrets Manager: a registration names the secret, and adding one
checks that the secret exists without reading it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from langorch.domain.tool_policies import ToolPolicy
from langorch.domain.tool_servers import (
    OnUnknown,
    ToolServer,
    ToolServerError,
    UnknownToolServerError,
    parse_header,
)

if TYPE_CHECKING:
    from langorch.app.ports import SecretsStore, ToolConnector, ToolServerStore
    from langorch.llm.toolbox import ToolSpec


@dataclass(frozen=True)
class AddTool:
    """``tools add NAME --mcp URL [--allow tool,…] [--header NAME=secret:ID]
    [--on-unknown retry|fail]``."""

    name: str
    url: str
    allow: Sequence[str] = ()
    headers: Sequence[str] = ()
    """``NAME=secret:ID`` options."""
    description: str = ""
    on_unknown: OnUnknown = "retry"
    """A call whose outcome is unknown after a crash: ``retry`` (with the same idempotency key)
    or ``fail`` (the step fails for a person to decide)."""
    builtin_names: frozenset[str] = field(default_factory=frozenset)
    """Names a registration may not take (the built-in tools)."""
    policies: Sequence[ToolPolicy] = ()
    """Tool-call rules over the server's tools (already checked: ``parse_policies``)."""
    cost_per_call_usd: float = 0.0
    """What one call of its tools costs (US dollars)."""
    tool_costs: Sequence[str] = ()
    """``TOOL=USD`` options: a tool's own cost per call."""


def add_tool(
    cmd: AddTool, store: ToolServerStore, secrets: SecretsStore
) -> tuple[ToolServer, bool]:
    """Register (or replace) a tool; returns it and whether it is new.

    Raises:
        ToolServerError: the name is a built-in tool's, an option is malformed, or a header's
            secret does not exist. Nothing is stored then.
    """
    from pydantic import ValidationError

    if cmd.name in cmd.builtin_names:
        raise ToolServerError(
            f"{cmd.name!r} is a built-in tool; register the server under another name"
        )
    headers = dict(parse_header(option) for option in cmd.headers)
    try:
        server = ToolServer(
            name=cmd.name,
            url=cmd.url,
            allow=tuple(a.strip() for a in cmd.allow if a.strip()),
            headers=headers,
            description=cmd.description,
            on_unknown=cmd.on_unknown,
            policies=tuple(cmd.policies),
            cost_per_call_usd=cmd.cost_per_call_usd,
            tool_costs=_tool_costs(cmd.tool_costs),
        )
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'tool'}: {e['msg']}" for e in exc.errors()
        )
        raise ToolServerError(f"tool {cmd.name}: {problems}") from exc
    missing = [secret for secret in headers.values() if not secrets.exists(secret)]
    if missing:
        raise ToolServerError(
            f"tool {cmd.name}: secret(s) {', '.join(missing)} do not exist; create each with "
            'the header value as {"value": "..."} (aws secretsmanager create-secret --name ID '
            '--secret-string \'{"value": "Bearer ..."}\'), then add the tool again'
        )
    return server, store.put(server)


def show_tool(name: str, store: ToolServerStore) -> ToolServer:
    """The registration named ``name``.

    Raises:
        UnknownToolServerError: none; the message lists the registered names.
    """
    server = store.get(name)
    if server is None:
        known = ", ".join(s.name for s in store.list()) or "none"
        raise UnknownToolServerError(
            f"no tool registered as {name!r} (registered: {known}); add it with "
            f"`langorch tools add {name} --mcp URL`"
        )
    return server


def remove_tool(name: str, store: ToolServerStore) -> None:
    """Remove a registration (steps that name it then fail if their model calls it).

    Raises:
        UnknownToolServerError: there was none.
    """
    if not store.delete(name):
        show_tool(name, store)  # raises, listing the registered names


def known_tool_names(store: ToolServerStore | None) -> frozenset[str]:
    """The tool names definitions may use: built-in tools plus registered ones.

    This is what validation's known-tools parameter takes (issue 9 item 1: a name outside it is
    accepted with a warning and fails only if a model calls it while unbound).
    """
    from langorch.llm.names import KNOWN_TOOLS

    registered = {server.name for server in store.list()} if store is not None else set()
    return frozenset(KNOWN_TOOLS | registered)


async def probe_tools(
    server: ToolServer, secrets: SecretsStore, connect: ToolConnector
) -> list[ToolSpec]:
    """Connect to the server and list the tools a model may call (``tools show --probe``).

    Raises:
        ToolServerError: the server cannot be reached, or a header's secret is missing.
    """
    from langorch.app.step_tools import read_headers

    connection = connect(server.name, server.url, read_headers(server, secrets))
    try:
        return [s for s in await connection.list_tools() if server.allows(s.name)]
    finally:
        await connection.aclose()


def _tool_costs(options: Sequence[str]) -> dict[str, float]:
    """``TOOL=USD`` options as a mapping.

    Raises:
        ToolServerError: an option is not ``TOOL=USD``.
    """
    costs: dict[str, float] = {}
    for option in options:
        name, _, value = option.partition("=")
        try:
            costs[name.strip()] = float(value)
        except ValueError:
            raise ToolServerError(
                f"--tool-cost {option!r}: expected TOOL=USD (e.g. issue_refund=0.25)"
            ) from None
    return costs
