"""Contract of the executions port (``Executions``): Step Functions on moto (boto3's adapter
under ``mock_aws``, and the embedded default's HTTP adapter against moto's server) and the fake.

For the task-token tests the state machine really runs on moto (``execute_state_machine``): its
one state waits for a task token, sent to an SQS queue the test reads, as the run state
machine's approval state does. The other tests use moto's default mode, where executions are
records (moto cannot stop an execution it is running that waits on a task token).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from moto import mock_aws

from langorch.adapters.emulator_stepfunctions import EmulatorStepFunctions
from langorch.adapters.stepfunctions import StepFunctions
from langorch.domain.errors import NotFoundError, TaskClosedError
from tests.fakes import InMemoryExecutions
from tests.support.polling import wait_for

Runner = StepFunctions | EmulatorStepFunctions | InMemoryExecutions
Park = Callable[[str], str]
"""Starts the run's execution and returns the task token it waits on."""

_ACCOUNT = "123456789012"
_QUEUE = "tokens"


def _waiting_machine(queue_url: str) -> str:
    return json.dumps(
        {
            "StartAt": "Wait",
            "States": {
                "Wait": {
                    "Type": "Task",
                    "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
                    "Parameters": {
                        "QueueUrl": queue_url,
                        "MessageBody": {
                            "run_id.$": "$$.Execution.Name",
                            "token.$": "$$.Task.Token",
                        },
                    },
                    "End": True,
                }
            },
        }
    )


def _machine(sqs: Any, client: Any) -> tuple[str, str]:
    """The waiting state machine and the queue its tokens go to: (machine ARN, queue URL)."""
    queue_url = sqs.create_queue(QueueName=_QUEUE)["QueueUrl"]
    arn = client.create_state_machine(
        name="langorch-runs",
        definition=_waiting_machine(queue_url),
        roleArn=f"arn:aws:iam::{_ACCOUNT}:role/runs",
    )["stateMachineArn"]
    return str(arn), str(queue_url)


def _parker(runner: Runner, sqs: Any, queue_url: str) -> Park:
    def park(run_id: str) -> str:
        runner.start(run_id, {"run_id": run_id})

        def token() -> str | None:
            for message in sqs.receive_message(QueueUrl=queue_url).get("Messages", []):
                body = json.loads(message["Body"])
                if body["run_id"] == run_id:
                    return str(body["token"])
            return None

        return wait_for(token, what=f"execution {run_id} to reach its task")

    return park


def _moto_executions(*, execute: bool) -> Iterator[tuple[StepFunctions, Park]]:
    import boto3

    with mock_aws(config={"stepfunctions": {"execute_state_machine": execute}}):
        sqs = boto3.client("sqs", region_name="us-east-1")
        client = boto3.client("stepfunctions", region_name="us-east-1")
        arn, queue_url = _machine(sqs, client)
        runner = StepFunctions(client, arn)
        yield runner, _parker(runner, sqs, queue_url)


def _emulator_executions(endpoint: str, *, execute: bool) -> Iterator[tuple[Runner, Park]]:
    """The embedded default's adapter against moto's server (the emulator ``langorch dev``
    serves), configured and emptied for each test."""
    import boto3

    config = {"stepfunctions": {"execute_state_machine": execute}}
    requests.post(f"{endpoint}/moto-api/reset", timeout=60)
    requests.post(f"{endpoint}/moto-api/config", json=config, timeout=60)
    session = boto3.Session(
        aws_access_key_id="local",
        aws_secret_access_key="local",  # the emulator's, not a secret
        region_name="us-east-1",
    )
    sqs = session.client("sqs", endpoint_url=endpoint)
    arn, queue_url = _machine(sqs, session.client("stepfunctions", endpoint_url=endpoint))
    runner = EmulatorStepFunctions(endpoint, arn, region="us-east-1")
    yield runner, _parker(runner, sqs, queue_url)
    requests.post(f"{endpoint}/moto-api/reset", timeout=60)


