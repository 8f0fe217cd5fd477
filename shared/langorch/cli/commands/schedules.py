"""``langorch schedules pause|resume WORKFLOW`` and ``backfill WORKFLOW --from --to [--max N]``:
a workflow's schedule triggers, stopped and started again, and the slots they missed started
once each."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from langorch.cli.context import Context
from langorch.cli.errors import UsageError
from langorch.cli.registry import Subparsers, add_command, add_group


def register(subparsers: Subparsers) -> None:
    """Add the ``schedules`` group."""
    group = add_group(subparsers, "schedules", "pause, resume and backfill workflows' schedules")
    pause = add_command(group, "pause", _pause, "stop a workflow's schedules firing")
    pause.add_argument("workflow", metavar="WORKFLOW", help="the workflow id")
    resume = add_command(group, "resume", _resume, "fire a paused workflow's schedules again")
    resume.add_argument("workflow", metavar="WORKFLOW", help="the workflow id")
    backfill = add_command(
        group, "backfill", _backfill, "start each slot in a range once (slots that ran start none)"
    )
    backfill.add_argument("workflow", metavar="WORKFLOW", help="the workflow id")
    backfill.add_argument(
        "--from", dest="start", required=True, metavar="ISO", help="e.g. 2026-11-20T00:00:00Z"
    )
    backfill.add_argument("--to", dest="end", required=True, metavar="ISO", help="(inclusive)")
    backfill.add_argument(
        "--max", type=int, default=100, metavar="N", help="refuse ranges with more slots (100)"
    )


def _moment(flag: str, text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"{flag} {text!r} is not an ISO-8601 time, e.g. 2026-11-20T09:00:00Z"
        ) from None
    # A time without an offset is UTC, as the Scheduler writes slots.
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _set(ctx: Context, workflow: str, *, paused: bool) -> None:
    from langorch.app.schedules import set_schedules_paused

    names = set_schedules_paused(workflow, paused, ctx.container)
    state = "paused" if paused else "resumed"
    ctx.out.result(
        {"workflow_id": workflow, "state": "DISABLED" if paused else "ENABLED", "schedules": names},
        f"{state} {', '.join(names)}",
    )


def _pause(ctx: Context, args: argparse.Namespace) -> None:
    _set(ctx, args.workflow, paused=True)


def _resume(ctx: Context, args: argparse.Namespace) -> None:
    _set(ctx, args.workflow, paused=False)


def _backfill(ctx: Context, args: argparse.Namespace) -> None:
    from langorch.app.schedules import backfill_schedules

    start, end = _moment("--from", args.start), _moment("--to", args.end)
    done = backfill_schedules(args.workflow, start, end, ctx.container, max_slots=args.max)
    document: dict[str, Any] = {
        "workflow_id": args.workflow,
        "slots": done.slots,
        "started": [r.run_id for r in done.started],
        "already_ran": [r.run_id for r in done.found],
        "skipped": [{"slot": slot, "reason": why} for slot, why in done.skipped],
    }

    def text() -> str:
        lines = [
            f"{len(done.slots)} slot(s): started {len(done.started)}, "
            f"{len(done.found)} had run already, {len(done.skipped)} skipped"
        ]
        lines += [f"  started {r.run_id}" for r in done.started]
        lines += [f"  skipped {slot}: {why}" for slot, why in done.skipped]
        return "\n".join(lines)

    ctx.out.result(document, text)
