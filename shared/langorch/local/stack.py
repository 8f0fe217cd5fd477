"""The local stack: an AWS emulator (moto in server mode) with langorch's resources in it.

``langorch dev`` starts one and writes ``.langorch/stack.json``; every other command finds the
stack through that file and talks to it exactly as it talks to AWS.
"""

from __future__ import annotations

import base64
import copy
import json
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import yaml

from langorch.config import Settings
from langorch.domain.errors import LangorchError
from langorch.local._invoke import TRIGGER, LambdaInvoker, Transport
from langorch.local.dynamodb_process import (
    DynamoDBForward,
    DynamoDBProcess,
    start_dynamodb_process,
)

STACK_FILE = "stack.json"
OUTBOX_DIR = "outbox"
STATE_DIR = "state"
SCHEDULER_ROLE = "langorch-local-scheduler"


@dataclass
class LocalStack:
    """A running emulator and what was provisioned in it."""

    settings: Settings
    home: Path
    examples: list[str] = field(default_factory=list)
    functions: dict[str, str] = field(default_factory=dict)
    """Handler package -> function ARN in the emulator."""
    gateway_url: str | None = None
    background: list[str] = field(default_factory=list)
    """What runs beside the emulator: ``gateway``, ``ticker``, ``s3-events``."""
    recovered: list[str] = field(default_factory=list)
    """Runs that were in flight when the stack last stopped and got a new execution."""
    dynamodb: DynamoDBProcess | None = None
    """The process serving DynamoDB (``langorch.local.dynamodb_process``)."""
    _stops: list[Callable[[], None]] = field(default_factory=list)
    _flush_logs: Callable[[float], bool] | None = None
    _transport: Transport | None = None
    """Invokes a function from this process without the emulator's HTTP API (gateway, tick,
    S3 events: :mod:`langorch.local.inprocess`)."""

    @property
    def stack_file(self) -> Path:
        return self.home / STACK_FILE

    def flush_logs(self, timeout: float = 30.0) -> bool:
        """Wait until the log lines of every invocation that has returned are in CloudWatch Logs.

        The functions' lines are shipped in the background (:mod:`langorch.local.logs`): a
        reader in this process that needs them the moment an invocation returned calls this
        first.

        Returns:
            ``False`` when ``timeout`` seconds passed first.
        """
        return True if self._flush_logs is None else self._flush_logs(timeout)

    def stop(self) -> None:
        """Stop everything this stack started (newest first) and forget the stack file."""
        self.stack_file.unlink(missing_ok=True)
        while self._stops:
            self._stops.pop()()


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ensure_port_free(port: int, *, what: str, option: str) -> None:
    """Fail at once, naming the option to change, when ``port`` is taken.

    Raises:
        PortBusyError: something listens on (or holds) 127.0.0.1:``port``.
    """
    with socket.socket() as sock:
        # As the servers bind: a port left in TIME_WAIT by a stopped stack is free to reuse.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            raise PortBusyError(
                f"cannot start {what} on 127.0.0.1:{port}: {exc.strerror or exc} (another "
                f"`langorch dev`?); stop what uses it or pick another port with {option} PORT"
            ) from exc


