"""``langorch audit``: export the approval evidence of runs as a hash-chained ledger, verify one."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path

from langorch.cli.context import Context
from langorch.cli.errors import UsageError
from langorch.cli.registry import Subparsers, add_command, add_group


def register(subparsers: Subparsers) -> None:
    """Add the ``audit`` group."""
    audit = add_group(subparsers, "audit", "approval evidence: export a ledger, verify one")
    export = add_command(
        audit, "export", _export, "a run's (or every run's since a date) approval ledger"
    )
    which = export.add_mutually_exclusive_group(required=True)
    which.add_argument("--run", metavar="RUN_ID", help="this run's approvals")
    which.add_argument("--since", metavar="DATE", help="runs with an approval asked since (ISO)")
    export.add_argument("--format", choices=["jsonl"], default="jsonl", help="jsonl (default)")
    export.add_argument("--output", metavar="FILE", help="write here (default: standard output)")
    check = add_command(audit, "verify", _verify, "check a ledger's chain; name the first bad line")
    check.add_argument("file", metavar="FILE")


def _export(ctx: Context, args: argparse.Namespace) -> None:
    from langorch.app.evidence import export_ledger

    since = _date(args.since) if args.since else None
    entries = export_ledger(ctx.container, run_id=args.run, since=since)
    text = "".join(json.dumps(e, sort_keys=True, ensure_ascii=False) + "\n" for e in entries)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        ctx.out.result(
            {"entries": len(entries), "file": args.output},
            lambda: f"{len(entries)} entries -> {args.output}",
        )
    else:
        ctx.out.result({"entries": entries}, lambda: text.rstrip("\n"))


def _verify(ctx: Context, args: argparse.Namespace) -> int:
    from langorch.domain.evidence import verify

    try:
        lines = Path(args.file).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UsageError(f"cannot read {args.file}: {exc.strerror}") from exc
    found = verify(lines)
    document = {
        "ok": found.ok,
        "entries": found.entries,
        "first_bad": found.first_bad,
        "reason": found.reason,
    }
    ctx.out.result(
        document,
        lambda: (
            f"ok: {found.entries} entries, chain intact"
            if found.ok
            else f"BROKEN at line {found.first_bad}: {found.reason}"
        ),
    )
    return 0 if found.ok else 1


def _date(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"--since {text!r} is not a date: write 2026-11-01 or 2026-11-01T09:00"
        ) from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)
