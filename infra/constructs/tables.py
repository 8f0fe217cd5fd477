"""The four DynamoDB tables, with the key schemas the adapters in ``langorch.adapters`` use."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

_S = dynamodb.AttributeType.STRING


class Tables(Construct):
    """Definitions, runs, checkpoints and long-term memory.

    All on-demand (idle costs nothing), encrypted with the AWS-managed KMS key, with
    point-in-time recovery. TTL only where the writer sets an expiry: checkpoints
    (``ttl``, ``DynamoCheckpointSaver``) and memory (``expires_at``, langgraph-checkpoint-aws's
    ``DynamoDBStore``). Definitions are immutable versions and runs are the audit trail: they
    never expire.

    Args:
        retain_data: keep the tables (and their data) when the stack is destroyed.
        full_index_projection: the runs table's indexes project the whole record, as a stack
            deployed before the lean indexes has them (``runs_indexes: full``).
    """

    def __init__(
        self, scope: Construct, id: str, *, retain_data: bool, full_index_projection: bool = False
    ) -> None:
        super().__init__(scope, id)
        self._removal = RemovalPolicy.RETAIN if retain_data else RemovalPolicy.DESTROY
        self._protect = retain_data
        # adapters/dynamodb/definitions.py: pk/sk.
        self.definitions = self._table("Definitions", "pk", "sk")
        # adapters/dynamodb/runs.py: pk/sk, runs by workflow (gsi1) and by status (gsi2), each
        # key sharded; the indexes carry only run_id and status (a listing reads the records by
        # key), so a save that changes no status writes no index (issue 33).
        # CloudFormation cannot change an index's projection in place, so a stack deployed
        # with the earlier full-record indexes keeps them (its keys are sharded all the same).
        self.runs = self._table("Runs", "pk", "sk")
        lean = not full_index_projection
        for index in ("gsi1", "gsi2"):
            self.runs.add_global_secondary_index(
                index_name=index,
                partition_key=dynamodb.Attribute(name=f"{index}pk", type=_S),
                sort_key=dynamodb.Attribute(name=f"{index}sk", type=_S),
                projection_type=(
                    dynamodb.ProjectionType.INCLUDE if lean else dynamodb.ProjectionType.ALL
                ),
                non_key_attributes=["run_id", "status"] if lean else None,
            )
        # adapters/dynamodb/checkpointer.py: PK/SK, every item carries `ttl` when a TTL is set.
        self.checkpoints = self._table("Checkpoints", "PK", "SK", ttl="ttl")
        # langgraph_checkpoint_aws/store/dynamodb/table.py: PK/SK, `expires_at` for TTL.
        self.memory = self._table("Memory", "PK", "SK", ttl="expires_at")

    @property
    def all(self) -> list[dynamodb.Table]:
        """Every table, for alarms and outputs."""
        return [self.definitions, self.runs, self.checkpoints, self.memory]

    def _table(self, id: str, pk: str, sk: str, *, ttl: str | None = None) -> dynamodb.Table:
        return dynamodb.Table(
            self,
            id,
            partition_key=dynamodb.Attribute(name=pk, type=_S),
            sort_key=dynamodb.Attribute(name=sk, type=_S),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute=ttl,
            deletion_protection=self._protect,
            removal_policy=self._removal,
        )
