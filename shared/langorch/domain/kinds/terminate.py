"""``terminate``: end the run now, as succeeded or failed, with outputs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from langorch.domain.kinds.base import Read, StepKind, Template, key_or_template

if TYPE_CHECKING:
    from langorch.domain.definitions import BlockDefinition, PlanStep


class TerminateKind(StepKind):
    """End the run; nothing may depend on it."""

    name = "terminate"
    step_fields = frozenset({"terminate"})
    ends_run = True

    def step_templates(
        self, step: PlanStep, block: BlockDefinition | None, path: str
    ) -> Iterator[Template]:
        """The message."""
        if step.terminate is not None:
            yield f"{path}.terminate.message", step.terminate.message, "template"

    def reads(self, step: PlanStep, block: BlockDefinition | None, path: str) -> Iterator[Read]:
        """The run's outputs."""
        if step.terminate is not None:
            for out_key, source in step.terminate.outputs.items():
                for name in sorted(key_or_template(source)):
                    yield f"{path}.terminate.outputs.{out_key}", name, "outputs"


KINDS = (TerminateKind(),)
