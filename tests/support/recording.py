"""A fake LLM port that answers as the offline provider and keeps every request it was sent."""

from __future__ import annotations

from typing import Any

from langorch.llm import LLMRequest, LLMResult, OfflineProvider


class RecordingLLM:
    """Answers like the offline provider (from ``script``) and keeps every request."""

    def __init__(self, script: Any = None) -> None:
        self.requests: list[LLMRequest] = []
        self._offline = OfflineProvider(script or {})

    def invoke(self, request: LLMRequest) -> LLMResult:
        self.requests.append(request)
        return self._offline.invoke(request)


def record_llm(container: Any, script: Any = None) -> RecordingLLM:
    """Make a ``RecordingLLM`` the LLM port of ``container`` (a fakes container); return it."""
    llm = RecordingLLM(script)
    container.__dict__["llm"] = llm
    return llm
