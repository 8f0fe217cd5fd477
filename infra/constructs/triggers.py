"""What starts runs asynchronously: EventBridge Scheduler, S3 drops via EventBridge, and DLQs."""

from __future__ import annotations

import json

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.constructs.storage import FilesBucket
from langorch.domain.triggers import RECONCILE_SOURCE

DLQ_RETENTION = Duration.days(14)
"""SQS's longest: a failed start must survive a long weekend before someone looks."""


class Triggers(Construct):
    """The schedule group and role, the file-drop rule, and the dead-letter queues.

    Schedules themselves are created by ``langorch workflows put`` (one per schedule
    trigger) in the group, with the role and the schedule DLQ from the stack outputs.
    Every asynchronous path into the trigger function ends in a queue when it gives up:

    - ``schedules``: the Scheduler could not invoke the function (after its retries);
    - ``file_events``: EventBridge could not deliver an object-created event;
    - ``trigger_failures``: the function was invoked asynchronously and failed every attempt.

    Args:
        prefix: name prefix, ``langorch-<stage>``.
        trigger: the trigger function.
        files: the files bucket (object-created events; checkpoint offloads excluded).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        prefix: str,
        trigger: lambda_.Function,
        files: FilesBucket,
        reconcile_minutes: int = 15,
    ) -> None:
        super().__init__(scope, id)
        self.schedule_dlq = self._queue("ScheduleDlq")
        self.file_events_dlq = self._queue("FileEventsDlq")
        self.trigger_dlq = self._queue("TriggerDlq")

        trigger.configure_async_invoke(
            on_failure=destinations.SqsDestination(self.trigger_dlq),
            retry_attempts=2,
            max_event_age=Duration.hours(6),
        )

        # Named by CloudFormation (a random suffix: the L2 construct would write a fixed
        # generated name) and deleted with the stack, whatever `retain_data` says: deleting a
        # group deletes its schedules, which would otherwise keep firing at a deleted
        # function, and a fixed name collides with a group still being deleted. Schedules
        # are derived data: `langorch workflows put` recreates them from the definitions.
        self.schedule_group = scheduler.CfnScheduleGroup(self, "ScheduleGroup")
        self.schedule_group.apply_removal_policy(RemovalPolicy.DESTROY)
        account = Stack.of(self).account
        # Only the account's own Scheduler may assume it (confused-deputy guard).
        self.scheduler_role = iam.Role(
            self,
            "SchedulerRole",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": account}},
            ),
            description="langorch schedules: invoke the trigger function",
        )
        trigger.grant_invoke(self.scheduler_role)
        self.schedule_dlq.grant_send_messages(self.scheduler_role)
        self.reconcile_schedule = (
            self._reconcile_schedule(trigger, reconcile_minutes) if reconcile_minutes else None
        )

        # Drops only: checkpoint payloads offloaded under the checkpoint prefix are written by
        # the runner itself and must never start runs.
        self.file_drop_rule = events.Rule(
            self,
            "FileDropped",
            description="langorch: an object created in the files bucket starts runs",
            event_pattern=events.EventPattern(
                source=["aws.s3"],
                detail_type=["Object Created"],
                detail={
                    "bucket": {"name": [files.bucket.bucket_name]},
                    "object": {
                        "key": [{"anything-but": {"prefix": f"{files.checkpoint_prefix}/"}}]
                    },
                },
            ),
        )
        self.file_drop_rule.add_target(
            targets.LambdaFunction(
                trigger,
                dead_letter_queue=self.file_events_dlq,
                retry_attempts=8,
                max_event_age=Duration.hours(24),
            )
        )

    def _reconcile_schedule(self, trigger: lambda_.Function, minutes: int) -> scheduler.CfnSchedule:
        """The trigger's reconcile pass every ``minutes``: no run stays open after its execution
        ended (``langorch runs reconcile``). Missed slots are harmless (the next pass finds the
        same runs), so the retry policy is short and failures land in the schedule DLQ."""
        return scheduler.CfnSchedule(
            self,
            "Reconcile",
            group_name=self.schedule_group.ref,
            description="langorch: end runs whose execution ended without their record",
            schedule_expression=f"rate({minutes} minute{'s' if minutes > 1 else ''})",
            flexible_time_window=scheduler.CfnSchedule.FlexibleTimeWindowProperty(mode="OFF"),
            target=scheduler.CfnSchedule.TargetProperty(
                arn=trigger.function_arn,
                role_arn=self.scheduler_role.role_arn,
                input=json.dumps({"source": RECONCILE_SOURCE}),
                retry_policy=scheduler.CfnSchedule.RetryPolicyProperty(
                    maximum_retry_attempts=2, maximum_event_age_in_seconds=60 * minutes
                ),
                dead_letter_config=scheduler.CfnSchedule.DeadLetterConfigProperty(
                    arn=self.schedule_dlq.queue_arn
                ),
            ),
        )

    @property
    def schedule_group_name(self) -> str:
        """The group's name (``Ref``), where ``langorch workflows put`` creates schedules."""
        return self.schedule_group.ref

    @property
    def dead_letter_queues(self) -> dict[str, sqs.Queue]:
        """Every DLQ by what fails into it, for alarms."""
        return {
            "schedules": self.schedule_dlq,
            "file-events": self.file_events_dlq,
            "trigger": self.trigger_dlq,
        }

    def _queue(self, id: str) -> sqs.Queue:
        return sqs.Queue(
            self,
            id,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=DLQ_RETENTION,
        )
