"""Every shape S3 uses to say an object was created — EventBridge, and classic notifications
direct, through SQS and through SNS — reads back the key as it was written."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import pytest

from langorch.domain.s3_notifications import S3EventError, objects_created
from langorch.domain.triggers import event_kind

EVENTS = Path(__file__).resolve().parents[1] / "fixtures" / "events"

HOSTILE_KEYS = [
    "inbox/c++ report (1).csv",
    "inbox/100% done.csv",
    "inbox/ünïcode été 東京.csv",
    "inbox/a+b=c&d;e:f,g@h$i.csv",
    "inbox/%2B literally.csv",
]


def _event(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    return data


def _classic(key: str) -> dict[str, Any]:
    event = _event("s3_notification_put.json")
    event["Records"][0]["s3"]["object"]["key"] = quote_plus(key, safe="/")
    return event


def _through_sqs(notification: dict[str, Any]) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": "059f36b4-87a3-44ab-83d2-661975830a7d",
                "eventSource": "aws:sqs",
                "body": json.dumps(notification),
            }
        ]
    }


def _sns_envelope(notification: dict[str, Any]) -> dict[str, Any]:
    return {"Type": "Notification", "MessageId": "m-1", "Message": json.dumps(notification)}


def _through_sns(notification: dict[str, Any]) -> dict[str, Any]:
    return {"Records": [{"EventSource": "aws:sns", "Sns": _sns_envelope(notification)}]}


def test_a_classic_notification_reads_bucket_key_size_etag_version_and_sequencer():
    # Given the documented notification shape, its key URL-encoded as S3 sends it
    event = _event("s3_notification_put.json")

    # When read
    [created] = objects_created(event)

    # Then every field is there and the key is decoded
    assert created.bucket == "langorch-files"
    assert created.key == "invoices/march 2026+final (1).json"
    assert created.size == 1024
    assert created.etag == "d41d8cd98f00b204e9800998ecf8427e"
    assert created.version_id == "096fKKXTRTtl3on89fVO.nfljtsv6qko"
    assert created.sequencer == "0055AED6DCD90281E5"


@pytest.mark.parametrize("key", HOSTILE_KEYS)
@pytest.mark.parametrize("wrap", ["direct", "sqs", "sns", "sns-to-sqs"])
def test_every_envelope_gives_back_the_key_as_written(key: str, wrap: str):
    # Given a notification for a key with spaces, plus signs, percent signs, brackets, non-ASCII
    notification = _classic(key)
    event = {
        "direct": lambda: notification,
        "sqs": lambda: _through_sqs(notification),
        "sns": lambda: _through_sns(notification),
        "sns-to-sqs": lambda: {
            "Records": [{"eventSource": "aws:sqs", "body": json.dumps(_sns_envelope(notification))}]
        },
    }[wrap]()

    # When the trigger recognises and reads it
    assert event_kind(event) == "s3"
    [created] = objects_created(event)

    # Then the key is exactly the one written
    assert created.key == key


@pytest.mark.parametrize("key", HOSTILE_KEYS)
def test_an_eventbridge_event_gives_back_the_key_as_written(key: str):
    event = _event("eventbridge_s3_object_created.json")
    event["detail"]["object"]["key"] = quote_plus(key, safe="/:")

    [created] = objects_created(event)

    assert created.key == key


def test_both_shapes_of_one_write_share_one_dedupe_key():
    # Given the same write seen through EventBridge and through a classic notification
    classic = _event("s3_notification_put.json")
    bridge = _event("eventbridge_s3_object_created.json")
    detail = bridge["detail"]
    obj = classic["Records"][0]["s3"]["object"]
    detail["bucket"]["name"] = classic["Records"][0]["s3"]["bucket"]["name"]
    detail["object"].update(
        key=obj["key"], etag=obj["eTag"], sequencer=obj["sequencer"], **{"version-id": None}
    )
    obj.pop("versionId")

    # When both are read, then a workflow would dedupe them to one run
    [one] = objects_created(classic)
    [other] = objects_created(bridge)
    assert one.dedupe_key("wf") == other.dedupe_key("wf")


def test_a_batch_of_records_gives_one_object_each_and_skips_other_event_types():
    # Given a batch of two creations and one removal
    first = _classic("inbox/a.csv")["Records"][0]
    second = copy.deepcopy(first)
    second["s3"]["object"]["key"] = "inbox/b.csv"
    removal = copy.deepcopy(first)
    removal["eventName"] = "ObjectRemoved:Delete"

    # When read
    created = objects_created({"Records": [first, removal, second]})

    # Then the creations come back in order and the removal starts nothing
    assert [c.key for c in created] == ["inbox/a.csv", "inbox/b.csv"]


def test_the_test_event_s3_sends_when_notifications_are_configured_names_no_object():
    test_event = {"Service": "Amazon S3", "Event": "s3:TestEvent", "Bucket": "langorch-files"}

    assert objects_created(_through_sqs(test_event)) == []


@pytest.mark.parametrize(
    ("event", "where"),
    [
        ({"Records": [{"eventSource": "aws:sqs", "body": "not json"}]}, "Records[0].body"),
        ({"Records": [{"eventSource": "aws:sqs"}]}, "Records[0].body"),
        ({"Records": [{"eventSource": "aws:sns", "Sns": {}}]}, "Records[0].Sns.Message"),
        (_through_sqs({"hello": "world"}), "holds no S3 'Records'"),
        (
            {"Records": [{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put", "s3": {}}]},
            "s3.bucket",
        ),
    ],
)
def test_a_malformed_s3_event_is_refused_with_where_it_went_wrong(event: dict[str, Any], where):
    with pytest.raises(S3EventError) as raised:
        objects_created(event)
    assert where in str(raised.value)


def test_an_sqs_body_nested_past_the_parser_is_a_malformed_event_not_a_crash():
    # Given an SQS-delivered notification whose body is nested 5,000 levels deep (before: a
    # RecursionError, retried by SQS until it reached the dead-letter queue)
    event = {"Records": [{"eventSource": "aws:sqs", "body": "[" * 5000 + "]" * 5000}]}

    # When it is read, Then it is refused as malformed, saying where and the limit
    with pytest.raises(S3EventError, match=r"^Records\[0\]\.body: is nested so deep"):
        objects_created(event)


def test_an_event_of_another_service_is_not_taken_for_an_s3_event():
    event = {"Records": [{"eventSource": "aws:kinesis", "kinesis": {}}]}

    assert event_kind(event) == "unknown"
    with pytest.raises(S3EventError, match="not an S3 event"):
        objects_created(event)
