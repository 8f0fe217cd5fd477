"""``langorch runs redrive | fork``: continue a failed run, go back to a step, fork with edits.

::

    langorch runs redrive RUN_ID [--from STEP] [--version N|latest] [--reason TEXT] [--force]
    langorch runs redrive --status failed [--workflow ID] [--since DURATION] [--dry-run]
    langorch runs fork RUN_ID --at STEP [--set KEY=JSON …] [--version N|latest]

Each works against the local stack or, with ``--stack``, a deployed one with the operator's
credentials (the stack's ``OperatorRecoveryPolicyArn`` output grants exactly what they need).
"""

from __future__ import annotations

import argparse
import getpass
import re
from datetime import timedelta
from typing import Any

from langorch.cli.commands._start_input import parse_edits, say
from langorch.cli.context import Context
from langorch.cli.errors import UsageError
from langorch.cli.registry import Subparsers, add_command, positive_float

_DURATION = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def register_into(runs: Subparsers) -> None:
    """Add ``redrive`` and ``fork`` to the ``runs`` group."""
    redrive = add_command(
        runs,
        "redrive",
        _redrive,
        "continue a failed or stranded run (or, with --from, any ended run) in a new execution",
    )
    redrive.add_argument("run_id", metavar="RUN_ID", nargs="?", help="the run (or use --status)")
    redrive.add_argument(
        "--from", dest="from_step", metavar="STEP", help="go back to the checkpoint before STEP"
    )
    _version_options(redrive)
    bulk = redrive.add_argument_group("bulk (instead of RUN_ID)")
    bulk.add_argument("--status", help="redrive every run in this status (failed)")
    bulk.add_argument("--workflow", help="with --status: only runs of this workflow")
    bulk.add_argument(
        "--since", metavar="DURATION", help="with --status: only runs that ended within, e.g. 24h"
    )
    bulk.add_argument("--dry-run", action="store_true", help="show the plan; change nothing")
    bulk.add_argument(
        "--rate",
        type=positive_float,
        default=None,
        metavar="N",
        help="with --status: redrives started per second (default 2, at most 25)",
    )

    fork = add_command(
        runs, "fork", _fork, "start a new run from another's checkpoint before a step, with edits"
    )
    fork.add_argument("run_id", metavar="RUN_ID")
    fork.add_argument("--at", required=True, metavar="STEP", help="the step the new run starts at")
    fork.add_argument(
        "--set",
        dest="edits",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="set a shared_context key in the new run's state (repeatable)",
    )
    _version_options(fork)


def _version_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--version",
        type=_version,
        metavar="N|latest",
        help="continue on this workflow version (latest: the active one; a draft by its number)",
    )
    parser.add_argument("--reason", help="why (recorded in the run's timeline)")
    parser.add_argument(
        "--force",
        action="store_true",
        help="accept a version the run's state does not fit (recorded)",
    )


def _version(text: str) -> int | str:
    if text == "latest":
        return text
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise argparse.ArgumentTypeError(f"{text!r} is not a version: write a number or 'latest'")


def parse_duration(text: str) -> timedelta:
    """``30m``, ``24h``, ``7d`` as a ``timedelta``.

    Raises:
        UsageError: not a number followed by s, m, h, d or w.
    """
    found = _DURATION.match(text.strip())
    if not found:
        raise UsageError(f"--since {text!r}: write a number and a unit (s, m, h, d, w), e.g. 24h")
    return timedelta(**{_UNITS[found.group(2)]: int(found.group(1))})


def cli_actor() -> str:
    """Who typed the command, for the timeline: ``cli:`` and the operator's login here."""
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli"


def _redrive(ctx: Context, args: argparse.Namespace) -> int:
    if args.status is not None:
        if args.run_id or args.from_step:
            raise UsageError("give either RUN_ID (with --from) or --status, not both")
        return _redrive_bulk(ctx, args)
    if args.run_id is None:
        raise UsageError("name the run (RUN_ID) or choose runs with --status failed")
    if args.workflow or args.since or args.dry_run or args.rate:
        raise UsageError("--workflow, --since, --dry-run and --rate go with --status")
    from langorch.app.recovery.redrive import redrive

    container = ctx.container
    done = redrive(
        container,
        args.run_id,
        from_step=args.from_step,
        version=args.version,
        reason=args.reason,
        actor=cli_actor(),
        force=args.force,
    )
    status = _drive_here(ctx, container, done.run_id) if done.started else None
    ctx.out.result({**done.to_dict(), "status": status}, lambda: _redriven_text(done, status))
    return 0 if status in (None, "succeeded", "waiting_approval") else 1


