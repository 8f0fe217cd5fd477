"""Amazon Bedrock through ``langchain-aws``'s ``ChatBedrockConverse`` (the Converse API).

``langchain_aws`` is imported when the first call is made, never at import time (ARCHITECTURE
§2, PERFORMANCE P3). The bedrock-runtime client comes from the composition root
(``client_factory``); this module is Bedrock's adapter, so it is where botocore errors are
named.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from langorch.domain.errors import LLMError
from langorch.llm._langchain import answer
from langorch.llm.base import LLMCallError, LLMRequest, LLMResult, ProviderUnavailableError

DEFAULT_BEDROCK_MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
"""On-demand in most Bedrock regions and able to force a tool choice (structured output)."""

_RETRYABLE_CODES = frozenset(
    {
        "ThrottlingException",
        "TooManyRequestsException",
        "ServiceUnavailableException",
        "InternalServerException",
        "ModelNotReadyException",
        "ModelTimeoutException",
    }
)
_NOT_AVAILABLE_CODES = frozenset(
    {"AccessDeniedException", "UnrecognizedClientException", "ExpiredTokenException"}
)


class BedrockProvider:
    """Structured answers from Bedrock models, by forced tool use.

    Args:
        client_factory: Returns a boto3 ``bedrock-runtime`` client; called at the first call.
            ``None`` lets langchain-aws build one from the default credential chain.
        region: Region for the client langchain-aws builds when no factory is given.
        default_model: Model id used when a request names none.
    """

    name = "bedrock"

    def __init__(
        self,
        *,
        client_factory: Callable[[], Any] | None = None,
        region: str = "us-east-1",
        default_model: str | None = None,
    ) -> None:
        self._client_factory = client_factory
        self._client: Any = None
        self._region = region
        self._default_model = default_model or DEFAULT_BEDROCK_MODEL
        self._models: dict[tuple[str, float | None], Any] = {}
        self._lock = threading.Lock()

    def invoke(self, request: LLMRequest) -> LLMResult:
        """Answer ``request`` through a forced tool call whose input schema is the answer's.

        Raises:
            ProviderNotAvailableError: ``langchain-aws`` is not installed, or no usable AWS
                credentials or model access.
            LLMCallError: The call failed (``retryable`` for throttling, 5xx and timeouts) or
                the answer does not parse.
        """
        model = request.model or self._default_model
        chat = self._chat(model, request.temperature)
        result = answer(
            chat,
            request,
            structured_options={"method": "function_calling"},
            translate=translate_bedrock_error,
            provider_label="Bedrock",
        )
        return LLMResult(
            outputs=result.outputs,
            provider=self.name,
            model=model,
            input_tokens=result.input_tokens,
            output_tokens=result.output_tokens,
        )

    def _chat(self, model: str, temperature: float | None) -> Any:
        key = (model, temperature)
        with self._lock:
            if key not in self._models:
                self._models[key] = self._new_chat(model, temperature)
            return self._models[key]

    def _new_chat(self, model: str, temperature: float | None) -> Any:
        try:
            from langchain_aws import ChatBedrockConverse
        except ImportError as exc:
            raise ProviderUnavailableError(
                "the bedrock provider needs langchain-aws: pip install 'langorch[bedrock]'"
            ) from exc
        if self._client is None and self._client_factory is not None:
            self._client = self._client_factory()
        options: dict[str, Any] = {"model": model, "region_name": self._region}
        if self._client is not None:
            options["client"] = self._client
            options["region_name"] = self._client.meta.region_name
        if temperature is not None:
            options["temperature"] = temperature
        try:
            return ChatBedrockConverse(**options)
        except Exception as exc:
            raise translate_bedrock_error(exc) from exc


def translate_bedrock_error(exc: Exception) -> LLMError:
    """Name a Bedrock failure; mark the transient ones ``retryable``.

    Args:
        exc: What botocore (or langchain-aws around it) raised.

    Returns:
        :class:`ProviderUnavailableError` for missing credentials or model access, else
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
    if isinstance(
        exc,
        EndpointConnectionError | ConnectTimeoutError | ReadTimeoutError | ConnectionClosedError,
    ):
        return LLMCallError(f"Bedrock unreachable: {exc}", retryable=True)
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        message = str(error.get("Message", ""))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
        if code in _NOT_AVAILABLE_CODES:
            return ProviderUnavailableError(
                f"Bedrock refused the call ({code}: {message}): check the credentials, the "
                f"bedrock:InvokeModel permission and model access in the Bedrock console"
            )
        retryable = code in _RETRYABLE_CODES or status >= 500
        return LLMCallError(f"Bedrock failed ({code}): {message}", retryable=retryable)
    return LLMCallError(f"Bedrock call failed: {type(exc).__name__}: {exc}")
