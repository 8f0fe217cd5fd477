"""``langorch runs start | list | show | logs | cancel | pause | resume | reconcile``.

Against a stack with a run state machine (``langorch dev``, a deployed stack), ``runs start``
starts the run's execution and, with ``--wait``, follows the run record until it ends or parks
on an approval. Without one — or with ``--approve`` / ``--reject``, which answer approvals from
this terminal — this process drives the run itself.

``runs start --local FILE…`` runs a workflow on this machine with no AWS account and no
emulator: the whole engine runs in this process on the embedded stores (SQLite, in a folder of
its own that goes when the command ends), approvals are answered at the prompt (or with
``--approve`` / ``--reject``) and waits are slept through.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from langorch.cli.commands._start_input import (
    answerer,
    check_answer_flags,
    check_driven_flags,
    check_launch_flags,
    read_input,
    say,
)
from langorch.cli.context import Context
from langorch.cli.errors import UsageError
from langorch.cli.output import table, terminal_width
from langorch.cli.registry import (
    Subparsers,
    add_command,
    add_group,
    bounded_int,
    positive_float,
)

_MAX_LIST = 1000
_DEFAULT_TIMEOUT = 900.0
_DEFAULT_PAUSE_WAIT = 60.0
_DEFAULT_MAX_SLEEP = 5.0


def register(subparsers: Subparsers) -> None:
    """Add the ``runs`` group."""
    runs = add_group(subparsers, "runs", "start and inspect runs")

    start = add_command(runs, "start", _start, "start a run of a workflow")
    start.add_argument("workflow", nargs="?", help="workflow id (default: the only one in FILE)")
    given = start.add_mutually_exclusive_group()
    given.add_argument("--input", metavar="JSON", help="the run's input (JSON, default {})")
    given.add_argument("--input-file", metavar="FILE", help="read the input from a JSON file")
    start.add_argument("--user", default="default", help="whose memory the run uses")
    start.add_argument(
        "--started-by",
        metavar="EMAIL",
        default=os.environ.get("LANGORCH_STARTED_BY") or None,
        help="who starts the run (default: $LANGORCH_STARTED_BY); an approval with "
        "separation_of_duties does not ask them",
    )
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
    start.add_argument("--comment", help="with --approve/--reject: the comment")
    start.add_argument(
        "--wait",
        action="store_true",
        help="follow the run until it ends or waits on an approval (state machine stacks): "
        "its events as they happen on stderr, then the outcome",
    )
    start.add_argument(
        "--timeout",
        type=positive_float,
        metavar="S",
        help=f"with --wait: give up following after S seconds (default {_DEFAULT_TIMEOUT:.0f}; "
        "the run goes on)",
    )
    start.add_argument(
        "--script", metavar="FILE", help="with --local: offline LLM answers per block/step"
    )
    start.add_argument(
        "--artifacts",
        metavar="DIR",
        help="with --local: keep the files the run attaches in DIR (default: they go with the "
        "command's temporary stores)",
    )
    start.add_argument(
        "--repeat",
        type=bounded_int(1, 100),
        metavar="N",
        help="run N times, memory persisting (--local, --approve or --reject)",
    )
    start.add_argument(
        "--max-sleep",
        type=positive_float,
        metavar="S",
        help=f"sleep at most S seconds per wait step (default {_DEFAULT_MAX_SLEEP:.0f}; "
        "--local, --approve or --reject)",
    )

    listing = add_command(runs, "list", _list, "recent runs")
    listing.add_argument("--workflow", help="only runs of this workflow")
    listing.add_argument("--status", help="only runs with this status (queued, running, paused, …)")
    listing.add_argument(
        "--limit", type=bounded_int(1, _MAX_LIST), default=20, help="at most this many"
    )

    show = add_command(runs, "show", _show, "a run's timeline: steps, approvals, errors")
    show.add_argument("run_id", metavar="RUN_ID")

    logs = add_command(runs, "logs", _logs, "the run's log lines from CloudWatch Logs")
    logs.add_argument("run_id", metavar="RUN_ID")

    cancel = add_command(runs, "cancel", _cancel, "cancel a run and stop its execution")
    cancel.add_argument("run_id", metavar="RUN_ID")
    cancel.add_argument("--reason", default="cancelled from the command line")

    pause = add_command(
        runs,
        "pause",
        _pause,
        "let the run's current step finish, then park it until `runs resume` (its approvals "
        "and waits keep their timers); needs a stack (`langorch dev` or --stack)",
    )
    pause.add_argument("run_id", metavar="RUN_ID")
    pause.add_argument("--reason", default="", help="why (on the run's timeline)")
    pause.add_argument(
        "--wait",
        action="store_true",
        help="wait until the run has paused (or ended) before answering",
    )
    pause.add_argument(
        "--timeout",
        type=positive_float,
        metavar="S",
        help=f"with --wait: give up after S seconds (default {_DEFAULT_PAUSE_WAIT:.0f})",
    )

    resume = add_command(runs, "resume", _resume, "go on with a paused run, from where it stopped")
    resume.add_argument("run_id", metavar="RUN_ID")
    resume.add_argument("--reason", default="", help="why (on the run's timeline)")

    reconcile = add_command(
        runs,
        "reconcile",
        _reconcile,
        "end runs whose execution ended while their record did not (prints what it fixed)",
    )
    reconcile.add_argument(
        "--dry-run", action="store_true", help="only list the stranded runs; change nothing"
    )

    from langorch.cli.commands import recovery  # redrive and fork: their own module

    recovery.register_into(runs)
    from langorch.cli.commands import run_diff  # runs diff: its own module

    run_diff.register_into(runs)


def _start(ctx: Context, args: argparse.Namespace) -> int | None:
    check_answer_flags(args)
    if args.local:
        check_driven_flags(args)
        return _start_local(ctx, args)
    if not args.workflow:
        raise UsageError("name the workflow to run: langorch runs start WORKFLOW [--input JSON]")

    data = read_input(args)
    container = ctx.container
    if ctx.settings.state_machine_arn and not (args.approve or args.reject):
        check_launch_flags(args)
        return _launch(ctx, args, container, args.workflow, data)
    check_driven_flags(args)
    # No state machine (or approvals answered here): this process is the runner. It starts
    # the run in the target's tables and drives it, answering approvals itself.
    return _run(ctx, args, container, args.workflow, data)


_POLL_SECONDS = 0.5
_PARKED_FOR_PEOPLE = frozenset({"waiting_approval"})
"""Statuses ``--wait`` stops at: nothing happens until a person decides (a sleep goes on by
itself, so it is waited through)."""


def _launch(
    ctx: Context, args: argparse.Namespace, container: Any, workflow: str, data: dict[str, Any]
) -> int:
    from langorch.app.runs import StartRun, launch_run
    from langorch.cli.timeline import render_run

    run, created = launch_run(
        StartRun(workflow, input=data, user_id=args.user, trigger_detail=_starter(args)), container
    )
    if not created:
        ctx.out.warn(f"run {run.run_id} already existed; its execution was not started again")
    execution = {"arn": run.execution_arn, "status": None, "reason": None}
    if not args.wait:
        ctx.out.result(
            {"run": run_json(run), "execution": execution},
            f"started {run.run_id} ({run.workflow_id}@{run.workflow_version})\n"
            f"  follow it:  langorch runs show {run.run_id}   |   langorch runs logs {run.run_id}",
        )
        return 0
    timeout = _DEFAULT_TIMEOUT if args.timeout is None else args.timeout
    run, events = _follow(ctx, container, run.run_id, timeout=timeout)
    document: dict[str, Any] = {
        "run": run_json(run),
        "execution": execution,
        "timeline": [e.model_dump(mode="json") for e in events],
    }
    where = _approval_whereabouts(ctx, run) if run.status.value in _PARKED_FOR_PEOPLE else None
    if where is not None:
        document["approval"] = where
    if ctx.out.json_mode:
        ctx.out.result({"runs": [document]}, "")
    else:
        # The events were told on stderr as they happened: the result is the outcome only.
        ctx.out.result(None, render_run(run, events, timeline=False) + "\n")
        if where is not None:
            say(ctx, where["message"])
    if run.is_terminal:
        return 0 if run.status.value == "succeeded" else 1
    if run.status.value in _PARKED_FOR_PEOPLE:
        return 0
    say(ctx, f"still {run.status.value} after {timeout:.0f} s; the run goes on")
    return 1


def _follow(ctx: Context, container: Any, run_id: str, *, timeout: float) -> tuple[Any, list[Any]]:
    """Poll the run record until it ends, parks for a person, or ``timeout`` passes.

    New timeline events are told on stderr as they appear (stdout stays the result).
    """
    import time

    from langorch.cli.timeline import AskedAt, event_line

    deadline = time.monotonic() + timeout
    shown = 0
    asked = AskedAt()
    while True:
        run = container.runs.get_run(run_id)
        events = container.runs.get_timeline(run_id)
        if not ctx.out.json_mode:
            for event in events[shown:]:
                line = event_line(event, asked)
                if line:
                    say(ctx, line)
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
            from langorch.domain.approvals.record import approval_id_for

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

    answer = answerer(ctx, args)
    documents: list[dict[str, Any]] = []
    code = 0
    max_sleep = _DEFAULT_MAX_SLEEP if args.max_sleep is None else args.max_sleep
    for _ in range(args.repeat or 1):
        run, _created = start_run(
            StartRun(workflow, input=data, user_id=args.user, trigger_detail=_starter(args)),
            container,
        )
        result = drive(
            run.run_id,
            container,
            on_approval=answer,
            sleep=lambda s: time.sleep(min(s, max_sleep)),
        )
        stored = container.runs.get_run(run.run_id)
        events = container.runs.get_timeline(run.run_id)
        artifacts = _artifacts(container, run.run_id)
        documents.append(
            {
                "run": run_json(stored),
                "execution": {"arn": None, "status": None, "reason": _DRIVEN_HERE},
                "timeline": [e.model_dump(mode="json") for e in events],
                "artifacts": artifacts,
            }
        )
        if not ctx.out.json_mode:
            kept = _artifact_lines(artifacts, temporary=bool(args.local and not args.artifacts))
            ctx.out.result(None, render_run(stored, events) + kept + "\n")
        if result.status != "succeeded":
            code = 1
    if ctx.out.json_mode:
        ctx.out.result({"runs": documents}, "")
    return code


def _start_local(ctx: Context, args: argparse.Namespace) -> int:
    import tempfile

    try:
        from langorch.composition.embedded import EmbeddedContainer
    except ImportError as exc:  # the SQLite saver ships with the `local` extra
        raise UsageError("--local needs the local extra: pip install 'langorch[local]'") from exc
    from langorch.app.definitions import register_files, seed_builtins
    from langorch.config import Settings

    data = read_input(args)
    files = [Path(f) for f in args.local]
    script = args.script
    if script is None:  # an example's scripted answers sit beside its definitions
        beside = files[0].parent / "offline.yaml"
        script = str(beside) if beside.exists() else None
    # The embedded stores (SQLite) in a folder of this command's own, gone when it ends; the LLM
    # settings are the user's (LANGORCH_DEFAULT_LLM_PROVIDER, LANGORCH_OPENAI_API_KEY, …).
    from langorch.app.tool_registry import known_tool_names
    from langorch.local.example_tools import start_example_servers

    with tempfile.TemporaryDirectory(prefix="langorch-local-") as home:
        settings = Settings(
            region="us-east-1",
            offline_script=script,
            local_home=home,
            artifacts_dir=str(Path(args.artifacts).resolve()) if args.artifacts else None,
        )
        container = EmbeddedContainer(settings)
        container.ensure_resources()
        seed_builtins(container.definitions)
        # An example's tool servers and stand-in agents sit beside its definitions too: started
        # here, registered in this command's stores, stopped when it ends.
        servers = start_example_servers(container, sorted({f.resolve().parent for f in files}))
        try:
            results = register_files(
                container.definitions,
                [str(f) for f in files],
                tools=known_tool_names(container.tool_servers),
                agents=container.agents.list(),
            )
            workflow = _local_workflow(args.workflow, results)
            return _run(ctx, args, container, workflow, data)
        finally:
            servers.stop()


def _local_workflow(named: str | None, results: list[Any]) -> str:
    workflows: list[str] = [r.id for r in results if r.kind == "workflow"]
    if named is not None:
        if named not in workflows:
            raise UsageError(
                f"--local files define the workflows {', '.join(workflows) or '(none)'}, "
                f"not {named}: name one of them, or leave the name out when there is one"
            )
        return named
    if len(workflows) != 1:
        raise UsageError(
            f"the files define {len(workflows)} workflows ({', '.join(workflows) or 'none'}): "
            "name the one to run"
        )
    return workflows[0]


def _list(ctx: Context, args: argparse.Namespace) -> None:
    from langorch.domain.prices import format_usd

    status = _status(args.status)
    runs = ctx.container.runs.list_runs(workflow_id=args.workflow, status=status, limit=args.limit)
    rows = [
        {
            "run_id": r.run_id,
            "workflow": f"{r.workflow_id}@{r.workflow_version}",
            "status": r.status.value,
            "trigger": r.trigger.type,
            "created_at": r.created_at.isoformat(timespec="seconds"),
            "cost_usd": r.cost_usd,
            "cost": format_usd(r.cost_usd),
        }
        for r in runs
    ]
    columns = [
        ("run_id", "RUN"),
        ("workflow", "WORKFLOW"),
        ("status", "STATUS"),
        ("trigger", "TRIGGER"),
        ("cost", "COST"),
        ("created_at", "CREATED"),
    ]
    ctx.out.result(
        {"runs": rows},
        lambda: table(rows, columns, max_width=terminal_width(), shrink=("workflow",)),
    )


def _status(text: str | None) -> Any:
    from langorch.domain.runs import RunStatus

    if not text:
        return None
    try:
        return RunStatus(text)
    except ValueError:
        known = ", ".join(s.value for s in RunStatus)
        raise UsageError(f"--status {text!r} is not a run status: use one of {known}") from None


def _show(ctx: Context, args: argparse.Namespace) -> None:
    from langorch.cli.timeline import render_run
    from langorch.domain.runs import current_execution

    repo = ctx.container.runs
    run = repo.get_run(args.run_id)
    events = repo.get_timeline(args.run_id)
    execution = _execution(ctx, current_execution(run))
    document = run_json(run)
    artifacts = _artifacts(ctx.container, run.run_id)

    def text() -> str:
        where = (
            f"  execution {execution['arn']} ({execution['status'] or execution['reason']})"
            if execution.get("arn")
            else f"  no Step Functions execution: {execution['reason']}"
        )
        head, _, rest = render_run(run, events).partition("\n\n")
        return f"{head}\n{where}\n\n{rest}{_artifact_lines(artifacts)}"

    ctx.out.result(
        {
            "run": document,
            "execution": execution,
            "timeline": [e.model_dump(mode="json") for e in events],
            "artifacts": artifacts,
        },
        text,
    )


def _artifacts(container: Any, run_id: str) -> list[dict[str, Any]] | str:
    """The run's attached files, each with its link (made now: a presigned URL in the cloud,
    printed for the operator and never logged; a path locally), or why they cannot be listed."""
    from langorch.app.artifacts import run_artifacts
    from langorch.domain.errors import StorageError

    try:
        linked = run_artifacts(run_id, container.artifacts)
    except StorageError as exc:  # the run is still shown
        return f"cannot be listed: {exc}"
    return [{**item.artifact.record(), "link": item.link} for item in linked]


def _artifact_lines(artifacts: list[dict[str, Any]] | str, *, temporary: bool = False) -> str:
    """The artifacts as text: step, name, size and type, then the link on a line of its own."""
    from langorch.domain.artifacts import LINK_SECONDS, human_size

    if isinstance(artifacts, str):
        return f"\n\nartifacts: {artifacts}"
    if not artifacts:
        return ""
    lines = []
    for a in artifacts:
        lines.append(f"  {a['step_id']}  {a['name']}  {human_size(a['size'])}  {a['content_type']}")
        lines.append(f"    {a['link']}")
    if any(a["link"].startswith("https://") for a in artifacts):
        lines.append(f"  (links work for {LINK_SECONDS // 60} minutes: `runs show` makes new ones)")
    if temporary:
        lines.append("  (in this command's temporary stores: --artifacts DIR keeps them)")
    return "\n\nartifacts:\n" + "\n".join(lines)


def run_json(run: Any) -> dict[str, Any]:
    """A run record as JSON, without ``execution_arn``: the record never stores it (it derives
    from the run id), so it read null; the documents carry an ``execution`` object instead."""
    document: dict[str, Any] = run.model_dump(mode="json")
    document.pop("execution_arn", None)
    return document


_DRIVEN_HERE = (
    "the run was driven by the langorch command that started it "
    "(`runs start --local`, `--approve`/`--reject`, or a stack without a state machine)"
)


def _execution(ctx: Context, run_id: str) -> dict[str, Any]:
    """The run's Step Functions execution (ARN and status), or why there is none."""
    from langorch.domain.errors import NotFoundError, StorageError

    arn = ctx.settings.state_machine_arn
    if not arn:
        return {
            "arn": None,
            "status": None,
            "reason": f"this stack has no state machine: {_DRIVEN_HERE}",
        }
    try:
        described = ctx.container.executions.describe(run_id)
    except NotFoundError:
        return {"arn": None, "status": None, "reason": _DRIVEN_HERE}
    except StorageError as exc:  # the run is still shown, from its record
        arn_of = ctx.container.executions.execution_arn(run_id)
        return {"arn": arn_of, "status": None, "reason": f"status unknown: {exc}"}
    return {"arn": described["executionArn"], "status": described["status"], "reason": None}


