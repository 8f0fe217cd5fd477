"""OpenAI (and OpenAI-compatible servers) through ``langchain-openai``'s ``ChatOpenAI``.

``langchain_openai`` and ``openai`` are imported when the first call is made, never at import
time (ARCHITECTURE §2, PERFORMANCE P3).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langorch.domain.errors import LLMError
from langorch.llm._langchain import ChatProvider
from langorch.llm.base import LLMCallError, LLMRequest, ProviderUnavailableError
from langorch.llm.schema import is_strict_compatible

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
OPENAI_TIMEOUT_SECONDS = 120.0

_RETRYABLE_STATUS = frozenset({408, 409, 429})

ApiKey = Callable[[], str | None] | str | None
"""The API key, or a function that fetches it (from Secrets Manager) on first use."""


class OpenAIProvider(ChatProvider):
    """Structured answers from OpenAI's chat-completions API.

    Args:
        api_key: The key or a function returning it; called at the first call, not before.
        base_url: An OpenAI-compatible endpoint (``None``: the SDK's default).
        default_model: Model used when a request names none.
        timeout_seconds: Per-HTTP-request timeout.
    """

    name = "openai"
    label = "OpenAI"

    def __init__(
        self,
        *,
        api_key: ApiKey = None,
        base_url: str | None = None,
        default_model: str | None = None,
        timeout_seconds: float = OPENAI_TIMEOUT_SECONDS,
    ) -> None:
        super().__init__(default_model or DEFAULT_OPENAI_MODEL)
        self._api_key = api_key
        self._base_url = base_url
        self._timeout = timeout_seconds

    def _structured_options(self, request: LLMRequest) -> dict[str, Any]:
        # A JSON-schema response format, strict when every output is a plain scalar.
        strict = True if is_strict_compatible(request) else None
        return {"method": "json_schema", "strict": strict}

    def _translate(self, exc: Exception) -> LLMError:
        return translate_openai_error(exc)

    def _new_chat(self, model: str, temperature: float | None) -> Any:
        try:
            from langchain_openai import ChatOpenAI
        except ImportError as exc:
            raise ProviderUnavailableError(
                "the openai provider needs langchain-openai: pip install 'langorch[openai]'"
            ) from exc
        api_key = self._api_key() if callable(self._api_key) else self._api_key
        if not api_key:
            raise ProviderUnavailableError(
                "the openai provider has no API key: store it in Secrets Manager for the "
                "deployment, or set LANGORCH_OPENAI_API_KEY for local use"
            )
        options: dict[str, Any] = {
            "model": model,
            "api_key": api_key,
            "base_url": self._base_url,
            # Retries belong to the step (max_retries with backoff, attempt numbers in the
            # state); SDK retries underneath would multiply them and hide the attempts.
            "max_retries": 0,
            "timeout": self._timeout,
            # Chat completions is what OpenAI-compatible servers implement.
            "use_responses_api": False,
        }
        if temperature is not None:
            options["temperature"] = temperature
        return ChatOpenAI(**options)


def translate_openai_error(exc: Exception) -> LLMError:
    """Name an ``openai`` SDK failure; mark the transient ones ``retryable``.

    Args:
        exc: What the SDK (or LangChain around it) raised.

    Returns:
        :class:`ProviderUnavailableError` for a rejected key, else :class:`LLMCallError`.
    """
    import openai

    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        # The SDK's message quotes part of the key; keep it out of logs and run state.
        return ProviderUnavailableError(
            f"OpenAI refused the API key (HTTP {exc.status_code}): configure a valid key"
        )
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return LLMCallError(f"OpenAI unreachable: {type(exc).__name__}: {exc}", retryable=True)
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retryable = status in _RETRYABLE_STATUS or status >= 500
        return LLMCallError(f"OpenAI answered HTTP {status}: {exc.message}", retryable=retryable)
    return LLMCallError(f"OpenAI call failed: {type(exc).__name__}: {exc}")
