"""``langorch queues redrive``: events the stack's dead-letter queues caught go to their target
again (:mod:`langorch.app.dead_letters`)."""

from __future__ import annotations

import argparse

from langorch.cli.context import Context
from langorch.cli.registry import Subparsers, add_command, add_group, bounded_int


def register(subparsers: Subparsers) -> None:
    """Add the ``queues`` group."""
    queues = add_group(subparsers, "queues", "redrive the stack's dead-letter queues")
    redrive = add_command(
        queues,
        "redrive",
        _redrive,
        "deliver the events a dead-letter queue caught to their target again (the trigger), "
        "then delete them; a repeat starts no run twice",
    )
    redrive.add_argument(
        "--queue",
        default=None,
        metavar="NAME",
        help="only this queue (schedules, file-events, trigger, events; default: all)",
    )
    redrive.add_argument(
        "--max",
        dest="most",
        type=bounded_int(1, 100_000),
        default=1_000,
        metavar="N",
        help="at most N events per queue (default 1000)",
    )


def _redrive(ctx: Context, args: argparse.Namespace) -> int:
    from langorch.app.dead_letters import RedriveQueues, redrive_queues

    done = redrive_queues(RedriveQueues(args.queue, args.most), ctx.container)
    lines = [
        f"{d.queue}: {d.moved} redriven"
        + (f", {d.unreadable} left (not an event)" if d.unreadable else "")
        for d in done
    ]
    text = "\n".join(lines) if lines else "no dead-letter queues (the local stack has none)"
    ctx.out.result({"queues": [d.to_dict() for d in done]}, text)
    return 0