def _logs(ctx: Context, args: argparse.Namespace) -> None:

    repo = ctx.container.runs
    run = repo.get_run(args.run_id)
    logs = ctx.container.logs
    groups = logs.groups(ctx.settings.log_group_prefix)
    # A minute of slack: a trigger's lines come just before the run record is written.
    start_ms = int(run.created_at.timestamp() * 1000) - 60_000
    lines = logs.lines_for_run(args.run_id, groups, start_ms=start_ms)
    # Log lines name a failure's type only (messages may quote the run's data); the reason is
    # in the run's timeline, which the same caller may read: put it beside its line.
    reasons = _failure_reasons(repo.get_timeline(args.run_id))
    rows = []
    for line in lines:
        fields = line.fields() or {"message": line.message}
        row: dict[str, Any] = {
            "group": line.group,
            "stream": line.stream,
            "timestamp": line.timestamp,
            "fields": fields,
        }
        reason = _reason_for(fields, reasons)
        if reason:
            row["reason"] = reason
        rows.append(row)
    ctx.out.result({"run_id": args.run_id, "lines": rows}, lambda: _render_logs(rows))


def _failure_reasons(events: list[Any]) -> dict[str, list[str]]:
    """Each step's failure reasons (``Type: message``), in the order they happened."""
    from langorch.domain.runs import TimelineEventType

    failed = (TimelineEventType.step_failed, TimelineEventType.step_retried)
    reasons: dict[str, list[str]] = {}
    for event in events:
        if event.type in failed and event.step_id and event.error is not None:
            reason = f"{event.error.type}: {event.error.message}"
            reasons.setdefault(event.step_id, []).append(reason)
    return reasons


