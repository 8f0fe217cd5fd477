"""Calls from the emulator's own process (langorch.local.inprocess): Lambda invocations answer
exactly as the emulator's ``lambda:Invoke`` API does (the same handler result, the same
function error, the same refusal of an unknown function), the Step Functions interpreter gets
them as its Lambda client while a dispatcher is installed and its own client back after; other
calls are answered by the emulator's WSGI app, journal included, without a socket."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from importlib import import_module
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from moto import mock_aws

from langorch.composition.container import Container
from langorch.config import Settings
from langorch.local._invoke import APPROVAL_CALLBACK, FunctionError, LambdaInvoker
from langorch.local.inprocess import INTERPRETER_LAMBDA, answer_in_process, transport
from langorch.local.journal import JournaledApp, open_journal, read_entries
from langorch.local.lambdas import Dispatcher, ensure_functions
from langorch.local.statemachine import EXECUTION_CONFIG

REGION = "us-east-1"


def _page_event(approval_id: str) -> dict[str, Any]:
    """``GET /approvals/{id}`` as the gateway builds it, with no signature."""
    path = f"/approvals/{approval_id}"
    return {
        "version": "2.0",
        "routeKey": "GET /approvals/{id}",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"user-agent": "pytest"},
        "requestContext": {
            "stage": "$default",
            "requestId": "r-1",
            "http": {"method": "GET", "path": path, "sourceIp": "127.0.0.1", "userAgent": "x"},
        },
        "pathParameters": {"id": approval_id},
        "isBase64Encoded": False,
    }


@pytest.fixture
def stack() -> Iterator[tuple[Settings, Dispatcher]]:
    # The emulator in this process with langorch's functions, handlers run by a dispatcher
    with mock_aws(config=EXECUTION_CONFIG):  # type: ignore[arg-type]
        settings = Settings(region=REGION)
        container = Container(settings)
        container.ensure_resources()
        container.secrets.put_json(
            settings.link_signing_secret, {"current": "k1", "keys": {"k1": "a" * 44}}
        )
        ensure_functions(container.client("lambda"), container.client("iam"), settings)
        with Dispatcher(isolation="inline") as dispatcher:
            yield settings, dispatcher


def test_an_invocation_without_the_api_answers_as_the_api_does(
    stack: tuple[Settings, Dispatcher],
):
    # Given the approval page's function, invoked through the API and without it
    settings, dispatcher = stack
    api = LambdaInvoker(settings, APPROVAL_CALLBACK)
    direct = LambdaInvoker(settings, APPROVAL_CALLBACK, transport=transport(dispatcher, REGION))

    # When each opens an unsigned link, then sends an event the handler cannot read
    pages = [invoker(_page_event("apr-unknown")) for invoker in (api, direct)]
    errors = []
    for invoker in (api, direct):
        with pytest.raises(FunctionError) as raised:
            invoker({"not": "an API Gateway event"})
        errors.append(str(raised.value))

    # Then both got the handler's refusal page, and both the same function error
    assert pages[0]["statusCode"] == pages[1]["statusCode"] == 403
    assert pages[0]["body"] == pages[1]["body"]
    assert errors[0] == errors[1]
    assert errors[0].startswith(f"{APPROVAL_CALLBACK}: ")


def test_the_interpreter_invokes_through_the_dispatcher_as_boto3_would(
    stack: tuple[Settings, Dispatcher],
):
    # Given the client moto's Step Functions interpreter builds for a Lambda task
    settings, _ = stack
    module: Any = import_module(INTERPRETER_LAMBDA)
    interpreter = module.boto_client_for(region=REGION, service="lambda")
    boto3_client = Container(settings).client("lambda")
    arn = boto3_client.get_function(FunctionName=APPROVAL_CALLBACK)["Configuration"]["FunctionArn"]
    payload = json.dumps(_page_event("apr-unknown")).encode()

    # When both invoke the function (as the ASL's lambda:invoke task does: by ARN)
    answers = [
        client.invoke(FunctionName=arn, Payload=payload) for client in (interpreter, boto3_client)
    ]

    # Then the answers match: status, no function error, the same page
    ours, theirs = ({**a, "Payload": json.loads(a["Payload"].read())} for a in answers)
    assert ours["StatusCode"] == theirs["StatusCode"] == 200
    assert "FunctionError" not in ours and "FunctionError" not in theirs
    assert ours["Payload"]["statusCode"] == theirs["Payload"]["statusCode"] == 403
    # And a function that does not exist is refused as the API refuses it
    for client in (interpreter, boto3_client):
        with pytest.raises(ClientError) as refused:
            client.invoke(FunctionName=arn.replace(APPROVAL_CALLBACK, "nope"), Payload=b"{}")
        assert refused.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_the_interpreter_gets_its_own_client_back_when_the_dispatcher_goes():
    # Given moto's interpreter as it builds its Lambda clients
    module: Any = import_module(INTERPRETER_LAMBDA)
    before = module.boto_client_for

    # When a dispatcher is installed, then uninstalled
    with Dispatcher(isolation="inline"):
        during = module.boto_client_for
    # Then it had another client meanwhile, and its own after
    assert during is not before
    assert module.boto_client_for is before


def test_calls_to_the_emulator_are_answered_by_its_app_and_journaled(tmp_path: Path):
    # Given the emulator's WSGI app with its journal, answering for an endpoint where nothing
    # listens (port 9): only a call handed to the app can succeed
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    app = JournaledApp(DomainDispatcherApplication(create_backend_app))
    app.journal = open_journal(tmp_path / "emulator.journal")
    session = boto3.Session(
        aws_access_key_id="local", aws_secret_access_key="local", region_name=REGION
    )
    stop = answer_in_process(session, app, "http://127.0.0.1:9")
    logs = session.client("logs", endpoint_url="http://127.0.0.1:9")
    elsewhere = session.client("logs", endpoint_url="http://127.0.0.1:10")

    # When a client writes log lines there and reads them back
    logs.create_log_group(logGroupName="/aws/lambda/f")
    logs.create_log_stream(logGroupName="/aws/lambda/f", logStreamName="s")
    logs.put_log_events(
        logGroupName="/aws/lambda/f",
        logStreamName="s",
        logEvents=[{"timestamp": int(time.time() * 1000), "message": "hello"}],
    )
    events = logs.get_log_events(logGroupName="/aws/lambda/f", logStreamName="s")["events"]
    app.journal.close()

    # Then the app answered, and journaled the three writes (not the read)
    assert [e["message"] for e in events] == ["hello"]
    targets = [e["environ"].get("HTTP_X_AMZ_TARGET") for e in read_entries(app.journal.path)]
    assert targets == [
        "Logs_20140328.CreateLogGroup",
        "Logs_20140328.CreateLogStream",
        "Logs_20140328.PutLogEvents",
    ]
    # And a call for another endpoint, or after the stop, is sent over the network
    with pytest.raises(EndpointConnectionError):
        elsewhere.describe_log_groups()
    stop()
    with pytest.raises(EndpointConnectionError):
        logs.describe_log_groups()
