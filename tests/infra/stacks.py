"""Stack variants that more than one test file reads, each synthesized once for all of them.

A synthesis (cdk-nag included) and its cfn-lint cost ~10 s of CPU, so independent options
whose assertions do not conflict ride in one variant: the network tests read what the VPC
options make, the edge tests what the edge options make, and each test still fails when its
own option breaks. ``waf`` and ``webhook_authorizer`` exclude each other, so each goes with
one of the two networks.
"""

from __future__ import annotations

from typing import Any

ISSUER = "https://idp.example.org/"
WAF: dict[str, Any] = {"waf": '{"rate_limit_per_5min": 2000}'}
WEBHOOK_JWT: dict[str, Any] = {
    "webhook_authorizer": {"issuer": ISSUER, "audience": ["langorch-webhooks"]},
}
GIVEN_VPC: dict[str, Any] = {
    "network": "vpc",
    "vpc_id": "vpc-0123456789abcdef0",
    "vpc_subnet_ids": "subnet-0aaaaaaaaaaaaaaa1,subnet-0bbbbbbbbbbbbbbb2",
    "vpc_availability_zones": "eu-west-1a,eu-west-1b",
    "vpc_route_table_ids": "rtb-0aaaaaaaaaaaaaaa1,rtb-0bbbbbbbbbbbbbbb2",
}
CREATED_NETWORK: dict[str, Any] = {
    # A VPC the stack creates, with hosts to allow (CONTEXT also names an MCP server,
    # tools.example.org) and a customer-managed key...
    "network": "vpc",
    "vpc_cidr": "10.42.0.0/16",
    "http_allowed_domains": "api.example.com,*.example.org",
    "approval_channels": "console,slack",
    "egress_domains": "api.openai.com",
    "kms": "cmk",
    # ...behind a WAF (the API a REST API)
    **WAF,
}
LONG_STAGE = "a-long-stage-name-20"  # the longest a stage may be (20)
GIVEN_NETWORK: dict[str, Any] = {
    # test_variants' eu-central-1 variant: a long stage, an SES domain identity, Marketplace
    # products, reconcile off, the full record indexes...
    "stage": LONG_STAGE,
    "region": "eu-central-1",
    "ses_domain": "example.org",
    "bedrock_marketplace_products": "prod-abc123,prod-def456",
    "reconcile_minutes": "0",
    "runs_indexes": "full",  # a stack deployed before the lean indexes
    # ...in a given VPC with nothing to allow (AWS services only)...
    **GIVEN_VPC,
    "vpc_availability_zones": "eu-central-1a,eu-central-1b",
    "mcp_servers": "",
    # ...and a JWT authorizer on the webhook route (the API the HTTP API)
    **WEBHOOK_JWT,
}
