"""``transform``: pure, sandboxed expressions over the state, one per output key; no I/O."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from langorch.domain.errors import Problem
from langorch.domain.kinds.base import StepCheck, StepKind, Template

if TYPE_CHECKING:
    from langorch.domain.definitions import BlockDefinition, PlanStep
    from langorch.domain.lookup import DefinitionLookup

_HINT = "add transform: {output_key: expression}"


def transform_of(step: PlanStep, block: BlockDefinition | None) -> dict[str, str]:
    """Output key -> expression: the step's, else its block's."""
    return step.transform or (block.transform if block else None) or {}


class TransformKind(StepKind):
    """Compute keys from expressions."""

    name = "transform"
    step_fields = frozenset({"transform"})
    block_fields = frozenset({"transform"})

    def check_step(self, c: StepCheck) -> Iterator[Problem]:
        """Something to compute."""
        if not transform_of(c.step, c.block):
            yield Problem(
                f"{c.path}.transform", "a transform step needs transform expressions", _HINT
            )

    def step_templates(
        self, step: PlanStep, block: BlockDefinition | None, path: str
    ) -> Iterator[Template]:
        """Each expression of the step."""
        for key, expression in (step.transform or {}).items():
            yield f"{path}.transform.{key}", expression, "expression"

    def outputs(
        self, step_id: str, step: PlanStep, block: BlockDefinition | None, lookup: DefinitionLookup
    ) -> set[str]:
        """The block's outputs and every key computed."""
        return super().outputs(step_id, step, block, lookup) | set(transform_of(step, block))

    def check_block(self, block: BlockDefinition) -> Iterator[Problem]:
        """A transform block computes something."""
        yield from super().check_block(block)
        if not block.transform:
            yield Problem("transform", "a transform block needs transform expressions", _HINT)

    def block_templates(self, block: BlockDefinition) -> Iterator[Template]:
        """Each expression of the block."""
        for key, expression in (block.transform or {}).items():
            yield f"transform.{key}", expression, "expression"


KINDS = (TransformKind(),)