def start_emulator(
    port: int, *, state_dir: Path | None = None, dynamodb: DynamoDBProcess | None = None
) -> tuple[Callable[[], None], Any]:
    """Start moto's server on 127.0.0.1:``port`` in this process, executing state machines.

    Args:
        port: the emulator's port.
        state_dir: where the emulator's durable state lives (:mod:`langorch.local.journal`):
            its journal is replayed before the server answers, and every successful write is
            journaled. ``None``: in memory only.
        dynamodb: the process that serves DynamoDB (its requests are forwarded there, and its
            journal entries are that process's to replay); ``None``: moto here serves it.

    Returns:
        Its stop function (which also gives moto back its own settings), and the WSGI app it
        serves (journal and DynamoDB forwarding included), for callers in this process.

    Raises:
        PortBusyError: something already listens on ``port``.
    """
    from moto.core.config import default_user_config

    from langorch.local.emulator import (
        lazy_batch_package,
        local_dynamodb,
        parse_each_definition_once,
        parse_each_json_path_once,
        stop_ends_task_waits,
        wide_listen_backlog,
    )
    from langorch.local.statemachine import enable_execution

    lazy_batch_package()
    saved_config = copy.deepcopy(default_user_config)
    saved_port = os.environ.get("MOTO_PORT")
    # moto's DynamoDB here only serves when no DynamoDB process does (then it needs the fixes).
    undos = [
        local_dynamodb() if dynamodb is None else (lambda: None),
        parse_each_definition_once(),
        parse_each_json_path_once(),
        stop_ends_task_waits(),
        wide_listen_backlog(),
    ]
    # One access-log line per AWS call drowns what the developer wants to see.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    try:
        server = _EmulatorServer(port, state_dir, dynamodb)
    except BaseException:
        for undo in undos:
            undo()
        raise

    def stop() -> None:
        # moto's backends are this process's memory, not the server's: without a reset the
        # next stack started in this process would see this one's tables and runs.
        _reset_emulator(port)
        server.stop()
        for undo in undos:
            undo()
        # The server shares this process's moto: later in-process mocks get moto's defaults.
        config = cast(dict[str, Any], default_user_config)
        config.clear()
        config.update(saved_config)
        if saved_port is None:
            os.environ.pop("MOTO_PORT", None)
        else:
            os.environ["MOTO_PORT"] = saved_port

    # moto imports its ASL interpreter (~2 s) on the first CreateStateMachine; importing it
    # now, while the tables are created, takes it off the path to "ready".
    threading.Thread(target=_warm_interpreter, name="langorch-warm-asl", daemon=True).start()
    try:
        # The backends are this process's memory: whatever ran in it before (another stack, a
        # test's emulator) must not show up in this stack's tables.
        _reset_emulator(port)
        server.restore()
        enable_execution(f"http://127.0.0.1:{port}")
    except BaseException:
        stop()
        raise
    return stop, server.served


class PortBusyError(LangorchError):
    """A port the local stack needs is taken by another process."""


JOURNAL_FILE = "emulator.journal"


class _EmulatorServer:
    """moto's WSGI app behind werkzeug's threaded server, its writes journaled under ``state_dir``.

    The socket is bound here, in the caller's thread: a busy port fails at once (moto's
    ``ThreadedMotoServer`` binds in its thread and waits forever for a server that never came).
    """

    def __init__(
        self, port: int, state_dir: Path | None, dynamodb: DynamoDBProcess | None = None
    ) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import make_server

        from langorch.local.emulator import keep_alive_handler, route_outside_the_lock
        from langorch.local.journal import JournaledApp

        self.moto_app = route_outside_the_lock(DomainDispatcherApplication(create_backend_app))
        self.app = JournaledApp(self.moto_app)
        self.state_dir = state_dir
        self.dynamodb = dynamodb
        self.served: Any = self.app
        if dynamodb is not None:
            self.served = DynamoDBForward(self.app, lambda: dynamodb.endpoint_url)
        ensure_port_free(port, what="the AWS emulator", option="--emulator-port")
        try:
            self._server = make_server(
                "127.0.0.1", port, self.served, threaded=True, request_handler=keep_alive_handler()
            )
        except (OSError, SystemExit) as exc:  # werkzeug exits on EADDRINUSE (a race lost)
            raise PortBusyError(
                f"cannot start the AWS emulator on 127.0.0.1:{port}: {exc}; stop what uses it "
                "or pick another port with --emulator-port PORT"
            ) from exc
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="langorch-emulator", daemon=True
        )
        self._thread.start()

    def restore(self) -> None:
        """Replay the journal into the (reset) emulator, then journal every new write."""
        if self.state_dir is None:
            return
        from langorch.local.journal import open_journal, read_entries, replay, service_of

        path = self.state_dir / JOURNAL_FILE
        started = time.monotonic()
        entries = read_entries(path)
        if self.dynamodb is not None:  # the DynamoDB process replays its own
            entries = (e for e in entries if service_of(e["environ"]) != "dynamodb")
        applied, refused = replay(self.moto_app, entries)
        logging.getLogger(__name__).info(
            "restored %d journaled writes (%d refused) in %.1f s",
            applied,
            refused,
            time.monotonic() - started,
        )
        self.app.journal = open_journal(path)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        if self.app.journal is not None:
            self.app.journal.close()


