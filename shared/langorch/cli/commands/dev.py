"""``langorch dev``: the local stack, in the foreground until Ctrl-C."""

from __future__ import annotations

import argparse
import json
import signal
import threading
from pathlib import Path
from typing import Any

from langorch.cli.context import Context
from langorch.cli.errors import UsageError
from langorch.cli.registry import Subparsers, add_command, bounded_int

_EXAMPLES = "examples"
DEFAULT_GATEWAY_PORT = 4567
DEFAULT_EMULATOR_PORT = 4566


def register(subparsers: Subparsers) -> None:
    """Add the ``dev`` command."""
    dev = add_command(subparsers, "dev", _dev, "run langorch on this machine (AWS emulator)")
    dev.add_argument(
        "--port",
        type=bounded_int(1, 65535),
        default=DEFAULT_GATEWAY_PORT,
        help="the HTTP gateway's port, the base of webhook URLs and approval links; fixed so "
        f"emailed links keep working across restarts (default {DEFAULT_GATEWAY_PORT})",
    )
    dev.add_argument(
        "--emulator-port",
        type=bounded_int(1, 65535),
        default=DEFAULT_EMULATOR_PORT,
        help=f"the AWS emulator's port (default {DEFAULT_EMULATOR_PORT})",
    )
    dev.add_argument(
        "--examples",
        metavar="DIR",
        help=f"a folder of <name>/definitions.yaml to register (default: ./{_EXAMPLES})",
    )
    dev.add_argument(
        "--verbose",
        action="store_true",
        help="also show the functions' JSON log lines (always in <home>/logs/functions.jsonl)",
    )
    dev.add_argument(
        "--console-port",
        type=int,
        default=8765,
        help="the run console's port (default 8765; 0: none)",
    )
    dev.add_argument(
        "--console-email",
        metavar="ADDRESS",
        help="the address approvals list you under: the console decides those as you "
        "(without it, approvers use their emailed links)",
    )
    dev.add_argument(
        "--slack",
        action="store_true",
        help="serve a fake Slack on loopback and post approval requests there too "
        "(README, 'Approvals in Slack')",
    )
    dev.add_argument(
        "--trace",
        metavar="console|URL",
        help="OpenTelemetry traces of runs (one per run, GenAI spans): 'console' prints the "
        "spans, a URL sends them to that OTLP/HTTP collector, e.g. "
        "http://localhost:4318/v1/traces (README, 'Production checklist')",
    )
    dev.add_argument(
        "--ready-only", action="store_true", help="start, print where everything is, stop"
    )


def _llm_line(settings: Any) -> str:
    """The model steps call by default: scripted answers offline, else provider, model, URL."""
    provider = settings.default_llm_provider
    if provider == "offline":
        scripted = (
            f" (scripted answers: {settings.offline_script})" if settings.offline_script else ""
        )
        return f"offline{scripted}"
    model = settings.default_llm_model or "the provider's default model"
    where = ""
    if provider == "openai":
        where = f" at {settings.openai_base_url or 'https://api.openai.com/v1'}"
    elif provider == "anthropic":
        where = f" at {settings.anthropic_base_url or 'https://api.anthropic.com'}"
    elif provider == "bedrock":
        where = f" in {settings.bedrock_region or settings.region}"
    return f"{provider}, {model}{where} (steps may name their own llm_provider / llm_model)"