def _reason_for(fields: dict[str, Any], reasons: dict[str, list[str]]) -> str | None:
    step = fields.get("step_id")
    if not fields.get("error_type") or not isinstance(step, str) or not reasons.get(step):
        return None
    # One log line per failed attempt: the attempts' reasons in turn, the last one repeating.
    queue = reasons[step]
    return queue.pop(0) if len(queue) > 1 else queue[0]


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
        message = str(fields.get("message", ""))
        if row.get("reason"):
            message += f": {row['reason']}"
        elif fields.get("error_type"):
            message += f": {fields['error_type']}"
        out.append(
            f"{at}  {function:<28} {fields.get('level', ''):<7} {message}"
            + (f"  [{where}]" if where else "")
        )
    return "\n".join(out)


def _cancel(ctx: Context, args: argparse.Namespace) -> int:
    from langorch.app.runs import cancel_run
    from langorch.domain.runs import current_execution

    run, changed = cancel_run(args.run_id, ctx.container, actor="cli", reason=args.reason)
    cancelled = run.status.value == "cancelled"
    if changed:
        text = f"cancelled {run.run_id}"
        if ctx.container.settings.state_machine_arn:
            # The one stopped: a run that continued (or was redriven) is in another than its id.
            text += f" (stopped its execution {current_execution(run)})"
    elif cancelled:
        text = f"{run.run_id} was already cancelled"
    else:
        text = f"{run.run_id} already ended as {run.status.value}: nothing to cancel"
    ctx.out.result({"run": run_json(run), "cancelled": changed}, text)
    return 0 if cancelled else 1


