"""Amazon Bedrock through ``langchain-aws``'s ``ChatBedrockConverse`` (the Converse API).

``langchain_aws`` is imported when the first call is made, never at import time (ARCHITECTURE
§2, PERFORMANCE P3). The bedrock-runtime client comes from the composition root
(``client_factory``); this module is Bedrock's adapter, so it is where botocore errors are
named.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langorch.domain.errors import LLMError
from langorch.llm._langchain import ChatProvider
from langorch.llm.base import LLMCallError, LLMRequest, ProviderUnavailableError

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


class BedrockProvider(ChatProvider):
    """Structured answers from Bedrock models, by forced tool use.

    Args:
        client_factory: Returns a boto3 ``bedrock-runtime`` client; called at the first call.
            ``None`` lets langchain-aws build one from the default credential chain.
        region: Region for the client langchain-aws builds when no factory is given.
        default_model: Model id used when a request names none.
    """

    name = "bedrock"
    label = "Bedrock"

    def __init__(
        self,
        *,
        client_factory: Callable[[], Any] | None = None,
        region: str = "us-east-1",
        default_model: str | None = None,
    ) -> None:
        super().__init__(default_model or DEFAULT_BEDROCK_MODEL)
        self._client_factory = client_factory
        self._client: Any = None
        self._region = region

    def _structured_options(self, request: LLMRequest) -> dict[str, Any]:
        # Forced tool use: the tool's input schema is the answer's.
        return {"method": "function_calling"}

    def _translate(self, exc: Exception) -> LLMError:
        return translate_bedrock_error(exc)

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
