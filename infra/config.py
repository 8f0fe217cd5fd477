"""Deployment configuration: ``cdk.json`` context, overridden per command with ``-c key=value``.

Every setting lives under the ``langorch`` context key of ``cdk.json``; a ``-c key=value`` on the
command line (or ``context`` passed to the ``App`` in tests) wins over it. Values given with
``-c`` are strings, so lists accept JSON or commas and booleans accept ``true``/``false``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

CONTEXT_KEY = "langorch"

_STAGE = re.compile(r"^[a-z][a-z0-9-]{0,19}$")
_EMAIL = re.compile(r"^[^@\s]+@([^@\s]+\.[^@\s]+)$")
_PROVIDERS = ("offline", "bedrock", "openai", "anthropic")
_MCP_URL = re.compile(r"^https?://[^/@\s]+(/\S*)?$")
_SECRET_NAME = re.compile(r"^[A-Za-z0-9/_+=.@-]{1,512}$")
_DOMAIN = re.compile(r"^(\*\.)?([A-Za-z0-9-]{1,63}\.)+[A-Za-z0-9-]{1,63}$")
OTEL_MODES = ("off", "otlp")
_SES_IDENTITY = ("create", "existing")
PLACEHOLDER_SENDER = "langorch@example.com"
"""The shipped ``sender_email``: SES can never verify it, so synthesis refuses it."""
_LOG_LEVELS = ("ALL", "ERROR", "FATAL", "OFF")
_RUNS_INDEXES = ("lean", "full")
_VPC_ID = re.compile(r"^vpc-[0-9a-f]{8,17}$")
_SUBNET_ID = re.compile(r"^subnet-[0-9a-f]{8,17}$")
_ROUTE_TABLE_ID = re.compile(r"^rtb-[0-9a-f]{8,17}$")
_AZ = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d[a-z]$")
NETWORKS = ("public", "vpc")
PROVIDER_HOSTS = {"openai": "api.openai.com", "anthropic": "api.anthropic.com"}
"""The public API host of each LLM provider reached over the internet (Bedrock has a VPC
endpoint)."""
MAX_ALLOWED_HOSTS = 500
"""The most hosts the egress firewall's rule group holds (infra/constructs/network.py)."""
SLACK_HOST = "slack.com"
"""Slack's Web API (``https://slack.com/api/``), which posts and answers approval requests."""
_KEY_ARN = re.compile(r"^arn:aws(-cn|-us-gov)?:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]{1,128}$")
RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1827, 3653)
"""The retention periods CloudWatch Logs offers."""


NO_SES_REGIONS = (
    "ap-east-1",
    "ap-east-2",
    "ap-southeast-4",
    "ap-southeast-6",
    "ap-southeast-7",
    "cn-north-1",
    "cn-northwest-1",
    "eu-south-2",
    "mx-central-1",
)
"""Regions where SES cannot be deployed (tests/infra/test_config.py checks cfn-lint agrees)."""
RESIDENCIES = ("global", "regional")
GEOGRAPHIES = ("us-gov.", "us.", "eu.", "apac.", "jp.", "au.", "ca.")
"""Geography (cross-region) inference profile prefixes: prompts stay in that geography."""
_GEOGRAPHY_REGIONS = {
    "us-gov.": ("us-gov-",),
    "us.": ("us-east-", "us-west-"),
    "eu.": ("eu-",),
    "apac.": ("ap-",),
    "jp.": ("ap-northeast-1", "ap-northeast-3"),
    "au.": ("ap-southeast-2", "ap-southeast-4"),
    "ca.": ("ca-",),
}


def _in_geography(region: str, geo: str) -> bool:
    return region.startswith(_GEOGRAPHY_REGIONS[geo])


def geography_of(region: str) -> str | None:
    """The geography profile prefix for a stack in ``region`` (``None``: none is known)."""
    for geo in ("us-gov.", "jp.", "au.", "us.", "eu.", "apac.", "ca."):
        if _in_geography(region, geo):
            return geo
    return None


class ConfigError(ValueError):
    """A deployment setting is missing or invalid; the message names it and how to fix it."""


MAX_MODEL_LIMITS_CHARS = 2048
"""``model_limits`` as JSON in the runner's environment (Lambda's holds 4 KB in all)."""


