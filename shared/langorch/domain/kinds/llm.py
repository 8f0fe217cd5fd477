"""``action`` and ``extraction``: an LLM call with structured output whose fields are the block's
``output_keys``. The block holds the prompt, so an inline step of these kinds is an error."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from langorch.domain.errors import Problem
from langorch.domain.kinds.base import StepKind

if TYPE_CHECKING:
    from langorch.domain.definitions import BlockDefinition


class _LLMKind(StepKind):
    needs_block = True

    def check_block(self, block: BlockDefinition) -> Iterator[Problem]:
        """A prompt is what the LLM is asked."""
        yield from super().check_block(block)
        if not block.prompt_template.strip():
            yield Problem(
                "prompt_template",
                f"an {self.name} block needs a prompt_template",
                "write the instructions for the LLM, with {placeholders} for the input keys",
            )


class ActionKind(_LLMKind):
    """Do something with an LLM (seed 000's default block type)."""

    name = "action"


class ExtractionKind(_LLMKind):
    """Extract fields from the inputs with an LLM."""

    name = "extraction"


KINDS = (ActionKind(), ExtractionKind())
