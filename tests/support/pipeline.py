"""The pipeline in one test process: moto's Step Functions in-process (``mock_aws``) running the
package's ASL, and the dispatcher running ``functions/`` inline on the interpreter's Lambda tasks.

By default on the embedded stores of a temporary home — what ``langorch dev`` runs, without its
servers and sandbox processes (an in-process emulator is this process's memory). With
``cloud=True``, on the cloud's adapters instead (DynamoDB, S3, Secrets Manager on moto): the
deployed composition, end to end."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moto import mock_aws

from langorch.app.definitions import register_workflow, seed_builtins
from langorch.app.runs import StartRun, launch_run
from langorch.composition.bootstrap import build_container
from langorch.composition.container import Container
from langorch.config import Settings
from langorch.domain.loading import load_text
from langorch.domain.runs import RunRecord
from langorch.local._invoke import TRIGGER, function_arn
from langorch.local.emulator import EXECUTION_CONFIG, stop_ends_task_waits
from langorch.local.lambdas import FUNCTIONS, Dispatcher, function_environment
from langorch.local.logs import CloudWatchSink
from langorch.local.statemachine import ensure_state_machine
from tests.support.polling import wait_for

EXECUTION_OF = {
    "succeeded": {"SUCCEEDED"},
    "failed": {"FAILED"},
    "cancelled": {"ABORTED", "SUCCEEDED"},
    "queued": {"RUNNING"},
    "running": {"RUNNING"},
    "sleeping": {"RUNNING"},
    "waiting_approval": {"RUNNING"},
    "paused": {"RUNNING"},
}
"""Run status -> the execution statuses that agree with it."""


@dataclass
class Pipeline:
    """The state machine and the functions, and the container to drive and read them."""

    container: Container

    @property
    def logs(self) -> Any:
        """The functions' log lines (the local store's)."""
        return self.container.logs

    def register(self, text: str) -> None:
        for plan in load_text(text, source="test.yaml", fmt="yaml").workflows:
            register_workflow(self.container.definitions, plan)

    def launch(self, workflow_id: str, data: dict[str, Any] | None = None) -> str:
        run, _ = launch_run(StartRun(workflow_id, input=data or {}), self.container)
        return run.run_id

    def execution(self, run_id: str) -> dict[str, Any]:
        return self.container.stepfunctions.describe(run_id)

    def history(self, run_id: str) -> list[dict[str, Any]]:
        arn = self.container.stepfunctions.execution_arn(run_id)
        client = self.container.client("stepfunctions")
        return list(client.get_execution_history(executionArn=arn)["events"])

    def run(self, run_id: str) -> RunRecord:
        return self.container.runs.get_run(run_id)

    def wait_for(self, what: Callable[[], bool], *, timeout: float = 30.0) -> None:
        # Backing off: a check reads moto's execution history or the run (~5 ms of CPU each).
        wait_for(what, what="the pipeline", timeout=timeout, interval=0.05, max_interval=0.8)

    def finished(self, run_id: str, *, timeout: float = 300.0) -> dict[str, Any]:
        # A guard, not a speed bound: the condition ends the wait as soon as the run ends.
        self.wait_for(lambda: self.execution(run_id)["status"] != "RUNNING", timeout=timeout)
        return self.execution(run_id)

    def assert_consistent(self, run_id: str) -> None:
        status = self.run(run_id).status.value
        assert self.execution(run_id)["status"] in EXECUTION_OF[status], status


def make_pipeline(
    dispatcher: Dispatcher, home: Path, *, cloud: bool = False, **settings: Any
) -> Pipeline:
    """Provision the pipeline in the (already started) in-process emulator, on ``home``'s
    embedded stores or (``cloud``) on the cloud's adapters; the dispatcher's functions get its
    settings as their environment."""
    settings.setdefault("outbox_dir", str(home / "outbox"))
    if not cloud:
        settings["local_home"] = str(home)
    base = Settings(trigger_function_arn=function_arn("us-east-1", TRIGGER), **settings)
    container = build_container(base)
    container.ensure_resources()
    seed_builtins(container.definitions)
    arns = {package: function_arn(base.region, name) for package, name in FUNCTIONS.items()}
    machine = ensure_state_machine(container.client("stepfunctions"), container.client("iam"), arns)
    final = base.model_copy(update={"state_machine_arn": machine})
    dispatcher.environment = function_environment(final)
    container = build_container(final)
    container.secrets.put_json(
        final.link_signing_secret, {"current": "k1", "keys": {"k1": "a" * 44}}
    )
    return Pipeline(container)


@contextlib.contextmanager
def _stops_end_waits() -> Iterator[None]:
    undo = stop_ends_task_waits()
    try:
        yield
    finally:
        undo()


@contextlib.contextmanager
def pipelines(home: Path) -> Iterator[Callable[..., Pipeline]]:
    """Pipelines (each on a home of its own under ``home``) in one in-process emulator that
    stops executions as the local stack's does; their functions' log lines land in the
    pipeline's store as each invocation returns."""
    with mock_aws(config=EXECUTION_CONFIG), _stops_end_waits():  # type: ignore[arg-type]
        sinks: list[CloudWatchSink] = []

        def sink(name: str, stream: str, lines: list[tuple[int, str]]) -> None:
            for each in sinks:
                each(name, stream, lines)

        # Inline: the emulator is this process's memory, which a sandbox process cannot reach.
        with Dispatcher(log_sink=sink, isolation="inline") as dispatcher:
            made = 0

            def make(**settings: Any) -> Pipeline:
                nonlocal made
                made += 1
                pipeline = make_pipeline(dispatcher, home / f"home-{made}", **settings)
                # Synchronous: the tests read the lines the moment a run's execution ends.
                store = CloudWatchSink(
                    pipeline.logs, pipeline.container.settings.log_group_prefix, background=False
                )
                store.ensure_groups(list(FUNCTIONS.values()))
                sinks[:] = [store]
                return pipeline

            yield make
