"""What starts runs asynchronously: EventBridge Scheduler, S3 drops via EventBridge, and DLQs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

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
from langorch.domain.definitions import TaskPlan
from langorch.domain.event_patterns import pattern_problems
from langorch.domain.loading import load_file
from langorch.domain.triggers import DEFAULT_BUS, EVENT_SOURCE, RECONCILE_SOURCE

WORKFLOW_SUFFIXES = (".yaml", ".yml", ".json")

APPROVAL_TIMER_PREFIX = "approval-timer-"
"""Names of approvals' wake-up schedules (``langorch.adapters.scheduler``; infra imports no
langorch code, so the prefix is repeated here and pinned by tests/infra)."""

DLQ_RETENTION = Duration.days(14)
"""SQS's longest: a failed start must survive a long weekend before someone looks."""


class Triggers(Construct):
    """The schedule group and role, the file-drop rule, and the dead-letter queues.

    Schedules themselves are created by ``langorch workflows put`` (one per schedule
    trigger) in the group, with the role and the schedule DLQ from the stack outputs.
    Every asynchronous path into the trigger function ends in a queue when it gives up:

    - ``schedules``: the Scheduler could not invoke the function (after its retries);
    - ``file_events``: EventBridge could not deliver an object-created event;
    - ``trigger_failures``: the function was invoked asynchronously and failed every attempt;
    - ``events``: EventBridge could not deliver an event to an event trigger's rule target.

    Each event trigger of the workflows in ``event_workflows`` gets its own rule on its bus,
    with its pattern, whose target hands the trigger function the envelope
    (``langorch.domain.triggers.event_envelope``) naming the workflow.

    Args:
        prefix: name prefix, ``langorch-<stage>``.
        trigger: the trigger function.
        files: the files bucket (object-created events; checkpoint offloads excluded).
        event_workflows: workflow files or folders whose event triggers get rules.
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
        event_workflows: Sequence[str] = (),
    ) -> None:
        super().__init__(scope, id)
        self.schedule_dlq = self._queue("ScheduleDlq")
        self.file_events_dlq = self._queue("FileEventsDlq")
        self.trigger_dlq = self._queue("TriggerDlq")
        self.events_dlq = self._queue("EventsDlq")

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

        self.event_rules = self._event_rules(trigger, event_workflows)

    def _event_rules(
        self, trigger: lambda_.Function, sources: Sequence[str]
    ) -> dict[str, events.Rule]:
        """One rule per event trigger, ``<workflow_id>#<n>`` -> rule."""
        rules: dict[str, events.Rule] = {}
        buses: dict[str, events.IEventBus] = {}
        for plan in _workflows(sources):
            event_triggers = [t for t in plan.all_triggers() if t.type == "event"]
            for n, t in enumerate(event_triggers, start=1):
                assert t.pattern is not None  # validated when loaded
                bus_name = t.bus or DEFAULT_BUS
                bus = None
                if bus_name != DEFAULT_BUS:
                    bus = buses.get(bus_name) or events.EventBus.from_event_bus_name(
                        self, f"Bus{len(buses) + 1}", bus_name
                    )
                    buses[bus_name] = bus
                rule = events.CfnRule(
                    self,
                    f"Event{plan.plan_id}{n}",
                    description=f"langorch: events that start {plan.plan_id}",
                    event_bus_name=bus.event_bus_name if bus else None,
                    event_pattern=t.pattern,
                    targets=[self._event_target(trigger, plan.plan_id, bus_name)],
                )
                rules[f"{plan.plan_id}#{n}"] = rule  # type: ignore[assignment]
                lambda_.CfnPermission(
                    self,
                    f"Event{plan.plan_id}{n}Invoke",
                    action="lambda:InvokeFunction",
                    function_name=trigger.function_arn,
                    principal="events.amazonaws.com",
                    source_arn=rule.attr_arn,
                )
        if rules:
            self.events_dlq.add_to_resource_policy(
                iam.PolicyStatement(
                    actions=["sqs:SendMessage"],
                    principals=[iam.ServicePrincipal("events.amazonaws.com")],
                    resources=[self.events_dlq.queue_arn],
                    conditions={
                        "ArnEquals": {"aws:SourceArn": [r.attr_arn for r in rules.values()]}
                    },
                )
            )
        return rules

    def _event_target(
        self, trigger: lambda_.Function, workflow_id: str, bus: str
    ) -> events.CfnRule.TargetProperty:
        # The input transformer wraps the whole event (<aws.events.event.json>, the detail
        # included; <aws.events.event> leaves it out) in the envelope that
        # names the workflow and the bus: an event delivered to a target does not say which
        # bus it was put on.
        template = json.dumps(
            {"source": EVENT_SOURCE, "workflow_id": workflow_id, "bus": bus, "event": "@EVENT@"}
        ).replace('"@EVENT@"', "<aws.events.event.json>")
        return events.CfnRule.TargetProperty(
            arn=trigger.function_arn,
            id="trigger",
            input_transformer=events.CfnRule.InputTransformerProperty(input_template=template),
            dead_letter_config=events.CfnRule.DeadLetterConfigProperty(
                arn=self.events_dlq.queue_arn
            ),
            retry_policy=events.CfnRule.RetryPolicyProperty(
                maximum_retry_attempts=8, maximum_event_age_in_seconds=24 * 3600
            ),
        )

    def grant_approval_timers(self, grantee: iam.IGrantable) -> None:
        """Let ``grantee`` create, update and delete approvals' one-time wake-ups (reminders
        and escalations, named ``approval-timer-<approval id>``) and hand the Scheduler its
        role for them."""
        stack = Stack.of(self)
        iam.Grant.add_to_principal(
            grantee=grantee,
            actions=[
                "scheduler:CreateSchedule",
                "scheduler:UpdateSchedule",
                "scheduler:DeleteSchedule",
            ],
            resource_arns=[
                stack.format_arn(
                    service="scheduler",
                    resource="schedule",
                    resource_name=f"*/{APPROVAL_TIMER_PREFIX}*",
                )
            ],
        )
        self.scheduler_role.grant_pass_role(grantee)

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
            "events": self.events_dlq,
        }

    def _queue(self, id: str) -> sqs.Queue:
        return sqs.Queue(
            self,
            id,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=DLQ_RETENTION,
        )


def _workflows(sources: Sequence[str]) -> list[TaskPlan]:
    """The workflows in the given files and folders (folders: their YAML and JSON files).

    Raises:
        ValueError: a path does not exist or a file does not load; the message says which.
    """
    plans: list[TaskPlan] = []
    for source in sources:
        path = Path(source)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.suffix in WORKFLOW_SUFFIXES)
        elif path.is_file():
            files = [path]
        else:
            raise ValueError(f"event_workflows: {source} does not exist")
        for file in files:
            for plan in load_file(file).workflows:
                for i, t in enumerate(plan.triggers):
                    problems = pattern_problems(t.pattern, f"triggers[{i}].pattern")
                    if t.type == "event" and problems:
                        first = problems[0]
                        raise ValueError(
                            f"event_workflows: {file}: {plan.plan_id}: {first.path} {first.message}"
                        )
                plans.append(plan)
    return plans
