"""The production options of issue 34, each synthesized for real (cdk-nag checked) and linted by
cfn-lint in its region: a customer-managed key (created, or given by ARN), regional LLM
residency, a custom domain with its DNS records, buckets emptied on destroy, ...

Synthesis is slow (a Node process), so each variant is built once per session and carries
several options at once.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.infra.conftest import Synthesized
from tests.infra.test_compliance import ACCEPTED_LINT
from tests.infra.test_variants import GIVEN_KEY, LONG_STAGE
from tests.infra.test_variants import VARIANTS as REGION_VARIANTS

OTEL_LAYER = "arn:aws:lambda:eu-west-1:901920570463:layer:aws-otel-collector-arm64-ver-0-117-0:1"
VARIANTS: dict[str, dict[str, Any]] = {
    "hardened": {
        "kms": "cmk",
        "retain_data": "false",
        "llm_residency": "regional",
        "llm_model": "eu.anthropic.claude-haiku-4-5-20251001-v1:0",
        "bedrock_regions": "eu-west-1,eu-west-3,eu-central-1",
        "domain_name": "runs.example.org",
        "certificate_arn": "arn:aws:acm:eu-west-1:123456789012:certificate/abc",
        "hosted_zone_id": "Z0123456789ABCDEFGHIJ",
        "http_allowed_domains": "api.example.com,*.example.org",
        "model_limits": {"bedrock:eu.anthropic.*": {"concurrency": 4, "rate": "60/1m"}},
        "otel": "otlp",
        "otel_layer_arn": OTEL_LAYER,
    },
    # kms: <key ARN>, in us-east-1: test_variants' variant there (long stage, an SES identity
    # adopted), so one synthesis serves both files
    "given-key": {"stage": LONG_STAGE, **REGION_VARIANTS["us-east-1"]},
}


@pytest.fixture(scope="session")
def variants(synthesized: Synthesized) -> dict[str, tuple[Any, dict[str, Any]]]:
    built = {name: synthesized(extra) for name, extra in VARIANTS.items()}
    return {name: (b.stack, b.template) for name, b in built.items()}


def _of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_variant_passes_cfn_lint_in_its_region(synthesized: Synthesized, name: str) -> None:
    findings = synthesized.lint(synthesized(VARIANTS[name]))
    problems = {
        f"{rule} {message}"
        for rule, message, _ in findings
        if not rule.startswith("I") and rule not in ACCEPTED_LINT
    }
    assert problems == set(), "\n".join(sorted(problems))


def _key_of(resource: dict[str, Any]) -> Any:
    """The KMS key a resource is encrypted with (``None``: not a customer-managed key)."""
    props = resource["Properties"]
    kind = resource["Type"]
    if kind == "AWS::DynamoDB::Table":
        sse = props.get("SSESpecification", {})
        return sse.get("KMSMasterKeyId") if sse.get("SSEType") == "KMS" else None
    if kind == "AWS::S3::Bucket":
        (rule,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        default = rule["ServerSideEncryptionByDefault"]
        return default.get("KMSMasterKeyID") if default["SSEAlgorithm"] == "aws:kms" else None
    if kind in ("AWS::SQS::Queue", "AWS::SNS::Topic"):
        return props.get("KmsMasterKeyId")
    if kind in ("AWS::SecretsManager::Secret", "AWS::Logs::LogGroup"):
        return props.get("KmsKeyId")
    if kind == "AWS::StepFunctions::StateMachine":
        config = props.get("EncryptionConfiguration", {})
        return config.get("KmsKeyId") if config.get("Type") == "CUSTOMER_MANAGED_KMS_KEY" else None
    raise AssertionError(kind)


def _encrypted_types() -> tuple[str, ...]:
    # Imported here, not at the top: infra.constructs loads aws-cdk-lib (a Node process, ~9 s of
    # CPU) that collecting this file on a worker that runs no infra test would pay.
    from infra.constructs.keys import ENCRYPTED_TYPES

    return ENCRYPTED_TYPES


def _storing(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] in _encrypted_types()}


def test_with_kms_cmk_every_storing_resource_uses_the_one_created_key(
    variants: dict[str, tuple[Any, dict[str, Any]]],
) -> None:
    # Given kms: cmk
    stack, template = variants["hardened"]
    (key_id,) = _of_type(template, "AWS::KMS::Key")
    key = template["Resources"][key_id]
    assert key["Properties"]["EnableKeyRotation"] is True
    access_logs = stack.get_logical_id(stack.files.access_logs.node.default_child)
    # Then every table, bucket, queue, topic, secret, log group and the state machine use it,
    # except the access-log bucket (S3 server access logs cannot be delivered into SSE-KMS)
    storing = _storing(template)
    assert {r["Type"] for r in storing.values()} == set(_encrypted_types())
    for logical_id, resource in storing.items():
        if logical_id == access_logs:
            assert _key_of(resource) is None
            continue
        assert _key_of(resource) == {"Fn::GetAtt": [key_id, "Arn"]}, logical_id


def test_a_created_key_lets_the_services_use_it_for_this_account_only(
    variants: dict[str, tuple[Any, dict[str, Any]]],
) -> None:
    # Given the created key's policy
    _, template = variants["hardened"]
    (key,) = _of_type(template, "AWS::KMS::Key").values()
    statements = {s.get("Sid"): s for s in key["Properties"]["KeyPolicy"]["Statement"]}
    # Then callers use it through the stack's services, from this account only
    via = statements["UseThroughLangorchServices"]["Condition"]["StringEquals"]
    assert via["kms:CallerAccount"] == "123456789012"
    assert {s.split(".")[0] for s in via["kms:ViaService"]} == {
        "dynamodb", "s3", "sqs", "sns", "secretsmanager", "states",
    }  # fmt: skip
    # ...CloudWatch Logs for this account's log groups, and the services that publish into
    # encrypted queues and topics, conditioned on this account
    logs = statements["CloudWatchLogsOfThisAccount"]
    assert logs["Principal"] == {"Service": "logs.eu-west-1.amazonaws.com"}
    publishers = statements["PublishersToEncryptedQueuesAndTopics"]
    assert publishers["Condition"] == {"StringEquals": {"aws:SourceAccount": "123456789012"}}
    # ...and it is deleted with the stack when data is not retained (7-day window)
    assert key["DeletionPolicy"] == "Delete"
    assert key["Properties"]["PendingWindowInDays"] == 7


def test_a_given_key_is_used_by_arn_and_nothing_creates_a_key(
    variants: dict[str, tuple[Any, dict[str, Any]]],
) -> None:
    # Given kms: <key ARN>
    stack, template = variants["given-key"]
    access_logs = stack.get_logical_id(stack.files.access_logs.node.default_child)
    # Then no key is created, and every storing resource names the given one
    assert not _of_type(template, "AWS::KMS::Key")
    for logical_id, resource in _storing(template).items():
        if logical_id != access_logs:
            assert _key_of(resource) == GIVEN_KEY, logical_id


def test_kms_managed_is_the_default_and_creates_no_key(synth: Any) -> None:
    # Given the default stack (kms: managed)
    # Then nothing is on a customer-managed key
    assert not synth.of_type("AWS::KMS::Key")
    for logical_id, resource in _storing(synth.template).items():
        assert _key_of(resource) is None, logical_id


def test_regional_residency_grants_only_the_geography_profile_and_its_regions(
    variants: dict[str, tuple[Any, dict[str, Any]]],
) -> None:
    from tests.infra.helpers import actions_on, function_role, render, role_statements

    # Given llm_residency regional with the eu. profile routing to three EU regions
    stack, template = variants["hardened"]
    runner = stack.get_logical_id(stack.functions.run_segment.node.default_child)
    role = function_role(template["Resources"], runner)
    invoke = actions_on(role_statements(template["Resources"], role))["bedrock:InvokeModel"]
    # Then the runner may invoke the profile and its model in those regions only: no global
    # profile, no region-less foundation model (what a global profile needs)
    base = "anthropic.claude-haiku-4-5-20251001-v1:0"
    assert {render(r) for r in invoke} == {
        f"arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.{base}",
        *(
            f"arn:aws:bedrock:{r}::foundation-model/{base}"
            for r in ("eu-west-1", "eu-west-3", "eu-central-1")
        ),
    }


def test_a_custom_domain_gets_alias_records_in_its_hosted_zone(
    variants: dict[str, tuple[Any, dict[str, Any]]],
) -> None:
    # Given domain_name with hosted_zone_id
    _, template = variants["hardened"]
    records = _of_type(template, "AWS::Route53::RecordSet")
    # Then A and AAAA aliases of runs.example.org point at the API's regional domain
    assert sorted(r["Properties"]["Type"] for r in records.values()) == ["A", "AAAA"]
    for record in records.values():
        props = record["Properties"]
        assert props["Name"] == "runs.example.org."
        assert props["HostedZoneId"] == "Z0123456789ABCDEFGHIJ"
        assert "RegionalDomainName" in json.dumps(props["AliasTarget"])
    # ...and without a zone (the default stack has no domain) no record is made
    _, given = variants["given-key"]
    assert not _of_type(given, "AWS::Route53::RecordSet")


def test_retain_data_false_empties_both_buckets_before_deleting_them(
    variants: dict[str, tuple[Any, dict[str, Any]]],
) -> None:
    # Given retain_data false: S3 refuses to delete a bucket that holds objects, and the
    # access-log bucket always holds some
    stack, template = variants["hardened"]
    emptied = {
        json.dumps(r["Properties"]["BucketName"])
        for r in _of_type(template, "Custom::S3AutoDeleteObjects").values()
    }
    # Then both buckets are emptied by the stack's destroy
    for bucket in (stack.files.bucket, stack.files.access_logs):
        ref = {"Ref": stack.get_logical_id(bucket.node.default_child)}
        assert json.dumps(ref) in emptied
    # ...while retained buckets (the default) are never emptied
    _, given = variants["given-key"]
    assert not _of_type(given, "Custom::S3AutoDeleteObjects")


def _runner(stack: Any, template: dict[str, Any]) -> dict[str, Any]:
    props: dict[str, Any] = template["Resources"][
        stack.get_logical_id(stack.functions.run_segment.node.default_child)
    ]["Properties"]
    return props


def test_the_domain_allow_list_and_otlp_traces_reach_only_the_runner(
    variants: dict[str, tuple[Any, dict[str, Any]]],
) -> None:
    # Given http_allowed_domains and otel: otlp with a collector layer
    stack, template = variants["hardened"]
    runner = _runner(stack, template)
    env = runner["Environment"]["Variables"]
    # Then the runner gets the allow-list and exports its spans over OTLP through the layer
    assert json.loads(env["LANGORCH_HTTP_ALLOWED_DOMAINS"]) == ["api.example.com", "*.example.org"]
    assert env["LANGORCH_OTEL_EXPORTER"] == "otlp"
    assert "LANGORCH_TRACE_CONTENT" not in env
    assert OTEL_LAYER in runner["Layers"]
    # ...and the trigger, which calls no step's host, gets neither
    trigger = template["Resources"][
        stack.get_logical_id(stack.functions.trigger.node.default_child)
    ]
    assert "LANGORCH_HTTP_ALLOWED_DOMAINS" not in trigger["Properties"]["Environment"]["Variables"]
    # ...while by default any host is allowed and X-Ray alone traces
    given_stack, given = variants["given-key"]
    default_env = _runner(given_stack, given)["Environment"]["Variables"]
    assert "LANGORCH_HTTP_ALLOWED_DOMAINS" not in default_env
    assert "LANGORCH_OTEL_EXPORTER" not in default_env


def test_model_limits_reach_the_runner_that_calls_the_models(
    variants: dict[str, tuple[Any, dict[str, Any]]],
) -> None:
    # Given model_limits in the deploy settings
    stack, template = variants["hardened"]
    # Then the runner reads them from its environment, as Settings reads LANGORCH_MODEL_LIMITS
    env = _runner(stack, template)["Environment"]["Variables"]
    assert json.loads(env["LANGORCH_MODEL_LIMITS"]) == {
        "bedrock:eu.anthropic.*": {"concurrency": 4, "rate": "60/1m"}
    }
    # ...and by default nothing limits the models
    given_stack, given = variants["given-key"]
    assert "LANGORCH_MODEL_LIMITS" not in _runner(given_stack, given)["Environment"]["Variables"]
