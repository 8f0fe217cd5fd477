"""``langorch replay --workflow W --candidate-version N``: the replay gate (README "Testing
workflows")."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from langorch.cli.context import Context
from langorch.cli.errors import UsageError
from langorch.cli.output import table, terminal_width
from langorch.cli.registry import Subparsers, add_command, bounded_int

if TYPE_CHECKING:
    from langorch.domain.replay import RunReplay
    from langorch.local.replay import ReplayReport


def register(subparsers: Subparsers) -> None:
    """Add the ``replay`` command."""
    replay = add_command(
        subparsers,
        "replay",
        _replay,
        "re-run recorded runs on a candidate version, calls and decisions served from the "
        "records (nothing is sent)",
    )
    replay.add_argument("--workflow", required=True, metavar="W")
    replay.add_argument("--candidate-version", required=True, type=bounded_int(1, 10**9))
    which = replay.add_mutually_exclusive_group()
    which.add_argument(
        "--runs", type=bounded_int(1, 1000), default=50, help="the newest N ended runs (50)"
    )
    which.add_argument("--since", metavar="DATE", help="ended runs started since (ISO date)")
    which.add_argument("--run", action="append", metavar="ID", help="this run (repeatable)")
    replay.add_argument(
        "--live-models",
        action="store_true",
        help="ask the model where a prompt changed (costs money), instead of reporting it",
    )
    replay.add_argument(
        "--unrecorded-approvals",
        choices=["approved", "rejected"],
        default="approved",
        help="the answer to an approval the recorded run never asked (default approved)",
    )
    replay.add_argument(
        "--fail-on",
        metavar="LIST",
        default="",
        help="exit 1 when any run has one of: path, failure, outputs, approvals, unrecorded, "
        "cost+N%% (e.g. path,failure,cost+20%%)",
    )
    replay.add_argument("--out", metavar="FILE", help="write the report as JSON")


def _replay(ctx: Context, args: argparse.Namespace) -> int:
    from langorch.domain.replay import FailOn
    from langorch.local.replay import replay, select_runs

    fail_on = FailOn.parse(args.fail_on)
    since = _date(args.since) if args.since else None
    source = ctx.container
    runs = select_runs(
        source,
        args.workflow,
        args.candidate_version,
        run_ids=args.run,
        limit=args.runs,
        since=since,
    )
    if not runs:
        raise UsageError(
            f"no ended runs of {args.workflow} on another version than "
            f"{args.candidate_version} to replay"
        )

    def told(done: RunReplay) -> None:
        if not ctx.out.json_mode:
            print(_line(done), file=ctx.out.stdout, flush=True)

    report = replay(
        source,
        args.workflow,
        args.candidate_version,
        runs,
        live_models=args.live_models,
        unrecorded_answer=args.unrecorded_approvals,
        fail_on=fail_on,
        progress=told,
    )
    document = report.to_dict()
    if args.out:
        Path(args.out).write_text(json.dumps(document, indent=2, default=str), encoding="utf-8")
    ctx.out.result(document, lambda: render_report(report))
    return 0 if report.passed else 1


def _date(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--since {text!r} is not an ISO date (e.g. 2026-11-01)") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _line(run: RunReplay) -> str:
    changes = [
        name
        for name, on in (
            ("path", run.path_changed),
            ("outputs", bool(run.outputs_changed)),
            ("approvals", run.routing_changed),
            ("NEW FAILURE", bool(run.new_failure)),
            ("unrecorded calls", bool(run.unrecorded)),
        )
        if on
    ]
    return f"{run.run_id}: {', '.join(changes) or 'same'}"


def render_report(report: ReplayReport) -> str:
    """Per changed run what changed, then the summary table and the verdict."""
    from langorch.domain.prices import format_usd

    lines: list[str] = []
    for run in report.runs:
        details: list[str] = []
        if run.path_changed:
            details += ["  path:"] + [f"    {line}" for line in run.path_diff]
        if run.routing_changed:
            details += ["  approvals:"] + [f"    {line}" for line in run.routing_diff]
        if run.outputs_changed:
            details.append(f"  outputs changed: {', '.join(run.outputs_changed)}")
        if run.new_failure:
            details.append(f"  new failure: {run.new_failure}")
        details += [f"  no record (not made): {call}" for call in run.unrecorded]
        if details:
            lines += [f"{run.run_id} (v{run.recorded_version} -> v{report.candidate_version}):"]
            lines += details
    rows = [
        {
            "run": r.run_id,
            "status": f"{r.recorded_status} -> {r.status}",
            "path": "changed" if r.path_changed else "same",
            "approvals": "changed" if r.routing_changed else "same",
            "outputs": str(len(r.outputs_changed)) if r.outputs_changed else "same",
            "cost": f"{format_usd(r.cost_usd[0])} -> {format_usd(r.cost_usd[1])}",
            "unrecorded": str(len(r.unrecorded)),
        }
        for r in report.runs
    ]
    columns = [
        ("run", "RUN"),
        ("status", "STATUS"),
        ("path", "PATH"),
        ("approvals", "APPROVALS"),
        ("outputs", "OUTPUTS"),
        ("cost", "COST"),
        ("unrecorded", "NO RECORD"),
    ]
    lines += ["", table(rows, columns, max_width=terminal_width())]
    summary = report.to_dict()["summary"]
    lines.append(
        f"{summary['runs']} runs replayed on {report.workflow}@{report.candidate_version}: "
        f"{summary['path_changed']} path changes, {summary['routing_changed']} approval routing "
        f"changes, {summary['outputs_changed']} with other outputs, {summary['new_failures']} new "
        f"failures, {summary['unrecorded_calls']} calls without a record (not made), "
        f"{summary['emails']} emails (none sent)"
    )
    failures = report.failures()
    if failures:
        lines.append(f"gate: FAILED ({len(failures)} runs)")
        lines += [f"  {run_id}: {'; '.join(why)}" for run_id, why in failures.items()]
    else:
        lines.append("gate: passed")
    return "\n".join(lines)
