"""S3 → EventBridge → SQS → the trigger, as local mode wires it (moto, in-process)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from langorch.local.s3events import S3Events, configure, patch_moto_sequencer

REGION = "us-east-1"
BUCKET = "langorch-files"


class Recorder:
    def __init__(self, failures: int = 0) -> None:
        self.events: list[dict[str, Any]] = []
        self.failures = failures

    def __call__(self, event: dict[str, Any]) -> Any:
        self.events.append(event)
        if self.failures:
            self.failures -= 1
            raise RuntimeError("trigger down")
        return {"ok": True}


@pytest.fixture
def clients(aws: None) -> Iterator[tuple[Any, Any, Any]]:
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=BUCKET)
    undo = patch_moto_sequencer()
    yield s3, boto3.client("events", region_name=REGION), boto3.client("sqs", region_name=REGION)
    undo()


def poller(clients: tuple[Any, Any, Any], invoke: Recorder) -> S3Events:
    s3, events, sqs = clients
    url = configure(s3, events, sqs, bucket=BUCKET, exclude_prefix="checkpoints/")
    return S3Events(sqs, url, invoke)


def test_an_object_put_reaches_the_trigger_as_the_eventbridge_envelope(clients):
    invoke = Recorder()
    pump = poller(clients, invoke)

    clients[0].put_object(Bucket=BUCKET, Key="inbox/report 1.csv", Body=b"a,b\n")
    handled = pump.pump()

    assert handled == invoke.events
    (event,) = invoke.events
    assert event["source"] == "aws.s3"
    assert event["detail-type"] == "Object Created"
    assert event["resources"] == [f"arn:aws:s3:::{BUCKET}"]
    assert event["detail"]["bucket"]["name"] == BUCKET
    assert event["detail"]["object"]["key"] == "inbox/report+1.csv"  # URL-encoded, as S3 sends it
    assert event["detail"]["object"]["size"] == 4


def test_checkpoint_offloads_in_the_same_bucket_start_nothing(clients):
    invoke = Recorder()
    pump = poller(clients, invoke)

    clients[0].put_object(Bucket=BUCKET, Key="checkpoints/run-1/blob", Body=b"{}")

    assert pump.pump() == []


def test_each_write_of_a_key_gets_its_own_growing_sequencer(clients):
    # moto stamps every S3 EventBridge event with the same sequencer; S3 does not.
    invoke = Recorder()
    pump = poller(clients, invoke)

    clients[0].put_object(Bucket=BUCKET, Key="inbox/a.csv", Body=b"1")
    clients[0].put_object(Bucket=BUCKET, Key="inbox/a.csv", Body=b"2")
    pump.pump()

    first, second = (e["detail"]["object"]["sequencer"] for e in invoke.events)
    assert first != second
    assert len(first) == len(second) == 18
    assert int(second, 16) > int(first, 16)


def test_a_failed_delivery_stays_in_the_queue_for_redelivery(clients):
    invoke = Recorder(failures=1)
    pump = poller(clients, invoke)

    clients[0].put_object(Bucket=BUCKET, Key="inbox/a.csv", Body=b"1")
    assert pump.pump() == []

    attributes = clients[2].get_queue_attributes(
        QueueUrl=pump.queue_url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    assert attributes["ApproximateNumberOfMessagesNotVisible"] == "1"


def test_configuring_twice_keeps_one_rule_and_queue(clients):
    s3, events, sqs = clients
    first = configure(s3, events, sqs, bucket=BUCKET, exclude_prefix=None)
    second = configure(s3, events, sqs, bucket=BUCKET, exclude_prefix=None)

    assert first == second
    assert len(events.list_targets_by_rule(Rule="langorch-local-s3-object-created")["Targets"]) == 1
