"""cdk-nag AwsSolutions acknowledgements, each with the reason it is safe.

cdk-nag 3 reads CDK's ``Validations.of(construct).acknowledge(...)``; an acknowledgement on a
construct covers its children. Wildcard findings (IAM5) are acknowledged one resource pattern
at a time, so a new wildcard anywhere fails synthesis until someone writes down why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Acknowledgment, Stack, Token, Validations
from constructs import IConstruct

if TYPE_CHECKING:
    from infra.stack import LangorchStack

XRAY = (
    "Resource::* is X-Ray only (xray:PutTraceSegments, xray:PutTelemetryRecords, added by "
    "active tracing): X-Ray has no resource-level permissions."
)
L1 = (
    "Python 3.12 on purpose: one runtime everywhere, matching the arm64 wheels and the byte "
    "code the layer is built with, and supported by SnapStart. Moving to a newer runtime "
    "is a deliberate change of RUNTIME and PYTHON_VERSION in infra/constructs/bundling.py."
)


def _ack(construct: IConstruct, rule: str, reason: str) -> None:
    Validations.of(construct).acknowledge(Acknowledgment(id=rule, reason=reason))


def _ref(stack: Stack, construct: IConstruct, attribute: str = "Arn") -> str:
    # How cdk-nag prints a token in a finding id: <LogicalId.Attribute>.
    resource = construct.node.default_child
    assert resource is not None
    return f"<{stack.get_logical_id(resource)}.{attribute}>"  # type: ignore[arg-type]


def _pseudo(value: str, name: str) -> str:
    # cdk-nag prints an unresolved pseudo parameter as <AWS::Name>, a known one literally.
    return f"<AWS::{name}>" if Token.is_unresolved(value) else value


def suppress(stack: LangorchStack) -> None:
    """Acknowledge every accepted finding on the construct it applies to."""
    functions = stack.functions
    for name, function in functions.all.items():
        role = function.role
        assert role is not None
        _ack(function, "AwsSolutions-L1", L1)
        if name != "run-segment":
            _ack(role, "AwsSolutions-IAM5[Resource::*]", XRAY)
    _ack(
        functions.run_segment,
        "@aws-cdk/aws-lambda:snapStartRequirePublish",
        "The runner is only ever invoked through its live alias on current_version, a "
        "published version that CDK republishes whenever code or configuration changes.",
    )
    callback_role = functions.approval_callback.role
    assert callback_role is not None
    _ack(
        callback_role,
        "AwsSolutions-IAM5[Resource::*]",
        XRAY + " Also states:SendTaskSuccess: a task token names no state machine, so the "
        "action cannot be scoped to one; holding a valid token (stored server-side, never "
        "sent to the approver) is the authorization.",
    )
    request_role = functions.request_approval.role
    assert request_role is not None
    _ack(
        request_role,
        f"AwsSolutions-IAM5[Resource::arn:{_pseudo(stack.partition, 'Partition')}"
        f":ses:{_pseudo(stack.region, 'Region')}:{_pseudo(stack.account, 'AccountId')}"
        ":identity/*]",
        "In the SES sandbox a send is also authorized against each recipient's identity, and "
        "approvers are only known at run time; the statement is conditioned on ses:FromAddress "
        "being the configured sender, so the role still cannot send as anyone else.",
    )
    trigger_role = functions.trigger.role
    assert trigger_role is not None
    _ack(
        trigger_role,
        f"AwsSolutions-IAM5[Resource::arn:{_pseudo(stack.partition, 'Partition')}"
        f":secretsmanager:{_pseudo(stack.region, 'Region')}"
        f":{_pseudo(stack.account, 'AccountId')}:secret:{stack.secrets.webhook_prefix}*]",
        "Per-workflow webhook secrets are created after deploy by `langorch workflows put`; "
        "the grant is read-only and limited to this stage's webhook name prefix (the * also "
        "covers the random suffix Secrets Manager appends to every secret ARN).",
    )
    _ack(
        trigger_role,
        f"AwsSolutions-IAM5[Resource::{_ref(stack, stack.tables.runs)}/index/*]",
        "The reconcile pass lists open runs by status: Query on this one table's indexes.",
    )
    _ack(
        trigger_role,
        f"AwsSolutions-IAM5[Resource::arn:{_pseudo(stack.partition, 'Partition')}"
        f":states:{_pseudo(stack.region, 'Region')}:{_pseudo(stack.account, 'AccountId')}"
        f":execution:{stack.config.prefix}-runs:*]",
        "The reconcile pass reads how each open run's execution ended: DescribeExecution on "
        "the executions of this stage's one state machine (named by run id at run time).",
    )
    runner_role = functions.run_segment.role
    assert runner_role is not None
    _ack(
        runner_role,
        "AwsSolutions-IAM5[Resource::*]",
        XRAY + " With bedrock_marketplace_products set, also aws-marketplace:Subscribe "
        "(conditioned on those product ids) and ViewSubscriptions: Marketplace subscriptions "
        "have no resource ARNs, AWS documents the product-id condition as the scope. Also "
        "states:SendTaskSuccess: releasing a resource lease wakes the next queued run with "
        "the task token kept in the resource's queue; a task token names no state machine, "
        "so the action cannot be scoped to one.",
    )
    _ack(
        runner_role,
        f"AwsSolutions-IAM5[Resource::{_ref(stack, stack.files.bucket)}"
        f"/{stack.files.checkpoint_prefix}/*]",
        "Object ARNs are key patterns: Get/Put/DeleteObject only under the checkpoint prefix, "
        "where DynamoCheckpointSaver offloads payloads too large for DynamoDB.",
    )
    _ack(
        functions.file_reader_role,
        f"AwsSolutions-IAM5[Resource::{_ref(stack, stack.files.bucket)}/*]",
        "read_file steps read the files dropped into this one bucket, under any prefix a "
        "workflow's s3 trigger watches (registered after deploy): s3:GetObject only, no list, "
        "write or delete; an explicit Deny on the checkpoint prefix keeps every run's "
        "checkpoints out (and the executor refuses those keys too).",
    )
    state_machine = stack.workflow.state_machine
    _ack(
        state_machine,
        "AwsSolutions-IAM5[Resource::*]",
        XRAY + " Also the CloudWatch Logs delivery actions (logs:CreateLogDelivery and the "
        "like) CDK grants for state machine logging: log delivery has no resource-level "
        "permissions.",
    )
    _ack(
        state_machine,
        f"AwsSolutions-IAM5[Resource::{_ref(stack, functions.request_approval)}:*]",
        "grant_invoke on request_approval also allows its versions and aliases (the :* "
        "qualifier) of that one function.",
    )
    _ack(
        stack.triggers.scheduler_role,
        f"AwsSolutions-IAM5[Resource::{_ref(stack, functions.trigger)}:*]",
        "grant_invoke on the trigger function also allows its versions and aliases (the :* "
        "qualifier) of that one function.",
    )
    secrets = stack.secrets
    for secret in (secrets.link_signing_seed, secrets.link_signing_key, secrets.llm_api_key):
        _ack(
            secret,
            "AwsSolutions-SMG4",
            "No rotation Lambda: the signing key rotates with `langorch keys rotate` (a new "
            "key id becomes current, old ones keep verifying the links already emailed), and "
            "the LLM key is issued by the provider and put by the operator (README).",
        )
    _ack(
        stack.api,
        "AwsSolutions-APIG4",
        "No authorizer on purpose: webhooks are authenticated by their HMAC signature and "
        "approvals by signed, expiring, single-use links, both verified in the handlers; "
        "senders and approvers have no AWS identity to authorize.",
    )
    for queue in stack.triggers.dead_letter_queues.values():
        _ack(
            queue,
            "AwsSolutions-SQS3",
            "This queue is itself a dead-letter queue (for the Scheduler, the EventBridge "
            "rule or the trigger's asynchronous invocations); nothing consumes it "
            "automatically, an alarm fires on its depth.",
        )
