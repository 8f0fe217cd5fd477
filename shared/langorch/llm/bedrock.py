"""Amazon Bedrock through ``langchain-aws``'s ``ChatBedrockConverse`` (the Converse API).

``langchain_aws`` is imported when the first call is made, never at import time (ARCHITECTURE
§2, PERFORMANCE P3). The bedrock-runtime client comes from the composition root
(``client_factory``), built from the standard AWS credential chain and never pointed at the
local emulator; this module is Bedrock's adapter, so it is where botocore errors are named.

One HTTP request per attempt: the factory's clients make a single attempt (botocore retries
off) because the step owns the retry policy. botocore is synchronous, so a call cannot be
cancelled mid-flight; instead each request is sent with a client whose read timeout is what is
left of the step's time when it is sent (after any earlier model round or tool call), so an
abandoned request ends about when the step does. A busy machine may send it late; so each
request is counted on its attempt (``_count_open_requests``) and an attempt given up ends only
when its request has closed, and sends none it had not sent yet (``calls.call_model``). The
first such client is built by :meth:`prepare`, before the step's time starts.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import replace
from typing import Any

from langorch.domain.errors import LLMError
from langorch.llm._langchain import (
    ATTEMPT_TALLY,
    Answer,
    AttemptAbandonedError,
    ChatProvider,
    message_text,
)
from langorch.llm.base import LLMCallError, LLMRequest, ProviderUnavailableError
from langorch.llm.errors import guardrail, malformed, refusal, throttled, timed_out, truncated
from langorch.llm.schema import ANSWER_SCHEMA_NAME, output_schema
from langorch.llm.settings import BedrockSettings

DEFAULT_BEDROCK_MODEL = "anthropic.claude-haiku-4-5-20251001-v1:0"
"""Claude Haiku 4.5: Active in Bedrock's model lifecycle (the old default, Claude 3 Haiku, is
Legacy with end of life 2026-09-10), able to force a tool choice (structured output). It is
served through cross-region inference profiles only, so it is sent with the
:data:`DEFAULT_INFERENCE_PROFILE` prefix unless ``inference_profile`` says otherwise."""

DEFAULT_INFERENCE_PROFILE = "global"
"""Prefix of the default model: the global profile routes to any commercial region."""

INFERENCE_PROFILE_PREFIXES = frozenset({"global", "us", "us-gov", "eu", "apac", "jp", "au", "ca"})
"""Geographic prefixes of Bedrock's system-defined cross-region inference profiles."""

DEFAULT_READ_TIMEOUT = 120.0
"""Read timeout when the step gives no time limit."""

_CLIENTS_KEPT = 8
_RETRYABLE_CODES = frozenset(
    {
        "ServiceUnavailableException",
        "InternalServerException",
        "ModelNotReadyException",
    }
)
_THROTTLING_CODES = frozenset({"ThrottlingException", "TooManyRequestsException"})
_NOT_AVAILABLE_CODES = frozenset(
    {"AccessDeniedException", "UnrecognizedClientException", "ExpiredTokenException"}
)
_MODEL_ID_HINTS = (
    "model identifier is invalid",
    "on-demand throughput",
    "inference profile",
    "end of its life",
)
"""Words of Bedrock's answers that say the model id is the problem (invalid, retired, or served
only through a profile): such an answer gets the ``llm_model`` hint."""
_MODEL_ID_CODES = frozenset({"ValidationException", "ResourceNotFoundException"})

ClientFactory = Callable[[float], Any]
"""Returns a bedrock-runtime client whose read timeout is the given number of seconds."""


