"""The stack deploys as configured elsewhere too: a long stage name, two regions, the aws-cn
partition, an SES identity adopted rather than created. Each variant is synthesized for real
(cdk-nag checked) and linted by cfn-lint for its own region.

Synthesis is slow (a Node process), so all variants are built once per session.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.infra.conftest import Synthesized
from tests.infra.stacks import GIVEN_NETWORK, LONG_STAGE
from tests.infra.test_compliance import ACCEPTED_LINT

# The first test to use `variants` synthesizes all three stacks (each is one test's synth):
# its time limit is three tests' (a loaded 2-core machine took 300 s for the three).
pytestmark = pytest.mark.timeout(900)

GIVEN_KEY = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
VARIANTS: dict[str, dict[str, Any]] = {
    # ...with a given KMS key: test_production_options' variant of it (one synthesis for both)
    "us-east-1": {"region": "us-east-1", "ses_identity": "existing", "kms": GIVEN_KEY},
    # ...with an SES domain, Marketplace products, reconcile off and the full record indexes,
    # in a given VPC: test_network's and test_edge_options' variant too (one synthesis)
    "eu-central-1": GIVEN_NETWORK,
    "cn-northwest-1": {
        "region": "cn-northwest-1",
        "account": "210987654321",
        "snap_start": "false",  # not offered in China's regions
        # ...nor is SES: refused at synth unless email is off
        "email": "off",
        "approval_channels": "console",
    },
}
KNOWN_GAPS = {
    # China's regions (aws-cn) have no SES: with email off the stack creates no SES resource.
    "cn-northwest-1": {
        # cfn-lint's pattern for Step Functions task resources only knows `arn:aws:`.
        "E3601 'arn:aws-cn:states:::lambda:invoke' does not match",
        "E3601 'arn:aws-cn:states:::lambda:invoke.waitForTaskToken' does not match",
    }
}


@pytest.fixture(scope="session")
def variants(synthesized: Synthesized) -> dict[str, tuple[Any, dict[str, Any]]]:
    built = {name: synthesized({"stage": LONG_STAGE, **extra}) for name, extra in VARIANTS.items()}
    return {name: (b.stack, b.template) for name, b in built.items()}


def _of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_variant_passes_cfn_lint_in_its_region(synthesized: Synthesized, name: str) -> None:
    findings = synthesized.lint(synthesized({"stage": LONG_STAGE, **VARIANTS[name]}))
    problems = {
        f"{rule} {message}".split(" '^arn")[0]
        for rule, message, _ in findings
        if not rule.startswith("I") and rule not in ACCEPTED_LINT
    }
    assert problems == KNOWN_GAPS.get(name, set()), "\n".join(sorted(problems))


def test_every_arn_the_stack_writes_names_its_own_partition(
    variants: dict[str, tuple[Any, dict[str, Any]]],
) -> None:
    # Given the aws-cn variant
    stack, template = variants["cn-northwest-1"]
    assert stack.partition == "aws-cn"
    text = json.dumps(template)
    # Then no ARN assumes the aws partition (the state machine's task resources included)
    assert '"arn:aws:' not in text and "arn:aws:" not in text.replace("arn:aws-cn:", "")
    assert "arn:aws-cn:states:::lambda:invoke" in text


def test_names_fit_their_limits_with_the_longest_stage(
    variants: dict[str, tuple[Any, dict[str, Any]]],
) -> None:
    limits = {
        "AWS::Lambda::Function": ("FunctionName", 64),
        "AWS::StepFunctions::StateMachine": ("StateMachineName", 80),
        "AWS::SES::ConfigurationSet": ("Name", 64),
        "AWS::CloudWatch::Alarm": ("AlarmName", 255),
        "AWS::Lambda::LayerVersion": ("LayerName", 140),
    }
    for _, template in variants.values():
        for kind, (prop, limit) in limits.items():
            for resource in _of_type(template, kind).values():
                name = resource["Properties"][prop]
                assert isinstance(name, str) and LONG_STAGE in name, (kind, name)
                assert len(name) <= limit, (kind, name)


def test_global_names_differ_between_regions(
    variants: dict[str, tuple[Any, dict[str, Any]]],
) -> None:
    # Dashboard names are global per account: one stage in two regions must not collide.
    names = set()
    for stack, template in variants.values():
        (dashboard,) = _of_type(template, "AWS::CloudWatch::Dashboard").values()
        name = dashboard["Properties"]["DashboardName"]
        assert name == f"langorch-{LONG_STAGE}-{stack.region}"
        names.add(name)
    assert len(names) == len(VARIANTS)


def test_an_existing_ses_identity_is_adopted_not_created(
    variants: dict[str, tuple[Any, dict[str, Any]]],
) -> None:
    # Given ses_identity: existing (the address is verified already, e.g. by another stage)
    _, template = variants["us-east-1"]
    # Then the stack creates no identity (a second EmailIdentity fails "already exists")...
    assert not _of_type(template, "AWS::SES::EmailIdentity")
    # ...and still grants sending from it, by its ARN
    text = json.dumps(template)
    assert ":identity/approvals@example.org" in text
    # while a domain identity is created (with DKIM) when asked for
    _, domain = variants["eu-central-1"]
    (identity,) = _of_type(domain, "AWS::SES::EmailIdentity").values()
    assert identity["Properties"]["EmailIdentity"] == "example.org"


def test_bedrock_first_use_may_subscribe_only_to_the_configured_products(
    variants: dict[str, tuple[Any, dict[str, Any]]],
) -> None:
    from tests.infra.helpers import as_list, function_role, role_statements

    stack, template = variants["eu-central-1"]
    runner = stack.get_logical_id(stack.functions.run_segment.node.default_child)
    statements = role_statements(
        template["Resources"], function_role(template["Resources"], runner)
    )
    subscribe = [s for s in statements if "aws-marketplace:Subscribe" in as_list(s["Action"])]
    assert subscribe == [
        {
            "Action": "aws-marketplace:Subscribe",
            "Condition": {
                "ForAnyValue:StringEquals": {
                    "aws-marketplace:ProductId": ["prod-abc123", "prod-def456"]
                }
            },
            "Effect": "Allow",
            "Resource": "*",
        }
    ]
    assert any("aws-marketplace:ViewSubscriptions" in as_list(s["Action"]) for s in statements)
    # Without product ids (the other variants) the runner has no Marketplace permission at all.
    for name in ("us-east-1", "cn-northwest-1"):
        other_stack, other = variants[name]
        role = function_role(
            other["Resources"],
            other_stack.get_logical_id(other_stack.functions.run_segment.node.default_child),
        )
        actions = {
            a for s in role_statements(other["Resources"], role) for a in as_list(s["Action"])
        }
        assert not any(a.startswith("aws-marketplace:") for a in actions)


def test_a_replaced_runner_version_is_deleted_so_one_snapshot_is_cached(
    variants: dict[str, tuple[Any, dict[str, Any]]],
) -> None:
    _, template = variants["us-east-1"]
    versions = _of_type(template, "AWS::Lambda::Version")
    assert versions and all(
        v.get("DeletionPolicy", "Delete") == "Delete" for v in versions.values()
    )


def test_the_reconcile_schedule_follows_reconcile_minutes(
    variants: dict[str, tuple[Any, dict[str, Any]]],
) -> None:
    # On by default (every 15 minutes); reconcile_minutes=0 turns it off
    schedules = {
        name: [
            s["Properties"]["ScheduleExpression"]
            for s in _of_type(t, "AWS::Scheduler::Schedule").values()
        ]
        for name, (_, t) in variants.items()
    }
    assert schedules == {
        "us-east-1": ["rate(15 minutes)"],
        "eu-central-1": [],
        "cn-northwest-1": ["rate(15 minutes)"],
    }


def test_nothing_keeps_a_fixed_name_that_outlives_the_stack(
    variants: dict[str, tuple[Any, dict[str, Any]]],
) -> None:
    # The schedule group is named by CloudFormation and deleted with the stack (its
    # schedules with it); secrets are named by CloudFormation.
    for _, template in variants.values():
        (group,) = _of_type(template, "AWS::Scheduler::ScheduleGroup").values()
        assert "Name" not in group["Properties"]
        for schedule in _of_type(template, "AWS::Scheduler::Schedule").values():
            assert "Name" not in schedule["Properties"]
        assert group.get("DeletionPolicy", "Delete") == "Delete"
        for secret in _of_type(template, "AWS::SecretsManager::Secret").values():
            assert "Name" not in secret["Properties"]


def test_a_stack_deployed_before_the_lean_indexes_keeps_its_full_record_indexes(
    variants: dict[str, tuple[Any, dict[str, Any]]],
) -> None:
    # Given runs_indexes: full (CloudFormation cannot change an index's projection in place)
    stack, template = variants["eu-central-1"]
    runs = template["Resources"][stack.get_logical_id(stack.tables.runs.node.default_child)]
    # Then the runs table's indexes are the earlier ones: the same keys, the whole record
    indexes = {i["IndexName"]: i for i in runs["Properties"]["GlobalSecondaryIndexes"]}
    assert set(indexes) == {"gsi1", "gsi2"}
    for name, index in indexes.items():
        assert index["KeySchema"] == [
            {"AttributeName": f"{name}pk", "KeyType": "HASH"},
            {"AttributeName": f"{name}sk", "KeyType": "RANGE"},
        ]
        assert index["Projection"] == {"ProjectionType": "ALL"}