@pytest.fixture(scope="module")
def emulator() -> Iterator[str]:
    """moto's server on a free loopback port (started only by the tests that use it)."""
    from moto.server import ThreadedMotoServer

    from langorch.local.stack import free_port

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    with pytest.MonkeyPatch.context() as patch:
        # Where the interpreter's own task calls (SQS) go, as `moto_server --port` sets it.
        patch.setenv("MOTO_PORT", str(port))
        yield f"http://127.0.0.1:{port}"
    server.stop()


def _executions(request: pytest.FixtureRequest, *, execute: bool) -> Iterator[tuple[Runner, Park]]:
    if request.param == "fake":
        fake = InMemoryExecutions()
        yield fake, lambda run_id: fake.park(run_id, {"run_id": run_id})
    elif request.param == "emulator":
        endpoint = request.getfixturevalue("emulator")
        yield from _emulator_executions(endpoint, execute=execute)
    else:
        yield from _moto_executions(execute=execute)


ADAPTERS = ["fake", "stepfunctions", "emulator"]


@pytest.fixture(params=ADAPTERS)
def executions(request: pytest.FixtureRequest) -> Iterator[tuple[Runner, Park]]:
    """Executions as records (moto's default mode)."""
    yield from _executions(request, execute=False)


@pytest.fixture(params=ADAPTERS)
def running(request: pytest.FixtureRequest) -> Iterator[tuple[Runner, Park]]:
    """Executions that run, so their tasks issue tokens."""
    yield from _executions(request, execute=True)


def _status(runner: Runner, run_id: str, leaving: str = "RUNNING") -> dict[str, Any]:
    """The execution's description once its status is no longer ``leaving``."""

    def left() -> dict[str, Any] | None:
        described = runner.describe(run_id)
        return described if described["status"] != leaving else None

    return wait_for(left, what=f"execution {run_id} to leave {leaving}")


def test_a_started_execution_is_named_by_the_run_and_running(
    executions: tuple[Runner, Park],
) -> None:
    runner, _ = executions
    arn, started = runner.start("run-1", {"run_id": "run-1", "resume": None})
    assert started and arn.endswith(":execution:langorch-runs:run-1")
    described = runner.describe("run-1")
    assert (described["name"], described["status"]) == ("run-1", "RUNNING")
    assert json.loads(described["input"]) == {"run_id": "run-1", "resume": None}


def test_starting_the_same_run_again_with_the_same_input_is_idempotent(
    executions: tuple[Runner, Park],
) -> None:
    runner, _ = executions
    first, _ = runner.start("run-1", {"run_id": "run-1"})
    # StartExecution with the same name and input while running answers with the same ARN
    assert runner.start("run-1", {"run_id": "run-1"}) == (first, True)


def test_starting_the_same_run_with_other_input_starts_nothing(
    executions: tuple[Runner, Park],
) -> None:
    runner, _ = executions
    first, _ = runner.start("run-1", {"run_id": "run-1"})
    assert runner.start("run-1", {"run_id": "run-1", "again": True}) == (first, False)
    assert json.loads(runner.describe("run-1")["input"]) == {"run_id": "run-1"}


def test_an_unknown_execution_is_not_found(executions: tuple[Runner, Park]) -> None:
    runner, _ = executions
    with pytest.raises(NotFoundError, match="run-ghost"):
        runner.describe("run-ghost")


def test_stopping_aborts_and_stopping_again_or_unknown_is_fine(
    executions: tuple[Runner, Park],
) -> None:
    runner, _ = executions
    runner.start("run-1", {"run_id": "run-1"})
    runner.stop("run-1", "cancelled by an operator")
    runner.stop("run-1", "cancelled by an operator")
    runner.stop("run-ghost", "nothing to stop")
    assert runner.describe("run-1")["status"] == "ABORTED"


def test_a_task_token_resumes_its_execution_once(running: tuple[Runner, Park]) -> None:
    runner, park = running
    token = park("run-1")
    runner.send_success(token, {"decision": "approved"})
    described = _status(runner, "run-1")
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"]) == {"decision": "approved"}
    with pytest.raises(TaskClosedError):
        runner.send_success(token, {"decision": "rejected"})


def test_an_unknown_task_token_is_closed(running: tuple[Runner, Park]) -> None:
    runner, _ = running
    with pytest.raises(TaskClosedError):
        runner.send_success("not-a-token", {"decision": "approved"})
