"""LLM providers with structured output: offline (deterministic), Bedrock and OpenAI.

Importing this package loads no LLM SDK: ``langchain_aws``, ``langchain_openai`` and
``openai`` are imported by the first Bedrock or OpenAI call (ARCHITECTURE §2, PERFORMANCE P3).
Nor does it load its own modules: each name below is imported from its module on first use
(PEP 562), so validation, which reads only :data:`KNOWN_PROVIDERS` and :data:`KNOWN_TOOLS`
(:mod:`langorch.llm.names`), builds neither the providers nor the tools (issue 26).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langorch.llm.base import (
        LLMCallError,
        LLMProvider,
        LLMRequest,
        LLMResult,
        ProviderUnavailableError,
        is_retryable,
    )
    from langorch.llm.names import KNOWN_PROVIDERS, KNOWN_TOOLS
    from langorch.llm.offline import OfflineProvider, OfflineScriptError
    from langorch.llm.registry import LLMRegistry

_MODULE_OF = {
    "KNOWN_PROVIDERS": "names",
    "KNOWN_TOOLS": "names",
    "LLMCallError": "base",
    "LLMProvider": "base",
    "LLMRegistry": "registry",
    "LLMRequest": "base",
    "LLMResult": "base",
    "OfflineProvider": "offline",
    "OfflineScriptError": "offline",
    "ProviderUnavailableError": "base",
    "is_retryable": "base",
}

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


def __getattr__(name: str) -> Any:
    """A name of :data:`__all__`, imported from its module (then kept here)."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
