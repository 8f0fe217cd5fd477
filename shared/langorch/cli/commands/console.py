"""``langorch console``: the run console in a browser, on 127.0.0.1.

Against the local stack by default, or a deployed one with ``--stack NAME`` (the operator's own
AWS credentials: IAM decides what the console may read and do). Nothing is exposed beyond this
machine unless ``--host`` says so, and nothing is answered but to the browser that opened the
start-up link it prints (it carries a token, as Jupyter's does). It acts as one operator: the
OS user locally, the IAM principal against a stack (see :mod:`langorch.console.operator`).
"""

from __future__ import annotations

import argparse

from langorch.cli.context import Context
from langorch.cli.errors import UsageError
from langorch.cli.registry import Subparsers, add_command

DEFAULT_PORT = 8765


def register(subparsers: Subparsers) -> None:
    """Add the ``console`` command."""
    console = add_command(
        subparsers, "console", _console, "runs, graphs, timelines and approvals in a browser"
    )
    console.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"the port (default {DEFAULT_PORT})"
    )
    console.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to bind (default 127.0.0.1: this machine only)",
    )
    console.add_argument(
        "--email",
        metavar="ADDRESS",
        help="local stack: the address approvals list you under (you decide those as yourself); "
        "against a stack your IAM principal says who you are",
    )
    console.add_argument(
        "--admin",
        action="store_true",
        help="admin override: decide approvals on an approver's behalf (said on every page, "
        "audited with your name); off by default",
    )


def _console(ctx: Context, args: argparse.Namespace) -> int:
    from langorch.composition.bootstrap import build_container
    from langorch.console.operator import OperatorError, operator_of
    from langorch.console.server import serve_console

    target = ctx.target()
    if ctx.reachable_target() is None:
        raise UsageError(
            f"the local stack at {target.settings.endpoint_url} is not answering: "
            "start it with `make dev` (which serves the console too), or pass --stack NAME"
        )
    container = build_container(target.settings)
    try:
        operator = operator_of(container, address=args.email, admin=args.admin)
    except OperatorError as exc:
        raise UsageError(str(exc)) from exc
    try:
        running = serve_console(
            container, target=target.name, host=args.host, port=args.port, operator=operator
        )
    except OSError as exc:
        raise UsageError(f"cannot serve the console on {args.host}:{args.port}: {exc}") from exc
    known = f", deciding as {operator.address}" if operator.address else ""
    admin = "\n  admin override ON: you may decide on any approver's behalf (audited)"
    ctx.out.result(
        {
            "console_url": running.startup_url,
            "target": target.name,
            "operator": operator.principal,
            "operator_address": operator.address,
            "admin": operator.admin,
        },
        f"langorch console for {target.name}\n"
        f"  console       {running.startup_url}\n"
        "                (open this link: it signs your browser in; nothing else gets in)\n"
        f"  acting as     {operator.described}{known}"
        f"{admin if operator.admin else ''}\n\nCtrl-C stops it.",
    )
    from langorch.cli.commands.dev import wait_until_stopped

    try:
        wait_until_stopped()
    finally:
        running.stop()
    return 0