@dataclass(frozen=True)
class DeployConfig:
    """What differs between deployments of the same code.

    Attributes:
        stage: short name of the deployment (``dev``, ``prod``); part of the stack and
            resource names, so several stages can share an account.
        region: AWS region; ``None`` means the CLI's (``CDK_DEFAULT_REGION``).
        account: AWS account; ``None`` means the CLI's (``CDK_DEFAULT_ACCOUNT``).
        sender_email: the address approval emails come from (an SES identity). The shipped
            placeholder ``langorch@example.com`` is refused: set your own.
        ses_domain: when set, SES verifies this whole domain (DKIM) instead of the sender
            address alone.
        ses_identity: ``create`` (the stack creates the identity: the address or domain is
            new to SES in this account and region) or ``existing`` (it is verified already,
            e.g. by another stage or by hand: the stack only grants sending from it).
        email: approval emails through SES (``off``: no SES resources, for regions without
            SES; approvals then go to the console or Slack, ``approval_channels``).
        public_base_url: the base of approval links; ``None`` means the HTTP API's own URL.
        domain_name: optional custom domain for the HTTP API (needs ``certificate_arn``).
        certificate_arn: ACM certificate for ``domain_name``, in the stack's region.
        hosted_zone_id: the Route 53 public hosted zone of ``domain_name``: the stack creates
            its A/AAAA alias records to the API (unset: create them yourself).
        default_approvers: who approves when a workflow names nobody.
        approval_channels: where approval requests go when a step names no ``channels``
            (``email``, ``slack``, ``console``); ``slack`` needs the Slack secret filled in
            (README, "Approvals in Slack").
        slack_channel: a Slack channel id (``C…``) to post requests in; unset: a DM to each
            approver.
        llm_provider: the default provider of blocks that name none.
        llm_model: the default model of blocks that name none.
        llm_providers: the LLM providers whose SDKs the runner's layer carries (``bedrock``,
            ``openai``, ``anthropic``); a block naming another fails with a message saying
            so. Unset: ``llm_provider``, and ``bedrock`` when Bedrock models are granted.
            Each SDK costs the runner's bundle (openai ~26 MB, anthropic ~19 MB unzipped;
            Lambda allows 250 MB).
        bedrock_models: Bedrock model ids the runner may invoke (least privilege: a block
            using a model not listed here is refused by IAM). Defaults to ``llm_model`` when
            the provider is ``bedrock``. Cross-region inference profile ids (``us.…``) work
            when ``bedrock_regions`` lists every region the profile routes to.
        bedrock_regions: regions whose foundation models an inference profile may route to
            (default: the stack's region only).
        llm_residency: ``global`` (any inference profile, including ``global.…`` ones, which
            may process prompts in any commercial region) or ``regional`` (only in-region
            foundation models and geography profiles such as ``eu.…``, whose routing regions
            ``bedrock_regions`` must list, all in the profile's geography): README, "Where
            prompts are processed".
        bedrock_marketplace_products: AWS Marketplace product ids of third-party models
            (Anthropic, Meta, ...; the Bedrock model catalog lists them): the runner may then
            subscribe the account on the first invocation. Empty: someone with Marketplace
            permissions invokes each model once (README, "Bedrock").
        mcp_servers: URLs of the MCP tool servers the runner may call (``langorch tools add``
            registers them; a registered tool whose URL is not listed here is refused at run
            time). Empty: no registered tool may be called.
        http_allowed_domains: the hosts ``http`` steps and the ``http_get`` tool may reach
            (``example.com`` exactly, ``*.example.com`` its subdomains); unset: any public
            host, none with ``network: vpc`` (README, "Production checklist").
        otel: ``otlp`` sends runs' OpenTelemetry traces from the runner to ``otel_endpoint``
            (default ``http://localhost:4318/v1/traces``, a collector layer's); ``off``: X-Ray
            only (the default).
        otel_layer_arn: a Lambda layer added to the runner, e.g. an OpenTelemetry collector
            (the ADOT collector layer) that forwards what the runner sends to localhost.
        trace_content: put prompts, outputs and tool arguments in spans.
        model_limits: per-model and per-provider limits on the runner's LLM calls, e.g.
            ``{"bedrock:anthropic.claude-3-5-sonnet*": {"concurrency": 4, "rate": "60/1m"},
            "openai": {"concurrency": 8}}`` (an object in cdk.json, JSON with ``-c``): a call
            over a limit parks its run until a slot frees, never fails it (README, "Model
            limits").
        mcp_secrets: names of the Secrets Manager secrets that hold the tool servers' header
            values (``--header NAME=secret:ID``); the runner may read exactly these.
        event_workflows: workflow files (or folders of them) whose event triggers get an
            EventBridge rule aimed at the trigger function: a rule is infrastructure, so a new
            event trigger is deployed, not only put (``langorch workflows put`` warns).
        log_retention_days: retention of every log group.
        checkpoint_ttl_days: checkpoints (and their offloaded S3 objects) expire after this.
        retain_data: keep tables and the bucket when the stack is destroyed.
        runs_indexes: ``lean`` (the runs table's indexes carry keys, run id and status) or
            ``full`` (they carry the whole record, as on a stack deployed before the lean
            indexes: CloudFormation cannot change an index's projection in place, so such a
            stack keeps ``full`` to update; README, "Upgrading a stack").
        reconcile_minutes: how often the stack's schedule ends runs whose execution ended
            without their record following (``langorch runs reconcile``); 0 turns it off.
        sfn_log_level: Step Functions log level (execution data is never logged).
        api_rate_limit: HTTP API steady-state requests per second.
        api_burst_limit: HTTP API burst.
        waf: ``{rate_limit_per_5min: N}`` puts the public API behind an AWS WAF web ACL: a
            rate-based rule (N requests per source IP per 5 minutes) and AWS's common and
            known-bad-inputs rule groups. The API is then a regional REST API, the only API
            Gateway kind a web ACL attaches to (``infra/constructs/edge.py`` says why not
            CloudFront). Unset: the HTTP API, no WAF.
        webhook_authorizer: ``{issuer, audience}``: a JWT authorizer on ``POST /hooks/…``
            only, in addition to each delivery's signature (README, "Production checklist").
        alarm_email: optional address subscribed to the alarm topic.
        kms: ``managed`` (each service's AWS-managed key), ``cmk`` (the stack creates one
            customer-managed key, rotated yearly) or a KMS key ARN (yours, in the stack's
            region; its key policy must allow what README "Encryption keys" lists). With a
            customer-managed key, tables, the files bucket, queues, the alarm topic, secrets,
            log groups and the state machine are all encrypted with it.
        network: ``public`` (the functions run outside any VPC, the default) or ``vpc``: every
            function runs in private subnets with security groups that take no inbound
            traffic, reaches AWS services through VPC endpoints, and the internet only
            through an AWS Network Firewall that allows ``egress_allow_list`` alone (README,
            "Network: VPC and egress allow-list").
        vpc_cidr: the address range of the VPC the stack creates (``/16`` to ``/22``; default
            ``10.0.0.0/16``).
        vpc_id: run in this existing VPC instead of creating one; its egress (NAT, firewall)
            is its owner's, the stack adds only security groups and endpoints.
        vpc_subnet_ids: the given VPC's private subnets the functions run in (two or more,
            in different zones).
        vpc_availability_zones: the zone of each of ``vpc_subnet_ids``, in the same order.
        vpc_route_table_ids: the route table of each of ``vpc_subnet_ids``, in the same order
            (the DynamoDB and S3 gateway endpoints add their routes there).
        vpc_endpoints: create the VPC endpoints (off: the given VPC has them already, e.g.
            shared from a central endpoints VPC).
        egress_domains: hosts the functions may reach besides those the stack derives
            (``http_allowed_domains``, the default LLM provider's API, ``mcp_servers``,
            Slack, the OTLP endpoint): e.g. ``api.openai.com`` for blocks that name OpenAI
            while the default is Bedrock.
        snap_start: SnapStart on the runner (not offered in every region, e.g. China's).
        bundle: build the dependency layer (``pip install`` for arm64, byte-compiled). Off
            for ``make synth`` and tests, which must stay offline and fast; ``make deploy``
            turns it on.
        python312: the Python 3.12 interpreter used to byte-compile the layer; found on
            ``PATH`` or under pyenv when unset.
        build_dir: where assets are staged before CDK copies them into the cloud assembly.
    """

    stage: str = "dev"
    region: str | None = None
    account: str | None = None
    sender_email: str = "langorch@example.com"
    ses_domain: str | None = None
    ses_identity: str = "create"
    email: bool = True
    public_base_url: str | None = None
    domain_name: str | None = None
    certificate_arn: str | None = None
    hosted_zone_id: str | None = None
    default_approvers: tuple[str, ...] = ()
    approval_channels: tuple[str, ...] = ("email", "console")
    slack_channel: str | None = None
    llm_provider: str = "bedrock"
    llm_model: str | None = "global.anthropic.claude-haiku-4-5-20251001-v1:0"
    llm_providers: tuple[str, ...] = ()
    bedrock_models: tuple[str, ...] = ()
    bedrock_regions: tuple[str, ...] = ()
    llm_residency: str = "global"
    bedrock_marketplace_products: tuple[str, ...] = ()
    mcp_servers: tuple[str, ...] = ()
    mcp_secrets: tuple[str, ...] = ()
    http_allowed_domains: tuple[str, ...] | None = None
    otel: str = "off"
    otel_endpoint: str | None = None
    otel_layer_arn: str | None = None
    trace_content: bool = False
    model_limits: Mapping[str, Any] | None = None
    event_workflows: tuple[str, ...] = ()
    log_retention_days: int = 30
    checkpoint_ttl_days: int = 30
    retain_data: bool = True
    runs_indexes: str = "lean"
    reconcile_minutes: int = 15
    sfn_log_level: str = "ALL"
    api_rate_limit: int = 50
    api_burst_limit: int = 100
    waf: Waf | None = None
    webhook_authorizer: JwtAuthorizer | None = None
    alarm_email: str | None = None
    kms: str = "managed"
    network: str = "public"
    vpc_cidr: str | None = None
    vpc_id: str | None = None
    vpc_subnet_ids: tuple[str, ...] = ()
    vpc_availability_zones: tuple[str, ...] = ()
    vpc_route_table_ids: tuple[str, ...] = ()
    vpc_endpoints: bool = True
    egress_domains: tuple[str, ...] = ()
    snap_start: bool = True
    bundle: bool = False
    python312: str | None = None
    build_dir: str | None = None

    def _validate_residency(self) -> None:
        if self.llm_residency not in RESIDENCIES:
            raise ConfigError(
                f"llm_residency {self.llm_residency!r}: 'global' or 'regional' (README, "
                '"Where prompts are processed")'
            )
        if self.llm_residency == "global":
            return
        for model in self.models_to_grant:
            if model.startswith("global."):
                hint = geography_of(self.region) if self.region else None
                instead = f"{hint}{model[len('global.') :]}" if hint else "a geography profile"
                raise ConfigError(
                    f"llm_residency regional: {model!r} is a global inference profile, which "
                    f"may process prompts in any commercial region; use {instead!r} (and list "
                    "its routing regions in bedrock_regions) or an in-region model id"
                )
            geo = next((g for g in GEOGRAPHIES if model.startswith(g)), None)
            if geo is None:
                continue
            if not self.bedrock_regions:
                raise ConfigError(
                    f"llm_residency regional: {model!r} is a geography profile; list the "
                    "regions it routes to in bedrock_regions (the Bedrock console's "
                    "cross-region inference page names them)"
                )
            outside = [r for r in self.bedrock_regions if not _in_geography(r, geo)]
            if outside:
                raise ConfigError(
                    f"llm_residency regional: bedrock_regions {', '.join(outside)} are outside "
                    f"the {geo.rstrip('.')} geography of {model!r}"
                )

    def _validate_model_limits(self) -> None:
        from langorch.domain.errors import DefinitionError
        from langorch.domain.model_limits import ModelLimits

        try:
            ModelLimits.parse(self.model_limits, providers=_PROVIDERS)
        except DefinitionError as exc:
            raise ConfigError(f'{exc}\n(README, "Model limits")') from None
        size = len(json.dumps(dict(self.model_limits or {})))
        if size > MAX_MODEL_LIMITS_CHARS:
            raise ConfigError(
                f"model_limits: {size:,} characters as JSON, past {MAX_MODEL_LIMITS_CHARS:,} (it "
                "travels in the runner's environment, 4 KB in all): cover models with patterns "
                '("bedrock:anthropic.*") rather than one key each'
            )

    def _validate_egress(self) -> None:
        for domain in self.http_allowed_domains or ():
            if not _DOMAIN.match(domain):
                raise ConfigError(
                    f"http_allowed_domains: {domain!r} is not a host name (api.example.com) "
                    "or a wildcard over a domain's subdomains (*.example.com)"
                )
        if self.otel not in OTEL_MODES:
            raise ConfigError(
                f"otel {self.otel!r}: 'off' or 'otlp' (README, \"Production checklist\")"
            )
        if self.otel == "off" and (self.otel_endpoint or self.otel_layer_arn):
            raise ConfigError("otel_endpoint and otel_layer_arn need otel: otlp")

    def _validate_llm_providers(self) -> None:
        sdks = _PROVIDERS[1:]
        for provider in self.llm_providers:
            if provider not in sdks:
                raise ConfigError(
                    f"llm_providers: {provider!r} is not a provider with an SDK: one of "
                    f"{', '.join(sdks)}"
                )
        if not self.llm_providers:
            return
        needed = {self.llm_provider} - {"offline"}
        needed |= {"bedrock"} if self.bedrock_models else set()
        missing = sorted(needed - set(self.llm_providers))
        if missing:
            raise ConfigError(
                f"llm_providers {list(self.llm_providers)} leaves out {', '.join(missing)}, "
                "which llm_provider or bedrock_models use: add it"
            )

    def _validate_mcp(self) -> None:
        for url in self.mcp_servers:
            if not _MCP_URL.match(url):
                raise ConfigError(
                    f"mcp_servers: {url!r} is not an http(s) URL without credentials (put "
                    "credentials in a secret listed in mcp_secrets)"
                )
        for name in self.mcp_secrets:
            if not _SECRET_NAME.match(name):
                raise ConfigError(
                    f"mcp_secrets: {name!r} is not a Secrets Manager secret name (letters, "
                    "digits and /_+=.@-, at most 512)"
                )

    def _validate_network(self) -> None:
        if self.network not in NETWORKS:
            raise ConfigError(
                f"network {self.network!r}: 'public' (no VPC) or 'vpc' (private subnets, VPC "
                'endpoints, egress through an allow-list: README, "Network: VPC and egress '
                'allow-list")'
            )
        vpc_settings = {
            "vpc_cidr": self.vpc_cidr,
            "vpc_id": self.vpc_id,
            "vpc_subnet_ids": self.vpc_subnet_ids,
            "vpc_availability_zones": self.vpc_availability_zones,
            "vpc_route_table_ids": self.vpc_route_table_ids,
            "egress_domains": self.egress_domains,
        }
        if self.network == "public":
            stray = [name for name, value in vpc_settings.items() if value]
            if stray:
                raise ConfigError(
                    f"{', '.join(stray)}: only with network: vpc; add -c network=vpc or remove them"
                )
            return
        for domain in self.egress_domains:
            if not _DOMAIN.match(domain):
                raise ConfigError(
                    f"egress_domains: {domain!r} is not a host name (api.example.com) or a "
                    "wildcard over a domain's subdomains (*.example.com)"
                )
        for url in self.mcp_servers:
            host = urllib.parse.urlsplit(url).hostname or ""
            if not _DOMAIN.match(host) or _is_address(host):
                raise ConfigError(
                    f"mcp_servers: {url!r}: with network: vpc a server is reached through "
                    "the egress firewall, which allows host names, not addresses: use the "
                    "server's DNS name"
                )
        if len(self.egress_allow_list) > MAX_ALLOWED_HOSTS:
            raise ConfigError(
                f"the egress allow-list has {len(self.egress_allow_list)} hosts, the firewall "
                f"holds {MAX_ALLOWED_HOSTS}: use wildcards (*.example.org) in "
                "http_allowed_domains and egress_domains"
            )
        if self.vpc_id is None:
            self._validate_created_vpc()
        else:
            self._validate_given_vpc()

    def _validate_created_vpc(self) -> None:
        given_only = ("vpc_subnet_ids", "vpc_availability_zones", "vpc_route_table_ids")
        stray = [name for name in given_only if getattr(self, name)]
        if stray:
            raise ConfigError(
                f"{', '.join(stray)} describe an existing VPC: set vpc_id too (or remove them "
                "to let the stack create the VPC)"
            )
        if self.vpc_cidr is None:
            return
        try:
            cidr = ipaddress.IPv4Network(self.vpc_cidr)
        except ValueError:
            cidr = None
        # Two zones of a /24 for the functions and /28s for the firewall and NAT: a /22 fits.
        if cidr is None or not 16 <= cidr.prefixlen <= 22:
            raise ConfigError(
                f"vpc_cidr {self.vpc_cidr!r}: an IPv4 network from /16 to /22 "
                "(e.g. 10.42.0.0/16), its host bits zero"
            )

    def _validate_given_vpc(self) -> None:
        assert self.vpc_id is not None
        if not _VPC_ID.match(self.vpc_id):
            raise ConfigError(f"vpc_id {self.vpc_id!r} is not a VPC id (vpc-0123456789abcdef0)")
        if self.vpc_cidr:
            raise ConfigError("vpc_cidr is for a VPC the stack creates: remove it with vpc_id")
        subnets, zones = self.vpc_subnet_ids, self.vpc_availability_zones
        if len(subnets) < 2 or not all(_SUBNET_ID.match(s) for s in subnets):
            raise ConfigError(
                f"vpc_subnet_ids {', '.join(subnets) or '(none)'}: two or more private subnet "
                "ids (subnet-…) of vpc_id, in different availability zones"
            )
        if len(zones) != len(subnets) or not all(_AZ.match(z) for z in zones):
            raise ConfigError(
                f"vpc_availability_zones {', '.join(zones) or '(none)'}: the zone of each of "
                f"the {len(subnets)} vpc_subnet_ids, in the same order (e.g. eu-west-1a)"
            )
        tables = self.vpc_route_table_ids
        if self.vpc_endpoints and (
            len(tables) != len(subnets) or not all(_ROUTE_TABLE_ID.match(t) for t in tables)
        ):
            raise ConfigError(
                f"vpc_route_table_ids {', '.join(tables) or '(none)'}: the route table (rtb-…) "
                f"of each of the {len(subnets)} vpc_subnet_ids, in the same order, where the "
                "DynamoDB and S3 gateway endpoints add their routes (or vpc_endpoints: false "
                "when the VPC has its endpoints already)"
            )

    @property
    def egress_allow_list(self) -> tuple[str, ...]:
        """The hosts the functions may reach on the internet with ``network: vpc``.

        ``http_allowed_domains`` (``http`` steps and ``http_get``), the API of each LLM provider
        the runner carries (``llm_providers``, else the default one), the MCP servers' hosts,
        Slack when approvals go there, a remote OTLP endpoint and ``egress_domains``; empty: AWS
        services only (through VPC endpoints).
        """
        hosts = [*(self.http_allowed_domains or ())]
        for provider in self.llm_providers or (self.llm_provider,):
            if provider in PROVIDER_HOSTS:
                hosts.append(PROVIDER_HOSTS[provider])
        hosts.extend(urllib.parse.urlsplit(url).hostname or "" for url in self.mcp_servers)
        if "slack" in self.approval_channels or self.slack_channel:
            hosts.append(SLACK_HOST)
        otlp = urllib.parse.urlsplit(self.otel_endpoint or "").hostname
        if self.otel == "otlp" and otlp and otlp not in ("localhost", "127.0.0.1"):
            hosts.append(otlp)
        hosts.extend(self.egress_domains)
        return tuple(dict.fromkeys(host.lower() for host in hosts if host))

    @property
    def prefix(self) -> str:
        """Prefix of physical names (functions, log groups, secrets): ``langorch-<stage>``."""
        return f"langorch-{self.stage}"

    @property
    def stack_name(self) -> str:
        """The CloudFormation stack name, what ``langorch … --stack NAME`` takes."""
        return self.prefix

    @property
    def models_to_grant(self) -> tuple[str, ...]:
        """Bedrock model ids the runner is allowed to invoke."""
        if self.bedrock_models:
            return self.bedrock_models
        if self.llm_provider == "bedrock" and self.llm_model:
            return (self.llm_model,)
        return ()

    @property
    def runner_extras(self) -> tuple[str, ...]:
        """The optional dependency groups of the runner's layer: its LLM providers' SDKs
        (``llm_providers``, else the default provider's and Bedrock's when models are granted)
        and the OpenTelemetry SDK with ``otel: otlp``."""
        providers = self.llm_providers
        if not providers:
            derived = {self.llm_provider} - {"offline"}
            derived |= {"bedrock"} if self.models_to_grant else set()
            providers = tuple(p for p in _PROVIDERS if p in derived)
        return (*providers, *(("otel",) if self.otel == "otlp" else ()))

    @classmethod
    def from_context(cls, get: Any) -> DeployConfig:
        """Build the configuration from CDK context.

        Args:
            get: ``node.try_get_context``; reads the ``langorch`` object of ``cdk.json``
                and single ``-c key=value`` overrides.

        Raises:
            ConfigError: a value is invalid.
        """
        base = get(CONTEXT_KEY) or {}
        if isinstance(base, str):
            base = json.loads(base)
        if not isinstance(base, dict):
            raise ConfigError(f"context {CONTEXT_KEY!r} must be an object, not {base!r}")
        values: dict[str, Any] = dict(base)
        for each in fields(cls):
            override = get(each.name)
            if override is not None:
                values[each.name] = override
        unknown = sorted(set(values) - {f.name for f in fields(cls)})
        if unknown:
            raise ConfigError(f"unknown langorch setting(s): {', '.join(unknown)}")
        return cls.parse(values)

    @classmethod
    def parse(cls, values: Mapping[str, Any]) -> DeployConfig:
        """Coerce and validate raw values (JSON from ``cdk.json`` or strings from ``-c``).

        Raises:
            ConfigError: a value is invalid; the message names the setting.
        """
        raw = dict(values)
        for name in (
            "default_approvers",
            "approval_channels",
            "bedrock_models",
            "bedrock_regions",
            "llm_providers",
            "bedrock_marketplace_products",
            "mcp_servers",
            "mcp_secrets",
            "event_workflows",
            "http_allowed_domains",
            "vpc_subnet_ids",
            "vpc_availability_zones",
            "vpc_route_table_ids",
            "egress_domains",
        ):
            if name in raw:
                raw[name] = tuple(_as_list(raw[name]))
        for name in (
            "retain_data",
            "bundle",
            "snap_start",
            "email",
            "trace_content",
            "vpc_endpoints",
        ):
            if name in raw:
                raw[name] = _as_bool(name, raw[name])
        for name in (
            "log_retention_days",
            "checkpoint_ttl_days",
            "api_rate_limit",
            "reconcile_minutes",
        ):
            if name in raw:
                raw[name] = _as_int(name, raw[name])
        if "api_burst_limit" in raw:
            raw["api_burst_limit"] = _as_int("api_burst_limit", raw["api_burst_limit"])
        if isinstance(raw.get("model_limits"), str) and raw["model_limits"]:
            raw["model_limits"] = _as_json("model_limits", raw["model_limits"])
        for name, value in list(raw.items()):
            if value == "":
                raw[name] = None
        _parse_edge(raw)
        config = cls(**raw)
        config._validate()
        return config

    def _validate(self) -> None:
        self._validate_model_limits()
        self._validate_mcp()
        self._validate_egress()
        self._validate_residency()
        self._validate_network()
        from langorch.domain.approvals.channels import UnknownChannelError, channels_of

        try:
            channels_of(self.approval_channels, ())
        except UnknownChannelError as exc:
            raise ConfigError(f"approval_channels: {exc}") from None
        if self.slack_channel is not None and not re.fullmatch(
            r"[CG][A-Z0-9]{6,}", self.slack_channel
        ):
            raise ConfigError(
                f"slack_channel {self.slack_channel!r} is not a Slack channel id (C0123456789: "
                "in Slack, the channel's details show it at the bottom)"
            )
        if not _STAGE.match(self.stage):
            raise ConfigError(
                f"stage {self.stage!r}: lowercase letters, digits and '-', at most 20, "
                "starting with a letter"
            )
        if not _EMAIL.match(self.sender_email):
            raise ConfigError(f"sender_email {self.sender_email!r} is not an email address")
        if self.sender_email == PLACEHOLDER_SENDER:
            raise ConfigError(
                f"sender_email is still the placeholder {PLACEHOLDER_SENDER}, which SES cannot "
                "verify: set an address you receive mail at (or one at a domain you own) in "
                'cdk.json\'s "langorch" settings or with CDK_ARGS="-c sender_email=you@your.domain"'
            )
        if self.email and self.region in NO_SES_REGIONS:
            raise ConfigError(
                f"region {self.region} has no SES, so approval emails cannot be sent from it "
                f"(nor from {', '.join(r for r in NO_SES_REGIONS if r != self.region)}): deploy "
                'with -c email=off -c approval_channels=console (or "console,slack" with the '
                'Slack app: README, "Approvals in Slack"), or in a region with SES'
            )
        if not self.email and "email" in self.approval_channels:
            raise ConfigError(
                "approval_channels names email but email is off: choose console and/or slack "
                "(-c approval_channels=console)"
            )
        if self.ses_identity not in _SES_IDENTITY:
            raise ConfigError(
                f"ses_identity {self.ses_identity!r}: 'create' (the stack creates and verifies "
                "the identity) or 'existing' (it is already verified in this account and region)"
            )
        if self.ses_domain and not self.sender_email.lower().endswith(
            "@" + self.ses_domain.lower()
        ):
            raise ConfigError(
                f"sender_email {self.sender_email!r} is not at ses_domain {self.ses_domain!r}: "
                "SES only sends from the verified domain's addresses"
            )
        for approver in self.default_approvers:
            if not _EMAIL.match(approver):
                raise ConfigError(f"default_approvers: {approver!r} is not an email address")
        if self.llm_provider not in _PROVIDERS:
            raise ConfigError(f"llm_provider {self.llm_provider!r}: one of {', '.join(_PROVIDERS)}")
        if self.runs_indexes not in _RUNS_INDEXES:
            raise ConfigError(
                f"runs_indexes {self.runs_indexes!r}: 'lean' (a new stack) or 'full' (a stack "
                'deployed before the lean indexes; README, "Upgrading a stack")'
            )
        self._validate_llm_providers()
        if self.sfn_log_level not in _LOG_LEVELS:
            raise ConfigError(
                f"sfn_log_level {self.sfn_log_level!r}: one of {', '.join(_LOG_LEVELS)}"
            )
        if self.public_base_url and not self.public_base_url.startswith("https://"):
            raise ConfigError(f"public_base_url {self.public_base_url!r} must be https://")
        if bool(self.domain_name) != bool(self.certificate_arn):
            raise ConfigError("domain_name and certificate_arn go together: set both or neither")
        if self.hosted_zone_id and not self.domain_name:
            raise ConfigError(
                "hosted_zone_id is where domain_name's DNS records go: set domain_name and "
                "certificate_arn too, or leave hosted_zone_id unset"
            )
        if self.checkpoint_ttl_days < 1:
            raise ConfigError("checkpoint_ttl_days must be at least 1")
        if not 0 <= self.reconcile_minutes <= 1440:
            raise ConfigError(
                f"reconcile_minutes {self.reconcile_minutes}: between 1 and 1440 (a day), "
                "or 0 for no reconcile schedule"
            )
        if self.kms not in ("managed", "cmk") and not _KEY_ARN.match(self.kms):
            raise ConfigError(
                f"kms {self.kms!r}: 'managed' (AWS-managed keys), 'cmk' (the stack creates a "
                "customer-managed key) or a key ARN (arn:aws:kms:<region>:<account>:key/<id>)"
            )
        if self.waf is not None and self.webhook_authorizer is not None:
            raise ConfigError(
                "webhook_authorizer is an HTTP API JWT authorizer, and with waf the API is a "
                "REST API, which has none: choose one (webhooks keep their signatures either "
                'way; README, "Production checklist")'
            )
        if self.log_retention_days not in RETENTION_DAYS:
            allowed = ", ".join(str(d) for d in RETENTION_DAYS)
            raise ConfigError(
                f"log_retention_days {self.log_retention_days}: CloudWatch Logs allows {allowed}"
            )


