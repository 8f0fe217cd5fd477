"""Provider settings: where the OpenAI-compatible API, Anthropic's API and Bedrock are, and how
to call them.

Plain data, no SDK: the registry holds them from start-up, the providers read them at the
first call. The composition root fills them from :class:`langorch.config.Settings`.
"""

from __future__ import annotations

from dataclasses import dataclass

OPENAI_TIMEOUT_SECONDS = 120.0
"""Per-request timeout when the step gives no tighter one."""


@dataclass(frozen=True)
class OpenAISettings:
    """Where and how to reach an OpenAI-compatible API.

    Attributes:
        base_url: ``None``: api.openai.com. Azure OpenAI:
            ``https://RESOURCE.openai.azure.com/openai/v1/``; vLLM, LiteLLM, a proxy: its URL.
        organization: ``OpenAI-Organization`` header.
        project: ``OpenAI-Project`` header.
        timeout_seconds: Per-request timeout (a step's remaining time may cut it shorter).
    """

    base_url: str | None = None
    organization: str | None = None
    project: str | None = None
    timeout_seconds: float = OPENAI_TIMEOUT_SECONDS


ANTHROPIC_TIMEOUT_SECONDS = 120.0
"""Per-request timeout of Anthropic's API when the step gives no tighter one."""


@dataclass(frozen=True)
class AnthropicSettings:
    """Where and how to reach Anthropic's API.

    Attributes:
        base_url: ``None``: https://api.anthropic.com; else a proxy or gateway serving it.
        timeout_seconds: Per-request timeout (a step's remaining time may cut it shorter).
    """

    base_url: str | None = None
    timeout_seconds: float = ANTHROPIC_TIMEOUT_SECONDS


@dataclass(frozen=True)
class BedrockSettings:
    """How to reach Bedrock.

    Attributes:
        region: Bedrock's region (default: the deployment's).
        inference_profile: A cross-region profile prefix (``us``, ``eu``, ``global``, …) put
            in front of model ids that carry none; ``None``: ids are sent as written (the
            default model still gets :data:`DEFAULT_INFERENCE_PROFILE`).
        guardrail_id: A Bedrock guardrail applied to every call.
        guardrail_version: Its version (``DRAFT`` or a number).
    """

    region: str = "us-east-1"
    inference_profile: str | None = None
    guardrail_id: str | None = None
    guardrail_version: str | None = None