_PAUSE_NEEDS_A_STACK = (
    "pausing needs a stack whose state machine runs the run (`langorch dev`, or a deployed "
    "stack with --stack NAME): a run started with `runs start --local` runs inside that "
    "command, and nothing else can reach it"
)


def _stack_for_pausing(ctx: Context) -> Any:
    """The target's container, refusing a target that runs no executions to park."""
    from langorch.cli.target import TargetError

    try:
        settings = ctx.settings
    except TargetError as exc:
        raise UsageError(f"{exc}. {_PAUSE_NEEDS_A_STACK}") from None
    if not settings.state_machine_arn:
        raise UsageError(f"this stack has no run state machine: {_PAUSE_NEEDS_A_STACK}")
    return ctx.container


def _pause(ctx: Context, args: argparse.Namespace) -> int:
    from langorch.app.pause import pause_run
    from langorch.cli.commands.recovery import cli_actor

    container = _stack_for_pausing(ctx)
    done = pause_run(args.run_id, container, actor=cli_actor(), reason=args.reason)
    if args.wait and done.state == "pausing":
        done = _until_paused(container, done, args.timeout or _DEFAULT_PAUSE_WAIT)
    run = done.run
    ctx.out.result(
        {"run": run_json(run), "asked": done.asked, "state": done.state},
        lambda: _paused_text(done),
    )
    return 1 if done.state == "ended" else 0