class BedrockProvider(ChatProvider):
    """Structured answers from Bedrock models, by forced tool use.

    Args:
        client_factory: Builds a bedrock-runtime client for a read timeout (seconds); called
            on first use of each timeout (the composition root passes the standard credential
            chain's; ``None``: a call is refused as unavailable).
        region: Shorthand for ``settings.region``.
        default_model: Model id used when a request names none.
        settings: Region, inference profile and guardrail.
    """

    name = "bedrock"
    label = "Bedrock"

    def __init__(
        self,
        *,
        client_factory: ClientFactory | None = None,
        region: str | None = None,
        default_model: str | None = None,
        settings: BedrockSettings | None = None,
    ) -> None:
        super().__init__(default_model or DEFAULT_BEDROCK_MODEL)
        settings = settings or BedrockSettings()
        if region is not None:
            settings = replace(settings, region=region)
        self._settings = settings
        self._client_factory = client_factory
        self._clients: OrderedDict[int, Any] = OrderedDict()
        self._clients_lock = threading.Lock()

    def resolve_model(self, model: str) -> str:
        """``model`` with the inference-profile prefix it needs (ARNs are left alone)."""
        if model.startswith("arn:") or model.split(".", 1)[0] in INFERENCE_PROFILE_PREFIXES:
            return model
        profile = self._settings.inference_profile
        if profile is None and model == DEFAULT_BEDROCK_MODEL:
            profile = DEFAULT_INFERENCE_PROFILE
        return f"{profile}.{model}" if profile else model

    def _client(self, read_timeout: int) -> Any:
        # Whole seconds, so one step timeout reuses one client; a few are kept (LRU).
        with self._clients_lock:
            client = self._clients.pop(read_timeout, None)
            if client is None:
                if self._client_factory is None:
                    raise ProviderUnavailableError(
                        "no Bedrock client is configured here: build the LLM registry with a "
                        "bedrock_client_factory (the container passes one)"
                    )
                client = self._client_factory(float(read_timeout))
                _count_open_requests(client)
            self._clients[read_timeout] = client
            while len(self._clients) > _CLIENTS_KEPT:
                self._clients.popitem(last=False)
            return client

    def _prepare_for(self, seconds: float | None) -> None:
        try:
            self._client(_whole_seconds(seconds))
        except LLMError:
            raise
        except Exception as exc:
            raise translate_bedrock_error(exc) from exc

    def _chat(self, request: LLMRequest) -> Any:
        # What is left of the step's time now, as this request is sent: earlier rounds of the
        # call (the model's, its tools') spent some of it.
        if request.deadline is not None:
            request = replace(request, timeout_seconds=request.deadline - time.monotonic())
        return super()._chat(request)

    def _chat_key(self, model: str, request: LLMRequest) -> Hashable:
        return (model, request.temperature, request.max_tokens, _read_timeout(request))

    def _new_chat(self, model: str, request: LLMRequest) -> Any:
        try:
            from langchain_aws import ChatBedrockConverse
        except ImportError as exc:
            raise ProviderUnavailableError(
                "the bedrock provider needs langchain-aws: pip install 'langorch[bedrock]' "
                "(a deployment: add bedrock to llm_providers in cdk.json)"
            ) from exc
        try:
            client = self._client(_read_timeout(request))
            options: dict[str, Any] = {
                "model": model,
                "client": client,
                "region_name": client.meta.region_name,
            }
            if request.temperature is not None:
                options["temperature"] = request.temperature
            if request.max_tokens is not None:
                options["max_tokens"] = request.max_tokens
            if self._settings.guardrail_id:
                options["guardrails"] = {
                    "guardrailIdentifier": self._settings.guardrail_id,
                    "guardrailVersion": self._settings.guardrail_version or "DRAFT",
                    "trace": "enabled",
                }
            return ChatBedrockConverse(**options)
        except LLMError:
            raise
        except Exception as exc:
            raise translate_bedrock_error(exc) from exc

    def _structured(self, chat: Any, request: LLMRequest) -> Any:
        # Forced tool use: the tool's input schema is the answer's, and Bedrock hands the input
        # back already parsed (no JSON text to repair).
        return chat.bind_tools([output_schema(request)], tool_choice=ANSWER_SCHEMA_NAME)

    def _check_stop(self, message: Any, request: LLMRequest, tokens: tuple[int, int]) -> None:
        stop = (getattr(message, "response_metadata", {}) or {}).get("stopReason")
        text = message_text(message) if stop else ""
        if stop == "guardrail_intervened":
            raise guardrail(request, self.label, "A Bedrock guardrail", text, tokens)
        if stop == "content_filtered":
            raise guardrail(request, self.label, "The model's content filter", text, tokens)
        if stop == "refusal":
            raise refusal(request, self.label, text or "(no text)", tokens)
        if stop in ("max_tokens", "model_context_window_exceeded"):
            raise truncated(request, self.label, text, tokens)
        if stop in ("malformed_model_output", "malformed_tool_use"):
            raise malformed(request, self.label, f"stop reason {stop}", text, tokens)

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
        return translate_bedrock_error(exc, request)


def _count_open_requests(client: Any) -> None:
    """Count each request this client sends on the step attempt that sends it (the attempt's
    tally reaches the SDK's worker thread in its context): an attempt cut off by the step's
    deadline leaves its request running in that thread, and ``call_model`` waits for it to
    close before the next attempt may send one. botocore's public events: ``before-send``, and
    ``response-received``, emitted once per request whether it was answered or failed."""
    events = client.meta.events
    events.register("before-send.bedrock-runtime", _request_opened, unique_id=_OPENED)
    events.register("response-received.bedrock-runtime", _request_closed, unique_id=_CLOSED)