def _drive_here(ctx: Context, container: Any, run_id: str) -> str | None:
    """Without a state machine this process is the runner (as for ``runs start``): run the
    segments until the run ends or parks on an approval; returns its status (``None``: the
    stack's state machine runs it)."""
    if ctx.settings.state_machine_arn:
        return None
    import time

    from langorch.app.runs import RunSegment, run_segment

    result = run_segment(RunSegment(run_id), container)
    while result.status in ("continue", "sleeping"):
        resume = None
        if result.status == "sleeping":
            time.sleep(min(float(result.seconds or 0), 5.0))
            resume = {"woke": True}
        result = run_segment(RunSegment(run_id, resume=resume), container)
    return result.status


def _redriven_text(done: Any, status: str | None) -> str:
    if not done.started:
        return (
            f"{done.run_id} was already redriven (attempt {done.attempt}, execution "
            f"{done.execution_name}); nothing started"
        )
    where = f"from {done.from_step}" if done.from_step else "from its last checkpoint"
    lines = [
        f"redriven {done.run_id} {where} on version {done.to_version} "
        f"(attempt {done.attempt}, execution {done.execution_name})"
    ]
    if done.diff is not None:
        diff = done.diff
        for label, steps in (("added", diff.added), ("removed", diff.removed)):
            if steps:
                lines.append(f"  steps {label}: {', '.join(steps)}")
        if diff.changed:
            lines.append(f"  steps changed: {', '.join(diff.changed)}")
    if done.decision_kept:
        lines.append(
            f"  its approval was {done.decision_kept} while the run was stranded: "
            "the run continues with that decision, nobody is asked again"
        )
    elif done.approval_kept:
        lines.append("  its pending approval stays valid: the links already sent still work")
    for problem in done.problems:
        lines.append(f"  forced past: {problem}")
    if status is not None:
        lines.append(f"ran it here (this stack has no state machine): {status}")
    lines.append(f"follow it with: langorch runs show {done.run_id}")
    return "\n".join(lines)


def _redrive_bulk(ctx: Context, args: argparse.Namespace) -> int:
    from langorch.app.recovery.bulk import DEFAULT_PER_SECOND, plan_redrives, redrive_many
    from langorch.domain.runs import RunStatus

    try:
        status = RunStatus(args.status)
    except ValueError:
        raise UsageError(f"--status {args.status!r} is not a run status (use failed)") from None
    since = parse_duration(args.since) if args.since else None
    container = ctx.container
    plan = plan_redrives(container, status=status, workflow_id=args.workflow, since=since)
    say(ctx, f"plan: redrive {len(plan)} {status.value} run(s)")
    for run in plan:
        say(ctx, f"  {run.run_id}  {run.workflow_id}@{run.workflow_version}")
    if args.dry_run or not plan:
        planned = [{"run_id": r.run_id, "workflow_id": r.workflow_id} for r in plan]
        ctx.out.result({"dry_run": args.dry_run, "plan": planned}, f"{len(plan)} run(s) planned")
        return 0

    def progress(done: int, total: int, item: Any) -> None:
        say(ctx, f"[{done}/{total}] {item.run_id} {item.outcome} {item.detail}".rstrip())

    items = redrive_many(
        container,
        plan,
        version=args.version,
        reason=args.reason,
        actor=cli_actor(),
        force=args.force,
        per_second=args.rate or DEFAULT_PER_SECOND,
        on_progress=progress,
    )
    for item in items:
        if item.outcome == "redriven":
            _drive_here(ctx, container, item.run_id)
    counts = {o: sum(i.outcome == o for i in items) for o in ("redriven", "already", "refused")}
    summary = ", ".join(f"{n} {o}" for o, n in counts.items())
    ctx.out.result(
        {"dry_run": False, "runs": [i.to_dict() for i in items], "summary": counts},
        lambda: (
            f"done: {summary}"
            + "".join(
                f"\n  refused {i.run_id}: {i.detail}" for i in items if i.outcome == "refused"
            )
        ),
    )
    return 0 if counts["refused"] == 0 else 1


def _fork(ctx: Context, args: argparse.Namespace) -> int:
    from langorch.app.recovery.forks import fork

    edits = parse_edits(args.edits, "--set")
    container = ctx.container
    done = fork(
        container,
        args.run_id,
        at_step=args.at,
        edits=edits,
        version=args.version,
        reason=args.reason,
        actor=cli_actor(),
        force=args.force,
    )
    status = _drive_here(ctx, container, done.run_id)
    edited = f" with {', '.join(done.edited)} set" if done.edited else ""
    ran = f"\nran it here (this stack has no state machine): {status}" if status else ""
    ctx.out.result(
        {**done.to_dict(), "status": status},
        f"forked {done.forked_from} at {done.at_step}{edited}: new run {done.run_id} "
        f"(version {done.workflow_version}){ran}\nfollow it with: langorch runs show {done.run_id}",
    )
    return 0 if status in (None, "succeeded", "waiting_approval") else 1
