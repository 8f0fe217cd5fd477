"""``langorch console``: the run console in a browser, on 127.0.0.1.

Against the local stack by default, or a deployed one with ``--stack NAME`` (the operator's own
AWS credentials: IAM decides what the console may read and do). Nothing is exposed beyond this
machine unless ``--host`` says so.
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


def _console(ctx: Context, args: argparse.Namespace) -> int:
    from langorch.composition.bootstrap import build_container
    from langorch.console.server import serve_console

    target = ctx.target()
    if ctx.reachable_target() is None:
        raise UsageError(
            f"the local stack at {target.settings.endpoint_url} is not answering: "
            "start it with `make dev` (which serves the console too), or pass --stack NAME"
        )
    try:
        running = serve_console(
            build_container(target.settings), target=target.name, host=args.host, port=args.port
        )
    except OSError as exc:
        raise UsageError(f"cannot serve the console on {args.host}:{args.port}: {exc}") from exc
    ctx.out.result(
        {"console_url": running.url, "target": target.name},
        f"langorch console for {target.name}\n  console       {running.url}\n\nCtrl-C stops it.",
    )
    from langorch.cli.commands.dev import wait_until_stopped

    try:
        wait_until_stopped()
    finally:
        running.stop()
    return 0
