"""``langorch tools add | list | show | remove``: MCP servers blocks may use as tools."""

from __future__ import annotations

import argparse
from typing import Any

from langorch.cli.context import Context
from langorch.cli.output import table
from langorch.cli.registry import Subparsers, add_command, add_group


def register(subparsers: Subparsers) -> None:
    """Add the ``tools`` group."""
    tools = add_group(subparsers, "tools", "register MCP tool servers blocks may call")

    add = add_command(
        tools,
        "add",
        _add,
        "register (or replace) an MCP server (streamable HTTP) as the tool NAME; a block "
        "lists NAME in tools_required",
    )
    add.add_argument("name", metavar="NAME")
    add.add_argument("--mcp", required=True, metavar="URL", help="the server's endpoint")
    add.add_argument(
        "--allow",
        metavar="TOOL,…",
        default="",
        help="only these of the server's tools (default: every tool it lists)",
    )
    add.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME=secret:ID",
        help='a request header whose value is the secret ID\'s {"value": "..."} '
        "(Secrets Manager); repeatable",
    )
    add.add_argument("--description", default="", help="shown by `tools list`")
    add.add_argument(
        "--on-unknown",
        choices=("retry", "fail"),
        default="retry",
        help="a call sent before a crash whose outcome was never recorded: send it again with "
        "the same idempotency key (retry, the default), or fail the step for a person (fail)",
    )

    add.add_argument(
        "--policies",
        metavar="FILE",
        help="tool-call rules over this server's tools, whichever workflow calls them (a YAML "
        "or JSON list, as a workflow's tool_policies)",
    )

    add.add_argument(
        "--cost",
        type=float,
        default=0.0,
        metavar="USD",
        help="what one call of the server's tools costs (US dollars; counted in run costs and "
        "budgets)",
    )
    add.add_argument(
        "--tool-cost",
        action="append",
        default=[],
        metavar="TOOL=USD",
        help="one tool's own cost per call, over --cost; repeatable",
    )

    add_command(tools, "list", _list, "every registered tool")

    show = add_command(tools, "show", _show, "one registration (secret ids, never values)")
    show.add_argument("name", metavar="NAME")
    show.add_argument(
        "--probe", action="store_true", help="connect and list the tools a model may call"
    )

    remove = add_command(tools, "remove", _remove, "remove a registration")
    remove.add_argument("name", metavar="NAME")


_ON_UNKNOWN = {
    "retry": "retry: a call of unknown outcome after a crash is sent again with the same key",
    "fail": "fail: a call of unknown outcome after a crash fails the step",
}


def _store(ctx: Context) -> Any:
    return ctx.container.tool_servers


def _secrets(ctx: Context) -> Any:
    return ctx.container.secrets


def _add(ctx: Context, args: argparse.Namespace) -> None:
    from langorch.app.tool_registry import AddTool, add_tool
    from langorch.llm.builtin_tools import KNOWN_TOOLS

    cmd = AddTool(
        name=args.name,
        url=args.mcp,
        allow=args.allow.split(",") if args.allow else (),
        headers=args.header,
        description=args.description,
        on_unknown=args.on_unknown,
        builtin_names=KNOWN_TOOLS,
        policies=_policies(args.policies) if args.policies else (),
        cost_per_call_usd=args.cost,
        tool_costs=args.tool_cost,
    )
    server, new = add_tool(cmd, _store(ctx), _secrets(ctx))
    verb = "registered" if new else "replaced"
    ctx.out.result(
        {**server.public(), "new": new},
        f"{verb} tool {server.name} -> {server.url}"
        + (f" (allowed: {', '.join(server.allow)})" if server.allow else "")
        + (f"; headers from secrets: {', '.join(server.headers)}" if server.headers else ""),
    )


def _policies(path: str) -> list[Any]:
    """The rules in ``--policies FILE`` (checked with their paths)."""
    from langorch.adapters.prices import read_tool_policies

    return read_tool_policies(path)


def _list(ctx: Context, args: argparse.Namespace) -> None:
    from langorch.llm.builtin_tools import KNOWN_TOOLS

    rows: list[dict[str, Any]] = [
        {"name": name, "kind": "built-in", "url": "", "allow": "", "description": ""}
        for name in sorted(KNOWN_TOOLS)
    ]
    rows += [
        {
            "name": s.name,
            "kind": "mcp",
            "url": s.url,
            "allow": ",".join(s.allow) or "(all)",
            "description": s.description,
        }
        for s in _store(ctx).list()
    ]
    columns = [("name", "NAME"), ("kind", "KIND"), ("url", "URL"), ("allow", "ALLOW")]
    ctx.out.result(rows, lambda: table(rows, columns))


def _show(ctx: Context, args: argparse.Namespace) -> None:
    import asyncio

    from langorch.app.tool_registry import probe_tools, show_tool

    server = show_tool(args.name, _store(ctx))
    document = server.public()
    lines = [f"tool {server.name}", f"  url      {server.url}"]
    lines.append(f"  allow    {', '.join(server.allow) or '(every tool the server lists)'}")
    for header, secret_id in server.headers.items():
        lines.append(f"  header   {header} from secret {secret_id}")
    if server.description:
        lines.append(f"  about    {server.description}")
    lines.append(f"  unknown  {_ON_UNKNOWN[server.on_unknown]}")
    for index, rule in enumerate(server.policies):
        mode = " (shadow)" if rule.mode == "shadow" else ""
        lines.append(f"  policy   [{index}] {rule.action}{mode} when {rule.when}")
    if args.probe:
        from langorch.adapters.mcp import McpConnection

        specs = asyncio.run(probe_tools(server, _secrets(ctx), McpConnection))
        document["tools"] = [{"name": s.name, "description": s.description} for s in specs]
        lines.append("  tools")
        lines += [f"    {s.name:<24} {s.description.splitlines()[0]}" for s in specs]
    ctx.out.result(document, "\n".join(lines))


def _remove(ctx: Context, args: argparse.Namespace) -> None:
    from langorch.app.tool_registry import remove_tool

    remove_tool(args.name, _store(ctx))
    ctx.out.result({"removed": args.name}, f"removed tool {args.name}")