_OPENED = "langorch-request-opened"
_CLOSED = "langorch-request-closed"


def _request_opened(**_: Any) -> None:
    attempt = ATTEMPT_TALLY.get()
    if attempt is not None:
        attempt.request_opened()


def _request_closed(exception: BaseException | None = None, **_: Any) -> None:
    attempt = ATTEMPT_TALLY.get()
    if attempt is not None and not isinstance(exception, AttemptAbandonedError):
        attempt.request_closed()  # (a refused request was never counted open)


def _read_timeout(request: LLMRequest) -> int:
    return _whole_seconds(request.timeout_seconds)


def _whole_seconds(seconds: float | None) -> int:
    # Rounded down: botocore gives up (and closes the connection) no later than the step's
    # own deadline, so an abandoned call never overlaps the step's next attempt.
    return max(1, math.floor(DEFAULT_READ_TIMEOUT if seconds is None else seconds))


def translate_bedrock_error(exc: Exception, request: LLMRequest | None = None) -> LLMError:
    """Name a Bedrock failure; mark the transient ones ``retryable``.

    Args:
        exc: What botocore (or langchain-aws around it) raised.
        request: The call, for messages that name the block, step and model.

    Returns:
        :class:`ProviderUnavailableError` for missing credentials or model access, a named
        error (:mod:`langorch.llm.errors`) for throttling and timeouts, else
        :class:`LLMCallError`.
    """
    from botocore.exceptions import (
        ClientError,
        ConnectionClosedError,
        ConnectTimeoutError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
        PartialCredentialsError,
        ReadTimeoutError,
    )

    if isinstance(exc, NoCredentialsError | PartialCredentialsError | NoRegionError):
        return ProviderUnavailableError(
            f"the bedrock provider has no usable AWS configuration ({exc}): give the function "
            f"a role with bedrock:InvokeModel, or configure AWS credentials and a region"
        )
    if request is not None and isinstance(exc, ReadTimeoutError):
        return timed_out(request, "Bedrock", request.timeout_seconds or DEFAULT_READ_TIMEOUT)
    if isinstance(
        exc,
        EndpointConnectionError | ConnectTimeoutError | ReadTimeoutError | ConnectionClosedError,
    ):
        return LLMCallError(f"Bedrock unreachable: {exc}", retryable=True)
    if isinstance(exc, ClientError):
        return _client_error(exc, request)
    return LLMCallError(f"Bedrock call failed: {type(exc).__name__}: {exc}")


def _client_error(exc: Any, request: LLMRequest | None) -> LLMError:
    error = exc.response.get("Error", {})
    code = str(error.get("Code", ""))
    message = str(error.get("Message", ""))
    meta = exc.response.get("ResponseMetadata", {})
    status = int(meta.get("HTTPStatusCode", 0))
    if code in _NOT_AVAILABLE_CODES:
        return ProviderUnavailableError(
            f"Bedrock refused the call ({code}: {message}): check the credentials, the "
            f"bedrock:InvokeModel permission and model access in the Bedrock console"
        )
    if code in _THROTTLING_CODES and request is not None:
        return throttled(request, "Bedrock", f"{code}: {message}", _retry_after(meta))
    if code == "ModelTimeoutException" and request is not None:
        return timed_out(request, "Bedrock (the model itself)", request.timeout_seconds or 0.0)
    hint = ""
    if code in _MODEL_ID_CODES and any(h in message.lower() for h in _MODEL_ID_HINTS):
        model = request.model if request is not None else None
        hint = (
            f" The model id {model!r} is not usable here: set llm_model on the step, block or "
            "workflow (or LANGORCH_DEFAULT_LLM_MODEL) to a model that is Active in Bedrock's "
            "model lifecycle and enabled in this region; models served only through "
            "cross-region inference need a profile prefix (us., eu., global.; see "
            "LANGORCH_BEDROCK_INFERENCE_PROFILE)."
        )
    retryable = code in _RETRYABLE_CODES or code in _THROTTLING_CODES or status >= 500
    return LLMCallError(f"Bedrock failed ({code}): {message}{hint}", retryable=retryable)


def _retry_after(meta: dict[str, Any]) -> float | None:
    value = (meta.get("HTTPHeaders") or {}).get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None
