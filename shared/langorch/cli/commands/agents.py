"""``langorch agents add | list | show | remove``: the workers CKP nodes name (seed 001 §7)."""

from __future__ import annotations

import argparse
from typing import Any

from langorch.cli.context import Context
from langorch.cli.output import table
from langorch.cli.registry import Subparsers, add_command, add_group


def register(subparsers: Subparsers) -> None:
    """Add the ``agents`` group."""
    agents = add_group(subparsers, "agents", "register the agents CKP procedures' nodes name")

    add = add_command(
        agents,
        "add",
        _add,
        "register (or replace) the agent NAME: a CKP node with agent: NAME performs the "
        "actions it supports through it",
    )
    add.add_argument("name", metavar="NAME")
    endpoint = add.add_mutually_exclusive_group(required=True)
    endpoint.add_argument("--http", metavar="URL", help="an HTTP agent: one JSON POST per call")
    endpoint.add_argument("--mcp", metavar="URL", help="an MCP server: a tool per action")
    add.add_argument("--actions", required=True, metavar="A,B,…", help="the actions it supports")
    add.add_argument(
        "--mode",
        choices=("step", "batch", "node"),
        default="step",
        help="one call per step (default), adjacent steps in one call, or a node's steps in one",
    )
    add.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME=secret:ID",
        help='a request header whose value is the secret ID\'s {"value": "..."}; repeatable',
    )
    add.add_argument("--resource-key", metavar="K", help="what it drives (desktop:vm-01:session-1)")
    add.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help="runs that may drive the resource at once (sets the resource's limit)",
    )
    add.add_argument("--max-steps", type=int, metavar="N", help="batch mode: steps per call")
    add.add_argument(
        "--max-duration", type=int, metavar="S", help="seconds one call may take (default 300)"
    )
    add.add_argument("--description", default="", help="shown by `agents list`")
    add.add_argument(
        "--cost",
        type=float,
        default=0.0,
        metavar="USD",
        help="what the agent charges per step it performs (US dollars; counted in run costs "
        "and budgets)",
    )

    add_command(agents, "list", _list, "every registered agent")

    show = add_command(agents, "show", _show, "one registration (secret ids, never values)")
    show.add_argument("name", metavar="NAME")

    remove = add_command(agents, "remove", _remove, "remove a registration")
    remove.add_argument("name", metavar="NAME")


def _add(ctx: Context, args: argparse.Namespace) -> None:
    from langorch.app.agents import AddAgent, add_agent

    cmd = AddAgent(
        name=args.name,
        url=args.http or args.mcp,
        transport="http" if args.http else "mcp",
        actions=args.actions.split(","),
        mode=args.mode,
        headers=args.header,
        resource_key=args.resource_key,
        limit=args.limit,
        max_steps_per_batch=args.max_steps,
        max_duration_seconds=args.max_duration,
        description=args.description,
        cost_per_step_usd=args.cost,
    )
    agent, new = add_agent(cmd, ctx.container)
    verb = "registered" if new else "replaced"
    resource = (
        f"; holds {agent.resource_key}"
        + (f" (limit {agent.concurrency_limit})" if agent.concurrency_limit else "")
        if agent.resource_key
        else ""
    )
    ctx.out.result(
        {**agent.public(), "new": new},
        f"{verb} agent {agent.name} ({agent.transport}, {agent.execution_mode.value} mode) -> "
        f"{agent.url}: {', '.join(agent.supported_actions)}{resource}",
    )


def _list(ctx: Context, args: argparse.Namespace) -> None:
    rows: list[dict[str, Any]] = [
        {
            "name": a.name,
            "transport": a.transport,
            "mode": a.execution_mode.value,
            "url": a.url,
            "actions": ",".join(a.supported_actions),
            "resource": a.resource_key or "",
            "limit": a.concurrency_limit or "",
            "description": a.description,
        }
        for a in ctx.container.agents.list()
    ]
    columns = [
        ("name", "NAME"),
        ("transport", "VIA"),
        ("mode", "MODE"),
        ("actions", "ACTIONS"),
        ("resource", "RESOURCE"),
        ("url", "URL"),
    ]
    ctx.out.result(rows, lambda: table(rows, columns, shrink=("actions", "url")))


def _show(ctx: Context, args: argparse.Namespace) -> None:
    from langorch.app.agents import show_agent

    agent = show_agent(args.name, ctx.container.agents)
    lines = [
        f"agent {agent.name}",
        f"  url        {agent.url} ({agent.transport})",
        f"  mode       {agent.execution_mode.value}"
        + (
            f" (at most {agent.max_steps_per_batch} steps per call)"
            if agent.execution_mode.value == "batch"
            else ""
        ),
        f"  actions    {', '.join(agent.supported_actions)}",
        f"  max call   {agent.max_duration_seconds} s",
    ]
    if agent.resource_key:
        limit = f" (limit {agent.concurrency_limit})" if agent.concurrency_limit else ""
        lines.append(f"  resource   {agent.resource_key}{limit}")
    for header, secret_id in agent.headers.items():
        lines.append(f"  header     {header} from secret {secret_id}")
    if agent.description:
        lines.append(f"  about      {agent.description}")
    ctx.out.result(agent.public(), "\n".join(lines))


def _remove(ctx: Context, args: argparse.Namespace) -> None:
    from langorch.app.agents import remove_agent

    remove_agent(args.name, ctx.container.agents)
    ctx.out.result({"removed": args.name}, f"removed agent {args.name}")