def _reset_emulator(port: int) -> None:
    import urllib.request

    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/moto-api/reset", data=b"", method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310
            response.read()
    except OSError:
        logging.getLogger(__name__).warning("could not reset the emulator on port %d", port)


def _warm_interpreter() -> None:
    import importlib

    importlib.import_module("moto.stepfunctions.parser.models")


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


def start_local_stack(
    *,
    home: Path,
    port: int | None = None,
    gateway_port: int | None = None,
    examples: Path | None = None,
    region: str = "us-east-1",
    durable: bool = True,
    console: bool = False,
    verbose: bool = False,
) -> LocalStack:
    """Start the emulator and provision the whole pipeline in it.

    Tables and bucket, built-in blocks and the examples; the four Lambda functions (routed to
    the handlers in ``functions/``, their log lines in the emulator's CloudWatch Logs); the run
    state machine from the package's ASL; the link-signing key; a verified SES sender; the
    outbox; and — when their modules are present — the HTTP gateway, the scheduler tick and
    the S3 event poller. Everything is written to ``<home>/stack.json``.

    Args:
        home: where the stack file, the merged offline script, the outbox and the emulator's
            durable state (``<home>/state/``) live.
        port: the emulator's port (default: a free one).
        gateway_port: the HTTP gateway's port, the base of every approval link (default: a
            free one; ``langorch dev`` passes a fixed one so links outlive a restart).
        examples: a folder of ``<name>/definitions.yaml`` to register (``None``: none).
        region: the emulated region.
        durable: keep the emulator's state under ``home`` across stops and crashes.
        console: for a person at a terminal (``langorch dev``): one human line per event on
            stdout, the functions' JSON lines in ``<home>/logs/functions.jsonl`` (see
            :mod:`langorch.local.terminal`); otherwise everything goes to stdout.
        verbose: with ``console``, the JSON lines on stdout as well.

    Raises:
        PortBusyError: the emulator's or the gateway's port is taken.
    """
    from langorch.adapters.aws import new_session
    from langorch.adapters.logs import CloudWatchLogs
    from langorch.app.definitions import seed_builtins
    from langorch.app.trigger_sync import register_and_sync
    from langorch.composition.container import Container
    from langorch.local.inprocess import answer_in_process, transport
    from langorch.local.lambdas import Dispatcher, function_environment
    from langorch.local.logs import CloudWatchSink

    home.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    has_gateway = _has_module("langorch.local.gateway")
    reserved: socket.socket | None = None
    if has_gateway and gateway_port:
        ensure_port_free(gateway_port, what="the HTTP gateway", option="--port")
    elif has_gateway:
        # Held bound until the gateway binds it: a port only looked up here could be handed
        # meanwhile to the DynamoDB process or to one of the sandboxes' outgoing connections.
        reserved = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        reserved.bind(("127.0.0.1", 0))
        gateway_port = int(reserved.getsockname()[1])
    stack = LocalStack(settings=Settings(region=region), home=home)
    state_dir = (home / STATE_DIR) if durable else None
    stack.dynamodb = dynamodb = start_dynamodb_process(state_dir)  # starts with the emulator
    stack._stops.append(dynamodb.stop)
    try:
        stop_emulator, emulator_app = start_emulator(port, state_dir=state_dir, dynamodb=dynamodb)
        stack._stops.append(stop_emulator)
        example_dirs = (
            sorted(p.parent for p in examples.glob("*/definitions.yaml"))
            if (examples is not None and examples.is_dir())
            else []
        )
        script = merged_offline_script(example_dirs, home / "offline.yaml")
        settings = Settings(
            region=region,
            endpoint_url=f"http://127.0.0.1:{port}",
            dynamodb_endpoint_url=dynamodb.wait_ready(),
            offline_script=str(script) if script else None,
            outbox_dir=str((home / OUTBOX_DIR).resolve()),
        )
        if has_gateway:
            # Approval links point at the gateway, which starts once the functions exist.
            settings = settings.model_copy(
                update={"public_base_url": f"http://127.0.0.1:{gateway_port}"}
            )
        # One boto3 session for every container of the start-up: each new session re-reads
        # botocore's data files, and the start-up builds three containers (PERFORMANCE P6).
        session = new_session(settings)
        # Its clients (the start-up's, the log shipper's) call the emulator without a socket.
        stack._stops.append(answer_in_process(session, emulator_app, f"http://127.0.0.1:{port}"))
        container = Container(settings, session=session)
        container.ensure_resources()
        seed_builtins(container.definitions)

        sink = CloudWatchSink(CloudWatchLogs(container.client("logs")), settings.log_group_prefix)
        # Stopped after the dispatcher and what invokes it, before the emulator: what they
        # logged is written first.
        stack._stops.append(sink.close)
        stack._flush_logs = sink.flush
        dispatcher = Dispatcher(**_console_options(home, sink, console, verbose)).install()
        stack._stops.append(dispatcher.uninstall)
        stack._transport = transport(dispatcher, region)
        settings, stack.functions = provision_pipeline(container, settings, sink)
        dispatcher.environment = function_environment(settings)
        stack.settings = settings
        if example_dirs:
            # Registered like `langorch workflows put`: webhook secrets and schedules too.
            batch = register_and_sync(
                [str(d / "definitions.yaml") for d in example_dirs],
                Container(settings, session=session),
            )
            stack.examples = [r.id for r in batch.results if r.kind == "workflow"]

        # Before the gateway opens: a click on an old link then finds the run parked again.
        stack.recovered = recover_runs(Container(settings, session=session))
        if has_gateway and gateway_port is not None:
            if reserved is not None:
                reserved.close()
            stack.gateway_url = start_gateway(stack, gateway_port)
        start_ticker(stack)
        start_s3_events(stack)
        write_stack_file(stack.stack_file, _stack_document(stack))
        return stack
    except BaseException:
        if reserved is not None:
            reserved.close()
        stack.stop()
        raise


