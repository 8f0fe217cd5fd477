"""``langorch resources set NAME --limit N | list``: resource limits for steps that hold a lease
(seed 001 §7b). A resource nobody declared has limit 1."""

from __future__ import annotations

import argparse
import time
from typing import Any

from langorch.cli.context import Context
from langorch.cli.registry import Subparsers, add_command, add_group


def register(subparsers: Subparsers) -> None:
    """Add the ``resources`` group."""
    group = add_group(subparsers, "resources", "declare and inspect resource limits")
    put = add_command(group, "set", _set, "set a resource's concurrency_limit")
    put.add_argument("name", metavar="NAME", help="the resource, e.g. browser:session-1")
    put.add_argument(
        "--limit", type=int, required=True, metavar="N", help="leases held at once (1-1000)"
    )
    add_command(group, "list", _list, "resources, their limits, holders and queues")


def _container(ctx: Context) -> Any:
    return ctx.container


def _set(ctx: Context, args: argparse.Namespace) -> None:
    from langorch.app.resources import declare_resource

    state = declare_resource(args.name, args.limit, _container(ctx))
    ctx.out.result(
        {"name": state.name, "limit": state.limit},
        f"resource {state.name}: at most {state.limit} step(s) at once",
    )


def _list(ctx: Context, args: argparse.Namespace) -> None:
    from langorch.app.resources import list_resources

    views = list_resources(_container(ctx), now=time.time())
    data = [
        {
            "name": v.name,
            "limit": v.limit,
            "declared": v.declared,
            "held_by": list(v.held_by),
            "queued": list(v.queued),
        }
        for v in views
    ]

    def text() -> str:
        if not views:
            return "no resources (a step's resource has limit 1 until `resources set`)"
        lines = [f"{'NAME':<32} {'LIMIT':>5}  {'HELD':>4}  {'QUEUED':>6}"]
        for v in views:
            limit = f"{v.limit}" if v.declared else f"{v.limit}*"
            lines.append(f"{v.name:<32} {limit:>5}  {len(v.held_by):>4}  {len(v.queued):>6}")
            lines += [f"  holds  {h}" for h in v.held_by]
            lines += [f"  queued {i}. {h}" for i, h in enumerate(v.queued, 1)]
        if any(not v.declared for v in views):
            lines.append("* undeclared: the default limit")
        return "\n".join(lines)

    ctx.out.result(data, text)
