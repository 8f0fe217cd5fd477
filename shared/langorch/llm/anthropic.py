"""Anthropic's API (Claude, direct) through ``langchain-anthropic``'s ``ChatAnthropic``.

``langchain_anthropic`` and ``anthropic`` are imported when the first call is made,
never at import time (ARCHITECTURE §2, PERFORMANCE P3).

As the other providers: one HTTP request per attempt (the SDK's retries are off, the step owns
the retry policy), the structured answer by forced tool use (the ``answer`` tool's input schema
is the block's output schema, as on Bedrock), and every failure named. The call runs on an async
client of its own, opened in the step's event loop: ``ChatAnthropic``'s default HTTP client is
cached process-wide and would outlive the loop of one Lambda invocation; cancelling the step's
task closes the connection.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from langorch.domain.errors import LLMError
from langorch.llm._langchain import Answer, ChatProvider, LazyKey, message_text
from langorch.llm.base import LLMCallError, LLMRequest, ProviderUnavailableError
from langorch.llm.errors import malformed, refusal, throttled, timed_out, truncated
from langorch.llm.schema import ANSWER_SCHEMA_NAME, output_schema
from langorch.llm.settings import ANTHROPIC_TIMEOUT_SECONDS, AnthropicSettings

DEFAULT_ANTHROPIC_MODEL = "claude-haiku-4-5-20251001"
"""Claude Haiku 4.5: the model Bedrock's default is, here on Anthropic's own API."""

DEFAULT_ANTHROPIC_MAX_TOKENS = 4096
"""Anthropic's API requires an output limit on every request: this one when the step sets
none (a block's ``max_tokens``, the workflow's ``llm_max_tokens`` or the deployment's)."""

_RETRYABLE_STATUS = frozenset({408, 409, 429})

ApiKey = Callable[[], str | None] | str | None
"""The API key, or a function that fetches it (from Secrets Manager) on first use."""


class AnthropicProvider(ChatProvider):
    """Structured answers from Anthropic's Messages API, by forced tool use.

    Args:
        api_key: The key or a function returning it; fetched at the first call, once.
        default_model: Model used when a request names none.
        settings: Endpoint and timeout.
    """

    name = "anthropic"
    label = "Anthropic"

    def __init__(
        self,
        *,
        api_key: ApiKey = None,
        default_model: str | None = None,
        settings: AnthropicSettings | None = None,
    ) -> None:
        super().__init__(default_model or DEFAULT_ANTHROPIC_MODEL)
        self._settings = settings or AnthropicSettings()
        self._key = LazyKey(
            api_key,
            "the anthropic provider has no API key: set LANGORCH_ANTHROPIC_API_KEY (or "
            "ANTHROPIC_API_KEY) in the environment, or store it in Secrets Manager for a "
            'deployment (LANGORCH_LLM_API_KEY_SECRET, as {"anthropic_api_key": ...})',
        )

    def _chat_key(self, model: str, request: LLMRequest) -> Hashable:
        return (model, request.temperature, request.max_tokens)

    def _new_chat(self, model: str, request: LLMRequest) -> Any:
        try:
            import anthropic
            from langchain_anthropic import ChatAnthropic
        except ImportError as exc:
            raise ProviderUnavailableError(
                "the anthropic provider needs langchain-anthropic: "
                "pip install 'langorch[anthropic]' (a deployment: add anthropic to llm_providers "
                "in cdk.json)"
            ) from exc
        settings = self._settings
        options: dict[str, Any] = {
            "model": model,
            "api_key": self._key(),
            "base_url": settings.base_url,
            # Retries belong to the step (max_retries with backoff, attempt numbers in the
            # state); SDK retries underneath would multiply them and hide the attempts.
            "max_retries": 0,
            "timeout": settings.timeout_seconds,
            "max_tokens": request.max_tokens or DEFAULT_ANTHROPIC_MAX_TOKENS,
        }
        if request.temperature is not None:
            options["temperature"] = request.temperature
        chat = ChatAnthropic(**options)
        # Our own client, bound to this event loop (see the module's docstring): ChatAnthropic
        # keeps its client in the `_async_client` cached property, so the one set here is used.
        client = anthropic.AsyncAnthropic(
            api_key=self._key(),
            base_url=settings.base_url,
            max_retries=0,
            timeout=settings.timeout_seconds,
            http_client=anthropic.DefaultAsyncHttpxClient(timeout=settings.timeout_seconds),
        )
        chat.__dict__["_async_client"] = client
        return chat

    def _structured(self, chat: Any, request: LLMRequest) -> Any:
        # Forced tool use: the tool's input schema is the answer's, handed back already parsed.
        return chat.bind_tools([output_schema(request)], tool_choice=ANSWER_SCHEMA_NAME)

    def _check_stop(self, message: Any, request: LLMRequest, tokens: tuple[int, int]) -> None:
        stop = (getattr(message, "response_metadata", {}) or {}).get("stop_reason")
        if stop == "refusal":
            raise refusal(request, self.label, message_text(message) or "(no text)", tokens)
        if stop in ("max_tokens", "model_context_window_exceeded"):
            raise truncated(request, self.label, message_text(message), tokens)

    def _outputs(self, raw: Any, request: LLMRequest, tokens: tuple[int, int]) -> dict[str, Any]:
        calls = [c for c in (raw.tool_calls or []) if c.get("name") == ANSWER_SCHEMA_NAME]
        if calls:
            return dict(calls[0]["args"])
        text = message_text(raw)
        if text:
            # The answer tool was forced: text instead of it is the model declining.
            raise refusal(request, self.label, text, tokens)
        raise malformed(request, self.label, "no call of the answer tool came back", "", tokens)

    def _translate(self, exc: Exception, request: LLMRequest, result: Answer) -> LLMError:
        return translate_anthropic_error(exc, request)


def translate_anthropic_error(exc: Exception, request: LLMRequest | None = None) -> LLMError:
    """Name an ``anthropic`` SDK failure; mark the transient ones ``retryable``.

    Args:
        exc: What the SDK (or LangChain around it) raised.
        request: The call, for messages that name the block, step and model.

    Returns:
        :class:`ProviderUnavailableError` for a rejected key, a named error from
        :mod:`langorch.llm.errors` for a throttled or timed-out call, else
        :class:`LLMCallError`.
    """
    import anthropic

    request = request or _UNKNOWN
    if isinstance(exc, anthropic.AuthenticationError | anthropic.PermissionDeniedError):
        # The SDK's message may quote part of the key; keep it out of logs and run state.
        return ProviderUnavailableError(
            f"Anthropic refused the API key (HTTP {exc.status_code}): configure a valid key "
            "(LANGORCH_ANTHROPIC_API_KEY, or the Secrets Manager secret of the deployment)"
        )
    if isinstance(exc, anthropic.APITimeoutError):
        return timed_out(request, "Anthropic", request.timeout_seconds or ANTHROPIC_TIMEOUT_SECONDS)
    if isinstance(exc, anthropic.APIConnectionError):
        return LLMCallError(
            f"Anthropic unreachable: {exc}. Check LANGORCH_ANTHROPIC_BASE_URL (default "
            "https://api.anthropic.com) and that it can be reached from here",
            retryable=True,
        )
    if isinstance(exc, anthropic.RateLimitError):
        return throttled(request, "Anthropic", f"HTTP 429: {_said(exc)}", _retry_after(exc))
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        said = _said(exc)
        hint = ""
        if status == 404 and "model" in said.lower():
            hint = (
                f" Check llm_model ({request.model!r}) on the step, block or workflow, or "
                "LANGORCH_DEFAULT_LLM_MODEL: it must name a model of Anthropic's API "
                f"(e.g. {DEFAULT_ANTHROPIC_MODEL}), not a Bedrock model id."
            )
        # 529: Anthropic is overloaded; like 5xx, worth another attempt.
        retryable = status in _RETRYABLE_STATUS or status >= 500
        return LLMCallError(f"Anthropic answered HTTP {status}: {said}{hint}", retryable=retryable)
    return LLMCallError(f"Anthropic call failed: {type(exc).__name__}: {exc}")


def _said(exc: Any) -> str:
    """What the server said: its error's ``message``, else the SDK's text."""
    body = getattr(exc, "body", None)
    error = body.get("error", body) if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    if isinstance(message, str) and message:
        return message
    return str(getattr(exc, "message", exc)) or "(no message)"


def _retry_after(exc: Any) -> float | None:
    """The wait the server asked for (``retry-after``, seconds)."""
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    value = headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


_UNKNOWN = LLMRequest(
    run_id="",
    step_id="?",
    block_id=None,
    provider="anthropic",
    model=None,
    system_prompt="",
    prompt="",
    output_keys=[],
)
