"""The local scheduler tick fires due Scheduler slots once, as EventBridge Scheduler would."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from langorch.local.ticker import Schedule, Ticker, slots_between, to_schedule

INPUT = json.dumps(
    {
        "source": "langorch.schedule",
        "workflow_id": "digest",
        "schedule": "langorch-digest-0",
        "scheduled_time": "<aws.scheduler.scheduled-time>",
        "attempt": "<aws.scheduler.attempt-number>",
        "execution": "<aws.scheduler.execution-id>",
    }
)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


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


def ticker(schedules: list[Schedule], invoke: Recorder, since: datetime) -> Ticker:
    ids = iter(f"exec-{n}" for n in range(100))
    return Ticker(lambda: schedules, invoke, since=since, new_id=lambda: next(ids))


def every_minute(**fields: Any) -> Schedule:
    return Schedule(name="langorch-digest-0", expression="cron(* * * * ? *)", input=INPUT, **fields)


def test_the_first_tick_fires_nothing_from_the_past():
    # Given a ticker started at 10:00:30 and a schedule due every minute
    invoke = Recorder()
    tick = ticker([every_minute()], invoke, since=at("2026-11-22T10:00:30"))

    # When it ticks at the moment it started
    fired = tick.fire_due(at("2026-11-22T10:00:30"))

    # Then nothing fires (10:00 is before the ticker started)
    assert fired == []
    assert invoke.events == []


def test_a_due_slot_fires_once_with_the_input_substituted_even_when_the_tick_repeats():
    invoke = Recorder()
    tick = ticker([every_minute()], invoke, since=at("2026-11-22T10:00:30"))

    first = tick.fire_due(at("2026-11-22T10:01:00.500000"))
    again = tick.fire_due(at("2026-11-22T10:01:00.500000"))
    later = tick.fire_due(at("2026-11-22T10:01:59"))

    assert first == [("langorch-digest-0", at("2026-11-22T10:01:00"))]
    assert again == [] and later == []
    assert invoke.events == [
        {
            "source": "langorch.schedule",
            "workflow_id": "digest",
            "schedule": "langorch-digest-0",
            "scheduled_time": "2026-11-22T10:01:00Z",
            "attempt": "0",
            "execution": "exec-0",
        }
    ]


def test_every_slot_between_two_ticks_fires_in_order():
    invoke = Recorder()
    tick = ticker([every_minute()], invoke, since=at("2026-11-22T10:00:30"))

    tick.fire_due(at("2026-11-22T10:03:10"))

    assert [e["scheduled_time"] for e in invoke.events] == [
        "2026-11-22T10:01:00Z",
        "2026-11-22T10:02:00Z",
        "2026-11-22T10:03:00Z",
    ]


def test_a_failed_delivery_is_retried_next_tick_with_a_new_execution_id():
    invoke = Recorder(failures=1)
    tick = ticker([every_minute()], invoke, since=at("2026-11-22T10:00:30"))

    tick.fire_due(at("2026-11-22T10:01:01"))
    delivered = tick.fire_due(at("2026-11-22T10:01:02"))

    assert delivered == [("langorch-digest-0", at("2026-11-22T10:01:00"))]
    assert [(e["scheduled_time"], e["attempt"], e["execution"]) for e in invoke.events] == [
        ("2026-11-22T10:01:00Z", "0", "exec-0"),
        ("2026-11-22T10:01:00Z", "1", "exec-1"),
    ]


def test_the_schedule_timezone_decides_the_slot():
    # 09:00 in Paris is 08:00 UTC in winter (CET) and 07:00 UTC in summer (CEST)
    paris = Schedule(name="s", expression="cron(0 9 * * ? *)", timezone="Europe/Paris")

    winter = list(slots_between(paris, at("2026-01-10T00:00:00"), at("2026-01-10T23:59:00")))
    summer = list(slots_between(paris, at("2026-07-10T00:00:00"), at("2026-07-10T23:59:00")))

    assert winter == [at("2026-01-10T08:00:00")]
    assert summer == [at("2026-07-10T07:00:00")]


def test_aws_days_of_week_count_from_sunday_as_one():
    # (the translation itself is tested in tests/unit/test_cron.py)
    monday = Schedule(name="s", expression="cron(0 12 ? * 2 *)")
    # 2026-11-22 is a Sunday
    slots = list(slots_between(monday, at("2026-11-22T00:00:00"), at("2026-11-29T00:00:00")))
    assert slots == [at("2026-11-23T12:00:00")]


def test_the_year_field_limits_slots():
    only_2027 = Schedule(name="s", expression="cron(0 0 1 1 ? 2027)")
    slots = list(slots_between(only_2027, at("2025-12-31T00:00:00"), at("2028-01-02T00:00:00")))
    assert slots == [at("2027-01-01T00:00:00")]


def test_disabled_schedules_and_slots_outside_start_and_end_do_not_fire():
    invoke = Recorder()
    since = at("2026-11-22T10:00:30")
    tick = ticker(
        [
            every_minute(enabled=False),
            Schedule(
                name="later",
                expression="cron(* * * * ? *)",
                start=at("2026-11-22T10:05:00"),
            ),
            Schedule(name="ended", expression="cron(* * * * ? *)", end=since),
        ],
        invoke,
        since=since,
    )

    assert tick.fire_due(since + timedelta(minutes=2)) == []


def test_rate_and_at_expressions():
    rate = Schedule(name="r", expression="rate(15 minutes)", start=at("2026-11-22T10:00:00"))
    once = Schedule(name="o", expression="at(2026-11-22T10:20:00)")

    window = (at("2026-11-22T10:00:00"), at("2026-11-22T10:31:00"))
    assert list(slots_between(rate, *window)) == [
        at("2026-11-22T10:15:00"),
        at("2026-11-22T10:30:00"),
    ]
    assert list(slots_between(once, *window)) == [at("2026-11-22T10:20:00")]


def test_an_unreadable_schedule_list_keeps_the_window_for_the_next_tick():
    invoke = Recorder()
    calls = {"n": 0}

    def flaky() -> list[Schedule]:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("emulator busy")
        return [every_minute()]

    tick = Ticker(flaky, invoke, since=at("2026-11-22T10:00:30"))
    assert tick.fire_due(at("2026-11-22T10:01:05")) == []
    assert tick.fire_due(at("2026-11-22T10:01:06")) == [
        ("langorch-digest-0", at("2026-11-22T10:01:00"))
    ]


def test_schedules_are_read_from_the_adapters_model_or_boto3_shape():
    class Info:
        name = "n"
        expression = "cron(0 9 * * ? *)"
        timezone = "Europe/Paris"
        input = {"scheduled_time": "<aws.scheduler.scheduled-time>"}
        state = "DISABLED"

    model = to_schedule(Info(), region="us-east-1", group="langorch")
    boto = to_schedule(
        {
            "Name": "n",
            "ScheduleExpression": "cron(0 9 * * ? *)",
            "Target": {"Input": '{"a": 1}'},
            "State": "ENABLED",
        },
        region="us-east-1",
        group="g",
    )

    assert model is not None and boto is not None
    assert (model.timezone, model.enabled) == ("Europe/Paris", False)
    assert json.loads(model.input) == {"scheduled_time": "<aws.scheduler.scheduled-time>"}
    assert model.arn == "arn:aws:scheduler:us-east-1:123456789012:schedule/langorch/n"
    assert (boto.input, boto.enabled, boto.timezone) == ('{"a": 1}', True, "UTC")


@pytest.mark.parametrize("expression", ["cron(0 9 * *)", "every day"])
def test_an_expression_it_cannot_read_is_skipped_not_fatal(expression: str):
    invoke = Recorder()
    tick = ticker(
        [Schedule(name="bad", expression=expression), every_minute()],
        invoke,
        since=at("2026-11-22T10:00:30"),
    )

    assert tick.fire_due(at("2026-11-22T10:01:01")) == [
        ("langorch-digest-0", at("2026-11-22T10:01:00"))
    ]
