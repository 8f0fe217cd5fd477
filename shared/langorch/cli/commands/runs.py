"""``langorch runs start | list | show | logs | cancel``.

Against a stack with a run state machine (``langorch dev``, a deployed stack), ``runs start``
starts the run's execution and, with ``--wait``, follows the run record until it ends or parks
on an approval. Without one — or with ``--approve`` / ``--reject``, which answer approvals from
this terminal — this process drives the run itself.

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
    start.add_argument(
        "--wait",
        action="store_true",
        help="follow the run until it ends or waits on an approval (state machine stacks)",
    )
    start.add_argument(
        "--timeout",
        type=float,
        default=900.0,
        metavar="S",
        help="--wait: give up following after S seconds (the run goes on)",
    )
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

    logs = add_command(runs, "logs", _logs, "the run's log lines from CloudWatch Logs")
    logs.add_argument("run_id", metavar="RUN_ID")

    cancel = add_command(runs, "cancel", _cancel, "cancel a run and stop its execution")
    cancel.add_argument("run_id", metavar="RUN_ID")
    cancel.add_argument("--reason", default="cancelled from the command line")


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

    container = Container(ctx.settings)
    if ctx.settings.state_machine_arn and not (args.approve or args.reject):
        return _launch(ctx, args, container, args.workflow, _input(args))
    # No state machine (or approvals answered here): this process is the runner. It starts
    # the run in the target's tables and drives it, answering approvals itself.
    return _run(ctx, args, container, args.workflow, _input(args))


_POLL_SECONDS = 0.5
_PARKED_FOR_PEOPLE = frozenset({"waiting_approval"})
"""Statuses ``--wait`` stops at: nothing happens until a person decides (a sleep goes on by
itself, so it is waited through)."""


def _launch(
    ctx: Context, args: argparse.Namespace, container: Any, workflow: str, data: dict[str, Any]
) -> int:
    from langorch.app.runs import StartRun, launch_run
    from langorch.cli.timeline import render_run

    run, created = launch_run(StartRun(workflow, input=data, user_id=args.user), container)
    if not created:
        ctx.out.warn(f"run {run.run_id} already existed; its execution was not started again")
    if not args.wait:
        ctx.out.result(
            {"run": run.model_dump(mode="json")},
            f"started {run.run_id} ({run.workflow_id}@{run.workflow_version})\n"
            f"  follow it:  langorch runs show {run.run_id}   |   langorch runs logs {run.run_id}",
        )
        return 0
    run, events = _follow(ctx, container, run.run_id, timeout=args.timeout)
    document: dict[str, Any] = {
        "run": run.model_dump(mode="json"),
        "timeline": [e.model_dump(mode="json") for e in events],
    }
    where = _approval_whereabouts(ctx, run) if run.status.value in _PARKED_FOR_PEOPLE else None
    if where is not None:
        document["approval"] = where
    if ctx.out.json_mode:
        ctx.out.result({"runs": [document]}, "")
    else:
        ctx.out.result(None, render_run(run, events) + "\n")
        if where is not None:
            _say(ctx, where["message"])
    if run.is_terminal:
        return 0 if run.status.value == "succeeded" else 1
    if run.status.value in _PARKED_FOR_PEOPLE:
        return 0
    _say(ctx, f"still {run.status.value} after {args.timeout:.0f} s; the run goes on")
    return 1


def _follow(ctx: Context, container: Any, run_id: str, *, timeout: float) -> tuple[Any, list[Any]]:
    """Poll the run record until it ends, parks for a person, or ``timeout`` passes.

    New timeline events are told on stderr as they appear (stdout stays the result).
    """
    import time

    from langorch.cli.timeline import event_line

    deadline = time.monotonic() + timeout
    shown = 0
    while True:
        run = container.runs.get_run(run_id)
        events = container.runs.get_timeline(run_id)
        if not ctx.out.json_mode:
            for event in events[shown:]:
                line = event_line(event)
                if line:
                    _say(ctx, line)
            shown = len(events)
        if run.is_terminal or run.status.value in _PARKED_FOR_PEOPLE:
            return run, events
        if time.monotonic() >= deadline:
            return run, events
        time.sleep(_POLL_SECONDS)


def _approval_whereabouts(ctx: Context, run: Any) -> dict[str, Any]:
    """Where the parked approval can be decided: the outbox locally, email in the cloud."""
    import time

    pending = run.pending
    approval_id: str | None = None
    if pending is not None:
        try:
            from langorch.domain.approvals import approval_id_for

            approval_id = approval_id_for(run.run_id, pending.interrupt_id)
        except ImportError:
            approval_id = None
    title = (pending.request.get("title") if pending else None) or "an approval"
    outbox = ctx.settings.outbox_dir
    if not outbox:
        return {
            "approval_id": approval_id,
            "message": f"waiting on {title}: the approvers were emailed a link"
            + (f" (langorch approvals show {approval_id})" if approval_id else ""),
        }
    # The email is written by the request_approval function just after the run parks.
    files: list[str] = []
    deadline = time.monotonic() + 5.0
    while approval_id and not files and time.monotonic() < deadline:
        files = sorted(str(p) for p in Path(outbox).glob(f"*{approval_id}*.json"))
        if not files:
            time.sleep(0.2)
    found = f"the email with its link is {files[-1]}" if files else f"the email lands in {outbox}"
    return {
        "approval_id": approval_id,
        "outbox_dir": outbox,
        "email_files": files,
        "message": f"waiting on {title}: {found}",
    }


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
    try:
        from moto import mock_aws
    except ImportError as exc:  # moto ships with the `local` extra, not in the Lambda bundle
        raise UsageError("--local needs the emulator: pip install 'langorch[local]'") from exc

    import boto3

    from langorch.app.container import Container
    from langorch.app.definitions import register_files, seed_builtins
    from langorch.config import Settings

    data = _input(args)
    files = [Path(f) for f in args.local]
    script = args.script
    if script is None:  # an example's scripted answers sit beside its definitions
        beside = files[0].parent / "offline.yaml"
        script = str(beside) if beside.exists() else None
    # The LLM settings are the user's (LANGORCH_DEFAULT_LLM_PROVIDER, LANGORCH_OPENAI_API_KEY,
    # LANGORCH_OPENAI_BASE_URL, …); the AWS resources are the in-process emulator's.
    settings = Settings(region="us-east-1", offline_script=script)
    # The emulator gets fixed fake credentials of its own; the environment's are left alone
    # (moto's mock_credentials off) so Bedrock calls use the user's real AWS credential chain,
    # and go to Bedrock itself (passthrough), not to the emulator.
    emulator = boto3.Session(
        aws_access_key_id="local",
        aws_secret_access_key="local",  # noqa: S106 - the emulator's, not a secret
        region_name=settings.region,
    )
    moto_config: Any = {
        "core": {"mock_credentials": False, "passthrough": {"services": ["bedrockruntime"]}}
    }
    with mock_aws(config=moto_config):
        container = Container(settings, session=emulator)
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


def _logs(ctx: Context, args: argparse.Namespace) -> None:
    from langorch.adapters.dynamodb.runs import RunsRepository
    from langorch.adapters.logs import CloudWatchLogs

    run = RunsRepository(ctx.client("dynamodb"), ctx.settings.runs_table).get_run(args.run_id)
    logs = CloudWatchLogs(ctx.client("logs"))
    groups = logs.groups(ctx.settings.log_group_prefix)
    # A minute of slack: a trigger's lines come just before the run record is written.
    start_ms = int(run.created_at.timestamp() * 1000) - 60_000
    lines = logs.lines_for_run(args.run_id, groups, start_ms=start_ms)
    rows = [
        {
            "group": line.group,
            "stream": line.stream,
            "timestamp": line.timestamp,
            "fields": line.fields() or {"message": line.message},
        }
        for line in lines
    ]
    ctx.out.result({"run_id": args.run_id, "lines": rows}, lambda: _render_logs(rows))


def _render_logs(rows: list[dict[str, Any]]) -> str:
    from datetime import UTC, datetime

    if not rows:
        return "(no log lines for this run yet)"
    out = []
    for row in rows:
        fields = row["fields"]
        at = datetime.fromtimestamp(row["timestamp"] / 1000, tz=UTC).strftime("%H:%M:%S.%f")[:-3]
        function = str(row["group"]).rsplit("/", 1)[-1]
        where = " ".join(
            f"{key}={fields[key]}" for key in ("segment", "step_id", "status") if key in fields
        )
        out.append(
            f"{at}  {function:<28} {fields.get('level', ''):<7} {fields.get('message', '')}"
            + (f"  [{where}]" if where else "")
        )
    return "\n".join(out)


def _cancel(ctx: Context, args: argparse.Namespace) -> int:
    from langorch.app.container import Container
    from langorch.app.runs import cancel_run

    run, changed = cancel_run(args.run_id, Container(ctx.settings), actor="cli", reason=args.reason)
    cancelled = run.status.value == "cancelled"
    if changed:
        text = f"cancelled {run.run_id}"
    elif cancelled:
        text = f"{run.run_id} was already cancelled"
    else:
        text = f"{run.run_id} already ended as {run.status.value}: nothing to cancel"
    ctx.out.result({"run": run.model_dump(mode="json"), "cancelled": changed}, text)
    return 0 if cancelled else 1
