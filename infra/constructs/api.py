"""The HTTP API: signed webhooks and the approval page/decision."""

from __future__ import annotations

import json

import jsii
from aws_cdk import RemovalPolicy
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_route53 as route53
from aws_cdk import aws_route53_targets as targets
from constructs import Construct

from infra.config import JwtAuthorizer
from infra.retention import retention_days

ACCESS_LOG_FORMAT = {
    "requestId": "$context.requestId",
    "requestTime": "$context.requestTime",
    "ip": "$context.identity.sourceIp",
    "method": "$context.httpMethod",
    "routeKey": "$context.routeKey",
    # $context.path is the path alone. Never the full URL: an approval link's query string
    # carries its signature, which must not be written anywhere (RELIABILITY.md).
    "path": "$context.path",
    "status": "$context.status",
    "responseLength": "$context.responseLength",
    "integrationStatus": "$context.integrationStatus",
    "integrationLatency": "$context.integrationLatency",
    "integrationError": "$context.integrationErrorMessage",
}


@jsii.implements(apigwv2.IAccessLogSettings)
class _AccessLogSettings:
    """``IAccessLogSettings`` is an interface in jsii: Python must implement it, not pass a dict."""

    def __init__(
        self, destination: apigwv2.IAccessLogDestination, format: apigw.AccessLogFormat
    ) -> None:
        self._destination = destination
        self._format = format

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        """Where access logs go."""
        return self._destination

    @property
    def format(self) -> apigw.AccessLogFormat:
        """The log line."""
        return self._format


class HttpApi(Construct):
    """``POST /hooks/{workflow_id}`` -> trigger, ``GET|HEAD|POST /approvals/{id}`` and
    ``POST /slack/interactions`` -> callback.

    Webhooks are authenticated by their HMAC signature and approvals by their signed,
    expiring, single-use links, both verified in the handlers. ``webhook_authorizer`` adds a
    JWT authorizer to the webhook route only, on top of the signature: approval pages and Slack
    stay without one (an approver follows a link from an email, Slack signs its own requests;
    neither carries a bearer token). The stage is throttled so a flood cannot run up Lambda and
    DynamoDB costs.

    Args:
        prefix: name prefix, ``langorch-<stage>``.
        trigger: the webhook handler.
        approval_callback: the approval handler.
        rate_limit, burst_limit: stage throttling.
        log_retention_days: retention of the access logs.
        domain_name, certificate_arn: optional custom domain.
        hosted_zone_id: the Route 53 public zone of ``domain_name``: the stack adds its alias
            records (else you point the name at the API's regional domain yourself).
        webhook_authorizer: the JWT issuer and audiences webhook senders' tokens must match.
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
        domain_name: str | None = None,
        certificate_arn: str | None = None,
        hosted_zone_id: str | None = None,
        webhook_authorizer: JwtAuthorizer | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.api = apigwv2.HttpApi(
            self,
            "Api",
            api_name=f"{prefix}-api",
            description="langorch webhooks and approvals",
            create_default_stage=False,
        )
        self.access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=retention_days(log_retention_days),
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.domain: apigwv2.DomainName | None = None
        mapping = None
        if domain_name and certificate_arn:
            self.domain = apigwv2.DomainName(
                self,
                "Domain",
                domain_name=domain_name,
                certificate=acm.Certificate.from_certificate_arn(self, "Cert", certificate_arn),
            )
            mapping = apigwv2.DomainMappingOptions(domain_name=self.domain)
            if hosted_zone_id:
                # The name only resolves with a record: an alias to the API's regional domain
                # (A and AAAA). A trailing dot makes it fully qualified, so the zone's name
                # need not be configured too.
                zone = route53.HostedZone.from_hosted_zone_id(self, "Zone", hosted_zone_id)
                target = route53.RecordTarget.from_alias(
                    targets.ApiGatewayv2DomainProperties(
                        self.domain.regional_domain_name, self.domain.regional_hosted_zone_id
                    )
                )
                route53.ARecord(
                    self, "DnsA", zone=zone, record_name=f"{domain_name}.", target=target
                )
                route53.AaaaRecord(
                    self, "DnsAaaa", zone=zone, record_name=f"{domain_name}.", target=target
                )
        self.stage = apigwv2.HttpStage(
            self,
            "Stage",
            http_api=self.api,
            stage_name="$default",
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(rate_limit=rate_limit, burst_limit=burst_limit),
            access_log_settings=_AccessLogSettings(
                apigwv2.LogGroupLogDestination(self.access_logs),
                apigw.AccessLogFormat.custom(json.dumps(ACCESS_LOG_FORMAT)),
            ),
            domain_mapping=mapping,
        )
        hooks = integrations.HttpLambdaIntegration("Hooks", trigger)
        approvals = integrations.HttpLambdaIntegration("Approvals", approval_callback)
        jwt = None
        if webhook_authorizer is not None:
            # Bearer token in Authorization; API Gateway checks signature, issuer, audience and
            # expiry before the trigger runs, which still verifies the delivery's signature.
            jwt = authorizers.HttpJwtAuthorizer(
                "WebhookJwt",
                webhook_authorizer.issuer,
                jwt_audience=list(webhook_authorizer.audience),
                authorizer_name=f"{prefix}-webhooks",
            )
        self.api.add_routes(
            path="/hooks/{workflow_id}",
            methods=[apigwv2.HttpMethod.POST],
            integration=hooks,
            authorizer=jwt,
        )
        self.api.add_routes(
            path="/approvals/{id}",
            methods=[apigwv2.HttpMethod.GET, apigwv2.HttpMethod.HEAD, apigwv2.HttpMethod.POST],
            integration=approvals,
        )
        # Slack's buttons: authenticated by Slack's request signature, checked in the handler.
        self.api.add_routes(
            path="/slack/interactions", methods=[apigwv2.HttpMethod.POST], integration=approvals
        )

    @property
    def url(self) -> str:
        """The API's base URL without a trailing slash (``https://…``)."""
        if self.domain is not None:
            return f"https://{self.domain.name}"
        return self.api.api_endpoint
