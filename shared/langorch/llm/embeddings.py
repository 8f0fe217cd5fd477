"""The embedding model ``query_memory`` searches by meaning with (``memory_embedding_model``).

``bedrock:<model id>`` (``langchain-aws``'s ``BedrockEmbeddings``, e.g.
``bedrock:amazon.titan-embed-text-v2:0``) or ``openai:<model>`` (``langchain-openai``'s
``OpenAIEmbeddings``, e.g. ``openai:text-embedding-3-small``; any OpenAI-compatible endpoint).
The SDK is imported at the first search, never when the container is built (PERFORMANCE P3),
and its failures are named as the chat providers name theirs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from langorch.domain.errors import LLMError
from langorch.llm.base import ProviderUnavailableError
from langorch.llm.settings import OpenAISettings

EMBEDDING_PROVIDERS = frozenset({"bedrock", "openai"})
"""The providers ``memory_embedding_model`` may name."""

EMBEDDING_TIMEOUT_SECONDS = 30.0
"""One embedding request's time limit: a search is a short step."""


def parse_embedding_model(spec: str) -> tuple[str, str]:
    """``(provider, model)`` of ``provider:model``.

    Raises:
        ValueError: not ``bedrock:<model id>`` or ``openai:<model>``.
    """
    provider, _, model = spec.partition(":")
    if provider not in EMBEDDING_PROVIDERS or not model:
        raise ValueError(
            f"memory_embedding_model {spec!r} must be 'bedrock:<model id>' (e.g. "
            "bedrock:amazon.titan-embed-text-v2:0) or 'openai:<model>' (e.g. "
            "openai:text-embedding-3-small)"
        )
    return provider, model


class LazyEmbeddings:
    """An embedding model built at its first use (LangChain's ``Embeddings`` interface).

    Args:
        spec: ``provider:model`` (:func:`parse_embedding_model`).
        openai_api_key: the OpenAI key, or a function returning it (read at the first use).
        openai: where the OpenAI-compatible API is.
        bedrock_client_factory: a bedrock-runtime client for a read timeout in seconds.
    """

    def __init__(
        self,
        spec: str,
        *,
        openai_api_key: Callable[[], str | None] | str | None = None,
        openai: OpenAISettings | None = None,
        bedrock_client_factory: Callable[[float], Any] | None = None,
    ) -> None:
        self.provider, self.model = parse_embedding_model(spec)
        self._openai_api_key = openai_api_key
        self._openai = openai or OpenAISettings()
        self._bedrock_client_factory = bedrock_client_factory
        self._model: Any = None
        self._lock = threading.Lock()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One vector per text.

        Raises:
            ProviderNotAvailableError: the SDK, the key or the credentials are missing.
            LLMError: the provider failed (``retryable`` when trying again may help).
        """
        vectors: list[list[float]] = self._call(lambda model: model.embed_documents(texts))
        return vectors

    def embed_query(self, text: str) -> list[float]:
        """The vector of a query (raises as :meth:`embed_documents`)."""
        vector: list[float] = self._call(lambda model: model.embed_query(text))
        return vector

    def _call(self, call: Callable[[Any], Any]) -> Any:
        model = self._built()
        try:
            return call(model)
        except LLMError:
            raise
        except Exception as exc:
            raise self._translate(exc) from exc

    def _translate(self, exc: Exception) -> LLMError:
        if self.provider == "openai":
            from langorch.llm.openai import translate_openai_error

            return translate_openai_error(exc)
        from langorch.llm.bedrock import translate_bedrock_error

        return translate_bedrock_error(exc)

    def _built(self) -> Any:
        with self._lock:
            if self._model is None:
                self._model = self._openai_model() if self.provider == "openai" else self._bedrock()
            return self._model

    def _openai_model(self) -> Any:
        try:
            from langchain_openai import OpenAIEmbeddings
        except ImportError as exc:
            raise ProviderUnavailableError(
                "openai embeddings need langchain-openai: pip install 'langorch[openai]'"
            ) from exc
        key = self._openai_api_key() if callable(self._openai_api_key) else self._openai_api_key
        if not key:
            raise ProviderUnavailableError(
                "memory_embedding_model names openai but there is no OpenAI key: set "
                "LANGORCH_OPENAI_API_KEY (or OPENAI_API_KEY), or store it in Secrets Manager "
                "for a deployment (LANGORCH_LLM_API_KEY_SECRET)"
            )
        return OpenAIEmbeddings(
            model=self.model,
            openai_api_key=key,
            openai_api_base=self._openai.base_url,
            openai_organization=self._openai.organization,
            request_timeout=EMBEDDING_TIMEOUT_SECONDS,
            max_retries=0,  # the step owns retries
            # The context-length check needs tiktoken's encodings, downloaded on first use:
            # memory items are small, and the server refuses an oversized one anyway.
            check_embedding_ctx_length=False,
        )

    def _bedrock(self) -> Any:
        try:
            from langchain_aws import BedrockEmbeddings
        except ImportError as exc:
            raise ProviderUnavailableError(
                "bedrock embeddings need langchain-aws: pip install 'langorch[bedrock]'"
            ) from exc
        if self._bedrock_client_factory is None:
            raise ProviderUnavailableError(
                "no Bedrock client is configured here: build the embeddings with a "
                "bedrock_client_factory (the container passes one)"
            )
        try:
            client = self._bedrock_client_factory(EMBEDDING_TIMEOUT_SECONDS)
            return BedrockEmbeddings(client=client, model_id=self.model)
        except Exception as exc:
            from langorch.llm.bedrock import translate_bedrock_error

            raise translate_bedrock_error(exc) from exc
