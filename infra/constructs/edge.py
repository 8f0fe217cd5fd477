"""The public edge: the HTTP API, or with ``waf`` a regional REST API behind an AWS WAF web ACL.

Why a REST API and not CloudFront in front of the HTTP API (issue 34 item 4): an HTTP API takes
neither a web ACL nor a resource policy, so with CloudFront a request sent straight to the
``execute-api`` URL would skip the WAF unless every handler checked a shared origin secret
(a secret in CloudFront's configuration and a check in code, both to keep and rotate), and a
CloudFront web ACL must live in us-east-1 (a second stack, cross-region references or a hand-made
ACL). A REGIONAL web ACL associated with the REST API's stage sits on the API itself: there is no
path around it, it is created in the stack's region with everything else, and removing ``waf``
gives the HTTP API back. The price: REST API requests cost more than HTTP API ones (a few dollars
per million: webhooks and approvals are far below that), the handlers receive API Gateway's v1
proxy events (``langorch.web.proxy_events`` answers both shapes alike), and a REST API has no
JWT authorizer, so ``webhook_authorizer`` needs the HTTP API (refused with ``waf`` at synth).
"""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_route53 as route53
from aws_cdk import aws_route53_targets as targets
from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

from infra.config import DeployConfig
from infra.constructs.api import ACCESS_LOG_FORMAT, HttpApi
from infra.retention import retention_days

STAGE = "api"
"""The REST API's stage: part of its ``execute-api`` URL (``…/api/approvals/…``)."""

REST_ACCESS_LOG_FORMAT = {
    **ACCESS_LOG_FORMAT,
    # The same keys as the HTTP API's lines (one Logs Insights query reads both); REST spells
    # the route and integration variables differently. $context.path is the path alone: never
    # the query string, which carries an approval link's signature.
    "routeKey": "$context.resourcePath",
    "integrationStatus": "$context.integration.status",
    "integrationLatency": "$context.integration.latency",
    "integrationError": "$context.integration.error",
    "waf": "$context.wafResponseCode",
}

COMMON_RULES = "AWSManagedRulesCommonRuleSet"
KNOWN_BAD_INPUTS = "AWSManagedRulesKnownBadInputsRuleSet"
COUNT_ONLY = ("SizeRestrictions_BODY",)
"""Common rule set rules that only count: it blocks bodies over 8 KB, and webhook deliveries
and approval forms may be larger (the handlers enforce their own limits)."""


def public_api(
    scope: Construct,
    config: DeployConfig,
    *,
    trigger: lambda_.IFunction,
    approval_callback: lambda_.IFunction,
) -> HttpApi | WafRestApi:
    """The stack's public API as configured: :class:`WafRestApi` with ``waf``, else the HTTP
    API (unchanged, so an existing stack keeps its API and URL)."""
    common: dict[str, Any] = {
        "prefix": config.prefix,
        "trigger": trigger,
        "approval_callback": approval_callback,
        "rate_limit": config.api_rate_limit,
        "burst_limit": config.api_burst_limit,
        "log_retention_days": config.log_retention_days,
        "domain_name": config.domain_name,
        "certificate_arn": config.certificate_arn,
        "hosted_zone_id": config.hosted_zone_id,
    }
    if config.waf is None:
        return HttpApi(scope, "Http", webhook_authorizer=config.webhook_authorizer, **common)
    return WafRestApi(scope, "Edge", rate_limit_per_5min=config.waf.rate_limit_per_5min, **common)


