"""``langorch runs diff RUN_A RUN_B``: two runs' timelines side by side."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from langorch.cli.context import Context
from langorch.cli.output import terminal_width
from langorch.cli.registry import Subparsers, add_command

if TYPE_CHECKING:
    from langorch.domain.run_diff import RunDiff, RunSide, StepSide


def register_into(runs: Subparsers) -> None:
    """Add ``diff`` to the ``runs`` group."""
    diff = add_command(
        runs, "diff", _diff, "two runs side by side: steps, outputs, tokens, cost, decisions"
    )
    diff.add_argument("run_a", metavar="RUN_A")
    diff.add_argument("run_b", metavar="RUN_B")
    diff.add_argument("--changed", action="store_true", help="only the steps where the runs differ")


def _diff(ctx: Context, args: argparse.Namespace) -> int:
    from langorch.domain.run_diff import diff_runs

    repo = ctx.container.runs
    found = diff_runs(
        repo.get_run(args.run_a),
        repo.get_timeline(args.run_a),
        repo.get_run(args.run_b),
        repo.get_timeline(args.run_b),
    )
    ctx.out.result(found.to_dict(), lambda: render_diff(found, changed_only=args.changed))
    return 0


def render_diff(found: RunDiff, *, changed_only: bool = False, width: int | None = None) -> str:
    """The comparison for a person: headers, the fork, the steps side by side (``*`` where they
    differ), then the final outputs that differ."""
    width = width or terminal_width()
    lines = [_header("A", found.a), _header("B", found.b)]
    if found.fork is not None:
        fork = found.fork
        which = "B" if fork["child"] == found.b.run_id else "A"
        edited = ", ".join(
            f"{k} = {_short(v, 60)}" for k, v in (fork.get("edited_values") or {}).items()
        )
        lines.append(
            f"{which} is a fork of {'A' if which == 'B' else 'B'} at step {fork['at_step']}"
            + (f", edited: {edited}" if edited else "")
        )
    column = max(20, (width - 26) // 2)
    lines += ["", f"  {'STEP':<20} {'A':<{column}} B"]
    for row in found.rows:
        if changed_only and not row.changed:
            continue
        step = row.step_id + (f" #{row.visit + 1}" if row.visit else "")
        mark = "*" if row.changed else " "
        left, right = _cell(row.a, column), _cell(row.b, column)
        lines.append(f"{mark} {step:<20.20} {left:<{column}} {right}")
        if row.changed and row.a is not None and row.b is not None:
            for key in row.changed_keys():
                a, b = row.a.outputs.get(key), row.b.outputs.get(key)
                lines.append(f"    {key}: {_short(a, column - 4)}  ->  {_short(b, column - 4)}")
    if found.outputs:
        lines += ["", "outputs that differ:"]
        for key, a, b in found.outputs:
            lines.append(f"  {key}: A {_short(a, column)}  B {_short(b, column)}")
    else:
        lines += ["", "the final outputs are the same"]
    return "\n".join(lines)


def _header(label: str, side: RunSide) -> str:
    from langorch.domain.prices import format_usd

    error = f"  ({side.error})" if side.error else ""
    return (
        f"{label}  {side.run_id}  {side.workflow}  {side.status}  cost {format_usd(side.cost_usd)}"
        f"  tokens {side.tokens}{error}"
    )


def _cell(side: StepSide | None, width: int) -> str:
    if side is None:
        return "-"
    parts = [side.status]
    if side.decision:
        parts.append(f"[{side.decision}]")
    if side.tokens:
        parts.append(f"{side.tokens} tok")
    if side.error:
        parts.append(side.error)
    elif side.outputs:
        parts.append(", ".join(f"{k}={v}" for k, v in side.outputs.items()))
    return _short(" ".join(parts), width)


def _short(value: Any, width: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= width else text[: max(width - 1, 1)] + "…"
