"""The files bucket: file drops that start runs, checkpoint payloads offloaded from DynamoDB, and
the files runs attach (artifacts), each prefix with its own retention."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from langorch.domain.artifacts import ARTIFACTS_PREFIX


class FilesBucket(Construct):
    """The bucket, and the bucket that receives its server access logs.

    Args:
        checkpoint_prefix: where ``DynamoCheckpointSaver`` offloads payloads
            (``Settings.checkpoint_prefix``).
        checkpoint_ttl_days: checkpoint items expire after this many days in DynamoDB; the
            offloaded objects expire one day later, so no live item points at a deleted object,
            and so do the files runs attached (``artifacts/``).
        log_retention_days: how long access logs are kept.
        retain_data: keep the bucket when the stack is destroyed.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        checkpoint_prefix: str,
        checkpoint_ttl_days: int,
        log_retention_days: int,
        retain_data: bool,
    ) -> None:
        super().__init__(scope, id)
        removal = RemovalPolicy.RETAIN if retain_data else RemovalPolicy.DESTROY
        self.checkpoint_prefix = checkpoint_prefix.strip("/")
        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
            lifecycle_rules=[
                s3.LifecycleRule(id="expire-logs", expiration=Duration.days(log_retention_days))
            ],
            removal_policy=removal,
            # retain_data=false: the stack's destroy empties the bucket first (S3 deletes
            # no bucket that holds objects; the access-log bucket always does).
            auto_delete_objects=not retain_data,
        )
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=False,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="files/",
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-offloaded-checkpoints",
                    prefix=f"{self.checkpoint_prefix}/",
                    expiration=Duration.days(checkpoint_ttl_days + 1),
                ),
                # Files runs attached (`attach` steps) expire with the runs' checkpoints.
                s3.LifecycleRule(
                    id="expire-run-artifacts",
                    prefix=f"{ARTIFACTS_PREFIX}/",
                    expiration=Duration.days(checkpoint_ttl_days + 1),
                ),
                s3.LifecycleRule(
                    id="abort-incomplete-uploads",
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                ),
            ],
            removal_policy=removal,
            # retain_data=false: the stack's destroy empties the bucket first (S3 deletes
            # no bucket that holds objects; the access-log bucket always does).
            auto_delete_objects=not retain_data,
        )
        # Object-created events go to EventBridge, where a rule tells drops from checkpoint
        # offloads and retries into a DLQ (S3's own notifications can do neither). Set on the
        # CloudFormation resource: `event_bridge_enabled=True` would add a custom-resource
        # Lambda (with a managed-policy role) only needed for buckets CDK does not own.
        cfn_bucket = self.bucket.node.default_child
        assert isinstance(cfn_bucket, s3.CfnBucket)
        cfn_bucket.notification_configuration = s3.CfnBucket.NotificationConfigurationProperty(
            event_bridge_configuration=s3.CfnBucket.EventBridgeConfigurationProperty(
                event_bridge_enabled=True
            )
        )

    def grant_checkpoint_offload(self, grantee: iam.IGrantable) -> None:
        """Let ``grantee`` write, read, list and delete offloaded checkpoints, nothing else.

        Exact actions (``DynamoCheckpointSaver``: PutObject, GetObject, ListObjectsV2,
        DeleteObjects) rather than ``grant_read_write``, whose ``s3:GetObject*``-style action
        groups include ACL and tagging calls, on the checkpoint prefix only.
        """
        iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
            resource_arns=[self.bucket.arn_for_objects(f"{self.checkpoint_prefix}/*")],
        )
        iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["s3:ListBucket"],
            resource_arns=[self.bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{self.checkpoint_prefix}/*"]}},
        )

    def grant_artifacts_write(self, grantee: iam.IGrantable) -> None:
        """Let ``grantee`` keep runs' artifacts: PutObject under ``artifacts/``, nothing else
        (``langorch.adapters.artifacts``; listing and links are the operators')."""
        iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["s3:PutObject"],
            resource_arns=[self.bucket.arn_for_objects(f"{ARTIFACTS_PREFIX}/*")],
        )

    def grant_read_drops(self, grantee: iam.IGrantable) -> None:
        """Let ``grantee`` read objects of the bucket (``read_file`` steps): GetObject only.

        Object ARNs cannot exclude a prefix, so pair this with :meth:`deny_checkpoints`.
        No ListBucket: a missing key then answers 403 rather than 404, and the step says
        "does not exist or the runner may not read it".
        """
        iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["s3:GetObject"],
            resource_arns=[self.bucket.arn_for_objects("*")],
        )

    def deny_checkpoints(self, role: iam.Role) -> None:
        """Explicitly deny ``role`` every object under the checkpoint prefix (a deny wins over
        any allow, :meth:`grant_read_drops`'s included)."""
        role.add_to_policy(
            iam.PolicyStatement(
                effect=iam.Effect.DENY,
                actions=["s3:GetObject"],
                resources=[self.bucket.arn_for_objects(f"{self.checkpoint_prefix}/*")],
            )
        )
