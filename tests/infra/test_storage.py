"""The files bucket: TLS only, private, encrypted, EventBridge on, checkpoint offloads and run
artifacts expire."""

from __future__ import annotations

from typing import Any

from tests.infra.conftest import Synth


def _bucket(synth: Synth) -> dict[str, Any]:
    return synth.resources[synth.logical_id(synth.stack.files.bucket)]["Properties"]


def test_bucket_is_private_encrypted_and_sends_events_to_eventbridge(synth: Synth) -> None:
    bucket = _bucket(synth)
    assert bucket["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    rule = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    assert bucket["NotificationConfiguration"] == {
        "EventBridgeConfiguration": {"EventBridgeEnabled": True}
    }
    assert "LoggingConfiguration" in bucket


def test_offloaded_checkpoints_expire_a_day_after_their_items(synth: Synth) -> None:
    rules = {r["Id"]: r for r in _bucket(synth)["LifecycleConfiguration"]["Rules"]}
    rule = rules["expire-offloaded-checkpoints"]
    assert rule["Prefix"] == "checkpoints/"
    assert rule["ExpirationInDays"] == 31  # checkpoint_ttl_days (30) + 1
    assert rule["Status"] == "Enabled"


def test_run_artifacts_expire_with_the_runs_checkpoints(synth: Synth) -> None:
    rules = {r["Id"]: r for r in _bucket(synth)["LifecycleConfiguration"]["Rules"]}
    rule = rules["expire-run-artifacts"]
    assert rule["Prefix"] == "artifacts/"
    assert rule["ExpirationInDays"] == 31  # checkpoint_ttl_days (30) + 1, as the offloads
    assert rule["Status"] == "Enabled"


def test_bucket_policy_denies_requests_without_tls(synth: Synth) -> None:
    bucket_id = synth.logical_id(synth.stack.files.bucket)
    policies = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in synth.of_type("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": bucket_id}
    ]
    assert len(policies) == 1
    denies = [s for s in policies[0] if s["Effect"] == "Deny"]
    assert any(
        s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} and s["Action"] == "s3:*"
        for s in denies
    )


def test_no_custom_resource_lambda_is_needed_for_notifications(synth: Synth) -> None:
    # The EventBridge flag is set on the bucket itself, so only our four functions exist.
    assert len(synth.of_type("AWS::Lambda::Function")) == 4
    assert not synth.of_type("Custom::S3BucketNotifications")
