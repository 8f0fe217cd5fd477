"""Trigger rules without AWS: AWS cron, schedule names, event parsing, dedupe keys."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from croniter import croniter

from langorch.domain.cron import classic_cron
from langorch.domain.definitions import Trigger
from langorch.domain.triggers import (
    MAX_SCHEDULE_NAME,
    S3ObjectCreated,
    ScheduleFired,
    aws_cron,
    event_kind,
    s3_trigger_matches,
    schedule_name,
)

EVENTS = Path(__file__).resolve().parents[1] / "fixtures" / "events"


def _event(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    return data


@pytest.mark.parametrize(
    ("cron", "expected"),
    [
        ("0 12 * * 2", "cron(0 12 ? * TUE *)"),
        ("0 9 * * 1-5", "cron(0 9 ? * MON-FRI *)"),
        ("*/15 * * * *", "cron(0/15 * * * ? *)"),
        ("0 0 1 * *", "cron(0 0 1 * ? *)"),
        ("30 6 * * 5-7", "cron(30 6 ? * SUN,FRI,SAT *)"),
        ("0 0 * * 0,7", "cron(0 0 ? * SUN *)"),
        ("0 8 * * mon-fri", "cron(0 8 ? * MON-FRI *)"),
        ("0 0 * * 5#3", "cron(0 0 ? * 6#3 *)"),
        ("0 0 * * 0-6", "cron(0 0 * * ? *)"),
    ],
)
def test_five_field_cron_becomes_aws_cron(cron: str, expected: str):
    # Given a classic cron expression, when converted, then it reads as AWS's
    assert aws_cron(cron) == expected


def test_restricting_both_day_fields_is_refused():
    # Given classic cron's "day 1 OR Monday", which AWS cannot express
    # When converted, then it is refused with the reason
    with pytest.raises(ValueError, match="both day-of-month and day-of-week"):
        aws_cron("0 9 1 * 1")


@pytest.mark.parametrize(
    "cron",
    [
        "0 12 * * 2",
        "0 9 * * 1-5",
        "*/15 * * * *",
        "0 0 */2 * *",
        "30 6 * * 5-7",
        "0 0 * * */2",
        "0 0 * * 5#3",
        "0 18 * * L5",
        "0 12 L * *",
        "0 12 15W * *",
    ],
)
def test_the_aws_form_fires_at_the_same_times(cron: str):
    # Given a cron and its AWS form read back as classic cron (what the local tick does)
    back = classic_cron(aws_cron(cron)).fields

    # When the next fifty times of each are computed
    start = datetime(2026, 1, 1, tzinfo=UTC)
    a, b = croniter(cron, start), croniter(back, start)

    # Then they are the same
    assert [a.get_next(datetime) for _ in range(50)] == [b.get_next(datetime) for _ in range(50)]


def test_schedule_names_fit_the_scheduler_limit_and_stay_distinct():
    # Given a 128-character workflow id
    long_id = "w" * 128

    # When its schedule names are made
    names = [schedule_name(long_id, i) for i in range(3)]

    # Then each fits, and they differ
    assert all(len(n) <= MAX_SCHEDULE_NAME for n in names)
    assert len(set(names)) == 3
    assert schedule_name("nightly") == "langorch-nightly"
    assert schedule_name("nightly", 1) == "langorch-nightly-2"


@pytest.mark.parametrize(
    ("fixture", "kind"),
    [
        ("apigw_v2_webhook.json", "http"),
        ("scheduler_invoke.json", "schedule"),
        ("eventbridge_s3_object_created.json", "s3"),
    ],
)
def test_each_recorded_event_is_recognised_by_its_shape(fixture: str, kind: str):
    assert event_kind(_event(fixture)) == kind


def test_the_s3_key_is_url_decoded():
    # Given the recorded event with an encoded key
    event = _event("eventbridge_s3_object_created.json")

    # When parsed
    obj = S3ObjectCreated.from_event(event)

    # Then spaces, plus signs and brackets are back
    assert obj.key == "invoices/march 2026+final (1).json"
    assert obj.version_id == "IYV3p45BT0ac8hjHg1houSdS1a.Mro8e"


def test_the_dedupe_key_prefers_version_then_sequencer_then_etag():
    # Given one write seen with less and less identity
    full = S3ObjectCreated("b", "k", etag="e", version_id="v", sequencer="s")
    unversioned = S3ObjectCreated("b", "k", etag="e", sequencer="s")
    etag_only = S3ObjectCreated("b", "k", etag="e")

    # When their dedupe keys are made, then each uses the best it has
    assert full.dedupe_key("w") == "s3:w:b/k@v=v"
    assert unversioned.dedupe_key("w") == "s3:w:b/k@seq=s"
    assert etag_only.dedupe_key("w") == "s3:w:b/k@etag=e"


def test_moto_style_etag_and_null_version_are_understood():
    # Given moto's spelling (eTag) and an unversioned bucket's "null" version
    event = _event("eventbridge_s3_object_created.json")
    obj = event["detail"]["object"]
    obj["eTag"] = obj.pop("etag")
    obj["version-id"] = "null"

    # When parsed
    parsed = S3ObjectCreated.from_event(event)

    # Then the etag is read and the version is absent
    assert parsed.etag == "b1946ac92492d2347c6235b4d2611184"
    assert parsed.version_id is None


def test_s3_triggers_match_on_bucket_prefix_and_suffix():
    obj = S3ObjectCreated("drop", "invoices/a.json", sequencer="1")
    assert s3_trigger_matches(Trigger(type="s3", prefix="invoices/"), obj, default_bucket="drop")
    assert not s3_trigger_matches(Trigger(type="s3", suffix=".csv"), obj, default_bucket="drop")
    assert not s3_trigger_matches(
        Trigger(type="s3", bucket="other", prefix="invoices/"), obj, default_bucket="drop"
    )


def test_a_schedule_input_without_a_substituted_time_is_refused():
    # Given Input whose placeholder was not substituted (not sent by the Scheduler)
    event = {**_event("scheduler_invoke.json"), "scheduled_time": "<aws.scheduler.scheduled-time>"}

    # When parsed, then it is refused (every slot would share one dedupe key)
    with pytest.raises(ValueError):
        ScheduleFired.model_validate(event)
