"""What the LLM tests share: a model request with every field a test does not care about."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from langorch.llm import LLMRequest


def sdks_imported(*modules: str) -> Any:
    """A module-scoped autouse fixture that imports ``modules`` before the module's first test.

    The SDKs take seconds to import, which must not fall inside a test's timed call; importing
    them at the top of the test module instead made every xdist worker pay them while collecting
    (langchain-anthropic alone ~10 s of CPU), the ones that never run the module too. Bind it in
    the module: ``_sdks = sdks_imported("langchain_aws", "langchain_openai")``.
    """

    @pytest.fixture(scope="module", autouse=True, name="_sdks_imported")
    def imported() -> None:
        for module in modules:
            importlib.import_module(module)

    return imported


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


def bedrock_at(url: str) -> Any:
    """An ``LLMRegistry`` whose default provider is Bedrock at ``url`` (a fake Bedrock server)."""
    from langorch.adapters.aws import bedrock_runtime_client
    from langorch.llm import LLMRegistry
    from langorch.llm.settings import BedrockSettings

    return LLMRegistry(
        default_provider="bedrock",
        bedrock=BedrockSettings(region="us-east-1"),
        bedrock_client_factory=lambda timeout: bedrock_runtime_client(
            region="us-east-1", read_timeout=timeout, endpoint_url=url
        ),
    )
