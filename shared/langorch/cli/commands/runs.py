"""``langorch runs start | list | show``.

``runs start --local FILE…`` runs a workflow on this machine with no AWS account: the whole
engine (definitions store, runs table, DynamoDB checkpointer, memory) runs against an in-process
AWS emulator, approvals are answered at the prompt (or with ``--approve`` / ``--reject``) and
waits are slept through.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from langorch.cli.context import Context
from langorch.cli.errors import UsageError
from langorch.cli.output import table
from langorch.cli.registry import Subparsers, add_command, add_group


def register(subparsers: Subparsers) -> None:
    """Add the ``runs`` group."""
    runs = add_group(subparsers, "runs", "start and inspect runs")

    start = add_command(runs, "start", _start, "start a run of a workflow")
    start.add_argument("workflow", nargs="?", help="workflow id (default: the only one in FILE)")
    start.add_argument("--input", default="{}", metavar="JSON", help="the run's input (JSON)")
    start.add_argument("--input-file", metavar="FILE", help="read the input from a JSON file")
    start.add_argument("--user", default="default", help="whose memory the run uses")
    start.add_argument(
        "--local",
        nargs="+",
        metavar="FILE",
        help="run on this machine in an in-process AWS emulator, with these definitions",
    )
    answer = start.add_mutually_exclusive_group()
    answer.add_argument("--approve", action="store_true", help="approve every approval")
    answer.add_argument("--reject", action="store_true", help="reject every approval")
    start.add_argument(
        "--edit",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="with --approve: set an editable key (repeatable)",
    )
    start.add_argument("--comment", default="", help="with --approve/--reject: the comment")
    start.add_argument("--script", metavar="FILE", help="offline LLM answers per block/step")
    start.add_argument(
        "--repeat", type=int, default=1, metavar="N", help="--local: run N times (memory persists)"
    )
    start.add_argument(
        "--max-sleep",
        type=float,
        default=5.0,
        metavar="S",
        help="--local: sleep at most S seconds per wait step",
    )

    listing = add_command(runs, "list", _list, "recent runs")
    listing.add_argument("--workflow", help="only runs of this workflow")
    listing.add_argument("--status", help="only runs with this status")
    listing.add_argument("--limit", type=int, default=20)

    show = add_command(runs, "show", _show, "a run's timeline: steps, approvals, errors")
    show.add_argument("run_id", metavar="RUN_ID")


def _input(args: argparse.Namespace) -> dict[str, Any]:
    text = Path(args.input_file).read_text() if args.input_file else args.input
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--input is not JSON: {exc.msg} at column {exc.colno}") from exc
    if not isinstance(data, dict):
        raise UsageError('--input must be a JSON object, e.g. {"key": "value"}')
    return data


def _edits(pairs: list[str]) -> dict[str, Any]:
    edits: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--edit {pair!r}: write KEY=JSON, e.g. restaurant='\"Chipotle\"'")
        try:
            edits[key] = json.loads(raw)
        except json.JSONDecodeError:
            edits[key] = raw  # a bare word is a string
    return edits


def _say(ctx: Context, message: str) -> None:
    # Conversation with the person at the terminal goes to stderr: stdout stays the result.
    print(message, file=ctx.out.stderr)


def _answerer(ctx: Context, args: argparse.Namespace) -> Any:
    edits = _edits(args.edit)

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        title = request.get("title") or request.get("step_id")
        _say(ctx, f"approval needed: {title}")
        if request.get("message"):
            _say(ctx, f"  {request['message']}")
        for key, value in (request.get("context") or {}).items():
            _say(ctx, f"  {key}: {json.dumps(value, default=str)[:200]}")
        if args.approve or args.reject:
            decision = "approved" if args.approve else "rejected"
            _say(ctx, f"  -> {decision} (from the command line)")
            return {
                "decision": decision,
                "approver": "cli",
                "comment": args.comment,
                "edits": {k: v for k, v in edits.items() if k in (request.get("editable") or {})},
            }
        if not sys.stdin.isatty():
            raise UsageError("an approval is waiting: pass --approve or --reject (no terminal)")
        return _prompt(ctx, request)

    return answer


def _prompt(ctx: Context, request: dict[str, Any]) -> dict[str, Any]:
    while True:
        choice = input("approve or reject? [a/r] ").strip().lower()
        if choice in ("a", "approve", "r", "reject"):
            break
    decision = "approved" if choice.startswith("a") else "rejected"
    edits: dict[str, Any] = {}
    for key, current in (request.get("editable") or {}).items():
        raw = input(f"  {key} [{json.dumps(current, default=str)}]: ").strip()
        if raw:
            try:
                edits[key] = json.loads(raw)
            except json.JSONDecodeError:
                edits[key] = raw
    comment = input("  comment (optional): ").strip()
    return {"decision": decision, "approver": "cli", "comment": comment, "edits": edits}


def _start(ctx: Context, args: argparse.Namespace) -> int | None:
    if args.local:
        return _start_local(ctx, args)
    if not args.workflow:
        raise UsageError("name the workflow to run: langorch runs start WORKFLOW [--input JSON]")
    from langorch.app.container import Container

    # Until the event pipeline runs segments in Step Functions, this process is the runner:
    # it starts the run in the target's tables and drives it, answering approvals here.
    container = Container(ctx.settings)
    return _run(ctx, args, container, args.workflow, _input(args))


def _run(
    ctx: Context, args: argparse.Namespace, container: Any, workflow: str, data: dict[str, Any]
) -> int:
    import time

    from langorch.app.runs import StartRun, drive, start_run
    from langorch.cli.timeline import render_run

    answer = _answerer(ctx, args)
    documents: list[dict[str, Any]] = []
    code = 0
    for _ in range(max(1, args.repeat)):
        run, _created = start_run(StartRun(workflow, input=data, user_id=args.user), container)
        result = drive(
            run.run_id,
            container,
            on_approval=answer,
            sleep=lambda s: time.sleep(min(s, args.max_sleep)),
        )
        stored = container.runs.get_run(run.run_id)
        events = container.runs.get_timeline(run.run_id)
        documents.append(
            {
                "run": stored.model_dump(mode="json"),
                "timeline": [e.model_dump(mode="json") for e in events],
            }
        )
        if not ctx.out.json_mode:
            ctx.out.result(None, render_run(stored, events) + "\n")
        if result.status != "succeeded":
            code = 1
    if ctx.out.json_mode:
        ctx.out.result({"runs": documents}, "")
    return code


def _start_local(ctx: Context, args: argparse.Namespace) -> int:
    import os

    try:
        from moto import mock_aws
    except ImportError as exc:  # moto ships with the `local` extra, not in the Lambda bundle
        raise UsageError("--local needs the emulator: pip install 'langorch[local]'") from exc

    from langorch.app.container import Container
    from langorch.app.definitions import register_files, seed_builtins
    from langorch.config import Settings
    from langorch.llm import LLMRegistry

    data = _input(args)
    files = [Path(f) for f in args.local]
    script = args.script
    if script is None:  # an example's scripted answers sit beside its definitions
        beside = files[0].parent / "offline.yaml"
        script = str(beside) if beside.exists() else None
    # The emulator needs credentials of some kind; they never leave this process.
    for name, value in (("AWS_ACCESS_KEY_ID", "local"), ("AWS_SECRET_ACCESS_KEY", "local")):
        os.environ.setdefault(name, value)
    with mock_aws():
        container = Container(
            Settings(region="us-east-1"),
            llm=LLMRegistry(default_provider="offline", offline_script=script),
        )
        container.ensure_resources()
        seed_builtins(container.definitions)
        results = register_files(container.definitions, [str(f) for f in files])
        workflow = args.workflow or _only_workflow(results)
        return _run(ctx, args, container, workflow, data)


def _only_workflow(results: list[Any]) -> str:
    workflows: list[str] = [r.id for r in results if r.kind == "workflow"]
    if len(workflows) != 1:
        raise UsageError(
            f"the files define {len(workflows)} workflows ({', '.join(workflows) or 'none'}): "
            "name the one to run"
        )
    return workflows[0]


def _list(ctx: Context, args: argparse.Namespace) -> None:
    from langorch.adapters.dynamodb.runs import RunsRepository
    from langorch.domain.runs import RunStatus

    status = RunStatus(args.status) if args.status else None
    runs = RunsRepository(ctx.client("dynamodb"), ctx.settings.runs_table).list_runs(
        workflow_id=args.workflow, status=status, limit=args.limit
    )
    rows = [
        {
            "run_id": r.run_id,
            "workflow": f"{r.workflow_id}@{r.workflow_version}",
            "status": r.status.value,
            "trigger": r.trigger.type,
            "created_at": r.created_at.isoformat(timespec="seconds"),
        }
        for r in runs
    ]
    columns = [
        ("run_id", "RUN"),
        ("workflow", "WORKFLOW"),
        ("status", "STATUS"),
        ("trigger", "TRIGGER"),
        ("created_at", "CREATED"),
    ]
    ctx.out.result({"runs": rows}, lambda: table(rows, columns))


def _show(ctx: Context, args: argparse.Namespace) -> None:
    from langorch.adapters.dynamodb.runs import RunsRepository
    from langorch.cli.timeline import render_run

    repo = RunsRepository(ctx.client("dynamodb"), ctx.settings.runs_table)
    run = repo.get_run(args.run_id)
    events = repo.get_timeline(args.run_id)
    ctx.out.result(
        {
            "run": run.model_dump(mode="json"),
            "timeline": [e.model_dump(mode="json") for e in events],
        },
        lambda: render_run(run, events),
    )
