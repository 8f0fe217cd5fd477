"""The edge options of issue 34 item 4: ``waf`` (a regional REST API behind an AWS WAF web ACL)
and ``webhook_authorizer`` (a JWT authorizer on the webhook route), each synthesized for real
(cdk-nag checked) and linted by cfn-lint; unset, the HTTP API is what it was.

Synthesis is slow (a Node process): each variant is built once per session, on the network
variants of ``test_network`` (``tests/infra/stacks.py``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.config import ConfigError, DeployConfig, JwtAuthorizer, Waf
from tests.infra.conftest import Synth, Synthesized
from tests.infra.helpers import ref_target
from tests.infra.stacks import CREATED_NETWORK, GIVEN_NETWORK, ISSUER
from tests.infra.test_compliance import ACCEPTED_LINT

# A variant's synthesis runs in the first test that reads it, and takes minutes when the
# machine is shared: more than pytest-timeout's default for one test.
pytestmark = pytest.mark.timeout(900)

VARIANTS: dict[str, dict[str, Any]] = {
    # waf: {rate_limit_per_5min: 2000}, on test_network's created VPC
    "waf": CREATED_NETWORK,
    # webhook_authorizer: {issuer, audience}, on test_network's given VPC
    "webhook-jwt": GIVEN_NETWORK,
}


class _Variants:
    """Each variant as (stack, template), synthesized when a test first asks for it (once per
    session, shared with test_network)."""

    def __init__(self, synthesized: Synthesized) -> None:
        self._synthesized = synthesized

    def synth(self, name: str) -> Synth:
        return self._synthesized(VARIANTS[name])

    def __getitem__(self, name: str) -> tuple[Any, dict[str, Any]]:
        built = self.synth(name)
        return built.stack, built.template


@pytest.fixture(scope="module")
def variants(synthesized: Synthesized) -> _Variants:
    return _Variants(synthesized)


def _of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_variant_passes_cfn_lint_in_its_region(
    variants: _Variants, synthesized: Synthesized, name: str
) -> None:
    problems = {
        f"{rule} {message}"
        for rule, message, _ in synthesized.lint(variants.synth(name))
        if not rule.startswith("I") and rule not in ACCEPTED_LINT
    }
    assert problems == set()


# --------------------------------------------------------------------------------------------
# waf
# --------------------------------------------------------------------------------------------


def test_waf_blocks_an_ip_past_its_rate_and_applies_the_aws_rule_groups(
    variants: _Variants,
) -> None:
    # Given waf: {rate_limit_per_5min: 2000}
    _, template = variants["waf"]
    (acl,) = _of_type(template, "AWS::WAFv2::WebACL").values()
    props = acl["Properties"]
    # Then a regional web ACL allows by default, first blocks an IP past 2000 requests in 5 min
    assert props["Scope"] == "REGIONAL" and props["DefaultAction"] == {"Allow": {}}
    rules = sorted(props["Rules"], key=lambda r: r["Priority"])
    assert rules[0]["Action"] == {"Block": {}}
    assert rules[0]["Statement"] == {
        "RateBasedStatement": {"AggregateKeyType": "IP", "EvaluationWindowSec": 300, "Limit": 2000}
    }
    # ...then AWS's common and known-bad-inputs rule groups, with their own actions
    groups = {
        r["Statement"]["ManagedRuleGroupStatement"]["Name"]: r for r in rules[1:]
    }  # fmt: skip
    assert set(groups) == {"AWSManagedRulesCommonRuleSet", "AWSManagedRulesKnownBadInputsRuleSet"}
    assert all(r["OverrideAction"] == {"None": {}} for r in groups.values())
    # ...except the common set's 8 KB body limit, counted only (webhooks may be larger)
    common = groups["AWSManagedRulesCommonRuleSet"]["Statement"]["ManagedRuleGroupStatement"]
    assert common["RuleActionOverrides"] == [
        {"ActionToUse": {"Count": {}}, "Name": "SizeRestrictions_BODY"}
    ]
    # ...and every rule is measured in CloudWatch with sampled requests
    for rule in rules:
        assert rule["VisibilityConfig"]["CloudWatchMetricsEnabled"] is True


def test_the_web_acl_guards_the_stage_every_route_is_served_from(
    variants: _Variants,
) -> None:
    # Given the waf variant
    _, template = variants["waf"]
    (acl_id,) = _of_type(template, "AWS::WAFv2::WebACL")
    (stage_id,) = _of_type(template, "AWS::ApiGateway::Stage")
    (api_id,) = _of_type(template, "AWS::ApiGateway::RestApi")
    # Then the web ACL is associated with the REST API's one stage
    (association,) = _of_type(template, "AWS::WAFv2::WebACLAssociation").values()
    assert association["Properties"]["WebACLArn"] == {"Fn::GetAtt": [acl_id, "Arn"]}
    arn = association["Properties"]["ResourceArn"]["Fn::Join"][1]
    assert arn == ["arn:aws:apigateway:eu-west-1::/restapis/", {"Ref": api_id},
                   "/stages/", {"Ref": stage_id}]  # fmt: skip
    # ...and no HTTP API is left to reach the functions around it
    assert not [k for k, v in template["Resources"].items() if "ApiGatewayV2" in v["Type"]]
    invokers = {
        json.dumps(p["Properties"]["SourceArn"])
        for p in _of_type(template, "AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "apigateway.amazonaws.com"
    }
    assert invokers and all(f'{{"Ref": "{stage_id}"}}' in arn for arn in invokers)


def test_the_rest_api_serves_the_http_apis_routes_to_the_same_functions(
    variants: _Variants,
) -> None:
    # Given the waf variant's REST API
    stack, template = variants["waf"]
    resources = _of_type(template, "AWS::ApiGateway::Resource")

    def path_of(resource_id: Any) -> str:
        target = ref_target(resource_id)
        if target not in resources:
            return ""
        props = resources[target]["Properties"]
        return f"{path_of(props['ParentId'])}/{props['PathPart']}"

    # Then each route reaches the function the HTTP API sends it to, without an authorizer
    routes = {}
    for method in _of_type(template, "AWS::ApiGateway::Method").values():
        props = method["Properties"]
        assert props["AuthorizationType"] == "NONE"
        assert props["Integration"]["Type"] == "AWS_PROXY"
        uri = props["Integration"]["Uri"]["Fn::Join"][1][1]
        routes[f"{props['HttpMethod']} {path_of(props['ResourceId'])}"] = ref_target(uri)
    trigger = stack.get_logical_id(stack.functions.trigger.node.default_child)
    callback = stack.get_logical_id(stack.functions.approval_callback.node.default_child)
    # ...and every body arrives byte for byte (base64): signatures are over the exact bytes
    (api,) = _of_type(template, "AWS::ApiGateway::RestApi").values()
    assert api["Properties"]["BinaryMediaTypes"] == ["*/*"]
    assert routes == {
        "POST /hooks/{workflow_id}": trigger,
        "GET /approvals/{id}": callback,
        "HEAD /approvals/{id}": callback,
        "POST /approvals/{id}": callback,
        "POST /slack/interactions": callback,
    }


def test_the_rest_stage_is_throttled_and_logs_access_without_query_strings(
    variants: _Variants,
) -> None:
    _, template = variants["waf"]
    (stage,) = _of_type(template, "AWS::ApiGateway::Stage").values()
    props = stage["Properties"]
    (throttle,) = props["MethodSettings"]
    assert throttle["ThrottlingRateLimit"] == 50 and throttle["ThrottlingBurstLimit"] == 100
    assert throttle.get("DataTraceEnabled", False) is False  # would log request bodies
    log_format = json.loads(props["AccessLogSetting"]["Format"])
    assert log_format["path"] == "$context.path"
    assert log_format["waf"] == "$context.wafResponseCode"
    text = json.dumps(log_format).lower()
    for forbidden in ("querystring", "requestoverride", "$context.authorizer", "header"):
        assert forbidden not in text


def test_links_in_emails_and_slack_use_the_rest_apis_url(
    variants: _Variants,
) -> None:
    # Given the waf variant without a custom domain
    stack, template = variants["waf"]
    (api_id,) = _of_type(template, "AWS::ApiGateway::RestApi")
    url = {
        "Fn::Join": [
            "",
            ["https://", {"Ref": api_id}, ".execute-api.eu-west-1.", {"Ref": "AWS::URLSuffix"},
             "/api"],
        ]
    }  # fmt: skip
    # Then approval links are built from the stage's URL, the one the web ACL guards
    for function in (stack.functions.request_approval, stack.functions.approval_callback):
        logical_id = stack.get_logical_id(function.node.default_child)
        env = template["Resources"][logical_id]["Properties"]["Environment"]["Variables"]
        assert env["LANGORCH_PUBLIC_BASE_URL"] == url
    assert template["Outputs"]["ApiUrl"]["Value"] == url


def test_a_custom_domain_on_the_rest_api_gets_tls_1_2_and_its_alias_records() -> None:
    from aws_cdk import App, Stack
    from aws_cdk import aws_lambda as lambda_
    from aws_cdk.assertions import Template

    from infra.constructs.edge import WafRestApi

    # Given the REST API alone (no cdk-nag: the waf variant checks the whole stack) on a domain
    stack = Stack(App(), "Edge", env={"account": "123456789012", "region": "eu-west-1"})
    handler = lambda_.Function.from_function_arn(
        stack, "Fn", "arn:aws:lambda:eu-west-1:123456789012:function:f"
    )
    api = WafRestApi(
        stack, "Edge", prefix="langorch-test", trigger=handler, approval_callback=handler,
        rate_limit=50, burst_limit=100, log_retention_days=30, rate_limit_per_5min=100,
        domain_name="runs.example.org",
        certificate_arn="arn:aws:acm:eu-west-1:123456789012:certificate/abc",
        hosted_zone_id="Z0123456789ABCDEFGHIJ",
    )  # fmt: skip
    template = Template.from_stack(stack).to_json()
    # Then the regional domain takes TLS 1.2 and up, maps to the guarded stage at its root...
    (domain,) = _of_type(template, "AWS::ApiGateway::DomainName").values()
    assert domain["Properties"]["SecurityPolicy"] == "TLS_1_2"
    assert domain["Properties"]["EndpointConfiguration"] == {"Types": ["REGIONAL"]}
    (mapping,) = _of_type(template, "AWS::ApiGateway::BasePathMapping").values()
    assert "BasePath" not in mapping["Properties"]
    # ...A and AAAA aliases point at it, and links use the domain
    records = _of_type(template, "AWS::Route53::RecordSet").values()
    assert sorted(r["Properties"]["Type"] for r in records) == ["A", "AAAA"]
    assert api.url == "https://runs.example.org"


# --------------------------------------------------------------------------------------------
# webhook_authorizer
# --------------------------------------------------------------------------------------------


def test_the_jwt_authorizer_guards_the_webhook_route_only(
    variants: _Variants,
) -> None:
    # Given webhook_authorizer: {issuer, audience}
    _, template = variants["webhook-jwt"]
    (authorizer_id, authorizer), *others = _of_type(
        template, "AWS::ApiGatewayV2::Authorizer"
    ).items()
    assert not others
    # Then a JWT authorizer checks the bearer token's issuer and audience...
    assert authorizer["Properties"]["AuthorizerType"] == "JWT"
    assert authorizer["Properties"]["IdentitySource"] == ["$request.header.Authorization"]
    assert authorizer["Properties"]["JwtConfiguration"] == {
        "Audience": ["langorch-webhooks"],
        "Issuer": ISSUER,
    }
    # ...on the webhook route, and no other route (approval pages and Slack keep their
    # signatures alone: neither sends a bearer token)
    routes = {
        r["Properties"]["RouteKey"]: (
            r["Properties"].get("AuthorizationType", "NONE"),
            ref_target(r["Properties"].get("AuthorizerId")),
        )
        for r in _of_type(template, "AWS::ApiGatewayV2::Route").values()
    }
    assert routes == {
        "POST /hooks/{workflow_id}": ("JWT", authorizer_id),
        "GET /approvals/{id}": ("NONE", None),
        "HEAD /approvals/{id}": ("NONE", None),
        "POST /approvals/{id}": ("NONE", None),
        "POST /slack/interactions": ("NONE", None),
    }


# --------------------------------------------------------------------------------------------
# Unset: the HTTP API as it was
# --------------------------------------------------------------------------------------------

HTTP_API_IDS = {
    "HttpApi4E1D4184",
    "HttpStageD1D6DBD6",
    "HttpAccessLogs1CB64BE3",
}
"""Logical ids of the HTTP API, its stage and access logs in deployed stacks: a new id would
replace the API (a new URL, every emailed link dead)."""


def test_unset_the_edge_is_the_http_api_it_was(synth: Synth) -> None:
    # Given the default stack (neither waf nor webhook_authorizer)
    # Then nothing of either is created, and the HTTP API keeps its logical ids
    for kind in ("AWS::WAFv2::WebACL", "AWS::ApiGateway::RestApi", "AWS::ApiGatewayV2::Authorizer"):
        assert not synth.of_type(kind), kind
    assert set(synth.resources) >= HTTP_API_IDS


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------

BASE = {"sender_email": "approvals@example.org"}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"rate_limit_per_5min": 500}, Waf(500)),
        ('{"rate_limit_per_5min": "500"}', Waf(500)),  # -c waf='{...}'
        ("on", Waf(2000)),
        ("off", None),
    ],
)
def test_waf_is_read_from_cdk_json_or_the_command_line(value: Any, expected: Waf | None) -> None:
    assert DeployConfig.parse({**BASE, "waf": value}).waf == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"rate_limit_per_5min": 5}, "between 10 and 2,000,000,000"),
        ({"rate_limit": 500}, "unknown key(s) rate_limit"),
        ("fast", "an object"),
    ],
)
def test_a_bad_waf_setting_names_what_to_write(value: Any, message: str) -> None:
    with pytest.raises(ConfigError, match="waf") as raised:
        DeployConfig.parse({**BASE, "waf": value})
    assert message in str(raised.value)


def test_webhook_authorizer_takes_an_issuer_and_audiences() -> None:
    config = DeployConfig.parse(
        {**BASE, "webhook_authorizer": '{"issuer": "https://idp.example.org/", "audience": "a"}'}
    )
    assert config.webhook_authorizer == JwtAuthorizer("https://idp.example.org/", ("a",))


@pytest.mark.parametrize(
    "value",
    [{"issuer": "https://idp.example.org/"}, {"issuer": "http://idp", "audience": ["a"]}],
    ids=["no-audience", "not-https"],
)
def test_a_webhook_authorizer_without_https_issuer_or_audience_is_refused(value: Any) -> None:
    with pytest.raises(ConfigError) as raised:
        DeployConfig.parse({**BASE, "webhook_authorizer": value})
    assert "webhook_authorizer: {issuer: https://" in str(raised.value)


def test_waf_and_a_webhook_authorizer_together_are_refused_with_the_reason() -> None:
    # A REST API (what waf makes) has no JWT authorizer
    with pytest.raises(ConfigError, match="REST API, which has none"):
        DeployConfig.parse(
            {
                **BASE,
                "waf": {"rate_limit_per_5min": 2000},
                "webhook_authorizer": {"issuer": ISSUER, "audience": ["a"]},
            }
        )
