"""The trigger Lambda's mapping on fakes: recorded API Gateway v2 requests and other events in,
status codes, logs and metrics out. The moto-backed wiring is in
``tests/integration/test_trigger_handler.py``."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator

import pytest

from functions.trigger import handler as trigger
from tests.fakes import Fakes
from tests.integration.triggers_support import SECRET, load_event
from tests.support.events import function_log, invoke
from tests.unit.triggers_support import all_runs, make_deps


@pytest.fixture
def deps() -> Iterator[Fakes]:
    fakes = make_deps()
    # The sandbox's container: the fakes satisfy every port the handler's use-cases name.
    previous = trigger.container.use(fakes)  # type: ignore[arg-type]
    yield fakes
    trigger.container.use(previous)


@pytest.fixture
def log_output() -> Iterator[io.StringIO]:
    """Everything the function logs."""
    with function_log(trigger) as stream:
        yield stream


def test_a_base64_encoded_body_is_verified_byte_for_byte(deps: Fakes):
    # Given the recorded request with isBase64Encoded
    event = load_event("apigw_v2_webhook_base64.json")

    # When the function is invoked
    response = invoke(trigger, event)

    # Then the signature over the decoded bytes verifies
    assert response["statusCode"] == 202


def test_a_body_changed_in_transit_is_refused(deps: Fakes):
    # Given the recorded base64 request with one byte of the body changed
    event = load_event("apigw_v2_webhook_base64.json")
    raw = base64.b64decode(event["body"]).replace(b"42", b"43")
    event["body"] = base64.b64encode(raw).decode()

    # When the function is invoked
    response = invoke(trigger, event)

    # Then it is a 401 with a JSON error and nothing started
    assert response["statusCode"] == 401
    assert "error" in json.loads(response["body"])
    assert all_runs(deps) == []


def test_logs_name_the_delivery_and_run_but_never_the_signature_or_secret(
    deps: Fakes, log_output: io.StringIO
):
    # Given the recorded request
    event = load_event("apigw_v2_webhook.json")
    signature = event["headers"]["webhook-signature"].partition(",")[2]

    # When the function handles it
    response = invoke(trigger, event)

    # Then the output has the delivery and run ids and neither the signature nor the secret
    out = log_output.getvalue()
    run_id = json.loads(response["body"])["run_id"]
    assert "dlv-0001" in out and run_id in out
    assert signature not in out
    assert SECRET not in out


def test_a_started_run_and_a_rejection_are_counted_with_their_dimension(
    deps: Fakes, capsys: pytest.CaptureFixture[str]
):
    # Given an accepted and a refused delivery
    good = load_event("apigw_v2_webhook.json")
    bad = load_event("apigw_v2_webhook.json")
    bad["headers"]["webhook-id"] = "dlv-forged"

    # When both are handled
    invoke(trigger, good)
    invoke(trigger, bad)

    # Then EMF lines count RunsStarted by trigger and WebhookRejected by status
    metrics = [
        json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line
    ]
    started = next(m for m in metrics if "RunsStarted" in m)
    rejected = next(m for m in metrics if "WebhookRejected" in m)
    assert started["trigger"] == "webhook" and started["RunsStarted"] == [1.0]
    assert rejected["status"] == "401"


def test_an_unknown_route_is_a_404_and_an_unknown_event_is_ignored(deps: Fakes):
    # Given a GET on the hook path and an event of no known shape
    get = load_event("apigw_v2_webhook.json")
    get["requestContext"]["http"]["method"] = "GET"

    # When each is handled
    response = invoke(trigger, get)
    ignored = invoke(trigger, {"source": "somewhere.else"})

    # Then nothing starts
    assert response["statusCode"] == 404
    assert ignored == {"ignored": "unsupported event"}
    assert all_runs(deps) == []


def test_a_malformed_s3_notification_is_refused_with_its_reason_and_starts_nothing(
    deps: Fakes, log_output: io.StringIO
):
    # Given an SQS message whose body is not an S3 notification
    event = {"Records": [{"eventSource": "aws:sqs", "body": json.dumps({"hello": "world"})}]}

    # When the function gets it
    answer = invoke(trigger, event)

    # Then it says why, logs it as an error, and nothing starts
    assert answer["ignored"] == "malformed S3 event"
    assert "Records[0].body holds no S3 'Records' list" in answer["reason"]
    assert '"malformed S3 event"' in log_output.getvalue()
    assert all_runs(deps) == []


def test_an_event_rules_envelope_starts_the_workflows_run_once(deps: Fakes):
    # Given a workflow with an event trigger and its rule's envelope around an EventBridge event
    from langorch.app.definitions import register_workflow
    from langorch.domain.loading import load_text
    from langorch.domain.triggers import event_envelope

    text = """
workflows:
  - plan_id: orders
    memory: false
    triggers: [{type: event, pattern: {source: [shop.orders]}}]
    steps: [{step_id: noop, kind: transform, transform: {x: "1"}}]
"""
    register_workflow(deps.definitions, load_text(text, source="o.yaml", fmt="yaml").workflows[0])
    event = load_event("eventbridge_order_placed.json")

    # When EventBridge invokes the function with it twice
    first = invoke(trigger, event_envelope("orders", "default", event))
    again = invoke(trigger, event_envelope("orders", "default", event))

    # Then one run started and the redelivery found it
    assert first["trigger"] == "event"
    assert [r["created"] for r in first["runs"]] == [True]
    assert [r["created"] for r in again["runs"]] == [False]
    assert [r.workflow_id for r in all_runs(deps)] == ["orders"]


def test_a_malformed_event_envelope_is_refused_with_its_reason(deps: Fakes):
    # Given an envelope whose event has no id
    envelope = {"source": "langorch.event", "workflow_id": "orders", "event": {"source": "x"}}

    # When the function gets it
    answer = invoke(trigger, envelope)

    # Then it says why and nothing starts
    assert answer["ignored"] == "malformed EventBridge event"
    assert all_runs(deps) == []