def _dev(ctx: Context, args: argparse.Namespace) -> int:
    import time

    try:
        from langorch.local.stack import LOG_FILE, start_local_stack
    except ImportError as exc:  # moto and the SQLite saver ship with the `local` extra
        raise UsageError(
            "langorch dev needs the local extra: pip install 'langorch[local]'"
        ) from exc

    started = time.monotonic()
    examples = _examples(ctx, args.examples)
    home = ctx.home()
    if (home / "stack.json").exists():
        from langorch.cli.target import endpoint_reachable

        endpoint = json.loads((home / "stack.json").read_text()).get("endpoint_url")
        if endpoint and endpoint_reachable(endpoint):
            raise UsageError(f"a local stack is already running at {endpoint}")
    stack = start_local_stack(
        home=home,
        port=args.emulator_port,
        gateway_port=args.port,
        examples=examples,
        console=True,
        verbose=args.verbose,
        # Started and registered before the examples, which bind to them, and before in-flight
        # runs resume: a run that calls a tool finds it at its new address.
        servers=True,
        slack=args.slack,
        # Ready once every port accepts requests; the state machine warms up behind it.
        background_warm_up=True,
        trace=args.trace,
    )
    from langorch.local.example_tools import ExampleTools

    tools: ExampleTools = stack.example_servers or ExampleTools()
    console_url = _start_console(ctx, stack, args.console_port, args.console_email)
    took = time.monotonic() - started
    warm_up = stack.warm_up
    assert warm_up is not None  # every stack has one
    warm_up.start()  # now that every port is up: imports beside them would only slow them
    if args.ready_only or ctx.out.json_mode:
        warm_up.wait()  # both figures in the one result
    settings = stack.settings
    lines = [
        f"langorch dev is ready in {took:.1f} s; {_warm_line(warm_up)}",
        f"  store         {home / 'langorch.db'}  (SQLite: runs, approvals, workflows, "
        "checkpoints, memory, secrets, schedules, logs)",
        f"  bucket        {home / 'bucket'}  (drop files here, or `langorch files put`)",
        f"  emulator      {settings.endpoint_url}  (moto: Step Functions runs the state machine)",
        f"  state machine {settings.state_machine_arn}",
        f"  stack file    {stack.stack_file}  (every langorch command finds it)",
        f"  functions     {', '.join(sorted(stack.functions))}  (Lambda-like sandboxes: "
        "worker processes, one invocation at a time each)",
        f"  logs          {settings.log_group_prefix}<function> in the store  "
        "(`langorch runs logs RUN_ID`)",
        f"  outbox        {settings.outbox_dir}  (approval emails and their links)",
        f"  JSON logs     {home / LOG_FILE}"
        + ("  (shown here too: --verbose)" if args.verbose else "  (--verbose shows them here)"),
    ]
    if stack.gateway_url:
        lines.append(f"  gateway       {stack.gateway_url}  (webhooks, approval pages)")
    if stack.fake_slack is not None:
        lines.append(
            f"  slack (fake)  {stack.fake_slack.base_url}  (approval requests posted there; "
            f"a press goes to {stack.gateway_url or 'the gateway'}/slack/interactions)"
        )
    lines += _recovered_lines(stack)
    lines += _console_line(console_url)
    if stack.background:
        lines.append(f"  running       {', '.join(stack.background)}")
    lines += [
        f"  LLM           {_llm_line(settings)}",
        *(
            [f"  model limits  {json.dumps(settings.model_limits)}  (LANGORCH_MODEL_LIMITS)"]
            if settings.model_limits
            else []
        ),
        f"  workflows     {', '.join(stack.examples) or '(none)'}",
        *[
            f"  tool          {name} -> {url}  (MCP, example)"
            for name, url in tools.registered.items()
        ],
        *[
            f"  agent         {name} -> {url}  (stand-in, example)"
            for name, url in tools.agents.items()
        ],
        "",
        "try, in another terminal (`source .venv/bin/activate` first puts langorch on PATH):",
        "  langorch workflows list",
        '  langorch runs start blog_review --input \'{"commit_message": "Add S3 offload"}\' --wait',
        "  langorch runs list",
        "  langorch runs logs RUN_ID",
        "",
        "Ctrl-C stops it.",
    ]
    ctx.out.result(
        {
            "ready_seconds": round(took, 2),
            "warm_seconds": _seconds(warm_up),
            "warm_up_error": warm_up.error,
            "endpoint_url": settings.endpoint_url,
            "stack_file": str(stack.stack_file),
            "state_machine_arn": settings.state_machine_arn,
            "functions": stack.functions,
            "gateway_url": stack.gateway_url,
            "console_url": console_url,
            "outbox_dir": settings.outbox_dir,
            "background": stack.background,
            "workflows": stack.examples,
            "recovered": stack.recovered,
            "tools": tools.registered,
            "agents": tools.agents,
        },
        "\n".join(lines),
    )
    if args.ready_only:
        stack.stop()  # its tool servers with it
        return 0 if warm_up.error is None else 1
    if warm_up.seconds is None:

        def say_when_warm() -> None:
            warm_up.wait()
            print("\n".join([_warm_line(warm_up), *_recovered_lines(stack)]), flush=True)

        threading.Thread(target=say_when_warm, name="langorch-say-warm", daemon=True).start()
    try:
        wait_until_stopped()
    finally:
        stack.stop()
    return 0


def _seconds(warm_up: Any) -> float | None:
    return None if warm_up.seconds is None else round(warm_up.seconds, 2)


def _warm_line(warm_up: Any) -> str:
    """What the state machine's warm-up has come to (moto's interpreter costs seconds)."""
    if warm_up.error is not None:
        return f"the state machine did not start: {warm_up.error} (runs cannot start; see above)"
    if warm_up.seconds is None:
        return "the state machine warms up behind it (runs started now wait for it, not fail)"
    return f"state machine warm in {warm_up.seconds:.1f} s"


def _recovered_lines(stack: Any) -> list[str]:
    if not stack.recovered:
        return []
    return [
        f"  recovered     {len(stack.recovered)} runs in flight when it last stopped "
        "(approvals stay parked, waits resume, segments continue from their checkpoint)"
    ]


def wait_until_stopped() -> None:
    """Block until Ctrl-C or SIGTERM (``langorch dev`` and ``langorch console`` in the
    foreground); the caller stops what it started."""
    stopped = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopped.set())
    stopped.wait()


def _start_console(ctx: Context, stack: Any, port: int, email: str | None) -> str | None:
    """The run console beside the stack (stopped with it), acting as the OS user known by
    ``email``; ``None`` when off or its port is taken (said, not fatal: the stack works
    without it)."""
    if not port:
        return None
    from langorch.console.operator import OperatorError, local_operator
    from langorch.console.server import serve_console

    try:
        operator = local_operator(address=email)
    except OperatorError as exc:
        raise UsageError(f"--console-email: {exc}") from exc
    try:
        running = serve_console(
            stack.container, target="the local stack", port=port, operator=operator
        )
    except OSError as exc:
        ctx.out.warn(f"no console: port {port} is taken ({exc}); pass --console-port")
        return None
    stack._stops.append(running.stop)
    return running.startup_url


def _console_line(url: str | None) -> list[str]:
    return [f"  console       {url}  (runs, graphs, approvals in a browser)"] if url else []


def _examples(ctx: Context, named: str | None) -> Path | None:
    """The examples folder; a named one must exist, a missing default is said, not skipped."""
    folder = Path(named or _EXAMPLES)
    if folder.is_dir():
        return folder
    if named is not None:
        raise UsageError(
            f"--examples {named}: no such folder; give a folder of <name>/definitions.yaml "
            "(the repository's is examples/)"
        )
    ctx.out.warn(
        f"no {_EXAMPLES}/ folder here: starting with no workflows "
        "(run from the repository, or pass --examples DIR)"
    )
    return None
