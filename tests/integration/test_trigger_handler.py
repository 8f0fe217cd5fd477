"""The trigger Lambda, driven by recorded API Gateway v2, Scheduler and EventBridge S3 events."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from functions.trigger import handler as trigger
from langorch.app.container import Container

from .conftest import UseContainer
from .triggers_support import SECRET, all_runs, executions, load_event, make_deps


@dataclass
class FakeContext:
    function_name: str = "langorch-trigger"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:langorch-trigger"
    aws_request_id: str = "req-1"


@pytest.fixture
def deps(aws: None, handler_container: UseContainer) -> Container:
    container = make_deps()
    # The sandbox's container, as the handler would build it from the environment.
    handler_container(trigger, container)
    return container


@pytest.fixture
def log_output() -> Iterator[io.StringIO]:
    """Everything the function logs (its JSON handler is shared with ``langorch.*`` loggers)."""
    stream = io.StringIO()
    handler = trigger.logger.registered_handler
    previous = handler.setStream(stream)
    yield stream
    handler.setStream(previous)


def _invoke(event: dict[str, Any]) -> dict[str, Any]:
    return trigger.handler(event, FakeContext())  # type: ignore[arg-type]


def test_a_recorded_webhook_request_answers_202_with_the_run_id(deps: Container):
    # Given the recorded API Gateway v2 request (signed with the test secret)
    event = load_event("apigw_v2_webhook.json")

    # When the function is invoked
    response = _invoke(event)

    # Then it answers 202 with the run id as JSON, and the execution exists
    assert response["statusCode"] == 202
    body = json.loads(response["body"])
    assert body["created"] is True
    assert [e["name"] for e in executions(deps)] == [body["run_id"]]
    assert deps.runs.get_run(body["run_id"]).input["note"] == "caf\u00e9 \u2615"


def test_a_base64_encoded_body_is_verified_byte_for_byte(deps: Container):
    # Given the recorded request with isBase64Encoded
    event = load_event("apigw_v2_webhook_base64.json")

    # When the function is invoked
    response = _invoke(event)

    # Then the signature over the decoded bytes verifies
    assert response["statusCode"] == 202


def test_a_body_changed_in_transit_is_refused(deps: Container):
    # Given the recorded base64 request with one byte of the body changed
    event = load_event("apigw_v2_webhook_base64.json")
    raw = base64.b64decode(event["body"]).replace(b"42", b"43")
    event["body"] = base64.b64encode(raw).decode()

    # When the function is invoked
    response = _invoke(event)

    # Then it is a 401 with a JSON error and nothing started
    assert response["statusCode"] == 401
    assert "error" in json.loads(response["body"])
    assert all_runs(deps) == []


def test_logs_name_the_delivery_and_run_but_never_the_signature_or_secret(
    deps: Container, log_output: io.StringIO
):
    # Given the recorded request
    event = load_event("apigw_v2_webhook.json")
    signature = event["headers"]["webhook-signature"].partition(",")[2]

    # When the function handles it
    response = _invoke(event)

    # Then the output has the delivery and run ids and neither the signature nor the secret
    out = log_output.getvalue()
    run_id = json.loads(response["body"])["run_id"]
    assert "dlv-0001" in out and run_id in out
    assert signature not in out
    assert SECRET not in out


def test_a_started_run_and_a_rejection_are_counted_with_their_dimension(
    deps: Container, capsys: pytest.CaptureFixture[str]
):
    # Given an accepted and a refused delivery
    good = load_event("apigw_v2_webhook.json")
    bad = load_event("apigw_v2_webhook.json")
    bad["headers"]["webhook-id"] = "dlv-forged"

    # When both are handled
    _invoke(good)
    _invoke(bad)

    # Then EMF lines count RunsStarted by trigger and WebhookRejected by status
    metrics = [
        json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line
    ]
    started = next(m for m in metrics if "RunsStarted" in m)
    rejected = next(m for m in metrics if "WebhookRejected" in m)
    assert started["trigger"] == "webhook" and started["RunsStarted"] == [1.0]
    assert rejected["status"] == "401"


def test_a_recorded_scheduler_invocation_starts_the_slots_run_once(deps: Container):
    # Given the Scheduler's Input for one slot
    event = load_event("scheduler_invoke.json")

    # When it is delivered twice
    first = _invoke(event)
    second = _invoke(event)

    # Then one run was created
    assert first["runs"][0]["created"] is True
    assert second["runs"][0] == {**first["runs"][0], "created": False}
    assert len(executions(deps)) == 1


def test_a_recorded_s3_event_starts_the_matching_workflow(deps: Container):
    # Given the recorded EventBridge S3 event
    event = load_event("eventbridge_s3_object_created.json")

    # When the function is invoked
    result = _invoke(event)

    # Then the .json watcher started, with the decoded key
    assert [r["workflow_id"] for r in result["runs"]] == ["json_drop"]
    run = deps.runs.get_run(result["runs"][0]["run_id"])
    assert run.input["key"] == "invoices/march 2026+final (1).json"


def test_an_unknown_route_is_a_404_and_an_unknown_event_is_ignored(deps: Container):
    # Given a GET on the hook path and an event of no known shape
    get = load_event("apigw_v2_webhook.json")
    get["requestContext"]["http"]["method"] = "GET"

    # When each is handled
    response = _invoke(get)
    ignored = _invoke({"source": "somewhere.else"})

    # Then nothing starts
    assert response["statusCode"] == 404
    assert ignored == {"ignored": "unsupported event"}
    assert all_runs(deps) == []


def test_a_classic_s3_notification_through_sqs_starts_the_run_the_eventbridge_event_started(
    deps: Container,
):
    # Given one write of a key, seen first as S3's classic notification delivered through SQS
    bridge = load_event("eventbridge_s3_object_created.json")
    obj = bridge["detail"]["object"]
    record = load_event("s3_notification_put.json")["Records"][0]
    record["s3"]["bucket"]["name"] = bridge["detail"]["bucket"]["name"]
    record["s3"]["object"].update(key=obj["key"], versionId=obj["version-id"])
    sqs = {"Records": [{"eventSource": "aws:sqs", "body": json.dumps({"Records": [record]})}]}

    # When the function gets it, and then the same write through EventBridge
    first = _invoke(sqs)
    second = _invoke(bridge)

    # Then the classic shape started the .json watcher with the decoded key, and the
    # EventBridge event of the same write started nothing more
    [started] = first["runs"]
    assert started["workflow_id"] == "json_drop" and started["created"] is True
    assert deps.runs.get_run(started["run_id"]).input["key"] == "invoices/march 2026+final (1).json"
    assert second["runs"] == [{**started, "created": False}]
    assert len(executions(deps)) == 1


def test_a_malformed_s3_notification_is_refused_with_its_reason_and_starts_nothing(
    deps: Container, log_output: io.StringIO
):
    # Given an SQS message whose body is not an S3 notification
    event = {"Records": [{"eventSource": "aws:sqs", "body": json.dumps({"hello": "world"})}]}

    # When the function gets it
    answer = _invoke(event)

    # Then it says why, logs it as an error, and nothing starts
    assert answer["ignored"] == "malformed S3 event"
    assert "Records[0].body holds no S3 'Records' list" in answer["reason"]
    assert '"malformed S3 event"' in log_output.getvalue()
    assert all_runs(deps) == []
