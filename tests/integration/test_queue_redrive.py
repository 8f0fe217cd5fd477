"""``langorch queues redrive`` on the local stack's emulator: an event the trigger's DLQ caught
(SQS in moto) goes to the trigger function again (routed to ``functions/trigger`` in this
process) and starts its run; redriving the same event again starts nothing more."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import boto3
import pytest
from botocore.awsrequest import AWSResponse, HTTPHeaders

from langorch.app.dead_letters import RedriveQueues, redrive_queues
from tests.integration.triggers_support import WORKFLOWS
from tests.support.pipeline import Pipeline, pipelines

SCHEDULE_EVENT = {
    "source": "langorch.schedule",
    "workflow_id": "nightly",
    "schedule": "langorch-nightly",
    "scheduled_time": "2026-11-24T17:00:00Z",
}
FAILED_INVOCATION = {
    "version": "1.0",
    "requestContext": {"condition": "RetriesExhausted", "approximateInvokeCount": 3},
    "requestPayload": SCHEDULE_EVENT,
    "responsePayload": {"errorMessage": "Rate exceeded"},
}
"""What Lambda puts in the trigger's on-failure queue after its last asynchronous attempt."""


class _Accepted(io.BytesIO):
    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.read()


class AsyncInvocations:
    """Lambda's queue of asynchronous invocations (``InvocationType=Event``): accepted (202)
    and kept; :meth:`deliver` runs them as the Lambda service would, through the local stack's
    routing of synchronous invocations to the handlers."""

    def __init__(self) -> None:
        self.queued: list[tuple[str, bytes]] = []

    def accept(self, request: Any, **_: Any) -> AWSResponse | None:
        if request.headers.get("X-Amz-Invocation-Type") not in ("Event", b"Event"):
            return None
        name = unquote(request.url.split("/functions/", 1)[1].split("/", 1)[0])
        self.queued.append((name, bytes(request.body or b"")))
        return AWSResponse(request.url, 202, HTTPHeaders(), _Accepted(b""))

    def deliver(self) -> None:
        client = boto3.client("lambda", region_name="us-east-1")
        queued, self.queued = self.queued, []
        for name, payload in queued:
            client.invoke(FunctionName=name, Payload=payload)


@pytest.fixture
def async_invocations(dlq_and_pipeline: tuple[str, Pipeline]) -> Iterator[AsyncInvocations]:
    invocations = AsyncInvocations()
    _, pipeline = dlq_and_pipeline
    events = pipeline.container.client("lambda").meta.events  # the redrive's client
    events.register_first("before-send.lambda.Invoke", invocations.accept, unique_id="async")
    yield invocations
    events.unregister("before-send.lambda.Invoke", unique_id="async")


@pytest.fixture
def dlq_and_pipeline(tmp_path: Path) -> Iterator[tuple[str, Pipeline]]:
    with pipelines(tmp_path) as make:
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="stack-TriggerDlq")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        pipeline = make(dead_letter_queues=f"trigger={arn}")
        pipeline.register(WORKFLOWS)
        yield url, pipeline


def _nightly_runs(pipeline: Pipeline) -> list[str]:
    return [r.run_id for r in pipeline.container.runs.list_runs(workflow_id="nightly")]


def test_a_dead_lettered_schedule_event_starts_its_run_once_however_often_redriven(
    dlq_and_pipeline: tuple[str, Pipeline], async_invocations: AsyncInvocations
):
    # Given the trigger's failed invocation of a schedule slot in its DLQ
    url, pipeline = dlq_and_pipeline
    sqs = boto3.client("sqs", region_name="us-east-1")
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps(FAILED_INVOCATION))

    # When the queues are redriven
    (done,) = redrive_queues(RedriveQueues(), pipeline.container)

    # Then the event is queued for the trigger, whose delivery starts the slot's run
    assert (done.queue, done.moved) == ("trigger", 1)
    assert [name for name, _ in async_invocations.queued] == [
        pipeline.container.settings.trigger_function_arn
    ]
    async_invocations.deliver()
    (run_id,) = _nightly_runs(pipeline)
    assert pipeline.finished(run_id)["status"] == "SUCCEEDED"
    # And the queue is empty
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)

    # And the same letter redriven again (a repeat delivery) starts no second run
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps(FAILED_INVOCATION))
    (again,) = redrive_queues(RedriveQueues("trigger"), pipeline.container)
    async_invocations.deliver()
    assert again.moved == 1
    assert _nightly_runs(pipeline) == [run_id]
