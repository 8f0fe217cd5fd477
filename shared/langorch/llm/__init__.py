"""LLM providers with structured output: offline (deterministic), Bedrock and OpenAI.

Importing this package loads no LLM SDK: ``langchain_aws``, ``langchain_openai`` and
``openai`` are imported by the first Bedrock or OpenAI call (ARCHITECTURE §2, PERFORMANCE P3).
"""

from langorch.llm.base import (
    LLMCallError,
    LLMProvider,
    LLMRequest,
    LLMResult,
    ProviderUnavailableError,
    is_retryable,
)
from langorch.llm.builtin_tools import KNOWN_TOOLS
from langorch.llm.offline import OfflineProvider, OfflineScriptError
from langorch.llm.registry import KNOWN_PROVIDERS, LLMRegistry

__all__ = [
    "KNOWN_PROVIDERS",
    "KNOWN_TOOLS",
    "LLMCallError",
    "LLMProvider",
    "LLMRegistry",
    "LLMRequest",
    "LLMResult",
    "OfflineProvider",
    "OfflineScriptError",
    "ProviderUnavailableError",
    "is_retryable",
]