WAF_RATE_LIMITS = (10, 2_000_000_000)
"""What AWS WAF accepts as a rate-based rule's limit (requests per 5 minutes per IP)."""


@dataclass(frozen=True)
class Waf:
    """The ``waf`` setting: the web ACL in front of the public API.

    Attributes:
        rate_limit_per_5min: requests one source IP may make in any 5 minutes before WAF
            blocks it (until its rate falls back under the limit).
    """

    rate_limit_per_5min: int


@dataclass(frozen=True)
class JwtAuthorizer:
    """The ``webhook_authorizer`` setting: who issues the senders' tokens, and for whom.

    Attributes:
        issuer: the token issuer URL (``https://…``, its ``iss`` claim); API Gateway reads its
            keys from ``<issuer>/.well-known/openid-configuration``.
        audience: accepted ``aud`` (or ``client_id``) values; at least one.
    """

    issuer: str
    audience: tuple[str, ...]


def _parse_edge(raw: dict[str, Any]) -> None:
    """``waf`` and ``webhook_authorizer`` from an object (cdk.json) or its JSON (``-c``)."""
    for name in ("waf", "webhook_authorizer"):
        if isinstance(raw.get(name), str | bool) and str(raw[name]).strip().lower() in (
            "off",
            "false",
        ):
            raw[name] = None
    if raw.get("waf") is not None:
        waf = _as_object("waf", raw["waf"], {"rate_limit_per_5min": 2000})
        unknown = sorted(set(waf) - {"rate_limit_per_5min"})
        if unknown:
            raise ConfigError(f"waf: unknown key(s) {', '.join(unknown)} (rate_limit_per_5min)")
        limit = _as_int("waf.rate_limit_per_5min", waf.get("rate_limit_per_5min"))
        low, high = WAF_RATE_LIMITS
        if not low <= limit <= high:
            raise ConfigError(
                f"waf.rate_limit_per_5min {limit}: between {low} and {high:,} requests per "
                "source IP in 5 minutes (AWS WAF's range)"
            )
        raw["waf"] = Waf(rate_limit_per_5min=limit)
    if raw.get("webhook_authorizer") is not None:
        jwt = _as_object("webhook_authorizer", raw["webhook_authorizer"], None)
        issuer = str(jwt.get("issuer") or "")
        audience = tuple(_as_list(jwt.get("audience") or []))
        unknown = sorted(set(jwt) - {"issuer", "audience"})
        if unknown or not issuer.startswith("https://") or not audience:
            raise ConfigError(
                "webhook_authorizer: {issuer: https://<your identity provider>, audience: "
                "[<accepted aud values>]}, both required"
                + (f"; unknown key(s) {', '.join(unknown)}" if unknown else "")
            )
        raw["webhook_authorizer"] = JwtAuthorizer(issuer=issuer, audience=audience)


