"""One-time schedules (approvals' reminder and escalation wake-ups) on EventBridge Scheduler
(moto): they delete themselves once fired, and a wake-up that did so while the next was being
written is created again."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import boto3
import pytest

from langorch.adapters.scheduler import ApprovalTimerSchedules, Schedules

ROLE = "arn:aws:iam::123456789012:role/langorch-scheduler"
TARGET = "arn:aws:lambda:us-east-1:123456789012:function:trigger"
GROUP = "langorch"


@pytest.fixture
def client(aws: None) -> Any:
    return boto3.client("scheduler", region_name="us-east-1")


@pytest.fixture
def schedules(client: Any) -> Schedules:
    store = Schedules(client, group=GROUP, role_arn=ROLE, target_arn=TARGET)
    store.ensure_group()
    return store


def _stored(client: Any, name: str) -> dict[str, Any]:
    found: dict[str, Any] = client.get_schedule(Name=name, GroupName=GROUP)
    return found


def test_an_approvals_wake_up_deletes_itself_once_it_has_fired(
    client: Any, schedules: Schedules
) -> None:
    # Given an approval whose reminder is due tomorrow morning
    wake_ups = ApprovalTimerSchedules(schedules)

    # When its wake-up is scheduled
    wake_ups.schedule("ap-1", datetime(2026, 11, 28, 9, 0, tzinfo=UTC))

    # Then the one-time schedule is deleted by the Scheduler after it fires
    stored = _stored(client, ApprovalTimerSchedules.name("ap-1"))
    assert stored["ScheduleExpression"] == "at(2026-11-28T09:00:00)"
    assert stored["ActionAfterCompletion"] == "DELETE"


def test_a_workflows_cron_schedule_is_kept_after_each_slot(
    client: Any, schedules: Schedules
) -> None:
    # When a schedule trigger's cron schedule is written
    schedules.put("langorch-digest", "cron(0 9 * * ? *)", "UTC", {"workflow_id": "digest"})

    # Then it stays after firing: it fires again tomorrow
    assert _stored(client, "langorch-digest")["ActionAfterCompletion"] == "NONE"


def test_a_wake_up_that_deleted_itself_meanwhile_is_created_again(
    client: Any, schedules: Schedules
) -> None:
    # Given a wake-up that fires and deletes itself just as the next one is being written:
    # after the create found it, before the update
    wake_ups = ApprovalTimerSchedules(schedules)
    wake_ups.schedule("ap-2", datetime(2026, 11, 28, 9, 0, tzinfo=UTC))
    name = ApprovalTimerSchedules.name("ap-2")
    scheduler = boto3.client("scheduler", region_name="us-east-1")

    def fired_and_deleted(**_: Any) -> None:
        scheduler.delete_schedule(Name=name, GroupName=GROUP)

    client.meta.events.register_first("before-call.scheduler.UpdateSchedule", fired_and_deleted)

    # When the next wake-up is scheduled
    wake_ups.schedule("ap-2", datetime(2026, 11, 28, 10, 0, tzinfo=UTC))

    # Then it exists, due at the new time
    stored = _stored(client, name)
    assert stored["ScheduleExpression"] == "at(2026-11-28T10:00:00)"
    assert stored["ActionAfterCompletion"] == "DELETE"
