"""Canaries for the one place the local stack steps into moto's behaviour (the table in
``langorch.local.emulator``): the state machine interpreter's Lambda tasks reach our dispatcher.

They run on the pinned moto in every ``make test``; a moto that builds its Lambda client another
way (simulated below) fails them with a message that says what changed and where to look.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from langorch.local.emulator import EXECUTION_CONFIG, route_lambda_invocations, start_emulator
from langorch.local.stack import free_port
from tests.support.polling import wait_for

REGION = "us-east-1"
FUNCTION = "arn:aws:lambda:us-east-1:123456789012:function:langorch-run-segment"
ROLE = "arn:aws:iam::123456789012:role/canary"
MACHINE = {
    "StartAt": "Invoke",
    "States": {
        "Invoke": {
            "Type": "Task",
            "Resource": "arn:aws:states:::lambda:invoke",
            "Parameters": {"FunctionName": FUNCTION, "Payload": {"run_id.$": "$.run_id"}},
            "OutputPath": "$.Payload",
            "End": True,
        }
    },
}
BROKEN = (
    "moto's Step Functions interpreter no longer invokes Lambda through boto3's default session "
    "(moto.stepfunctions.parser.asl.utils.boto_client.boto_client_for): update the routing in "
    "langorch/local/emulator.py and its table for this moto version"
)


class Recorder:
    """A transport that answers like a handler and keeps what this module's executions asked.

    The routing is the process's: an execution that another test's stack left running (moto's
    execution threads outlive the stack that started them) may call it too; it is answered, not
    kept.
    """

    def __init__(self, error: str | None = None) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.error = error

    def __call__(self, function: str, payload: bytes) -> tuple[bytes, str | None]:
        event = json.loads(payload)
        if str(event.get("run_id", "")).startswith("canary"):
            self.calls.append((function, event))
        if self.error:
            return json.dumps({"errorType": self.error, "errorMessage": "no"}).encode(), "Unhandled"
        return json.dumps({"status": "succeeded", "seen": event["run_id"]}).encode(), None


def _execute(sfn: Any, name: str) -> dict[str, Any]:
    arn = sfn.create_state_machine(name=name, definition=json.dumps(MACHINE), roleArn=ROLE)[
        "stateMachineArn"
    ]
    execution = sfn.start_execution(
        stateMachineArn=arn, name="e1", input=json.dumps({"run_id": name})
    )
    described = wait_for(
        lambda: (
            (d := sfn.describe_execution(executionArn=execution["executionArn"]))["status"]
            != "RUNNING"
            and d
        ),
        what="the canary execution to end",
    )
    return dict(described)


@pytest.fixture
def in_process() -> Iterator[Any]:
    with mock_aws(config=EXECUTION_CONFIG):  # type: ignore[arg-type]
        yield boto3.client("stepfunctions", region_name=REGION)


def test_a_lambda_task_reaches_the_dispatcher_under_mock_aws(in_process: Any) -> None:
    # Given the routing installed inside the mock (whose default session it is)
    recorder = Recorder()
    undo = route_lambda_invocations(recorder)
    try:
        # When an execution runs a Lambda task
        described = _execute(in_process, "canary")
    finally:
        undo()
    # Then the transport got the function and the payload, and its answer is the output
    assert recorder.calls == [(FUNCTION, {"run_id": "canary"})], BROKEN
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"]) == {"status": "succeeded", "seen": "canary"}


def test_a_function_error_fails_the_task_with_its_error_type(in_process: Any) -> None:
    recorder = Recorder(error="LeaseHeldError")
    undo = route_lambda_invocations(recorder)
    try:
        described = _execute(in_process, "canary-error")
    finally:
        undo()
    assert recorder.calls, BROKEN
    assert described["status"] == "FAILED"
    assert described.get("error") == "LeaseHeldError"


def test_a_lambda_task_reaches_the_dispatcher_from_the_emulators_server() -> None:
    # Given moto's own server, as `langorch dev` runs it, and the routing in this process
    port = free_port()
    emulator = start_emulator(port)
    emulator.warm()
    emulator.open_executions()
    recorder = Recorder()
    undo = route_lambda_invocations(recorder)
    try:
        sfn = boto3.client(
            "stepfunctions",
            region_name=REGION,
            endpoint_url=f"http://127.0.0.1:{port}",
            aws_access_key_id="local",
            aws_secret_access_key="local",
        )
        described = _execute(sfn, "canary-server")
    finally:
        undo()
        emulator.stop()
    assert recorder.calls == [(FUNCTION, {"run_id": "canary-server"})], BROKEN
    assert described["status"] == "SUCCEEDED"


def test_other_calls_of_the_session_are_left_alone(in_process: Any) -> None:
    # Given the routing, a Lambda call that is not an invocation goes to moto as before
    recorder = Recorder()
    undo = route_lambda_invocations(recorder)
    try:
        functions = boto3.client("lambda", region_name=REGION).list_functions()["Functions"]
    finally:
        undo()
    assert functions == [] and recorder.calls == []


def test_a_moto_that_builds_its_lambda_client_elsewhere_is_caught(in_process: Any) -> None:
    # Given the routing installed, then the interpreter's session changed under it (what a moto
    # building its client from another session would look like)
    recorder = Recorder()
    undo = route_lambda_invocations(recorder)
    boto3.setup_default_session()
    try:
        described = _execute(in_process, "canary-moved")
    finally:
        undo()
    # Then nothing reached the dispatcher (moto answered the task itself, without our handler):
    # the canaries above would fail, with BROKEN as the reason
    assert recorder.calls == []
    assert json.loads(described.get("output") or "{}") != {
        "status": "succeeded",
        "seen": "canary-moved",
    }


def _waiting_on_a_token(client: Any) -> tuple[str, str]:
    """An execution waiting on its task token: its ARN and the token."""
    import io
    import zipfile

    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("h.py", "def handler(event, context):\n    return {}\n")
    iam = boto3.client("iam", region_name="us-east-1")
    role = iam.create_role(RoleName="waits", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    function = boto3.client("lambda", region_name="us-east-1").create_function(
        FunctionName="asks",
        Runtime="python3.12",
        Role=role,
        Handler="h.handler",
        Code={"ZipFile": archive.getvalue()},
    )["FunctionArn"]
    task = {
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
        "Parameters": {"FunctionName": function, "Payload": {"token.$": "$$.Task.Token"}},
        "TimeoutSeconds": 3600,
        "End": True,
    }
    machine = client.create_state_machine(
        name="waits",
        definition=json.dumps({"StartAt": "Wait", "States": {"Wait": task}}),
        roleArn=role,
    )["stateMachineArn"]
    execution = client.start_execution(stateMachineArn=machine, name="run-1", input="{}")
    arn = execution["executionArn"]

    def scheduled_token() -> str | None:
        for event in client.get_execution_history(executionArn=arn)["events"]:
            if event["type"] == "TaskScheduled":
                parameters = json.loads(event["taskScheduledEventDetails"]["parameters"])
                return str(parameters["Payload"]["token"])
        return None

    return arn, wait_for(scheduled_token, what="the execution to schedule its task")


def test_a_stopped_execution_waiting_on_a_token_ends_aborted_and_refuses_the_token() -> None:
    from langorch.local.emulator import stop_ends_task_waits

    with mock_aws(config=EXECUTION_CONFIG):  # type: ignore[arg-type]
        undo = stop_ends_task_waits()
        try:
            client = boto3.client("stepfunctions", region_name="us-east-1")
            # Given an execution waiting on its task token (an approval's)
            arn, token = _waiting_on_a_token(client)
            # When it is stopped
            client.stop_execution(executionArn=arn, cause="stopped from the console")
            # Then it ends ABORTED, as Step Functions ends it, not RUNNING until its timeout
            status = wait_for(
                lambda: (
                    (s := client.describe_execution(executionArn=arn)["status"]) != "RUNNING" and s
                ),
                what="the stopped execution to end",
            )
            assert status == "ABORTED"
            # ... and its token is refused: nothing is told it resumed
            with pytest.raises(ClientError) as refused:
                client.send_task_success(taskToken=token, output="{}")
            assert refused.value.response["Error"]["Code"] in ("TaskDoesNotExist", "InvalidToken")
        finally:
            undo()


def test_the_stop_fix_says_what_moved_when_moto_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a moto whose interpreter no longer has the callback module the fix reaches
    import sys

    monkeypatch.setitem(sys.modules, "moto.stepfunctions.parser.asl.eval.callback.callback", None)
    # Then installing it fails loudly, naming where to look
    from langorch.local.emulator import EmulatorError, stop_ends_task_waits

    with pytest.raises(EmulatorError, match="stop_ends_task_waits"):
        stop_ends_task_waits()
