"""``import langorch.llm`` stays light: no LLM SDK until a block needs one (PERFORMANCE P3)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.subprocess  # each test starts a fresh Python; make test runs them

_CHECK = """
import sys
import langorch.llm
from langorch.llm import KNOWN_TOOLS, LLMRegistry, LLMRequest
registry = LLMRegistry(default_provider="offline")
registry.provider("bedrock")
registry.provider("openai")
registry.provider("anthropic")
registry.invoke(LLMRequest(run_id="r", step_id="s", block_id=None, provider="", model=None,
                           system_prompt="", prompt="p", output_keys=["a"], tools=["calculator"]))
heavy = ("langchain_aws", "langchain_openai", "openai", "langchain_anthropic", "anthropic",
         "langchain_core", "langgraph", "boto3")
print(sorted(m for m in sys.modules if m.split(".")[0] in heavy))
"""


def test_import_and_offline_use_load_no_llm_sdk() -> None:
    # Given a fresh interpreter
    # When langorch.llm is imported, the real providers looked up and an offline call made
    out = subprocess.run(
        [sys.executable, "-c", _CHECK], capture_output=True, text=True, check=True
    ).stdout

    # Then no LLM SDK, LangChain, LangGraph or boto3 module was loaded
    assert out.strip() == "[]"