def recover_runs(container: Any) -> list[str]:
    """Give every run that was in flight when the stack stopped a new execution.

    The emulator's Step Functions executions do not survive a restart (see
    :mod:`langorch.local.journal`); the runs' own state does (:mod:`langorch.app.recovery.restart`).

    Returns:
        The recovered run ids.
    """
    from langorch.app.recovery.restart import recover_in_flight

    recovered = recover_in_flight(container)
    if recovered:
        logging.getLogger(__name__).info("recovered %d runs in flight", len(recovered))
    return [r.run_id for r in recovered]


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


def provision_pipeline(
    container: Any, settings: Settings, sink: Any
) -> tuple[Settings, dict[str, str]]:
    """Create the functions, the state machine, the signing key and the SES sender.

    Returns:
        The settings completed with what was created, and handler package -> function ARN.
    """
    from langorch.local.lambdas import FUNCTIONS, ensure_functions
    from langorch.local.statemachine import ensure_state_machine

    lambda_client, iam = container.client("lambda"), container.client("iam")
    arns = ensure_functions(lambda_client, iam, settings)
    state_machine = ensure_state_machine(container.client("stepfunctions"), iam, arns)
    sink.ensure_groups(list(FUNCTIONS.values()))
    _ensure_signing_key(container, settings.link_signing_secret)
    container.client("ses").verify_email_identity(EmailAddress=settings.sender_email)
    settings = settings.model_copy(
        update={
            "state_machine_arn": state_machine,
            "trigger_function_arn": arns["trigger"],
            "scheduler_role_arn": _ensure_scheduler_role(iam),
        }
    )
    # The functions' environment carries the final settings (the state machine's ARN).
    ensure_functions(lambda_client, iam, settings)
    return settings, arns