class WafRestApi(Construct):
    """The HTTP API's routes on a regional REST API whose stage a WAF web ACL guards.

    Routes, throttling, access logs and the custom domain are those of
    :class:`infra.constructs.api.HttpApi`. The web ACL blocks a source IP past
    ``rate_limit_per_5min`` requests in 5 minutes, then applies AWS's common and known-bad-inputs
    rule groups; everything else is allowed on to the handlers, which verify signatures.

    Args:
        prefix: name prefix, ``langorch-<stage>``.
        trigger: the webhook handler.
        approval_callback: the approval and Slack handler.
        rate_limit, burst_limit: stage throttling (all callers together).
        log_retention_days: retention of the access logs.
        rate_limit_per_5min: the WAF's per-IP rate limit.
        domain_name, certificate_arn: optional custom domain (a regional certificate).
        hosted_zone_id: the Route 53 public zone of ``domain_name`` for its alias records.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        prefix: str,
        trigger: lambda_.IFunction,
        approval_callback: lambda_.IFunction,
        rate_limit: int,
        burst_limit: int,
        log_retention_days: int,
        rate_limit_per_5min: int,
        domain_name: str | None = None,
        certificate_arn: str | None = None,
        hosted_zone_id: str | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=retention_days(log_retention_days),
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.api = apigw.RestApi(
            self,
            "Api",
            rest_api_name=f"{prefix}-api",
            description="langorch webhooks and approvals (behind AWS WAF)",
            endpoint_configuration=apigw.EndpointConfiguration(types=[apigw.EndpointType.REGIONAL]),
            cloud_watch_role=False,
            # Every request body reaches the handlers base64-encoded, byte for byte: a webhook's
            # signature is over its exact bytes, and a REST API otherwise passes bodies on as
            # UTF-8 text. Answers stay text (the handlers never set isBase64Encoded).
            binary_media_types=["*/*"],
            deploy_options=apigw.StageOptions(
                stage_name=STAGE,
                throttling_rate_limit=rate_limit,
                throttling_burst_limit=burst_limit,
                access_log_destination=apigw.LogGroupLogDestination(self.access_logs),
                access_log_format=apigw.AccessLogFormat.custom(json.dumps(REST_ACCESS_LOG_FORMAT)),
            ),
        )
        # Test invocations from the console would need a second permission per method.
        hooks = apigw.LambdaIntegration(trigger, allow_test_invoke=False)
        approvals = apigw.LambdaIntegration(approval_callback, allow_test_invoke=False)
        root = self.api.root
        root.add_resource("hooks").add_resource("{workflow_id}").add_method("POST", hooks)
        approval = root.add_resource("approvals").add_resource("{id}")
        for method in ("GET", "HEAD", "POST"):
            approval.add_method(method, approvals)
        # Slack's buttons: authenticated by Slack's request signature, checked in the handler.
        root.add_resource("slack").add_resource("interactions").add_method("POST", approvals)
        self.web_acl = self._web_acl(prefix, rate_limit_per_5min)
        wafv2.CfnWebACLAssociation(
            self,
            "WebAclAssociation",
            resource_arn=self.api.deployment_stage.stage_arn,
            web_acl_arn=self.web_acl.attr_arn,
        )
        self.domain: apigw.DomainName | None = None
        self._domain_name = domain_name
        if domain_name and certificate_arn:
            self.domain = self.api.add_domain_name(
                "Domain",
                domain_name=domain_name,
                certificate=acm.Certificate.from_certificate_arn(self, "Cert", certificate_arn),
                endpoint_type=apigw.EndpointType.REGIONAL,
                security_policy=apigw.SecurityPolicy.TLS_1_2,
            )
            if hosted_zone_id:
                zone = route53.HostedZone.from_hosted_zone_id(self, "Zone", hosted_zone_id)
                target = route53.RecordTarget.from_alias(targets.ApiGatewayDomain(self.domain))
                route53.ARecord(
                    self, "DnsA", zone=zone, record_name=f"{domain_name}.", target=target
                )
                route53.AaaaRecord(
                    self, "DnsAaaa", zone=zone, record_name=f"{domain_name}.", target=target
                )

    def _web_acl(self, prefix: str, rate_limit_per_5min: int) -> wafv2.CfnWebACL:
        def seen(name: str) -> wafv2.CfnWebACL.VisibilityConfigProperty:
            # CloudWatch metrics per rule and sampled requests: what was blocked, and why.
            return wafv2.CfnWebACL.VisibilityConfigProperty(
                cloud_watch_metrics_enabled=True,
                metric_name=f"{prefix}-{name}",
                sampled_requests_enabled=True,
            )

        def managed(name: str, priority: int, *, count: tuple[str, ...] = ()) -> Any:
            return wafv2.CfnWebACL.RuleProperty(
                name=name,
                priority=priority,
                override_action=wafv2.CfnWebACL.OverrideActionProperty(none={}),
                statement=wafv2.CfnWebACL.StatementProperty(
                    managed_rule_group_statement=wafv2.CfnWebACL.ManagedRuleGroupStatementProperty(
                        vendor_name="AWS",
                        name=name,
                        rule_action_overrides=[
                            wafv2.CfnWebACL.RuleActionOverrideProperty(
                                name=rule,
                                action_to_use=wafv2.CfnWebACL.RuleActionProperty(count={}),
                            )
                            for rule in count
                        ]
                        or None,
                    )
                ),
                visibility_config=seen(name),
            )

        # First the rate limit (cheap, and a flood then costs no rule-group evaluation).
        rate = wafv2.CfnWebACL.RuleProperty(
            name="RatePerIp",
            priority=0,
            action=wafv2.CfnWebACL.RuleActionProperty(block={}),
            statement=wafv2.CfnWebACL.StatementProperty(
                rate_based_statement=wafv2.CfnWebACL.RateBasedStatementProperty(
                    limit=rate_limit_per_5min,
                    aggregate_key_type="IP",
                    evaluation_window_sec=300,
                )
            ),
            visibility_config=seen("rate-per-ip"),
        )
        return wafv2.CfnWebACL(
            self,
            "WebAcl",
            scope="REGIONAL",
            description=f"{prefix}: rate limit per IP, AWS common and known-bad-inputs rules",
            default_action=wafv2.CfnWebACL.DefaultActionProperty(allow={}),
            visibility_config=seen("edge"),
            rules=[
                rate,
                managed(COMMON_RULES, 1, count=COUNT_ONLY),
                managed(KNOWN_BAD_INPUTS, 2),
            ],
        )

    @property
    def url(self) -> str:
        """The API's base URL without a trailing slash: the custom domain's, else the stage's
        (``https://<id>.execute-api.<region>.<suffix>/api``)."""
        if self.domain is not None:
            return f"https://{self._domain_name}"
        stack = Stack.of(self)
        return (
            f"https://{self.api.rest_api_id}.execute-api.{stack.region}.{stack.url_suffix}/{STAGE}"
        )
