"""Asynchronous triggers: schedule group and role, the S3 drop rule, and their DLQs."""

from __future__ import annotations

import json

from langorch.domain.triggers import RECONCILE_SOURCE
from tests.infra.conftest import Synth
from tests.infra.helpers import actions_on, ref_target, role_statements


def test_schedule_group_and_role_that_may_only_invoke_the_trigger(synth: Synth) -> None:
    # Named by CloudFormation and deleted with the stack (with the schedules in it), so
    # nothing keeps firing at a deleted function and a redeploy meets no leftover name.
    (group,) = synth.of_type("AWS::Scheduler::ScheduleGroup").values()
    assert "Name" not in group.get("Properties", {})
    assert group["DeletionPolicy"] == "Delete"
    triggers = synth.stack.triggers
    role_id = synth.logical_id(triggers.scheduler_role)
    role = synth.resources[role_id]["Properties"]
    statement = role["AssumeRolePolicyDocument"]["Statement"][0]
    assert statement["Principal"] == {"Service": "scheduler.amazonaws.com"}
    assert statement["Condition"] == {"StringEquals": {"aws:SourceAccount": "123456789012"}}
    allowed = actions_on(role_statements(synth.resources, role_id))
    trigger = synth.logical_id(synth.stack.functions.trigger)
    assert allowed["lambda:InvokeFunction"] == {f"<{trigger}.Arn>", f"<{trigger}.Arn>:*"}
    assert set(allowed) == {
        "lambda:InvokeFunction",
        "sqs:SendMessage",
        "sqs:GetQueueAttributes",
        "sqs:GetQueueUrl",
    }


def test_file_drops_start_runs_but_checkpoint_offloads_never_do(synth: Synth) -> None:
    rule = synth.resources[synth.logical_id(synth.stack.triggers.file_drop_rule)]["Properties"]
    pattern = rule["EventPattern"]
    assert pattern["source"] == ["aws.s3"]
    assert pattern["detail-type"] == ["Object Created"]
    assert pattern["detail"]["bucket"]["name"] == [
        {"Ref": synth.logical_id(synth.stack.files.bucket)}
    ]
    assert pattern["detail"]["object"]["key"] == [{"anything-but": {"prefix": "checkpoints/"}}]
    (target,) = rule["Targets"]
    assert ref_target(target["Arn"]) == synth.logical_id(synth.stack.functions.trigger)
    assert ref_target(target["DeadLetterConfig"]["Arn"]) == synth.logical_id(
        synth.stack.triggers.file_events_dlq
    )
    assert target["RetryPolicy"]["MaximumRetryAttempts"] == 8


def test_failed_async_invocations_of_the_trigger_land_in_a_dlq(synth: Synth) -> None:
    # (the approval callback has one too: its Slack presses are handed on asynchronously)
    trigger = {"Ref": synth.logical_id(synth.stack.functions.trigger)}
    configs = synth.of_type("AWS::Lambda::EventInvokeConfig").values()
    (props,) = [c["Properties"] for c in configs if c["Properties"]["FunctionName"] == trigger]
    assert props["MaximumRetryAttempts"] == 2
    destination = props["DestinationConfig"]["OnFailure"]["Destination"]
    assert ref_target(destination) == synth.logical_id(synth.stack.triggers.trigger_dlq)


def test_dead_letter_queues_are_encrypted_tls_only_and_kept_14_days(synth: Synth) -> None:
    queues = synth.of_type("AWS::SQS::Queue")
    assert len(queues) == 4
    for queue in queues.values():
        assert queue["Properties"]["SqsManagedSseEnabled"] is True
        assert queue["Properties"]["MessageRetentionPeriod"] == 14 * 86400
    for policy in synth.of_type("AWS::SQS::QueuePolicy").values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        assert any(
            s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
            for s in statements
        )


def test_the_reconcile_pass_runs_on_a_schedule_in_the_stacks_group(synth: Synth) -> None:
    # Every 15 minutes (reconcile_minutes) the trigger function ends runs whose execution
    # ended without their record following, through the schedule role, failures in the DLQ
    triggers = synth.stack.triggers
    (schedule,) = synth.of_type("AWS::Scheduler::Schedule").values()
    properties = schedule["Properties"]
    assert properties["ScheduleExpression"] == "rate(15 minutes)"
    assert properties["GroupName"] == {"Ref": synth.logical_id(triggers.schedule_group)}
    target = properties["Target"]
    assert json.loads(target["Input"]) == {"source": RECONCILE_SOURCE}
    assert ref_target(target["Arn"]) == synth.logical_id(synth.stack.functions.trigger)
    assert ref_target(target["RoleArn"]) == synth.logical_id(triggers.scheduler_role)
    assert ref_target(target["DeadLetterConfig"]["Arn"]) == synth.logical_id(triggers.schedule_dlq)
    # And the trigger may read how executions ended, of this stage's state machine only
    statements = role_statements(
        synth.resources, synth.logical_id(synth.stack.functions.trigger.role)
    )
    described = actions_on(statements)["states:DescribeExecution"]
    assert described == {"arn:aws:states:eu-west-1:123456789012:execution:langorch-test-runs:*"}


def test_each_event_trigger_gets_a_rule_on_its_bus_aimed_at_the_trigger_with_a_dlq(
    synth: Synth,
) -> None:
    # Given the workflows of event_workflows: big_orders on default, audit on the audit bus
    triggers = synth.stack.triggers
    trigger = synth.logical_id(synth.stack.functions.trigger)

    # When the stack is synthesized
    rules = {
        key: synth.resources[synth.stack.get_logical_id(rule)]["Properties"]
        for key, rule in triggers.event_rules.items()
    }

    # Then each rule carries the trigger's pattern, on its bus
    assert set(rules) == {"big_orders#1", "audit#1"}
    orders, audit = rules["big_orders#1"], rules["audit#1"]
    assert orders["EventPattern"]["detail"]["total"] == [{"numeric": [">=", 100]}]
    assert "EventBusName" not in orders
    assert audit["EventBusName"] == "audit"
    # And its target is the trigger function, with the envelope naming the workflow and bus
    (target,) = orders["Targets"]
    assert ref_target(target["Arn"]) == trigger
    template = target["InputTransformer"]["InputTemplate"]
    assert '"source": "langorch.event"' in template
    assert '"workflow_id": "big_orders"' in template
    assert '"event": <aws.events.event.json>' in template
    # And failed deliveries go to the events DLQ, which only these rules may write to
    assert ref_target(target["DeadLetterConfig"]["Arn"]) == synth.logical_id(triggers.events_dlq)
    permissions = [
        p["Properties"]
        for p in synth.of_type("AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "events.amazonaws.com"
    ]
    assert len([p for p in permissions if "SourceArn" in p]) >= 2
