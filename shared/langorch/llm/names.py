"""The names definitions may use for LLM providers and built-in tools.

Apart from the providers and tools themselves, so that validation reads them without importing
either (issue 26); :mod:`.registry` and :mod:`.builtin_tools` use these sets, and
``tests/unit/test_llm_registry.py`` checks that they name what is built.
"""

from __future__ import annotations

KNOWN_PROVIDERS: frozenset[str] = frozenset({"offline", "bedrock", "openai", "anthropic"})
"""The names ``llm_provider`` may use."""

KNOWN_TOOLS: frozenset[str] = frozenset({"current_time", "calculator", "http_get"})
"""The names ``tools_required`` may use: :data:`langorch.llm.builtin_tools.TOOL_FACTORIES`'
keys."""
