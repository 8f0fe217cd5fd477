"""Settings, read once at the composition root (``LANGORCH_*`` environment variables).

Nothing else reads the environment. Tests and the local stack build a ``Settings`` with their
own endpoint and names and pass it to :func:`langorch.composition.container.build_container`.

``Settings()`` reads the environment as pydantic-settings' ``BaseSettings`` would (this model
was one until the CLI's start-up time mattered, issue 26: that package imports asyncio, dotenv
and its own CLI, a fifth of a local ``langorch runs list``'s imports): a field's variable is
``LANGORCH_<FIELD>`` (any case), or the names of its ``validation_alias``; a list or dict field
takes JSON; a value passed to the constructor (or in ``Settings.model_validate``'s mapping)
wins over the environment.
"""

from __future__ import annotations

import json
import os
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

ENV_PREFIX = "LANGORCH_"
"""A field's environment variable is this prefix and its name (unless it has aliases)."""

_JSON_TYPES = (list, dict, set, frozenset, tuple)
"""Annotations whose values the environment gives as JSON."""


class SettingsError(ValueError):
    """A setting in the environment that cannot be read (a list or dict that is not JSON)."""


class Settings(BaseModel):
    """Where langorch's resources are and how it behaves by default."""

    model_config = ConfigDict(extra="ignore", validate_default=True)

    def __init__(self, **values: Any) -> None:
        """Settings from ``values``, then the environment (:func:`from_environment`), then the
        defaults.

        Raises:
            SettingsError: a list or dict setting in the environment is not JSON.
            pydantic.ValidationError: a value is out of its range or of the wrong type.
        """
        super().__init__(**{**from_environment(os.environ), **values})

    region: str = "us-east-1"
    endpoint_url: str | None = None
    """AWS endpoint override: the local emulator in dev mode and tests; ``None`` in the cloud."""
    local_home: str | None = None
    """The embedded default: the folder whose SQLite file (``langorch.db``) and ``bucket/``
    folder hold every store — runs, approvals, definitions, checkpoints, memory, secrets,
    schedules, log lines and dropped files (``langorch.composition.embedded``). ``None``: the
    cloud's stores (DynamoDB, S3, Secrets Manager, Scheduler, CloudWatch Logs)."""

    artifacts_dir: str | None = None
    """Local mode: where the files runs attach are kept (default ``<home>/bucket/artifacts``;
    ``runs start --local --artifacts DIR`` keeps them past the command's temporary home)."""

    definitions_table: str = "langorch-definitions"
    runs_table: str = "langorch-runs"
    checkpoints_table: str = "langorch-checkpoints"
    memory_table: str = "langorch-memory"
    bucket: str = "langorch-files"
    """Drop bucket; checkpoint payloads too large for DynamoDB are offloaded under
    ``checkpoint_prefix``."""
    file_reader_role_arn: str | None = None
    """A role ``read_file`` steps read the bucket with (the deployed stack's: it may read
    files and is explicitly denied the checkpoint prefix). Unset: the process's credentials."""
    checkpoint_prefix: str = "checkpoints"
    resource_queue_cap: int = Field(default=1000, ge=1, le=100_000)
    """Waiters one resource's queue (a step's ``resource``, a workflow's ``concurrency`` key) may
    hold; past it an acquire is refused with ``QueueFullError`` instead of queued."""
    model_limits: dict[str, Any] = Field(default_factory=dict)
    """Per-model and per-provider limits on LLM calls (issue 33), as JSON in
    ``LANGORCH_MODEL_LIMITS`` (cdk.json's ``model_limits``): ``{"bedrock:anthropic.claude*":
    {"concurrency": 4, "rate": "60/1m"}, "openai": {"concurrency": 8}}``. A call over a limit
    waits (its run parks), never fails: :mod:`langorch.domain.model_limits`."""

    @field_validator("model_limits")
    @classmethod
    def _model_limits(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value:
            from langorch.domain.errors import DefinitionError
            from langorch.domain.model_limits import ModelLimits
            from langorch.llm.names import KNOWN_PROVIDERS

            try:
                ModelLimits.parse(value, providers=KNOWN_PROVIDERS)
            except DefinitionError as exc:
                raise ValueError(f"{exc}\n(LANGORCH_MODEL_LIMITS, as JSON)") from None
        return value

    default_llm_provider: str = "offline"
    default_llm_model: str | None = None
    """Model of the default provider for steps, blocks and workflows that name none."""
    default_llm_max_tokens: int | None = Field(default=None, ge=1)
    """Output token limit for LLM steps whose block and workflow set none."""
    default_llm_temperature: float | None = Field(default=None, ge=0, le=2)
    """Temperature for LLM steps whose block and workflow set none."""
    prices_file: str | None = None
    """LLM prices over the shipped ones (a JSON or YAML file of ``provider/model`` to US
    dollars per million tokens, :mod:`langorch.domain.prices`)."""
    tool_policies_file: str | None = None
    """The deployment's tool-call rules (a JSON or YAML list, :mod:`langorch.domain.tool_policies`),
    weighed with each tool server's and workflow's, the strictest winning."""
    offline_script: str | None = None
    """Scripted answers for the offline provider (a JSON or YAML file)."""
    openai_api_key: str | None = Field(
        default=None,
        validation_alias=AliasChoices(
            "LANGORCH_OPENAI_API_KEY", "OPENAI_API_KEY", "openai_api_key"
        ),
        repr=False,
    )
    """From ``LANGORCH_OPENAI_API_KEY`` or ``OPENAI_API_KEY``; a deployment reads it from
    Secrets Manager (``llm_api_key_secret``). Never written to disk (``stack.json``)."""
    anthropic_api_key: str | None = Field(
        default=None,
        validation_alias=AliasChoices(
            "LANGORCH_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY", "anthropic_api_key"
        ),
        repr=False,
    )
    """From ``LANGORCH_ANTHROPIC_API_KEY`` or ``ANTHROPIC_API_KEY``; a deployment reads it from
    Secrets Manager (``llm_api_key_secret``'s ``anthropic_api_key``, or its ``api_key`` when
    ``anthropic`` is the default provider). Never written to disk (``stack.json``)."""
    anthropic_base_url: str | None = None
    """A proxy or gateway serving Anthropic's API. ``None``: https://api.anthropic.com."""
    anthropic_timeout_seconds: float = Field(default=120.0, gt=0, le=900)
    """Per-request timeout; a step's remaining ``timeout_seconds`` cuts it shorter."""
    openai_base_url: str | None = None
    """An OpenAI-compatible endpoint: Azure OpenAI (``https://RESOURCE.openai.azure.com/openai/v1/``),
    vLLM, LiteLLM, a company proxy. ``None``: api.openai.com."""
    openai_organization: str | None = None
    openai_project: str | None = None
    openai_timeout_seconds: float = Field(default=120.0, gt=0, le=900)
    """Per-request timeout; a step's remaining ``timeout_seconds`` cuts it shorter."""
    bedrock_region: str | None = None
    """Bedrock's region (default: ``region``)."""
    bedrock_endpoint_url: str | None = None
    """A Bedrock VPC endpoint (or a test server). Never ``endpoint_url``: the emulator has no
    Bedrock, and its fake credentials would replace the user's."""
    bedrock_inference_profile: str | None = None
    """Cross-region inference profile prefix (``us``, ``eu``, ``apac``, ``global``, …) put in
    front of Bedrock model ids that have none."""
    bedrock_guardrail_id: str | None = None
    bedrock_guardrail_version: str | None = None
    """``DRAFT`` or a version number (default ``DRAFT`` when an id is set)."""

    memory_embedding_model: str | None = Field(default=None, pattern=r"^(bedrock|openai):.+")
    """``query_memory`` searches by meaning with this model: ``bedrock:<model id>`` (e.g.
    ``bedrock:amazon.titan-embed-text-v2:0``) or ``openai:<model>`` (e.g.
    ``openai:text-embedding-3-small``). ``None``: by keyword."""
    memory_min_score: float = Field(default=0.35, ge=-1, le=1)
    """The least cosine similarity of a match by meaning."""

    tool_max_calls_per_step: int = Field(default=8, ge=1, le=100)
    """Tool calls one attempt of a step may make; later calls are refused (told to the model)."""
    http_allowed_domains: list[str] | None = None
    """The hosts ``http`` steps and the ``http_get`` tool may reach (``example.com`` exactly,
    ``*.example.com`` its subdomains); a refused call fails the step (``http``) or is told to
    the model (``http_get``), named on the timeline. ``None``: any public host."""
    tool_server_urls: list[str] | None = None
    """The MCP server URLs registered tools may use (the deployed stack's ``mcp_servers``);
    ``None``: any (local mode). A registered tool with another URL is refused at run time."""
    tool_call_timeout_seconds: float = Field(default=30.0, gt=0, le=900)
    """Seconds one tool call may take; a slower call is told to the model as an error."""
    otel_exporter: Literal["none", "console", "otlp"] = "none"
    """OpenTelemetry traces of runs, one trace per run across its segments with GenAI spans for
    LLM and tool calls (:mod:`langorch.adapters.otel`): ``otlp`` sends them to ``otel_endpoint``
    (a collector; the ADOT Lambda layer's), ``console`` prints them (``langorch dev --trace
    console``). ``none``: X-Ray only (Powertools), the default."""
    otel_endpoint: str = "http://localhost:4318/v1/traces"
    """The OTLP/HTTP traces URL (the ADOT Lambda layer's collector listens here)."""
    trace_content: bool = False
    """Put prompts, outputs, tool arguments and error messages in spans (off: ids, models,
    token counts, costs and durations only)."""
    segment_budget_seconds: float = 600.0
    """A segment stops at the next step boundary after this long and returns ``continue``: the
    safety net that ends every segment before its Lambda's timeout."""
    segment_budget_supersteps: int | None = Field(default=None, ge=1)
    """A segment also stops after this many supersteps (a superstep runs every step whose
    inputs are ready) and returns ``continue``: a budget in work, so a run is cut into the same
    segments on any machine, however loaded. ``None``: the time budget alone."""
    pause_recheck_seconds: int = Field(default=3600, ge=1, le=365 * 86_400)
    """How long an execution parked on a pause waits before it looks again whether the run
    was resumed (a resume wakes it at once; this is the fallback for a wake-up that was lost)."""
    execution_history_limit: int = Field(default=24_000, ge=50, le=25_000)
    """The history events a run's execution may reach before the run continues in a fresh
    execution (continue-as-new). Step Functions fails an execution at 25,000; the 1,000 kept
    back are room for the events of retries, which the count (from the shipped state machine,
    ``langorch.domain.history``) does not see."""
    checkpoint_ttl_days: int | None = 30
    default_approvers: list[str] = []

    # --- The event pipeline (issue 3) ---
    state_machine_arn: str | None = None
    """The run state machine; runs start as executions named by their run id."""
    trigger_function_arn: str | None = None
    """What EventBridge Scheduler schedules invoke."""
    scheduler_group: str = "langorch"
    scheduler_role_arn: str | None = None
    """The role schedules assume to invoke the trigger function."""
    schedule_dlq_arn: str | None = None
    """Where the Scheduler puts a schedule's event it could not deliver after its retries."""
    dead_letter_queues: str = ""
    """The stack's dead-letter queues as ``name=ARN`` pairs, comma-separated (its
    ``DeadLetterQueues`` output), for ``langorch queues redrive``; empty: none (the local
    stack delivers its events in process)."""
    public_base_url: str = "http://127.0.0.1:8787"
    """Approval links are built from this, never from request headers."""
    sender_email: str = "langorch@example.com"
    ses_configuration_set: str | None = None
    """A configuration set without click tracking (SES must not rewrite approval links)."""
    outbox_dir: str | None = None
    """Local mode: emails are written here (and their links printed) instead of sent."""
    link_signing_secret: str = "langorch/link-signing-key"  # noqa: S105 - a name, not a value
    approval_form_dwell_seconds: float = 2.0
    """An approval form decides only this long after its page view (mail scanners that submit
    forms at once are asked to press again); 0 turns the check off."""
    """Secrets Manager secret: ``{"current": KEY_ID, "keys": {KEY_ID: base64 key, ...}}``."""
    approval_channels: list[str] = Field(default_factory=lambda: ["email", "console"])
    """Where approval requests go when their step names no ``channels``."""
    slack_secret: str = "langorch/slack"  # noqa: S105 - a name, not a value
    """Secrets Manager secret: ``{"bot_token": "xoxb-…", "signing_secret": "…"}``."""
    slack_channel: str | None = None
    """Post approval requests in this Slack channel (id ``C…``); unset: a DM to each approver."""
    slack_users: dict[str, str] = Field(default_factory=dict)
    """Slack user id -> approver address; wins over the address Slack's profile shows."""
    slack_base_url: str | None = None
    """Slack's Web API URL (``langorch dev`` points it at its fake Slack on loopback)."""
    console_url: str | None = None
    """Where the operator console is served; a chat message's Details button opens the
    approval there (unset: the approval callback's URL, which asks for the emailed link)."""
    webhook_secret_prefix: str = "langorch/webhooks/"  # noqa: S105 - a name prefix
    """Per-workflow webhook secret: ``{"current": ..., "previous": ...}`` under this prefix."""
    llm_api_key_secret: str | None = None
    """Secrets Manager secret holding the LLM keys (cloud): ``{"api_key": ...}`` for OpenAI
    (or for Anthropic when it is the default provider), ``"openai_api_key"`` and
    ``"anthropic_api_key"`` to hold both."""
    webhook_max_body_bytes: int = 262_144
    webhook_tolerance_seconds: int = 300
    log_group_prefix: str = "/aws/lambda/"


def from_environment(env: Mapping[str, str]) -> dict[str, Any]:
    """The settings ``env`` gives, by field name, as :class:`Settings` reads them.

    Args:
        env: the environment (names compared in any case).

    Raises:
        SettingsError: a list or dict setting is not JSON.
    """
    by_name = {name.lower(): name for name in env}
    found: dict[str, Any] = {}
    for field, info in Settings.model_fields.items():
        alias = info.validation_alias
        names = (
            [str(choice) for choice in alias.choices]
            if isinstance(alias, AliasChoices)
            else [ENV_PREFIX + field]
        )
        variable = next((by_name[name.lower()] for name in names if name.lower() in by_name), None)
        if variable is None:
            continue
        value = env[variable]
        if _takes_json(info.annotation):
            try:
                found[field] = json.loads(value)
            except ValueError as exc:
                raise SettingsError(
                    f"{variable} is not JSON ({exc}): a list or dict setting is written as JSON, "
                    'e.g. ["a@example.com"] or {"U123": "a@example.com"}'
                ) from None
        else:
            found[field] = value
    return found


def _takes_json(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_takes_json(arg) for arg in typing.get_args(annotation))
    return origin in _JSON_TYPES or annotation in _JSON_TYPES