def _until_paused(container: Any, done: Any, timeout: float) -> Any:
    import time

    from langorch.app.pause import Paused

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(_POLL_SECONDS)
        run = container.runs.get_run(done.run.run_id)
        if run.is_terminal or run.status.value == "paused":
            return Paused(run, done.asked)
    return done


def _paused_text(done: Any) -> str:
    run = done.run
    if done.state == "ended":
        return f"{run.run_id} already ended as {run.status.value}: nothing to pause"
    pause = run.pause
    who = f" by {pause.by}" if pause is not None and not done.asked else ""
    if done.state == "pausing":
        head = "asked" if done.asked else f"{run.run_id} was already asked{who}"
        target = f" {run.run_id}" if done.asked else ""
        return (
            f"{head}{target} to pause: it pauses when its current step finishes\n"
            f"  follow it:  langorch runs show {run.run_id}"
        )
    head = f"paused {run.run_id}" if done.asked else f"{run.run_id} was already paused{who}"
    if run.pending is not None:
        kind = run.pending.kind
        step = run.pending.request.get("step_id", "")
        what = {"approval": "approval", "wait": "wait", "resource": "resource queue"}[kind]
        head += f" (its {what} at {step} stays open: an answer is held until the resume)"
    return f"{head}\n  go on with:  langorch runs resume {run.run_id}"


