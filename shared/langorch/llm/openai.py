"""OpenAI (and OpenAI-compatible servers, Azure OpenAI's v1 API) through ``ChatOpenAI``.

``langchain_openai``, ``openai`` and ``httpx`` are imported when the first call is made, never
at import time (ARCHITECTURE §2, PERFORMANCE P3).

One HTTP request per attempt: the SDK's own retries are off (``max_retries=0``) because the
step owns the retry policy; the call runs on the SDK's async client, so cancelling the step's
task (its timeout) closes the connection instead of leaving a paid request running.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable
from dataclasses import replace
from typing import Any

from langorch.domain.errors import LLMError
from langorch.llm._langchain import Answer, ChatProvider, LazyKey, message_text, parse_json_object
from langorch.llm.base import LLMCallError, LLMRequest, ProviderUnavailableError
from langorch.llm.errors import guardrail, malformed, refusal, throttled, timed_out, truncated
from langorch.llm.schema import ANSWER_SCHEMA_NAME, is_strict_compatible, output_schema
from langorch.llm.settings import OPENAI_TIMEOUT_SECONDS, OpenAISettings

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"

_RETRYABLE_STATUS = frozenset({408, 409, 429})
_SDK_STATUS_PREFIX = re.compile(r"^Error code: \d+(?: - )?")
_WAIT_IN_MESSAGE = re.compile(r"try again in (\d+(?:\.\d+)?)\s*(ms|s)\b", re.IGNORECASE)

ApiKey = Callable[[], str | None] | str | None
"""The API key, or a function that fetches it (from Secrets Manager) on first use."""


class OpenAIProvider(ChatProvider):
    """Structured answers from a chat-completions API with a JSON-schema response format.

    Args:
        api_key: The key or a function returning it; fetched at the first call, once.
        base_url: Shorthand for ``settings.base_url``.
        default_model: Model used when a request names none.
        timeout_seconds: Shorthand for ``settings.timeout_seconds``.
        settings: Endpoint, organisation, project and timeout.
    """

    name = "openai"
    label = "OpenAI"

    def __init__(
        self,
        *,
        api_key: ApiKey = None,
        base_url: str | None = None,
        default_model: str | None = None,
        timeout_seconds: float | None = None,
        settings: OpenAISettings | None = None,
    ) -> None:
        super().__init__(default_model or DEFAULT_OPENAI_MODEL)
        settings = settings or OpenAISettings()
        if base_url is not None:
            settings = replace(settings, base_url=base_url)
        if timeout_seconds is not None:
            settings = replace(settings, timeout_seconds=timeout_seconds)
        self._settings = settings
        self._key = LazyKey(
            api_key,
            "the openai provider has no API key: set LANGORCH_OPENAI_API_KEY (or "
            "OPENAI_API_KEY) in the environment, or store it in Secrets Manager for a "
            "deployment (LANGORCH_LLM_API_KEY_SECRET)",
        )

    def _chat_key(self, model: str, request: LLMRequest) -> Hashable:
        return (model, request.temperature, request.max_tokens)

    def _new_chat(self, model: str, request: LLMRequest) -> Any:
        try:
            import httpx
            from langchain_openai import ChatOpenAI
        except ImportError as exc:
            raise ProviderUnavailableError(
                "the openai provider needs langchain-openai: pip install 'langorch[openai]' "
                "(a deployment: add openai to llm_providers in cdk.json)"
            ) from exc
        settings = self._settings
        headers = {"OpenAI-Project": settings.project} if settings.project else None
        options: dict[str, Any] = {
            "model": model,
            "api_key": self._key(),
            "base_url": settings.base_url,
            "organization": settings.organization,
            "default_headers": headers,
            # Retries belong to the step (max_retries with backoff, attempt numbers in the
            # state); SDK retries underneath would multiply them and hide the attempts.
            "max_retries": 0,
            "timeout": settings.timeout_seconds,
            # Chat completions is what OpenAI-compatible servers implement.
            "use_responses_api": False,
            # Our own client, bound to this event loop (LangChain's default one is shared
            # process-wide and outlives the loop of one Lambda invocation).
            "http_async_client": httpx.AsyncClient(timeout=settings.timeout_seconds),
        }
        if request.temperature is not None:
            options["temperature"] = request.temperature
        if request.max_tokens is not None:
            options["max_tokens"] = request.max_tokens
        return ChatOpenAI(**options)

    def _structured(self, chat: Any, request: LLMRequest) -> Any:
        schema = output_schema(request)
        strict = is_strict_compatible(request)
        body = {k: v for k, v in schema.items() if k not in ("title", "description")}
        return chat.bind(
            response_format={
                "type": "json_schema",
                "json_schema": {
                    "name": ANSWER_SCHEMA_NAME,
                    "description": schema["description"],
                    "schema": body,
                    # Strict mode needs every value fully described: free-form objects and
                    # arrays of unknown items fall back to non-strict (validated here instead).
                    "strict": strict,
                },
            }
        )

    def _check_stop(self, message: Any, request: LLMRequest, tokens: tuple[int, int]) -> None:
        refused = getattr(message, "additional_kwargs", {}).get("refusal")
        if refused:
            raise refusal(request, self.label, str(refused), tokens)
        finish = (getattr(message, "response_metadata", {}) or {}).get("finish_reason")
        if finish == "length":
            raise truncated(request, self.label, message_text(message), tokens)
        if finish == "content_filter":
            raise guardrail(
                request, self.label, "The content filter", message_text(message), tokens
            )

    def _outputs(self, raw: Any, request: LLMRequest, tokens: tuple[int, int]) -> dict[str, Any]:
        text = message_text(raw)
        if not text:
            raise malformed(request, self.label, "the answer is empty", text, tokens)
        return parse_json_object(text, request, self.label, tokens)

    def _translate(self, exc: Exception, request: LLMRequest, result: Answer) -> LLMError:
        return translate_openai_error(exc, request, result)


def translate_openai_error(
    exc: Exception, request: LLMRequest | None = None, result: Answer | None = None
) -> LLMError:
    """Name an ``openai`` SDK failure; mark the transient ones ``retryable``.

    Args:
        exc: What the SDK (or LangChain around it) raised.
        request: The call, for messages that name the block and step.
        result: The request's token tally: a cut-off answer's usage is added to it.

    Returns:
        :class:`ProviderUnavailableError` for a rejected key, a named error from
        :mod:`langorch.llm.errors` for a cut-off, filtered, throttled or timed-out call, else
        :class:`LLMCallError`.
    """
    import openai

    request = request or _UNKNOWN
    result = result or Answer()
    if isinstance(exc, openai.LengthFinishReasonError | openai.ContentFilterFinishReasonError):
        completion = getattr(exc, "completion", None)
        usage = getattr(completion, "usage", None)
        tokens = (
            (int(usage.prompt_tokens or 0), int(usage.completion_tokens or 0)) if usage else (0, 0)
        )
        result.add(*tokens)
        choices = getattr(completion, "choices", None) or []
        text = str(getattr(choices[0].message, "content", "") or "") if choices else ""
        if isinstance(exc, openai.LengthFinishReasonError):
            return truncated(request, "OpenAI", text, tokens)
        return guardrail(request, "OpenAI", "The content filter", text, tokens)
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        # The SDK's message quotes part of the key; keep it out of logs and run state.
        return ProviderUnavailableError(
            f"OpenAI refused the API key (HTTP {exc.status_code}): configure a valid key "
            "(LANGORCH_OPENAI_API_KEY, or the Secrets Manager secret of the deployment)"
        )
    if isinstance(exc, openai.APITimeoutError):
        return timed_out(request, "OpenAI", request.timeout_seconds or OPENAI_TIMEOUT_SECONDS)
    if isinstance(exc, openai.APIConnectionError):
        return LLMCallError(_unreachable(exc), retryable=True)
    if isinstance(exc, openai.RateLimitError):
        return throttled(request, "OpenAI", f"HTTP 429: {_said(exc)}", _retry_after(exc))
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retryable = status in _RETRYABLE_STATUS or status >= 500
        said = _said(exc)
        hint = ""
        if status == 404 and "model" in said.lower():
            hint = (
                f" Check llm_model ({request.model!r}) on the step, block or workflow, or "
                "LANGORCH_DEFAULT_LLM_MODEL: it must name a model (Azure: a deployment) that "
                "this endpoint serves."
            )
        return LLMCallError(f"OpenAI answered HTTP {status}: {said}{hint}", retryable=retryable)
    return LLMCallError(f"OpenAI call failed: {type(exc).__name__}: {exc}")


def _said(exc: Any) -> str:
    """What the server said: its error's ``message``, else the body's text, without the SDK's
    "Error code: 429 - " (the status is in our message already)."""
    body = getattr(exc, "body", None)
    error = body.get("error", body) if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    if isinstance(message, str) and message:
        return message
    if isinstance(body, str) and body:
        return body[:500]
    return _SDK_STATUS_PREFIX.sub("", str(getattr(exc, "message", exc))) or "(no message)"


def _unreachable(exc: Any) -> str:
    """The connection failure with the URL it tried (no credentials, no query) and its cause."""
    request = getattr(exc, "request", None)
    url = getattr(request, "url", None)
    where = ""
    if url is not None:
        where = f" at {url.copy_with(userinfo=b'', query=None, fragment=None)}"
    root = _root_cause(exc)
    why = f" ({type(root).__name__}: {root})" if root is not exc and str(root) else ""
    return (
        f"OpenAI unreachable{where}: {exc}{why}. Check openai_base_url "
        "(LANGORCH_OPENAI_BASE_URL), and that a server runs there and can be reached"
    )


def _root_cause(exc: BaseException) -> BaseException:
    """The first failure under the SDK's wrappers (e.g. ``ConnectionRefusedError``)."""
    for _ in range(10):  # a chain is short; a cycle must not loop
        below = exc.__cause__ or exc.__context__
        if below is None:
            break
        exc = below
    return exc


def _retry_after(exc: Any) -> float | None:
    """The wait the server asked for: ``retry-after-ms``, ``retry-after``, or the message."""
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return max(0.0, float(value) * scale)
            except ValueError:
                continue  # an HTTP date: rare for APIs, fall through to the message
    found = _WAIT_IN_MESSAGE.search(str(getattr(exc, "message", exc)))
    if found:
        amount = float(found.group(1))
        return amount / 1000 if found.group(2).lower() == "ms" else amount
    return None


_UNKNOWN = LLMRequest(
    run_id="",
    step_id="?",
    block_id=None,
    provider="openai",
    model=None,
    system_prompt="",
    prompt="",
    output_keys=[],
)
