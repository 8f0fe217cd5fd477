"""``network: vpc`` (issue 34, item 2): the functions in private subnets, VPC endpoints for the
AWS services their roles are granted, and egress through Network Firewall to the allow-list.

Two variants, each synthesized once per session (cdk-nag checked, cfn-lint linted): a VPC the
stack creates, with hosts to allow and a customer-managed key; and a given VPC with nothing to
allow (AWS services only). They carry the edge options too (``tests/infra/stacks.py``), which
``test_edge_options`` reads from the same syntheses.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from infra.config import ConfigError, DeployConfig
from tests.infra.conftest import Synth, Synthesized
from tests.infra.helpers import as_list, function_role, role_statements
from tests.infra.stacks import CREATED_NETWORK, GIVEN_NETWORK
from tests.infra.stacks import GIVEN_VPC as GIVEN
from tests.infra.test_compliance import ACCEPTED_LINT

# A variant's first test waits for its synthesis (cdk-nag included): about a minute alone,
# several on a machine shared by many test runs; the suite's 300 s limit is for one test.
pytestmark = pytest.mark.timeout(900)

SENDER = {"sender_email": "approvals@example.org"}
VARIANTS: dict[str, dict[str, Any]] = {"created": CREATED_NETWORK, "given": GIVEN_NETWORK}
INTERFACE_SERVICES = {
    "bedrock-runtime", "email", "lambda", "scheduler", "secretsmanager", "states", "sts", "xray",
}  # fmt: skip


# --- configuration ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"network": "vpn"}, "network 'vpn': 'public' .* or 'vpc'"),
        ({"vpc_id": "vpc-0123456789abcdef0"}, "vpc_id: only with network: vpc"),
        ({"network": "vpc", "vpc_cidr": "10.0.0.0/8"}, "vpc_cidr '10.0.0.0/8': .* /16 to /22"),
        ({"network": "vpc", "vpc_cidr": "10.0.0.1/16"}, "its host bits zero"),
        ({**GIVEN, "vpc_id": "vpc-1"}, "vpc_id 'vpc-1' is not a VPC id"),
        ({**GIVEN, "vpc_subnet_ids": "subnet-0aaaaaaaaaaaaaaa1"}, "two or more private subnet"),
        ({**GIVEN, "vpc_availability_zones": "eu-west-1a"}, "the zone of each of the 2"),
        ({**GIVEN, "vpc_route_table_ids": ""}, "vpc_route_table_ids .*vpc_endpoints: false"),
        ({"network": "vpc", "vpc_subnet_ids": "subnet-0aaaaaaaaaaaaaaa1"}, "set vpc_id too"),
        ({"network": "vpc", "egress_domains": "https://x.org"}, "egress_domains: 'https://x.org'"),
        ({"network": "vpc", "mcp_servers": "http://10.0.0.7/mcp"}, "host names, not addresses"),
        ({**GIVEN, "vpc_cidr": "10.42.0.0/16"}, "vpc_cidr is for a VPC the stack creates"),
    ],
)
def test_invalid_network_settings_are_refused_with_the_setting_named(
    values: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        DeployConfig.parse({**SENDER, **values})


def test_a_given_vpc_with_its_own_endpoints_needs_no_route_tables() -> None:
    # Given a VPC whose endpoints exist already (e.g. shared from a central VPC)
    config = DeployConfig.parse(
        {**SENDER, **GIVEN, "vpc_route_table_ids": "", "vpc_endpoints": "false"}
    )
    # Then no route table is asked for
    assert config.vpc_endpoints is False and config.vpc_route_table_ids == ()


def test_the_egress_allow_list_gathers_every_host_the_functions_call() -> None:
    # Given http steps' domains, OpenAI as the default provider, an MCP server, Slack
    # approvals, a remote OTLP endpoint and one extra host
    config = DeployConfig.parse(
        {
            **SENDER,
            "network": "vpc",
            "http_allowed_domains": "api.example.com,*.example.org",
            "llm_provider": "openai",
            "llm_model": "gpt-4o-mini",
            "mcp_servers": "https://tools.example.org/mcp,https://API.example.com/mcp",
            "approval_channels": "console,slack",
            "otel": "otlp",
            "otel_endpoint": "https://otlp.example.net/v1/traces",
            "egress_domains": "gateway.example.net",
        }
    )
    # Then each is listed once, in that order
    assert config.egress_allow_list == (
        "api.example.com",
        "*.example.org",
        "api.openai.com",
        "tools.example.org",
        "slack.com",
        "otlp.example.net",
        "gateway.example.net",
    )


def test_every_provider_the_runner_carries_is_allowed_not_only_the_default() -> None:
    # Given Bedrock as the default provider, and blocks that may name OpenAI or Anthropic
    config = DeployConfig.parse(
        {**SENDER, "network": "vpc", "llm_providers": "bedrock,openai,anthropic"}
    )
    # Then both providers' APIs are reachable through the firewall (Bedrock has its endpoint)
    assert config.egress_allow_list == ("api.openai.com", "api.anthropic.com")


def test_bedrock_without_tools_slack_or_http_domains_allows_no_host() -> None:
    # Given the default provider Bedrock (a VPC endpoint), a local collector, nothing else
    config = DeployConfig.parse(
        {**SENDER, "network": "vpc", "otel": "otlp", "otel_endpoint": "http://localhost:4318"}
    )
    # Then nothing on the internet is allowed
    assert config.egress_allow_list == ()


# --- synthesized -----------------------------------------------------------------------------


# One fixture per variant: a test's time limit covers the one synthesis it waits for.
@pytest.fixture(scope="module")
def created(synthesized: Synthesized) -> Synth:
    return synthesized(VARIANTS["created"])


@pytest.fixture(scope="module")
def given(synthesized: Synthesized) -> Synth:
    return synthesized(VARIANTS["given"])


@pytest.fixture(params=list(VARIANTS))
def variant(request: pytest.FixtureRequest) -> Synth:
    synthesized: Synth = request.getfixturevalue(request.param)
    return synthesized


def test_variant_passes_cdk_nag_and_cfn_lint(variant: Synth, synthesized: Synthesized) -> None:
    # Given the variant, synthesized with cdk-nag (the fixture raises on an unacknowledged
    # finding)
    # Then cfn-lint finds nothing in its region either
    problems = {
        f"{rule} {message}"
        for rule, message, _ in synthesized.lint(variant)
        if not rule.startswith("I") and rule not in ACCEPTED_LINT
    }
    assert problems == set(), "\n".join(sorted(problems))


def _function_subnets_and_groups(variant: Synth) -> dict[str, Any]:
    return {
        name: variant.resources[variant.logical_id(function)]["Properties"].get("VpcConfig")
        for name, function in variant.stack.functions.all.items()
    }


def test_every_function_runs_in_private_subnets_behind_a_group_without_inbound(
    variant: Synth,
) -> None:
    network = variant.stack.network
    # Then the four functions share the network's subnets and security group
    configs = _function_subnets_and_groups(variant)
    assert len(configs) == 4
    group_id = variant.logical_id(network.security_group)
    for config in configs.values():
        assert config["SecurityGroupIds"] == [{"Fn::GetAtt": [group_id, "GroupId"]}]
        assert config["SubnetIds"] == [
            variant.stack.resolve(subnet.subnet_id) for subnet in network.subnets
        ]
    # ...which takes no inbound traffic, and sends out only HTTPS (and HTTP with hosts to allow)
    group = variant.resources[group_id]["Properties"]
    assert "SecurityGroupIngress" not in group
    ports = sorted(rule["FromPort"] for rule in group["SecurityGroupEgress"])
    assert ports == ([80, 443] if network.allowed_hosts else [443])
    assert not [
        r
        for r in variant.of_type("AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == {"Fn::GetAtt": [group_id, "GroupId"]}
    ]


def _granted_services(variant: Synth) -> set[str]:
    stack, resources = variant.stack, variant.resources
    roles = [function_role(resources, variant.logical_id(f)) for f in stack.functions.all.values()]
    roles.append(variant.logical_id(stack.functions.file_reader_role))
    return {
        action.split(":")[0]
        for role in roles
        for statement in role_statements(resources, role)
        if statement["Effect"] == "Allow"
        for action in as_list(statement["Action"])
    }


def _endpoint_services(variant: Synth) -> dict[str, str]:
    """Endpoint service short name (``states``) -> its type (``Interface``, ``Gateway``)."""
    found: dict[str, str] = {}
    for endpoint in variant.of_type("AWS::EC2::VPCEndpoint").values():
        props = endpoint["Properties"]
        # com.amazonaws.<region>.<name>, the region a literal or a Ref in an Fn::Join
        name = re.findall(r"\.([a-z0-9-]+)", json.dumps(props["ServiceName"]))[-1]
        found[name] = props.get("VpcEndpointType", "Gateway")
    return found


def test_every_aws_service_the_functions_are_granted_has_an_endpoint(variant: Synth) -> None:
    from infra.constructs.network import (
        GATEWAY_ENDPOINTS,
        INTERFACE_ENDPOINTS,
        NOT_CALLED_FROM_THE_VPC,
    )

    # Given the services the functions' roles (and the role the runner assumes) are granted
    granted = _granted_services(variant) - set(NOT_CALLED_FROM_THE_VPC)
    gateways = {s: "Gateway" for s in granted if s in GATEWAY_ENDPOINTS}
    interfaces = {
        INTERFACE_ENDPOINTS[s].short_name: "Interface" for s in granted if s in INTERFACE_ENDPOINTS
    }
    # Then each has its endpoint, and nothing else has one: DynamoDB and S3 as gateways, the
    # rest as interfaces reached with private DNS from the functions' security group only
    found = _endpoint_services(variant)
    assert found == gateways | interfaces
    assert found == {"dynamodb": "Gateway", "s3": "Gateway"} | dict.fromkeys(
        INTERFACE_SERVICES, "Interface"
    )
    functions_group = {
        "Fn::GetAtt": [variant.logical_id(variant.stack.network.security_group), "GroupId"]
    }
    for endpoint in variant.of_type("AWS::EC2::VPCEndpoint").values():
        props = endpoint["Properties"]
        if props.get("VpcEndpointType") == "Interface":
            assert props["PrivateDnsEnabled"] is True
            (group,) = props["SecurityGroupIds"]
            ingress = variant.resources[group["Fn::GetAtt"][0]]["Properties"]
            assert "SecurityGroupIngress" not in ingress
    (ingress,) = variant.of_type("AWS::EC2::SecurityGroupIngress").values()
    assert ingress["Properties"]["SourceSecurityGroupId"] == functions_group
    assert ingress["Properties"]["FromPort"] == 443


def test_the_firewall_allows_exactly_the_configured_hosts(created: Synth) -> None:
    # Given a created VPC with http_allowed_domains, an MCP server, Slack and an extra host
    variant = created
    # Then one domain-list rule group allows exactly them (TLS SNI and HTTP Host)...
    (group,) = variant.of_type("AWS::NetworkFirewall::RuleGroup").values()
    source = group["Properties"]["RuleGroup"]["RulesSource"]["RulesSourceList"]
    assert source == {
        "GeneratedRulesType": "ALLOWLIST",
        "Targets": [
            "api.example.com",
            ".example.org",
            "tools.example.org",
            "slack.com",
            "api.openai.com",
        ],
        "TargetTypes": ["TLS_SNI", "HTTP_HOST"],
    }
    # ...the policy drops everything else once established, and logs each drop
    (policy,) = variant.of_type("AWS::NetworkFirewall::FirewallPolicy").values()
    settings = policy["Properties"]["FirewallPolicy"]
    assert settings["StatefulDefaultActions"] == ["aws:drop_established", "aws:alert_established"]
    assert settings["StatefulEngineOptions"] == {"RuleOrder": "STRICT_ORDER"}
    assert len(variant.of_type("AWS::NetworkFirewall::LoggingConfiguration")) == 2
    # ...and the runner refuses other hosts itself, with the same domains
    runner = variant.resources[variant.logical_id(variant.stack.functions.run_segment)]
    env = runner["Properties"]["Environment"]["Variables"]
    assert json.loads(env["LANGORCH_HTTP_ALLOWED_DOMAINS"]) == ["api.example.com", "*.example.org"]


def test_the_functions_reach_the_internet_only_through_the_firewall(created: Synth) -> None:
    # Given the created VPC: one firewall per zone
    variant = created
    network = variant.stack.network
    firewalls = [variant.stack.get_logical_id(f) for f in network.firewalls]
    assert len(firewalls) == 2
    routes = variant.of_type("AWS::EC2::Route")
    # Then each functions subnet's default route goes to its zone's firewall endpoint, not NAT
    for zone, subnet in enumerate(network.subnets):
        table = variant.stack.resolve(subnet.route_table.route_table_id)
        (default,) = [
            r["Properties"]
            for r in routes.values()
            if r["Properties"]["RouteTableId"] == table
            and r["Properties"].get("DestinationCidrBlock") == "0.0.0.0/0"
        ]
        assert "NatGatewayId" not in default and "GatewayId" not in default
        assert firewalls[zone] in json.dumps(default["VpcEndpointId"])
    # ...only firewall subnets route to a NAT gateway, and only public subnets to the internet
    nat_tables = {
        json.dumps(r["Properties"]["RouteTableId"])
        for r in routes.values()
        if "NatGatewayId" in r["Properties"]
    }
    firewall_subnets = variant.stack.network.vpc.select_subnets(subnet_group_name="firewall")
    assert nat_tables == {
        json.dumps(variant.stack.resolve(s.route_table.route_table_id))
        for s in firewall_subnets.subnets
    }
    # ...and the answers come back through the same firewall
    answers = [r["Properties"] for r in routes.values() if "DestinationCidrBlock" in r["Properties"]
               and r["Properties"]["DestinationCidrBlock"].startswith("10.42.")]  # fmt: skip
    assert len(answers) == 2
    assert all("VpcEndpointId" in r for r in answers)


def test_a_given_vpc_with_nothing_to_allow_reaches_aws_services_only(given: Synth) -> None:
    # Given a given VPC, Bedrock as the provider, no MCP server, no http domains, no Slack
    variant = given
    # Then the stack creates no VPC, subnet, NAT gateway or firewall...
    for kind in ("AWS::EC2::VPC", "AWS::EC2::Subnet", "AWS::EC2::NatGateway"):
        assert not variant.of_type(kind), kind
    assert not variant.of_type("AWS::NetworkFirewall::Firewall")
    # ...runs the functions in the given subnets, routes DynamoDB and S3 in their tables...
    for config in _function_subnets_and_groups(variant).values():
        assert config["SubnetIds"] == ["subnet-0aaaaaaaaaaaaaaa1", "subnet-0bbbbbbbbbbbbbbb2"]
    gateways = [
        e["Properties"]
        for e in variant.of_type("AWS::EC2::VPCEndpoint").values()
        if "RouteTableIds" in e["Properties"]
    ]
    assert len(gateways) == 2
    assert all(
        g["RouteTableIds"] == ["rtb-0aaaaaaaaaaaaaaa1", "rtb-0bbbbbbbbbbbbbbb2"] for g in gateways
    )
    # ...has the runner refuse every http step by name (none is allowed)...
    runner = variant.resources[variant.logical_id(variant.stack.functions.run_segment)]
    assert runner["Properties"]["Environment"]["Variables"]["LANGORCH_HTTP_ALLOWED_DOMAINS"] == "[]"
    # ...and says so at synth
    metadata = json.loads(
        (variant.outdir / f"{variant.stack.stack_name}.metadata.json").read_text()
    )
    warnings = [
        entry["data"]
        for entries in metadata.values()
        for entry in entries
        if entry["type"] == "aws:cdk:warning"
    ]
    assert any("VPC endpoints and nothing else" in w for w in warnings)


def test_network_public_is_the_default_and_creates_no_network(synth: Synth) -> None:
    # Given the default stack (network unset)
    assert synth.stack.network is None
    # Then nothing of a VPC is created and no function is attached to one
    kinds = {r["Type"] for r in synth.resources.values()}
    assert not {k for k in kinds if k.startswith(("AWS::EC2::", "AWS::NetworkFirewall::"))}
    assert all(config is None for config in _function_subnets_and_groups(synth).values())
    for function in synth.stack.functions.all.values():
        env = synth.resources[synth.logical_id(function)]["Properties"]["Environment"]
        assert "AWS_STS_REGIONAL_ENDPOINTS" not in env["Variables"]
