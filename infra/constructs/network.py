"""``network: vpc``: the functions in private subnets, AWS services through VPC endpoints, the
internet only through a domain allow-list (README, "Network: VPC and egress allow-list").

Egress is controlled by AWS Network Firewall with a stateful domain-list rule group (the TLS SNI
of HTTPS, the Host header of HTTP), chosen over a forward proxy (Squid on EC2 or Fargate)
because it is managed (no instances to patch, scale or keep available in each zone), the code
needs no proxy settings (boto3, httpx, slack_sdk, the OpenAI, Anthropic and MCP clients all
connect directly), and its rules are in the template beside the settings they come from. Its
limits: it reads the name a client announces (SNI, Host), not the server's certificate, and
it costs per zone-hour (README gives the figures).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import Annotations, Fn, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_networkfirewall as nfw
from constructs import Construct

from infra.config import DeployConfig
from infra.retention import retention_days

Interface = ec2.InterfaceVpcEndpointAwsService
GATEWAY_ENDPOINTS = {
    "dynamodb": ec2.GatewayVpcEndpointAwsService.DYNAMODB,
    "s3": ec2.GatewayVpcEndpointAwsService.S3,
}
"""IAM service prefix -> gateway endpoint (free, a route in the functions' route tables)."""
INTERFACE_ENDPOINTS = {
    "bedrock": Interface.BEDROCK_RUNTIME,
    "cloudwatch": Interface.CLOUDWATCH_MONITORING,
    "events": Interface.EVENTBRIDGE,
    "kms": Interface.KMS,
    "lambda": Interface.LAMBDA_,
    "scheduler": Interface("scheduler"),
    "secretsmanager": Interface.SECRETS_MANAGER,
    "ses": Interface.EMAIL,  # the SES API (email-smtp is SMTP's)
    "sns": Interface.SNS,
    "sqs": Interface.SQS,
    "states": Interface.STEP_FUNCTIONS,
    "sts": Interface.STS,
    # Lambda's own X-Ray daemon sends active tracing's segments from outside the VPC, but an
    # OpenTelemetry collector layer (otel_layer_arn) exports to X-Ray from inside it.
    "xray": Interface.XRAY,
}
"""IAM service prefix -> interface endpoint (private DNS: the SDKs' default hosts resolve to
it, so no code names an endpoint)."""
NOT_CALLED_FROM_THE_VPC = {
    "logs": "Lambda delivers the functions' logs itself; no function calls CloudWatch Logs",
    "ec2": "Lambda creates and deletes the functions' network interfaces",
    "iam": "iam:PassRole authorizes handing a role to a service; it is no call",
    "aws-marketplace": "Bedrock subscribes the account on a model's first use, not the runner",
    # tests/infra/test_iam_from_code.py, LAMBDA_ON_THE_FUNCTIONS_BEHALF: no code calls SQS.
    "sqs": "Lambda sends the trigger's failed asynchronous events to its dead-letter queue",
}
"""Granted services whose calls do not leave the functions' network interfaces."""

FUNCTIONS_SUBNETS = "functions"
FIREWALL_SUBNETS = "firewall"
PUBLIC_SUBNETS = "public"
ZONES = 2
"""Zones of a created VPC: two, each with its own NAT gateway and firewall endpoint."""
RULE_CAPACITY = 1000
"""The rule group's capacity, fixed: a change replaces the group, and its name is fixed. A
domain uses one unit per target type (two), so 500 hosts fit (``config.MAX_ALLOWED_HOSTS``)."""
ENI_ACTIONS = [
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
]
"""What Lambda does with a function's role to attach it to its subnets (the actions of the
AWSLambdaVPCAccessExecutionRole managed policy, without its logs:* on every log group)."""


def firewall_domain(host: str) -> str:
    """A host of the allow-list as Network Firewall writes it: ``*.example.org`` is
    ``.example.org`` (which also matches ``example.org`` itself; the runner's own check,
    ``langorch.domain.egress``, does not)."""
    return host[1:] if host.startswith("*.") else host


def granted_services(roles: Sequence[iam.IRole]) -> list[str]:
    """The IAM service prefixes of every action the policies attached to ``roles`` allow.

    Read from the synthesized policies, so an endpoint follows each ``grant_*`` of the stack
    rather than a list kept by hand (and ``tests/infra/test_iam_from_code.py`` keeps the
    grants equal to the calls the code makes).
    """
    stack = Stack.of(roles[0])
    names = [stack.resolve(role.role_name) for role in roles]
    services: set[str] = set()
    for node in stack.node.find_all():
        if not isinstance(node, iam.CfnPolicy):
            continue
        if not any(attached in names for attached in stack.resolve(node.roles) or []):
            continue
        document: dict[str, Any] = stack.resolve(node.policy_document)
        for statement in document["Statement"]:
            if statement["Effect"] != "Allow":
                continue
            actions = statement["Action"]
            for action in [actions] if isinstance(actions, str) else actions:
                services.add(action.split(":")[0])
    return sorted(services)


def endpoints_for(services: Sequence[str]) -> list[str]:
    """The services of ``services`` that need a VPC endpoint.

    Raises:
        ValueError: a service has neither an endpoint here nor a reason to need none.
    """
    unknown = [
        s
        for s in services
        if s not in GATEWAY_ENDPOINTS
        and s not in INTERFACE_ENDPOINTS
        and s not in NOT_CALLED_FROM_THE_VPC
    ]
    if unknown:
        raise ValueError(
            f"the functions are granted {', '.join(unknown)} actions, and network: vpc knows no "
            "VPC endpoint for them: add each to INTERFACE_ENDPOINTS or GATEWAY_ENDPOINTS in "
            "infra/constructs/network.py (or to NOT_CALLED_FROM_THE_VPC, with the reason)"
        )
    return [s for s in services if s not in NOT_CALLED_FROM_THE_VPC]


class Network(Construct):
    """Private subnets for ``functions``, VPC endpoints for the AWS services their roles are
    granted, and egress through Network Firewall to ``config.egress_allow_list`` alone.

    In a created VPC with hosts to allow: per zone a public subnet (NAT gateway), a firewall
    subnet (the firewall's endpoint) and a functions subnet; the functions' default route
    goes to the firewall, the firewall's to the NAT gateway, and the public subnet sends the
    answers back through the firewall. With nothing to allow there is no route out at all:
    isolated subnets and endpoints only. In a given VPC (``vpc_id``) routing is its owner's:
    the stack adds security groups and endpoints, and says which hosts to allow.

    Args:
        config: the deployment's settings (``network: vpc`` and the ``vpc_*`` settings).
        functions: the functions to place in the VPC.
        assumed_roles: roles the functions assume to call AWS (their services get endpoints).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: DeployConfig,
        functions: Sequence[lambda_.Function],
        assumed_roles: Sequence[iam.IRole] = (),
    ) -> None:
        super().__init__(scope, id)
        self._prefix = config.prefix
        self._retention = retention_days(config.log_retention_days)
        self.allowed_hosts = config.egress_allow_list
        roles = [f.role for f in functions if f.role is not None]
        self.endpoint_services = endpoints_for(granted_services([*roles, *assumed_roles]))
        self.firewalls: list[nfw.CfnFirewall] = []
        self.rule_group: nfw.CfnRuleGroup | None = None
        self.vpc: ec2.IVpc
        if config.vpc_id is None:
            egress = bool(self.allowed_hosts)
            self.vpc = self._created_vpc(config.vpc_cidr, egress=egress)
            self.subnets = self.vpc.select_subnets(subnet_group_name=FUNCTIONS_SUBNETS).subnets
            if egress:
                self._firewall()
        else:
            # Explicit ids rather than Vpc.from_lookup: a lookup needs AWS credentials at synth
            # (make synth and the tests are offline), and without them it yields a dummy VPC.
            self.vpc = ec2.Vpc.from_vpc_attributes(
                self,
                "Vpc",
                vpc_id=config.vpc_id,
                availability_zones=list(config.vpc_availability_zones),
                private_subnet_ids=list(config.vpc_subnet_ids),
                private_subnet_route_table_ids=list(config.vpc_route_table_ids) or None,
            )
            self.subnets = self.vpc.private_subnets
        self.security_group = self._functions_security_group()
        if config.vpc_endpoints:
            self._endpoints()
        self._attach(functions)
        self._say_where_egress_goes(given=config.vpc_id is not None)

    def _created_vpc(self, cidr: str | None, *, egress: bool) -> ec2.Vpc:
        functions = ec2.SubnetConfiguration(
            name=FUNCTIONS_SUBNETS,
            subnet_type=(
                ec2.SubnetType.PRIVATE_WITH_EGRESS if egress else ec2.SubnetType.PRIVATE_ISOLATED
            ),
            cidr_mask=24,
        )
        subnets = [functions]
        if egress:
            subnets = [
                ec2.SubnetConfiguration(
                    name=PUBLIC_SUBNETS, subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=28
                ),
                ec2.SubnetConfiguration(
                    name=FIREWALL_SUBNETS,
                    subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS,
                    cidr_mask=28,
                ),
                functions,
            ]
        vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(cidr or "10.0.0.0/16"),
            # The region's first zones, resolved at deploy: synthesis stays offline (a zone
            # lookup needs credentials) and no zone name is guessed.
            availability_zones=[Fn.select(i, Fn.get_azs()) for i in range(ZONES)],
            nat_gateways=ZONES if egress else 0,
            subnet_configuration=subnets,
        )
        flow_logs = logs.LogGroup(
            self, "FlowLogs", retention=self._retention, removal_policy=RemovalPolicy.DESTROY
        )
        vpc.add_flow_log(
            "FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs)
        )
        return vpc

    def _firewall(self) -> None:
        """One firewall per zone (each with one endpoint, so its id is read without guessing
        the order of a multi-zone firewall's endpoint list), one policy, one rule group."""
        targets = [firewall_domain(host) for host in self.allowed_hosts]
        self.rule_group = nfw.CfnRuleGroup(
            self,
            "AllowedDomains",
            rule_group_name=f"{self._prefix}-allowed-domains",
            type="STATEFUL",
            capacity=RULE_CAPACITY,
            description="langorch: the hosts the functions may reach (egress_allow_list)",
            rule_group=nfw.CfnRuleGroup.RuleGroupProperty(
                rules_source=nfw.CfnRuleGroup.RulesSourceProperty(
                    rules_source_list=nfw.CfnRuleGroup.RulesSourceListProperty(
                        generated_rules_type="ALLOWLIST",
                        targets=targets,
                        target_types=["TLS_SNI", "HTTP_HOST"],
                    )
                ),
                stateful_rule_options=nfw.CfnRuleGroup.StatefulRuleOptionsProperty(
                    rule_order="STRICT_ORDER"
                ),
            ),
        )
        policy = nfw.CfnFirewallPolicy(
            self,
            "EgressPolicy",
            firewall_policy_name=f"{self._prefix}-egress",
            firewall_policy=nfw.CfnFirewallPolicy.FirewallPolicyProperty(
                stateless_default_actions=["aws:forward_to_sfe"],
                stateless_fragment_default_actions=["aws:forward_to_sfe"],
                stateful_engine_options=nfw.CfnFirewallPolicy.StatefulEngineOptionsProperty(
                    rule_order="STRICT_ORDER"
                ),
                # Whatever the allow-list did not pass is dropped once the TCP handshake is
                # done (the SNI or Host is only seen after it), other protocols included;
                # each drop is an alert in the firewall's log group.
                stateful_default_actions=["aws:drop_established", "aws:alert_established"],
                stateful_rule_group_references=[
                    nfw.CfnFirewallPolicy.StatefulRuleGroupReferenceProperty(
                        resource_arn=self.rule_group.attr_rule_group_arn, priority=1
                    )
                ],
            ),
        )
        alerts = logs.LogGroup(
            self, "FirewallAlerts", retention=self._retention, removal_policy=RemovalPolicy.DESTROY
        )
        firewall_subnets = self.vpc.select_subnets(subnet_group_name=FIREWALL_SUBNETS).subnets
        public_subnets = self.vpc.select_subnets(subnet_group_name=PUBLIC_SUBNETS).subnets
        for zone, (subnet, outside, inside) in enumerate(
            zip(firewall_subnets, public_subnets, self.subnets, strict=True), start=1
        ):
            firewall = nfw.CfnFirewall(
                self,
                f"Firewall{zone}",
                firewall_name=f"{self._prefix}-egress-{zone}",
                firewall_policy_arn=policy.attr_firewall_policy_arn,
                vpc_id=self.vpc.vpc_id,
                subnet_mappings=[nfw.CfnFirewall.SubnetMappingProperty(subnet_id=subnet.subnet_id)],
                description=f"langorch egress allow-list, zone {zone}",
            )
            nfw.CfnLoggingConfiguration(
                self,
                f"Firewall{zone}Logging",
                firewall_arn=firewall.attr_firewall_arn,
                logging_configuration=nfw.CfnLoggingConfiguration.LoggingConfigurationProperty(
                    log_destination_configs=[
                        nfw.CfnLoggingConfiguration.LogDestinationConfigProperty(
                            log_destination_type="CloudWatchLogs",
                            log_type="ALERT",
                            log_destination={"logGroup": alerts.log_group_name},
                        )
                    ]
                ),
            )
            self.firewalls.append(firewall)
            # EndpointIds holds one "<zone>:<endpoint id>" per subnet mapping: here exactly one.
            endpoint = Fn.select(1, Fn.split(":", Fn.select(0, firewall.attr_endpoint_ids)))
            default_route = inside.node.find_child("DefaultRoute")
            assert isinstance(default_route, ec2.CfnRoute)
            default_route.add_property_deletion_override("NatGatewayId")
            default_route.add_property_override("VpcEndpointId", endpoint)
            ec2.CfnRoute(
                self,
                f"AnswersThroughFirewall{zone}",
                route_table_id=outside.route_table.route_table_id,
                destination_cidr_block=inside.ipv4_cidr_block,
                vpc_endpoint_id=endpoint,
            )

    def _functions_security_group(self) -> ec2.SecurityGroup:
        group = ec2.SecurityGroup(
            self,
            "Functions",
            vpc=self.vpc,
            description="langorch functions: no inbound; HTTPS to endpoints and allowed hosts",
            allow_all_outbound=False,
        )
        group.add_egress_rule(
            ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "HTTPS: VPC endpoints, allowed hosts"
        )
        if self.allowed_hosts:
            group.add_egress_rule(
                ec2.Peer.any_ipv4(), ec2.Port.tcp(80), "HTTP to allowed hosts (firewall)"
            )
        return group

    def _endpoints(self) -> None:
        subnets = ec2.SubnetSelection(subnets=self.subnets)
        endpoint_group = ec2.SecurityGroup(
            self,
            "Endpoints",
            vpc=self.vpc,
            description="langorch VPC endpoints: HTTPS from the langorch functions only",
            allow_all_outbound=False,
        )
        endpoint_group.add_ingress_rule(
            self.security_group, ec2.Port.tcp(443), "HTTPS from the langorch functions"
        )
        for service in self.endpoint_services:
            endpoint_id = service.title().replace("-", "")
            if service in GATEWAY_ENDPOINTS:
                self.vpc.add_gateway_endpoint(
                    endpoint_id, service=GATEWAY_ENDPOINTS[service], subnets=[subnets]
                )
                continue
            self.vpc.add_interface_endpoint(
                endpoint_id,
                service=INTERFACE_ENDPOINTS[service],
                subnets=subnets,
                security_groups=[endpoint_group],
                private_dns_enabled=True,
                open=False,
            )

    def _attach(self, functions: Sequence[lambda_.Function]) -> None:
        roles = [f.role for f in functions if f.role is not None]
        # A policy of its own, which each function waits for: Lambda checks that the role may
        # create network interfaces when the function is created. ENIs are created by Lambda
        # with ids no one knows beforehand, and Describe* has no resource-level permissions.
        self.interfaces_policy = iam.Policy(
            self,
            "NetworkInterfaces",
            roles=roles,
            statements=[iam.PolicyStatement(actions=ENI_ACTIONS, resources=["*"])],
        )
        subnet_ids = [subnet.subnet_id for subnet in self.subnets]
        for function in functions:
            # Set on the CloudFormation resource: the functions are built before the network
            # knows which endpoints their finished grants need.
            resource = function.node.default_child
            assert isinstance(resource, lambda_.CfnFunction)
            resource.vpc_config = lambda_.CfnFunction.VpcConfigProperty(
                security_group_ids=[self.security_group.security_group_id],
                subnet_ids=subnet_ids,
            )
            function.node.add_dependency(self.interfaces_policy)
            # The STS endpoint in the VPC is the regional one, never sts.amazonaws.com.
            function.add_environment("AWS_STS_REGIONAL_ENDPOINTS", "regional")

    def _say_where_egress_goes(self, *, given: bool) -> None:
        if not self.allowed_hosts:
            Annotations.of(self).add_warning_v2(
                "langorch:network-aws-only",
                "network: vpc with no host to allow: the functions reach AWS services through "
                "VPC endpoints and nothing else. http steps and http_get are refused (set "
                "http_allowed_domains), and so are OpenAI, Anthropic, MCP servers and Slack "
                "(llm_provider, mcp_servers, approval_channels, egress_domains).",
            )
        elif given:
            Annotations.of(self).add_warning_v2(
                "langorch:network-given-vpc-egress",
                "network: vpc in the given VPC: its routes and firewall decide egress, not this "
                f"stack. Allow these hosts there: {', '.join(self.allowed_hosts)}.",
            )
