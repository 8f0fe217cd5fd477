"""Contract of the executions port (``Executions``): Step Functions on moto and the fake.

On moto the state machine really runs (``execute_state_machine``): its one state waits for a
task token, sent to an SQS queue the test reads, as the run state machine's approval state does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from moto import mock_aws

from langorch.adapters.stepfunctions import StepFunctions
from langorch.domain.errors import NotFoundError, TaskClosedError
from tests.fakes import InMemoryExecutions

Runner = StepFunctions | InMemoryExecutions
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


@pytest.fixture
def _moto_executions() -> Iterator[tuple[StepFunctions, Park]]:
    import boto3

    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        sqs = boto3.client("sqs", region_name="us-east-1")
        queue_url = sqs.create_queue(QueueName=_QUEUE)["QueueUrl"]
        client = boto3.client("stepfunctions", region_name="us-east-1")
        arn = client.create_state_machine(
            name="langorch-runs",
            definition=_waiting_machine(queue_url),
            roleArn=f"arn:aws:iam::{_ACCOUNT}:role/runs",
        )["stateMachineArn"]
        runner = StepFunctions(client, arn)

        def park(run_id: str) -> str:
            runner.start(run_id, {"run_id": run_id})
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                for message in sqs.receive_message(QueueUrl=queue_url).get("Messages", []):
                    body = json.loads(message["Body"])
                    if body["run_id"] == run_id:
                        return str(body["token"])
            raise AssertionError(f"execution {run_id} did not reach its task within 10 s")

        yield runner, park


@pytest.fixture(params=["fake", "stepfunctions"])
def executions(request: pytest.FixtureRequest) -> tuple[Runner, Park]:
    if request.param == "fake":
        fake = InMemoryExecutions()
        return fake, lambda run_id: fake.park(run_id, {"run_id": run_id})
    return request.getfixturevalue("_moto_executions")  # type: ignore[no-any-return]


def _status(runner: Runner, run_id: str, leaving: str = "RUNNING") -> dict[str, Any]:
    """The execution's description once its status is no longer ``leaving`` (10 s at most)."""
    deadline = time.monotonic() + 10
    while True:
        described = runner.describe(run_id)
        if described["status"] != leaving or time.monotonic() > deadline:
            return described


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


def test_a_task_token_resumes_its_execution_once(executions: tuple[Runner, Park]) -> None:
    runner, park = executions
    token = park("run-1")
    runner.send_success(token, {"decision": "approved"})
    described = _status(runner, "run-1")
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"]) == {"decision": "approved"}
    with pytest.raises(TaskClosedError):
        runner.send_success(token, {"decision": "rejected"})


def test_an_unknown_task_token_is_closed(executions: tuple[Runner, Park]) -> None:
    runner, _ = executions
    with pytest.raises(TaskClosedError):
        runner.send_success("not-a-token", {"decision": "approved"})
