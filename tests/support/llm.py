"""What the LLM tests share: a model request with every field a test does not care about."""

from __future__ import annotations

from typing import Any

from langorch.llm import LLMRequest


def an_llm_request(**fields: Any) -> LLMRequest:
    """A one-key request of a run's ``draft`` step; ``fields`` say what the test is about.

    A test module binds its own defaults with ``functools.partial``; a call may still
    override any of them.
    """
    defaults: dict[str, Any] = {
        "run_id": "run-1",
        "step_id": "draft",
        "block_id": "write_draft",
        "provider": "offline",
        "model": None,
        "system_prompt": "",
        "prompt": "Write a title.",
        "output_keys": ["title"],
    }
    return LLMRequest(**{**defaults, **fields})