def _as_object(name: str, value: Any, on: dict[str, Any] | None) -> dict[str, Any]:
    """A setting given as an object, as its JSON (``-c name='{…}'``), or ``on`` (defaults)."""
    if isinstance(value, Waf | JwtAuthorizer):
        return {k: getattr(value, k) for k in value.__dataclass_fields__}
    if on is not None and _is_on(value):
        return on
    if isinstance(value, str):
        with contextlib.suppress(ValueError):  # not JSON: refused below, by name
            value = json.loads(value)
    if not isinstance(value, dict):
        raise ConfigError(f"{name} {value!r}: an object, e.g. {name}='{{…}}' with -c")
    return value


def _is_on(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in ("true", "on"))


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _as_list(value: Any) -> list[str]:
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    text = str(value).strip()
    if not text:
        return []
    if text.startswith("["):
        return [str(v) for v in json.loads(text)]
    return [part.strip() for part in text.split(",") if part.strip()]


def _as_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off", ""):
        return False
    raise ConfigError(f"{name} {value!r}: true or false")


def _as_int(name: str, value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{name} {value!r}: a whole number") from exc


def _as_json(name: str, value: str) -> Any:
    """A ``-c name=…`` value that is an object in cdk.json, given as JSON text."""
    try:
        return json.loads(value)
    except ValueError as exc:
        raise ConfigError(
            f"{name}: not JSON ({exc}); in cdk.json write an object, with -c the same object "
            f'as JSON, e.g. -c \'{name}={{"openai": {{"concurrency": 8}}}}\''
        ) from None
