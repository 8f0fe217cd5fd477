"""Block definitions for tests whose LLM steps call a (loopback) Bedrock."""

from __future__ import annotations

from langorch.domain.definitions import BlockDefinition


def a_title_block(model: str) -> BlockDefinition:
    """Block ``b_title``: one LLM call to Bedrock ``model`` that writes ``title``, tried once."""
    return BlockDefinition(
        block_id="b_title",
        output_keys=["title"],
        prompt_template="Write a title.",
        max_retries=0,
        llm_provider="bedrock",
        llm_model=model,
    )
