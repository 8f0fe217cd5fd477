"""One customer-managed KMS key for everything the stack stores (``kms: cmk|<key ARN>``)."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import CfnResource, Duration, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct, IConstruct

VIA_SERVICES = ("dynamodb", "s3", "sqs", "sns", "secretsmanager", "states")
"""Services that use the key on a caller's behalf: the caller (a function's role, an operator)
needs no grant of its own, as with the AWS-managed keys: ``kms:ViaService`` and
``kms:CallerAccount`` keep it to this account's use through these services."""

PUBLISHERS = ("cloudwatch.amazonaws.com", "events.amazonaws.com", "ses.amazonaws.com")
"""Services that write into encrypted queues and topics in their own name: CloudWatch alarms
publish to the alarm topic, EventBridge rules send failed events to their dead-letter queue,
SES publishes bounces and complaints to the email events topic."""

USE = [
    "kms:Encrypt",
    "kms:Decrypt",
    "kms:ReEncrypt*",
    "kms:GenerateDataKey*",
    "kms:DescribeKey",
]


def key_policy_statements(stack: Stack) -> list[iam.PolicyStatement]:
    """What a customer-managed key's policy must allow for this stack (README, "Encryption
    keys"): added to a created key, and what a given key's owner must allow."""
    account, region, partition = stack.account, stack.region, stack.partition
    return [
        iam.PolicyStatement(
            sid="UseThroughLangorchServices",
            principals=[iam.AnyPrincipal()],
            actions=USE,
            resources=["*"],
            conditions={
                "StringEquals": {
                    "kms:CallerAccount": account,
                    "kms:ViaService": [f"{s}.{region}.amazonaws.com" for s in VIA_SERVICES],
                }
            },
        ),
        iam.PolicyStatement(
            sid="CloudWatchLogsOfThisAccount",
            principals=[iam.ServicePrincipal(f"logs.{region}.amazonaws.com")],
            actions=USE,
            resources=["*"],
            conditions={
                "ArnLike": {
                    "kms:EncryptionContext:aws:logs:arn": (
                        f"arn:{partition}:logs:{region}:{account}:log-group:*"
                    )
                }
            },
        ),
        iam.PolicyStatement(
            # Step Functions' vended logs decrypt the encrypted execution history they deliver.
            sid="StateMachineLogDelivery",
            principals=[iam.ServicePrincipal("delivery.logs.amazonaws.com")],
            actions=["kms:Decrypt", "kms:GenerateDataKey*"],
            resources=["*"],
            conditions={"StringEquals": {"aws:SourceAccount": account}},
        ),
        iam.PolicyStatement(
            sid="PublishersToEncryptedQueuesAndTopics",
            principals=[iam.ServicePrincipal(p) for p in PUBLISHERS],
            actions=["kms:Decrypt", "kms:GenerateDataKey*"],
            resources=["*"],
            conditions={"StringEquals": {"aws:SourceAccount": account}},
        ),
    ]


class StackKey(Construct):
    """The stack's customer-managed key: created (``cmk``) or given (a key ARN).

    A created key rotates yearly and is kept when the stack is destroyed with ``retain_data``
    (retained tables and bucket cannot be read without it); otherwise it is scheduled for
    deletion after 7 days, the shortest window KMS allows.

    Args:
        setting: ``cmk`` or a key ARN.
        retain_data: keep the key when the stack is destroyed.
        prefix: name prefix, ``langorch-<stage>`` (the key's alias).
    """

    def __init__(
        self, scope: Construct, id: str, *, setting: str, retain_data: bool, prefix: str
    ) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        self.created = setting == "cmk"
        if not self.created:
            self.key: kms.IKey = kms.Key.from_key_arn(self, "Given", setting)
            return
        key = kms.Key(
            self,
            "Key",
            description=f"{prefix}: tables, files, queues, topics, secrets, logs, runs",
            alias=f"alias/{prefix}",
            enable_key_rotation=True,
            pending_window=Duration.days(7),
            removal_policy=RemovalPolicy.RETAIN if retain_data else RemovalPolicy.DESTROY,
        )
        for statement in key_policy_statements(stack):
            key.add_to_resource_policy(statement)
        self.key = key


ENCRYPTED_TYPES = (
    "AWS::DynamoDB::Table",
    "AWS::S3::Bucket",
    "AWS::SQS::Queue",
    "AWS::SNS::Topic",
    "AWS::SecretsManager::Secret",
    "AWS::Logs::LogGroup",
    "AWS::StepFunctions::StateMachine",
)
"""Every resource of these types is encrypted with the key (tests/infra/test_keys.py)."""


def encrypt_with(
    root: IConstruct, key: kms.IKey, *, except_buckets: Sequence[s3.IBucket] = ()
) -> None:
    """Point every storing resource under ``root`` at ``key``.

    Done once over the finished tree, on the CloudFormation resources, rather than through
    each construct's own option: a resource added later is covered without remembering to,
    and the synth test checks the same list of types.

    Args:
        except_buckets: buckets that must stay on SSE-S3: S3 server access logging cannot
            deliver into an SSE-KMS bucket (the access-log bucket).
    """
    arn = key.key_arn
    skipped = {f"{b.node.path}/Resource" for b in except_buckets}
    for node in root.node.find_all():
        if not isinstance(node, CfnResource) or node.node.path in skipped:
            continue
        if isinstance(node, dynamodb.CfnTable):
            node.sse_specification = dynamodb.CfnTable.SSESpecificationProperty(
                sse_enabled=True, sse_type="KMS", kms_master_key_id=arn
            )
        elif isinstance(node, s3.CfnBucket):
            node.bucket_encryption = s3.CfnBucket.BucketEncryptionProperty(
                server_side_encryption_configuration=[
                    s3.CfnBucket.ServerSideEncryptionRuleProperty(
                        # A bucket key: one data key per bucket for a while, not one KMS call
                        # per object.
                        bucket_key_enabled=True,
                        server_side_encryption_by_default=(
                            s3.CfnBucket.ServerSideEncryptionByDefaultProperty(
                                sse_algorithm="aws:kms", kms_master_key_id=arn
                            )
                        ),
                    )
                ]
            )
        elif isinstance(node, sqs.CfnQueue):
            node.sqs_managed_sse_enabled = None
            node.kms_master_key_id = arn
        elif isinstance(node, sns.CfnTopic):
            node.kms_master_key_id = arn
        elif isinstance(node, secretsmanager.CfnSecret | logs.CfnLogGroup):
            node.kms_key_id = arn
        elif isinstance(node, sfn.CfnStateMachine):
            node.encryption_configuration = sfn.CfnStateMachine.EncryptionConfigurationProperty(
                type="CUSTOMER_MANAGED_KMS_KEY",
                kms_key_id=arn,
                kms_data_key_reuse_period_seconds=300,
            )
