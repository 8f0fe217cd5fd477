"""The trigger Lambda on moto, driven by recorded API Gateway v2, Scheduler and EventBridge S3
events: one test per wiring path. The handler's mapping (statuses, logs, metrics, routes) is
proven on fakes in ``tests/unit/test_trigger_handler.py``."""

from __future__ import annotations

import json

import pytest

from functions.trigger import handler as trigger
from langorch.composition.container import Container
from tests.support.events import invoke

from .conftest import UseContainer
from .triggers_support import executions, load_event, make_deps


@pytest.fixture
def deps(aws: None, handler_container: UseContainer) -> Container:
    container = make_deps()
    # The sandbox's container, as the handler would build it from the environment.
    handler_container(trigger, container)
    return container


def test_a_recorded_webhook_request_answers_202_with_the_run_id(deps: Container):
    # Given the recorded API Gateway v2 request (signed with the test secret)
    event = load_event("apigw_v2_webhook.json")

    # When the function is invoked
    response = invoke(trigger, event)

    # Then it answers 202 with the run id as JSON, and the execution exists
    assert response["statusCode"] == 202
    body = json.loads(response["body"])
    assert body["created"] is True
    assert [e["name"] for e in executions(deps)] == [body["run_id"]]
    assert deps.runs.get_run(body["run_id"]).input["note"] == "caf\u00e9 \u2615"


def test_a_recorded_scheduler_invocation_starts_the_slots_run_once(deps: Container):
    # Given the Scheduler's Input for one slot
    event = load_event("scheduler_invoke.json")

    # When it is delivered twice
    first = invoke(trigger, event)
    second = invoke(trigger, event)

    # Then one run was created
    assert first["runs"][0]["created"] is True
    assert second["runs"][0] == {**first["runs"][0], "created": False}
    assert len(executions(deps)) == 1


def test_a_recorded_s3_event_starts_the_matching_workflow(deps: Container):
    # Given the recorded EventBridge S3 event
    event = load_event("eventbridge_s3_object_created.json")

    # When the function is invoked
    result = invoke(trigger, event)

    # Then the .json watcher started, with the decoded key
    assert [r["workflow_id"] for r in result["runs"]] == ["json_drop"]
    run = deps.runs.get_run(result["runs"][0]["run_id"])
    assert run.input["key"] == "invoices/march 2026+final (1).json"


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
    first = invoke(trigger, sqs)
    second = invoke(trigger, bridge)

    # Then the classic shape started the .json watcher with the decoded key, and the
    # EventBridge event of the same write started nothing more
    [started] = first["runs"]
    assert started["workflow_id"] == "json_drop" and started["created"] is True
    assert deps.runs.get_run(started["run_id"]).input["key"] == "invoices/march 2026+final (1).json"
    assert second["runs"] == [{**started, "created": False}]
    assert len(executions(deps)) == 1
