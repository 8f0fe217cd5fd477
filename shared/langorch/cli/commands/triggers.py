"""``langorch triggers show WORKFLOW``: a workflow's triggers and flow control, and what its
recent starts became — started, queued behind a key, delayed, dropped and why — with counts."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from langorch.cli.context import Context
from langorch.cli.registry import Subparsers, add_command, add_group


def register(subparsers: Subparsers) -> None:
    """Add the ``triggers`` group."""
    group = add_group(subparsers, "triggers", "inspect what starts a workflow's runs")
    show = add_command(
        group, "show", _show, "triggers, flow control, and counts of started/queued/dropped runs"
    )
    show.add_argument("workflow", metavar="WORKFLOW", help="the workflow id")


def _show(ctx: Context, args: argparse.Namespace) -> None:
    from langorch.app.trigger_view import show_triggers

    view = show_triggers(args.workflow, ctx.container)

    def text() -> str:
        lines = [f"{view.workflow_id}@{view.version}", "triggers:"]
        lines += [f"  {json.dumps(t, sort_keys=True)}" for t in view.triggers] or [
            "  (manual only)"
        ]
        lines.append("flow control:")
        for name, entry in view.flow.items():
            note = "" if entry["enforced"] else "  (not enforced yet)"
            lines.append(f"  {name}: {json.dumps(entry['spec'], sort_keys=True)}{note}")
        if not view.flow:
            lines.append("  (none)")
        lines.append(f"last {view.runs_read} run(s), by trigger and status:")
        for trigger, counts in view.by_trigger.items():
            lines.append(f"  {trigger:<9} " + "  ".join(f"{s} {n}" for s, n in counts.items()))
        for reason, count in view.dropped.items():
            lines.append(f"  dropped {count}: {reason}")
        for rule, count in view.merged.items():
            lines.append(f"  folded {count} into later runs: by {rule} (counted on the run)")
        for rule, count in view.delayed.items():
            lines.append(f"  delayed {count}: by {rule}")
        if view.missed_slots:
            lines.append(f"  schedule slots missed in downtime, not run: {view.missed_slots}")
        if view.keys:
            lines.append(f"{'KEY':<48} {'LIMIT':>5}  {'HELD':>4}  {'WAITING':>7}")
            lines += [
                f"{k.resource:<48} {k.limit:>5}  {k.held:>4}  {k.waiting:>7}" for k in view.keys
            ]
        return "\n".join(lines)

    ctx.out.result(asdict(view), text)
