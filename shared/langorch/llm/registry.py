"""The one entry point the engine calls: pick the provider, call it, check the answer."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from langorch.llm.base import LLMCallError, LLMProvider, LLMRequest, LLMResult
from langorch.llm.names import KNOWN_PROVIDERS as KNOWN_PROVIDERS  # re-exported
from langorch.llm.offline import OfflineProvider
from langorch.llm.schema import validate_outputs
from langorch.llm.settings import AnthropicSettings, BedrockSettings, OpenAISettings


class LLMRegistry:
    """Providers by name, built on first use, with the answer validated for every provider.

    Building the registry reads the offline script (so a bad script fails at start-up) but
    imports no LLM SDK and fetches no key: Bedrock, OpenAI and Anthropic are set up by
    :meth:`prepare`, which a step calls before its time starts, or else by their first call.

    Args:
        default_provider: Used when a request's ``provider`` is empty.
        default_model: Used when a request names no model *and* goes to the default
            provider (a model id of one provider means nothing to another).
        offline_script: Scripted answers for the offline provider: a JSON or YAML file, or an
            already parsed mapping.
        openai_api_key: The OpenAI key, or a function returning it (read at the first call).
        openai_base_url: An OpenAI-compatible endpoint instead of api.openai.com.
        bedrock_client_factory: Returns a boto3 ``bedrock-runtime`` client for a read timeout
            in seconds, making one attempt per call (``adapters.aws.bedrock_runtime_client``).
        region: Bedrock region when no client factory is given.
        openai: OpenAI settings (base URL, organisation, project, timeout); ``openai_base_url``
            overrides its base URL.
        bedrock: Bedrock settings (region, inference profile, guardrail); ``region`` is used
            when it is not given.
        default_max_tokens: Output token limit for requests that set none.
        default_temperature: Temperature for requests that set none.
        anthropic_api_key: The Anthropic key, or a function returning it (read at the first
            call).
        anthropic: Anthropic settings (base URL, timeout).

    Raises:
        LLMCallError: ``default_provider`` is not a known provider.
        OfflineScriptError: The offline script cannot be read or is badly shaped.
    """

    def __init__(
        self,
        *,
        default_provider: str = "offline",
        default_model: str | None = None,
        offline_script: str | Path | dict[str, Any] | None = None,
        openai_api_key: Callable[[], str | None] | str | None = None,
        openai_base_url: str | None = None,
        bedrock_client_factory: Callable[[float], Any] | None = None,
        region: str = "us-east-1",
        openai: OpenAISettings | None = None,
        bedrock: BedrockSettings | None = None,
        default_max_tokens: int | None = None,
        default_temperature: float | None = None,
        anthropic_api_key: Callable[[], str | None] | str | None = None,
        anthropic: AnthropicSettings | None = None,
    ) -> None:
        _check_provider(default_provider)
        self._default_provider = default_provider
        self._default_model = default_model
        self._openai_api_key = openai_api_key
        self._openai = openai or OpenAISettings()
        if openai_base_url is not None:
            self._openai = replace(self._openai, base_url=openai_base_url)
        self._bedrock = bedrock or BedrockSettings(region=region)
        self._bedrock_client_factory = bedrock_client_factory
        self._anthropic_api_key = anthropic_api_key
        self._anthropic = anthropic or AnthropicSettings()
        self._default_max_tokens = default_max_tokens
        self._default_temperature = default_temperature
        self._providers: dict[str, LLMProvider] = {
            "offline": OfflineProvider(offline_script),
        }
        self._lock = threading.Lock()

    def provider(self, name: str) -> LLMProvider:
        """The provider called ``name``, built on first use (no SDK import until it answers).

        Raises:
            LLMCallError: ``name`` is not in :data:`KNOWN_PROVIDERS`.
        """
        _check_provider(name)
        with self._lock:
            if name not in self._providers:
                self._providers[name] = self._build(name)
            return self._providers[name]

    def prepare(self, name: str, seconds: float | None = None) -> None:
        """Load what a call to ``name`` (empty: the default provider) needs — its SDK, its key,
        a client for ``seconds`` — so that none of it is paid inside a step's time.

        Importing an LLM SDK cold takes seconds: a step that paid it inside its
        ``timeout_seconds`` lost its first attempt before sending a request. Steps call this
        from outside their timeout (``langorch.engine.kinds.llm``); a provider prepared once
        returns at once.

        Raises:
            LLMCallError: ``name`` is not a known provider.
            ProviderNotAvailableError: its SDK or key is missing.
        """
        self.provider(name or self._default_provider).prepare(seconds)

    def invoke(self, request: LLMRequest) -> LLMResult:
        """Answer ``request`` from synchronous code; see :meth:`ainvoke`."""
        name, request = self._prepare(request)
        return self._checked(request, self.provider(name).invoke(request))

    async def ainvoke(self, request: LLMRequest) -> LLMResult:
        """Answer ``request`` with its provider (or the default) and validate the answer.

        Cancelling the awaiting task abandons the provider's HTTP request.

        Returns:
            The result whose ``outputs`` hold exactly the output keys (plus ``branch`` for a
            decision), each coerced to its declared type where that is safe.

        Raises:
            ProviderNotAvailableError: The provider's SDK, key or credentials are missing.
            LLMError: The provider failed (see ``retryable`` and :mod:`langorch.llm.errors`),
                a key is missing from the answer, a value has the wrong type, or the branch is
                not one of the choices.
        """
        name, request = self._prepare(request)
        return self._checked(request, await self.provider(name).ainvoke(request))

    def _prepare(self, request: LLMRequest) -> tuple[str, LLMRequest]:
        name = request.provider or self._default_provider
        _check_provider(name)
        # Tool names are not refused here: a block may name a tool nothing binds yet (seed
        # 000's `browser`, accepted with a warning at `put`). The step's toolbox binds the
        # built-in and registered tools and fails the step if the model calls another.
        changes: dict[str, Any] = {}
        if request.model is None and name == self._default_provider and self._default_model:
            changes["model"] = self._default_model
        if request.max_tokens is None and self._default_max_tokens is not None:
            changes["max_tokens"] = self._default_max_tokens
        if request.temperature is None and self._default_temperature is not None:
            changes["temperature"] = self._default_temperature
        return name, replace(request, **changes) if changes else request

    @staticmethod
    def _checked(request: LLMRequest, result: LLMResult) -> LLMResult:
        try:
            outputs = validate_outputs(request, result.outputs)
        except LLMCallError as exc:
            # The answer was billed even though it does not fit the block.
            exc.input_tokens, exc.output_tokens = result.input_tokens, result.output_tokens
            raise
        return LLMResult(
            outputs=outputs,
            provider=result.provider,
            model=result.model,
            input_tokens=result.input_tokens,
            output_tokens=result.output_tokens,
        )

    def _build(self, name: str) -> LLMProvider:
        default_model = self._default_model if name == self._default_provider else None
        if name == "openai":
            from langorch.llm.openai import OpenAIProvider

            return OpenAIProvider(
                api_key=self._openai_api_key, default_model=default_model, settings=self._openai
            )
        if name == "anthropic":
            from langorch.llm.anthropic import AnthropicProvider

            return AnthropicProvider(
                api_key=self._anthropic_api_key,
                default_model=default_model,
                settings=self._anthropic,
            )
        from langorch.llm.bedrock import BedrockProvider

        return BedrockProvider(
            client_factory=self._bedrock_client_factory,
            default_model=default_model,
            settings=self._bedrock,
        )


def _check_provider(name: str) -> None:
    if name not in KNOWN_PROVIDERS:
        raise LLMCallError(
            f"unknown LLM provider {name!r}; known providers: {', '.join(sorted(KNOWN_PROVIDERS))}"
        )