def _ensure_signing_key(container: Any, name: str) -> None:
    """Create the approval link-signing secret when missing: one random 32-byte key, ``k1``."""
    # Created here rather than by approvals' ensure_signing_key, which reads the secret first:
    # a missing secret reads as a StorageError there (Secrets.get_json looks for the ClientError
    # in __cause__, Powertools chains it as __context__), not as SecretNotFoundError.
    if not container.secrets.exists(name):
        key = base64.b64encode(secrets.token_bytes(32)).decode("ascii")
        container.secrets.put_json(
            name,
            {"current": "k1", "keys": {"k1": key}},
            description="langorch approval link signing",
        )
    try:
        from langorch.app.approvals.decisions import ensure_signing_key
    except ImportError:
        return  # built without approvals: nothing reads the key
    ensure_signing_key(container.secrets, name)  # checks the secret is in the shape they read


def _ensure_scheduler_role(iam: Any) -> str:
    # EventBridge Scheduler needs a role to invoke the trigger; the emulator checks it exists.
    try:
        return str(iam.get_role(RoleName=SCHEDULER_ROLE)["Role"]["Arn"])
    except iam.exceptions.NoSuchEntityException:
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "scheduler.amazonaws.com"},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
        role = iam.create_role(RoleName=SCHEDULER_ROLE, AssumeRolePolicyDocument=json.dumps(trust))
        return str(role["Role"]["Arn"])


# --------------------------------------------------------------------------------------------
# What runs beside the emulator. Each starts only when its module is part of this build. They
# invoke the functions through the emulator's Lambda, so the dispatcher gives the handlers the
# functions' settings and ships their log lines, as for the state machine's invocations.
# --------------------------------------------------------------------------------------------


def _has_module(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def start_gateway(stack: LocalStack, port: int) -> str | None:
    """Serve the HTTP routes (``local/gateway.py``) on ``port``; returns its URL."""
    if not _has_module("langorch.local.gateway"):
        return None
    from langorch.local import gateway

    url, stop = gateway.start_gateway(stack.settings, port=port, transport=stack._transport)
    stack._stops.append(stop)
    stack.background.append("gateway")
    return url


def _trigger(stack: LocalStack) -> LambdaInvoker:
    """The trigger function, invoked from this process (the tick, S3 events)."""
    return LambdaInvoker(stack.settings, TRIGGER, transport=stack._transport)


def start_ticker(stack: LocalStack) -> None:
    """Fire due schedules at the trigger function (``local/ticker.py``)."""
    if not _has_module("langorch.local.ticker"):
        return
    from langorch.local import ticker

    stack._stops.append(ticker.start_ticker(stack.settings, invoke=_trigger(stack)))
    stack.background.append("ticker")


def start_s3_events(stack: LocalStack) -> None:
    """Deliver the drop bucket's object-created events (``local/s3events.py``)."""
    if not _has_module("langorch.local.s3events"):
        return
    from langorch.local import s3events

    stack._stops.append(s3events.start_s3_events(stack.settings, invoke=_trigger(stack)))
    stack.background.append("s3-events")


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
        "settings": settings.model_dump(mode="json", exclude=set(SECRET_SETTINGS)),
    }


def _function_names() -> list[str]:
    from langorch.local.lambdas import FUNCTIONS

    return list(FUNCTIONS.values())
