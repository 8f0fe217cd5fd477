"""The run state machine, deployed from the same ASL file local mode executes."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.constructs.bundling import REPO_ROOT
from infra.retention import retention_days

ASL_FILE = REPO_ROOT / "shared" / "langorch" / "statemachine.asl.json"
"""One definition of the state machine (ARCHITECTURE §2): CDK and ``langorch dev`` share it."""


PARTITION_VARIABLE = "${Partition}"


def definition_text(asl_file: Path, partition: str) -> str:
    """The ASL with ``arn:${Partition}:states:::…`` filled in at synthesis.

    Filled here rather than through ``DefinitionSubstitutions``: CDK knows the partition of a
    stack with a region (``aws``, ``aws-cn``, ``aws-us-gov``) and writes it literally, which
    cfn-lint can check; an environment-agnostic stack gets ``${AWS::Partition}``. The local
    stack fills the same variable with ``aws`` (``langorch.local.statemachine``).
    """
    return asl_file.read_text(encoding="utf-8").replace(PARTITION_VARIABLE, partition)


class RunStateMachine(Construct):
    """A Standard state machine: one execution per run, named by the run id.

    Logging goes to a vended-logs group with ``includeExecutionData`` off: execution data
    holds run inputs, approval payloads and the task token, none of which may reach logs.

    Args:
        prefix: name prefix, ``langorch-<stage>``.
        run_segment: what ``${RunSegmentFunctionArn}`` invokes (the SnapStart alias).
        request_approval: what ``${RequestApprovalFunctionArn}`` invokes.
        log_level: ``ALL``, ``ERROR``, ``FATAL`` or ``OFF``.
        log_retention_days: retention of the log group.
        asl_file: the definition (default: the package's ``statemachine.asl.json``).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        prefix: str,
        run_segment: lambda_.IFunction,
        request_approval: lambda_.IFunction,
        log_level: str,
        log_retention_days: int,
        asl_file: Path = ASL_FILE,
    ) -> None:
        super().__init__(scope, id)
        # The /aws/vendedlogs/ prefix keeps CloudWatch Logs' resource policy from growing
        # with every state machine (its size limit has broken deployments).
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            log_group_name=f"/aws/vendedlogs/states/{prefix}-runs",
            retention=retention_days(log_retention_days),
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            state_machine_name=f"{prefix}-runs",
            state_machine_type=sfn.StateMachineType.STANDARD,
            # from_string, not from_file: the definition goes into the template itself
            # (DefinitionString) rather than a separate S3 asset, so the template alone shows
            # what runs, and tests compare it with the file.
            definition_body=sfn.DefinitionBody.from_string(
                definition_text(asl_file, Stack.of(self).partition)
            ),
            definition_substitutions={
                "RunSegmentFunctionArn": run_segment.function_arn,
                "RequestApprovalFunctionArn": request_approval.function_arn,
            },
            logs=sfn.LogOptions(
                destination=self.log_group,
                level=getattr(sfn.LogLevel, log_level),
                include_execution_data=False,
            ),
            tracing_enabled=True,
        )
        run_segment.grant_invoke(self.state_machine)
        request_approval.grant_invoke(self.state_machine)
