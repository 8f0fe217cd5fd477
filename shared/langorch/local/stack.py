"""The local stack: the whole pipeline on one machine, its state under one home folder.

``langorch dev`` starts one and writes ``<home>/stack.json``; every other command finds the stack
through that file. What it is made of:

- **Stores**: the embedded container (:mod:`langorch.composition.embedded`): runs, approvals,
  definitions, checkpoints, memory, secrets, schedules and log lines in ``<home>/langorch.db``
  (SQLite, WAL), dropped files in ``<home>/bucket/``, emails in ``<home>/outbox/``. Durable by
  construction: a stop, a crash or ``kill -9`` loses nothing acknowledged, and starting takes as
  long with a year of history as with none.
- **Step Functions**: moto's interpreter runs the package's ASL (:mod:`langorch.local.emulator`,
  which also lists the one place the stack steps into moto's behaviour). Executions live in
  memory; after a restart every run still in flight gets a new one, from its record and its
  checkpoint (:mod:`langorch.app.recovery.restart`).
- **Lambda**: the dispatcher (:mod:`langorch.local.lambdas`) runs ``functions/`` in Lambda-like
  sandboxes; the gateway (webhooks, approval pages), the scheduler tick and the bucket watcher
  invoke it as API Gateway, EventBridge Scheduler and EventBridge would.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from langorch.config import Settings
from langorch.domain.errors import LangorchError
from langorch.local._invoke import ACCOUNT_ID, TRIGGER, LambdaInvoker, Transport, function_arn
from langorch.local.emulator import EmulatorError, PortBusyError, ensure_port_free

__all__ = ["LocalStack", "PortBusyError", "free_port", "start_local_stack"]

STACK_FILE = "stack.json"
OUTBOX_DIR = "outbox"
OLD_JOURNAL = "state/emulator.journal"
"""Where homes of the previous layout kept their state (a journal of emulator writes)."""
SCHEDULER_ROLE = f"arn:aws:iam::{ACCOUNT_ID}:role/langorch-local-scheduler"
"""The role schedules name (nothing assumes it locally; the cloud's schedules need one)."""

logger = logging.getLogger(__name__)


class HomeLayoutError(LangorchError):
    """The home was written by an older langorch whose state this one cannot read."""


@dataclass
class LocalStack:
    """A running local stack and what was provisioned in it."""

    settings: Settings
    home: Path
    examples: list[str] = field(default_factory=list)
    functions: dict[str, str] = field(default_factory=dict)
    """Handler package -> function ARN."""
    gateway_url: str | None = None
    background: list[str] = field(default_factory=list)
    """What runs beside the emulator: ``gateway``, ``ticker``, ``bucket-events``."""
    recovered: list[str] = field(default_factory=list)
    """Runs that were in flight when the stack last stopped and got a new execution."""
    container: Any = None
    """The stack's own container (the embedded stores, in this process)."""
    transport: Transport | None = None
    """Invokes a function of the stack (the dispatcher)."""
    bucket_events: Any = None
    """The bucket watcher (``pump()`` delivers what is due now)."""
    ticker: Any = None
    """The scheduler tick (``fire_due(now)`` fires what is due)."""
    example_servers: Any = None
    fake_slack: Any = None
    """The fake Slack (``slack=True``): its recorded messages, its base URL."""
    """The examples' tool servers and agents (``servers=True``): an ``ExampleTools``."""
    warm_up: WarmUp | None = None
    """The state machine's warm-up (the interpreter, the machine, the runs recovered)."""
    _stops: list[Callable[[], None]] = field(default_factory=list)
    _flush_logs: Callable[[float], bool] | None = None

    @property
    def stack_file(self) -> Path:
        return self.home / STACK_FILE

    def invoker(self, function_name: str) -> LambdaInvoker:
        """Invoke one of the stack's functions from this process (tests, the tick)."""
        assert self.transport is not None
        return LambdaInvoker(function_name, self.transport)

    def flush_logs(self, timeout: float = 30.0) -> bool:
        """Wait until the log lines of every invocation that has returned are stored.

        Returns:
            ``False`` when ``timeout`` seconds passed first.
        """
        return True if self._flush_logs is None else self._flush_logs(timeout)

    def stop(self) -> None:
        """Stop everything this stack started (newest first) and forget the stack file."""
        self.stack_file.unlink(missing_ok=True)
        if self.warm_up is not None:
            self.warm_up.join()  # what it starts (executions) is stopped below with the rest
        while self._stops:
            self._stops.pop()()


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def check_home_layout(home: Path) -> None:
    """Refuse a home written by the previous layout instead of starting it empty.

    Raises:
        HomeLayoutError: the home holds an emulator journal and no database.
    """
    from langorch.adapters.sqlite._db import DATABASE_FILE

    if (home / OLD_JOURNAL).exists() and not (home / DATABASE_FILE).exists():
        raise HomeLayoutError(
            f"{home} was written by an older langorch (its state is a journal of emulator "
            f"writes, {home / OLD_JOURNAL}, which this version does not read): move it away "
            f"(`mv {home} {home}.old`) and register your workflows again, or pass --home NEW"
        )


EXAMPLE_FILES = ("definitions.yaml", "*.ckp.json")
"""What an example folder's definitions are: langorch's own file and CKP procedures."""


def example_files(folders: list[Path]) -> list[str]:
    """The definition files of example folders, in order."""
    return [
        str(f) for folder in folders for glob in EXAMPLE_FILES for f in sorted(folder.glob(glob))
    ]


def merged_offline_script(example_dirs: list[Path], target: Path) -> Path | None:
    """Merge the examples' scripted LLM answers (``offline.yaml``) into one file."""
    merged: dict[str, Any] = {}
    for directory in example_dirs:
        script = directory / "offline.yaml"
        if script.exists():
            merged.update(yaml.safe_load(script.read_text()) or {})
    if not merged:
        return None
    target.write_text(yaml.safe_dump(merged, sort_keys=True))
    return target


def _tracing(trace: str | None) -> dict[str, Any]:
    """The settings of ``langorch dev --trace``: ``console`` prints runs' spans, a URL sends
    them to that OTLP/HTTP collector (``http://localhost:4318/v1/traces``)."""
    if trace is None:
        return {}
    if trace == "console":
        return {"otel_exporter": "console"}
    return {"otel_exporter": "otlp", "otel_endpoint": trace}


def start_local_stack(
    *,
    home: Path,
    port: int | None = None,
    gateway_port: int | None = None,
    examples: Path | None = None,
    region: str = "us-east-1",
    console: bool = False,
    verbose: bool = False,
    servers: bool = False,
    slack: bool = False,
    before_recovery: Callable[[LocalStack], None] | None = None,
    background_warm_up: bool = False,
    trace: str | None = None,
) -> LocalStack:
    """Start the local stack with everything provisioned.

    The stores (created when missing), the built-in blocks and the examples with their triggers;
    the emulator running the state machine from the package's ASL; the four functions' dispatcher
    (their log lines in the local log store); the link-signing key; the outbox; the HTTP gateway,
    the scheduler tick and the bucket watcher. Runs that were in flight get new executions
    before the gateway opens. Everything is written to ``<home>/stack.json``.

    Args:
        home: the folder that holds the stack's state (created when missing).
        port: the emulator's port (default: a free one).
        gateway_port: the HTTP gateway's port, the base of every approval link (default: a
            free one; ``langorch dev`` passes a fixed one so links outlive a restart).
        examples: a folder of ``<name>/definitions.yaml`` to register (``None``: none).
        region: the region in ARNs and events.
        console: for a person at a terminal (``langorch dev``): one human line per event on
            stdout, the functions' JSON lines in ``<home>/logs/functions.jsonl``.
        verbose: with ``console``, the JSON lines on stdout as well.
        servers: start the examples' MCP tool servers and stand-in agents (``tools.yaml``,
            ``agents.yaml``) and register them before the examples' definitions, which then
            bind to them (``stack.example_servers``; stopped with the stack).
        slack: serve a fake Slack Web API on loopback (``langorch.local.fake_slack``) and send
            approval requests to Slack too (``approval_channels``: email, slack, console);
            its bot token and a fresh signing secret are stored in the local secrets.
        before_recovery: runs once the stack can serve functions, before in-flight runs get
            their executions again: what those runs call must be up first (the examples' tool
            servers, each on a new address and token).
        background_warm_up: return once every port accepts requests, before the state
            machine's warm-up, which the caller starts (``stack.warm_up.start()``) when what it
            adds is up too (``langorch dev``: the console); by default, return warm.
        trace: ``console`` prints runs' OpenTelemetry spans; a URL sends them to that OTLP/HTTP
            collector (``None``: no OpenTelemetry).

    Raises:
        PortBusyError: the emulator's or the gateway's port is taken.
        HomeLayoutError: the home was written by an older layout.
    """
    from langorch.app.definitions import seed_builtins
    from langorch.app.trigger_sync import register_and_sync
    from langorch.composition.embedded import EmbeddedContainer
    from langorch.local.emulator import start_emulator
    from langorch.local.lambdas import Dispatcher, function_environment
    from langorch.local.logs import CloudWatchSink

    started = time.monotonic()
    home = home.resolve()
    home.mkdir(parents=True, exist_ok=True)
    check_home_layout(home)
    port = port or free_port()
    reserved: socket.socket | None = None
    if gateway_port:
        ensure_port_free(gateway_port, what="the HTTP gateway", option="--port")
    else:
        # Held bound until the gateway binds it: a port only looked up here could be handed
        # meanwhile to a sandbox's outgoing connection.
        reserved = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        reserved.bind(("127.0.0.1", 0))
        gateway_port = int(reserved.getsockname()[1])
    example_dirs = (
        sorted({p.parent for glob in EXAMPLE_FILES for p in examples.glob(f"*/{glob}")})
        if (examples is not None and examples.is_dir())
        else []
    )
    script = merged_offline_script(example_dirs, home / "offline.yaml")
    settings = Settings(
        region=region,
        endpoint_url=f"http://127.0.0.1:{port}",
        local_home=str(home),
        offline_script=str(script) if script else None,
        outbox_dir=str(home / OUTBOX_DIR),
        public_base_url=f"http://127.0.0.1:{gateway_port}",
        trigger_function_arn=function_arn(region, TRIGGER),
        scheduler_role_arn=SCHEDULER_ROLE,
        **_tracing(trace),
    )
    stack = LocalStack(settings=settings, home=home)
    try:
        if slack:
            settings = stack.settings = _with_fake_slack(stack, settings)
        # Its port is bound now; moto is imported and served by the warm-up (below).
        emulator = start_emulator(port)
        stack._stops.append(emulator.stop)
        container = EmbeddedContainer(settings)
        container.ensure_resources(engine=False)  # LangGraph's tables: the first segment's
        seed_builtins(container.definitions)
        _ensure_signing_key(container, settings.link_signing_secret)
        if slack:
            _ensure_slack_secret(container, settings.slack_secret)

        sink = CloudWatchSink(container.logs, settings.log_group_prefix)
        # Stopped after the dispatcher and what invokes it: what they logged is written first.
        stack._stops.append(sink.close)
        stack._flush_logs = sink.flush
        dispatcher = Dispatcher(**_console_options(home, sink, console, verbose)).install()
        stack._stops.append(dispatcher.uninstall)
        stack.transport = dispatcher.transport()
        stack.functions = _function_arns(region)
        # Created by the warm-up (below): its name, and so its ARN, are known now.
        settings = settings.model_copy(update={"state_machine_arn": state_machine_arn(region)})
        dispatcher.environment = function_environment(settings)
        sink.ensure_groups(list(_function_names()))
        stack.settings = settings
        stack.container = container = EmbeddedContainer(settings)
        if servers:
            from langorch.local.example_tools import start_example_servers

            stack.example_servers = start_example_servers(container, example_dirs)
            stack._stops.append(stack.example_servers.stop)
        if example_dirs:
            # Registered like `langorch workflows put`: webhook secrets and schedules too.
            batch = register_and_sync(example_files(example_dirs), container)
            stack.examples = [r.id for r in batch.results if r.kind == "workflow"]

        if before_recovery is not None:
            before_recovery(stack)
        stack.warm_up = WarmUp(stack, emulator, started)
        if reserved is not None:
            reserved.close()
            reserved = None
        _start_background(stack, gateway_port)
        if console:
            _for_a_person(stack)
        write_stack_file(stack.stack_file, _stack_document(stack))
        if not background_warm_up:
            stack.warm_up.start()
            stack.warm_up.wait()
            if stack.warm_up.error:
                raise EmulatorError(stack.warm_up.error)
        return stack
    except BaseException:
        if reserved is not None:
            reserved.close()
        stack.stop()
        raise


def _with_fake_slack(stack: LocalStack, settings: Settings) -> Settings:
    """Serve the fake Slack and point the settings at it (requests go to Slack too)."""
    from langorch.local.fake_slack import FakeSlack, serve

    running = serve(FakeSlack(open_workspace=True))
    stack.fake_slack = running
    stack._stops.append(running.stop)
    return settings.model_copy(
        update={
            "slack_base_url": running.base_url,
            "approval_channels": ["email", "slack", "console"],
        }
    )


def _ensure_slack_secret(container: Any, name: str) -> None:
    """The fake Slack's bot token and a signing secret (kept across restarts)."""
    import secrets

    if not container.secrets.exists(name):
        value = {"bot_token": "xoxb-langorch-dev", "signing_secret": secrets.token_hex(16)}
        container.secrets.put_json(name, value, description="langorch dev: the fake Slack app")


def _function_arns(region: str) -> dict[str, str]:
    from langorch.local.lambdas import FUNCTIONS

    return {package: function_arn(region, name) for package, name in FUNCTIONS.items()}


def _function_names() -> list[str]:
    from langorch.local.lambdas import FUNCTIONS

    return list(FUNCTIONS.values())


def state_machine_arn(region: str) -> str:
    """The run state machine's ARN in the emulator (its name is fixed)."""
    from langorch.local.statemachine import STATE_MACHINE_NAME

    return f"arn:aws:states:{region}:{ACCOUNT_ID}:stateMachine:{STATE_MACHINE_NAME}"


class WarmUp:
    """What the local stack finishes after it is ready, in a background thread: moto served and
    its Step Functions interpreter imported, the run state machine created from the package's
    ASL, the runs in flight when the stack last stopped given new executions, then the slots
    the schedules with ``catch_up`` missed while it was down caught up.

    Started once the rest of the stack is up, not beside it: imports hold the interpreter's
    lock, so seconds of moto imported in parallel would only have slowed the rest as much
    (measured: the ready time doubled, the warm time stayed).

    Until then a Step Functions call waits at the emulator's gate, and what the gateway, the
    scheduler tick and the bucket watcher invoke waits for the recovery (a click on an old
    approval link then finds its run parked again): nothing fails, it is late.
    """

    def __init__(self, stack: LocalStack, emulator: Any, started: float) -> None:
        self._stack = stack
        self._emulator = emulator
        self._started = started
        self._done = threading.Event()
        self.seconds: float | None = None
        """From the start of the stack to warm."""
        self.error: str | None = None
        """Why the warm-up failed (``None``: it did not)."""
        self._thread = threading.Thread(target=self._run, name="langorch-warm-up", daemon=True)

    def start(self) -> None:
        """Start it in its thread (once)."""
        if not self._thread.is_alive() and not self._done.is_set():
            self._thread.start()

    def _run(self) -> None:
        stack, emulator = self._stack, self._emulator
        try:
            emulator.warm()
            arn = _state_machine(stack.container, stack.functions)
            if arn != stack.settings.state_machine_arn:
                raise EmulatorError(
                    f"the run state machine is {arn}, not {stack.settings.state_machine_arn}"
                )
            emulator.open_executions()
            stack.recovered = recover_runs(stack.container)
            if stack.ticker is not None:  # the slots before the tick's window: missed
                _catch_up(stack, until=stack.ticker.since)
        except Exception as exc:
            logger.exception("the state machine did not warm up")
            self.error = f"{type(exc).__name__}: {exc}"
            emulator.open_executions(f"the local stack's state machine failed: {self.error}")
        self.seconds = time.monotonic() - self._started
        self._done.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the warm-up ended (well or not); ``False`` when ``timeout`` passed."""
        return self._done.wait(timeout)

    def gated(self, transport: Transport) -> Transport:
        """``transport``, each invocation waiting for the warm-up first."""

        def invoke(name: str, payload: bytes) -> tuple[bytes, str | None]:
            self._done.wait()
            return transport(name, payload)

        return invoke

    def join(self) -> None:
        if self._thread.is_alive():
            self._thread.join()


def _state_machine(container: Any, function_arns: dict[str, str]) -> str:
    """Create (or update) the run state machine in the emulator from the package's ASL."""
    from langorch.local.statemachine import ensure_state_machine

    return ensure_state_machine(
        container.client("stepfunctions"), container.client("iam"), function_arns
    )


def recover_runs(container: Any) -> list[str]:
    """Give every run that was in flight when the stack stopped a new execution.

    Returns:
        The recovered run ids.
    """
    from langorch.app.recovery.restart import recover_in_flight

    recovered = recover_in_flight(container)
    if recovered:
        logger.info("recovered %d runs in flight", len(recovered))
    return [r.run_id for r in recovered]


def _start_background(stack: LocalStack, gateway_port: int) -> None:
    """The gateway, the scheduler tick and the bucket watcher, invoking through the dispatcher."""
    from langorch.local import gateway, ticker
    from langorch.local.bucket_events import start_bucket_events

    assert stack.transport is not None and stack.warm_up is not None
    container = stack.container
    # What comes from outside waits for the warm-up: a click on an old approval link then
    # finds its run parked again, a webhook its state machine.
    transport = stack.warm_up.gated(stack.transport)
    stack.gateway_url, stop_gateway = gateway.start_gateway(
        stack.settings, port=gateway_port, transport=transport
    )
    stack._stops.append(stop_gateway)
    trigger = LambdaInvoker(TRIGGER, transport)
    stack.ticker = ticker.start_ticker(stack.settings, container.schedules, invoke=trigger)
    stack._stops.append(stack.ticker)
    stack.bucket_events = start_bucket_events(
        container.bucket, container.db, trigger, region=stack.settings.region
    )
    stack._stops.append(stack.bucket_events)
    stack.background += ["gateway", "ticker", "bucket-events"]


def _catch_up(stack: LocalStack, *, until: datetime) -> None:
    """The schedules' ``catch_up`` after the stack was down: the slots missed up to ``until``
    (the ticker fires the ones after it), each schedule by its trigger's ``catch_up``."""
    from langorch.app.schedules import catch_up_schedules

    for done in catch_up_schedules(stack.container, until=until):
        logger.info(
            "schedule %s caught up (%s): %d missed, %d started, %d skipped",
            done.schedule,
            done.mode,
            done.count,
            len(done.started),
            done.skipped,
        )


EMULATOR_LOG = "logs/emulator.log"
"""moto's own log lines, under the home, when ``langorch dev`` runs for a person."""


def _for_a_person(stack: LocalStack) -> None:
    """The terminal follows every run's timeline (one line per event, whoever caused it), and
    moto's own log lines go to a file: its interpreter logs each failed execution as a
    thousand-character dump, where the terminal already says which run failed and why."""
    from langorch.local.terminal import start_following

    follower = start_following(stack.container.runs)
    stack._stops.append(follower)
    path = stack.home / EMULATOR_LOG
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    moto = logging.getLogger("moto")
    saved = (moto.handlers[:], moto.propagate)
    moto.handlers[:] = [handler]
    moto.propagate = False

    def restore() -> None:
        moto.handlers[:], moto.propagate = saved
        handler.close()

    stack._stops.append(restore)


LOG_FILE = "logs/functions.jsonl"
"""The functions' JSON log lines, under the home, when ``langorch dev`` runs for a person."""


def _console_options(home: Path, sink: Any, console: bool, verbose: bool) -> dict[str, Any]:
    """The dispatcher's log sink and output routing (see ``start_local_stack``'s ``console``)."""
    if not console:
        return {"log_sink": sink}
    from langorch.local._sandbox import OutputRouting
    from langorch.local.terminal import TerminalSink, both

    routing = OutputRouting(json_file=str((home / LOG_FILE).resolve()), echo_json=verbose)
    return {"log_sink": both(sink, TerminalSink()), "output": routing}


def _ensure_signing_key(container: Any, name: str) -> None:
    """Create the approval link-signing secret when missing: one random 32-byte key, ``k1``."""
    from langorch.app.approvals.keys import ensure_signing_key

    if not container.secrets.exists(name):
        key = base64.b64encode(secrets.token_bytes(32)).decode("ascii")
        container.secrets.put_json(
            name,
            {"current": "k1", "keys": {"k1": key}},
            description="langorch approval link signing",
        )
    ensure_signing_key(container.secrets, name)  # checks the secret is in the shape they read


SECRET_SETTINGS = frozenset({"openai_api_key"})
"""Settings never written to ``stack.json``: each process reads them from its environment."""


def write_stack_file(path: Path, document: dict[str, Any]) -> None:
    """Write ``stack.json`` readable by its owner only (0600), created so from the start."""
    path.unlink(missing_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(document, indent=2))


def _stack_document(stack: LocalStack) -> dict[str, Any]:
    settings = stack.settings
    return {
        "endpoint_url": settings.endpoint_url,
        "gateway_url": stack.gateway_url,
        "outbox_dir": settings.outbox_dir,
        "state_machine_arn": settings.state_machine_arn,
        "functions": stack.functions,
        "log_groups": sorted(f"{settings.log_group_prefix}{name}" for name in _function_names()),
        "background": stack.background,
        "pid": os.getpid(),
        "settings": settings.model_dump(mode="json", exclude=set(SECRET_SETTINGS)),
    }