def _resume(ctx: Context, args: argparse.Namespace) -> int:
    from langorch.app.pause import resume_run
    from langorch.cli.commands.recovery import cli_actor

    container = _stack_for_pausing(ctx)
    done = resume_run(args.run_id, container, actor=cli_actor(), reason=args.reason)
    run = done.run
    if done.resumed:
        text = f"resumed {run.run_id}"
        if run.status.value in ("waiting_approval", "sleeping") and run.pending is not None:
            text += f" (it is {run.status.value} again, on the same {run.pending.kind})"
    elif run.is_terminal:
        text = f"{run.run_id} already ended as {run.status.value}: nothing to resume"
    else:
        text = f"{run.run_id} is not paused ({run.status.value}): nothing to resume"
    ctx.out.result({"run": run_json(run), "resumed": done.resumed}, text)
    return 0 if done.resumed or not run.is_terminal else 1


def _starter(args: argparse.Namespace) -> dict[str, str]:
    """The run's ``started_by`` (``--started-by``), checked to be one person's address."""
    from langorch.domain.identities import IdentityError, canonical_identity

    who = (args.started_by or "").strip()
    if not who:
        return {}
    if len(who) > 254:
        raise UsageError(f"--started-by {who[:80]!r} is not an email address (over 254 chars)")
    try:
        canonical_identity(who)
    except IdentityError as exc:
        raise UsageError(f"--started-by {who[:80]!r} {exc.reason}; {exc.hint}") from None
    return {"started_by": who}


def _reconcile(ctx: Context, args: argparse.Namespace) -> int:
    from langorch.app.recovery.reconcile import reconcile_runs

    repairs = reconcile_runs(ctx.container, dry_run=args.dry_run)
    verb = "would end" if args.dry_run else "ended"
    lines = [
        f"{verb} {r.run_id} ({r.workflow_id}): record {r.record_status}, execution "
        f"{r.execution_status} — {r.reason}"
        for r in repairs
        if args.dry_run or r.repaired
    ]
    text = "\n".join(lines) if lines else "no stranded runs"
    ctx.out.result({"dry_run": args.dry_run, "runs": [r.to_dict() for r in repairs]}, text)
    return 0
