"""What operators need to recover runs from their own machine: a managed policy to attach.

``langorch runs redrive | fork`` (and ``runs show`` / ``runs list`` to follow them) and
``langorch queues redrive`` run with the operator's credentials against the deployed stack
(``--stack``). The policy grants exactly the AWS calls those use-cases can make — derived from
the code and checked action for action by ``tests/infra/test_operator_policy.py`` — plus reading
this stack's outputs (``--stack``).
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.constructs.storage import FilesBucket
from infra.constructs.tables import Tables


class RecoveryOperatorPolicy(Construct):
    """A customer-managed policy for the people who redrive and fork runs.

    Args:
        tables: the stack's tables.
        files: the files bucket (offloaded checkpoints live under its checkpoint prefix).
        state_machine: the run state machine (redrives start executions of it).
        dead_letter_queues: the stack's DLQs (``queues redrive`` reads and deletes letters).
        trigger: the function the DLQs' events were for (``queues redrive`` invokes it).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        tables: Tables,
        files: FilesBucket,
        state_machine: sfn.IStateMachine,
        dead_letter_queues: list[sqs.IQueue],
        trigger: lambda_.IFunction,
    ) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        runs, checkpoints = tables.runs.table_arn, tables.checkpoints.table_arn
        executions = stack.format_arn(
            service="states",
            resource="execution",
            resource_name=f"{state_machine.state_machine_name}:*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        prefix = files.checkpoint_prefix
        statements = [
            # The run record (reopened with a conditional write), its lease, its timeline;
            # Query on the indexes lists runs by status and workflow (bulk, runs list), and
            # BatchGetItem reads the listed page's records (the indexes hold no bodies).
            _allow(
                "RunRecords",
                [
                    "GetItem",
                    "BatchGetItem",
                    "PutItem",
                    "UpdateItem",
                    "ConditionCheckItem",
                    "BatchWriteItem",
                ],
                [runs],
            ),
            _allow("RunQueries", ["Query"], [runs, f"{runs}/index/*"]),
            # The checkpoint history: read to find the step, a copy written as the new head.
            _allow("Checkpoints", ["Query", "Scan", "BatchWriteItem", "PutItem"], [checkpoints]),
            _allow("Definitions", ["GetItem"], [tables.definitions.table_arn]),
            iam.PolicyStatement(
                sid="OffloadedCheckpoints",
                actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
                resources=[files.bucket.arn_for_objects(f"{prefix}/*")],
            ),
            iam.PolicyStatement(
                sid="OffloadedCheckpointList",
                actions=["s3:ListBucket"],
                resources=[files.bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{prefix}/*"]}},
            ),
            iam.PolicyStatement(
                sid="StartRedrives",
                actions=["states:StartExecution"],
                resources=[state_machine.state_machine_arn],
            ),
            iam.PolicyStatement(
                sid="FollowExecutions", actions=["states:DescribeExecution"], resources=[executions]
            ),
            # queues redrive: each letter read, delivered to the trigger again, then deleted.
            iam.PolicyStatement(
                sid="DeadLetters",
                actions=["sqs:GetQueueUrl", "sqs:ReceiveMessage", "sqs:DeleteMessage"],
                resources=[q.queue_arn for q in dead_letter_queues],
            ),
            iam.PolicyStatement(
                sid="RedeliverDeadLetters",
                actions=["lambda:InvokeFunction"],
                resources=[trigger.function_arn],
            ),
            iam.PolicyStatement(
                sid="StackOutputs",
                actions=["cloudformation:DescribeStacks"],
                resources=[stack.stack_id],
            ),
        ]
        self.policy = iam.ManagedPolicy(
            self,
            "Policy",
            description=(
                "langorch operators: runs redrive / fork / show and queues redrive with --stack "
                f"{stack.stack_name} (exactly what those commands call)"
            ),
            statements=statements,
        )


def _allow(sid: str, actions: list[str], resources: list[str]) -> iam.PolicyStatement:
    return iam.PolicyStatement(
        sid=sid, actions=[f"dynamodb:{a}" for a in actions], resources=resources
    )
