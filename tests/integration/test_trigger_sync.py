"""Syncing a workflow's triggers through the container on moto: what EventBridge Scheduler gets.

The sync logic (create, update, leave alone, delete) is proven on fakes in
``tests/unit/test_triggers_schedules_s3.py``; this is the wiring and the AWS-side shape.
"""

from __future__ import annotations

import json

from langorch.app.trigger_sync import sync_triggers
from langorch.composition.container import Container
from langorch.domain.definitions import TaskPlan

from .triggers_support import SCHEDULER_ROLE, TRIGGER_FN, make_deps

SCHEDULE_DLQ = "arn:aws:sqs:us-east-1:123456789012:langorch-prod-ScheduleDlq"


def _nightly(deps: Container) -> TaskPlan:
    plan = deps.definitions.get_workflow("nightly")
    assert plan is not None
    return plan


def _raw_schedule(deps: Container, name: str) -> dict[str, object]:
    return dict(deps.client("scheduler").get_schedule(Name=name, GroupName="langorch"))


def test_registering_a_schedule_trigger_creates_the_schedule_in_aws_cron(aws: None) -> None:
    # Given the stored workflow with "0 17 * * 1-5" in Europe/Paris, on a deployed stack
    deps = make_deps(schedule_dlq_arn=SCHEDULE_DLQ)

    # When its triggers are synced
    sync = sync_triggers(_nightly(deps), deps)

    # Then the schedule exists with AWS's cron, the timezone, no flexible window and our Input
    assert [(c.name, c.action) for c in sync.schedules] == [("langorch-nightly", "created")]
    stored = _raw_schedule(deps, "langorch-nightly")
    assert stored["ScheduleExpression"] == "cron(0 17 ? * MON-FRI *)"
    assert stored["ScheduleExpressionTimezone"] == "Europe/Paris"
    assert stored["FlexibleTimeWindow"] == {"Mode": "OFF"}
    target = stored["Target"]
    assert isinstance(target, dict)
    assert target["Arn"] == TRIGGER_FN and target["RoleArn"] == SCHEDULER_ROLE
    assert json.loads(target["Input"]) == {
        "source": "langorch.schedule",
        "workflow_id": "nightly",
        "schedule": "langorch-nightly",
        "scheduled_time": "<aws.scheduler.scheduled-time>",
    }
    # And the Scheduler retries delivery for hours, then puts the event in the stack's DLQ
    assert target["DeadLetterConfig"] == {"Arn": SCHEDULE_DLQ}
    assert target["RetryPolicy"] == {"MaximumEventAgeInSeconds": 21600, "MaximumRetryAttempts": 20}

    # And syncing again through a new container changes nothing
    again = sync_triggers(_nightly(deps), Container(deps.settings, clock=deps.clock))
    assert [c.action for c in again.schedules] == ["unchanged"]
