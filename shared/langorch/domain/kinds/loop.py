"""``loop``: for-each over a list; the body steps run once per item, results collected."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from langorch.domain.errors import Problem
from langorch.domain.kinds.base import Read, StepCheck, StepKind, key_or_template
from langorch.domain.step_settings import LoopSpec

if TYPE_CHECKING:
    from langorch.domain.definitions import BlockDefinition, PlanStep
    from langorch.domain.lookup import DefinitionLookup


class LoopKind(StepKind):
    """Repeat the body per item (the topology wires body entries, exits and what follows)."""

    name = "loop"
    step_fields = frozenset({"loop"})
    parks = True
    is_loop = True

    def loop(self, step: PlanStep) -> LoopSpec | None:
        """The step's loop settings."""
        return step.loop

    def check_step(self, c: StepCheck) -> Iterator[Problem]:
        """Settings exist."""
        if c.step.loop is None:
            yield Problem(
                f"{c.path}.loop",
                "a loop step needs loop settings",
                "add loop: {over: <list key>, body: [<step ids>]}",
            )

    def reads(self, step: PlanStep, block: BlockDefinition | None, path: str) -> Iterator[Read]:
        """The list it iterates over."""
        if step.loop is not None:
            for name in sorted(key_or_template(step.loop.over)):
                yield f"{path}.loop.over", name, "iterates over"

    def outputs(
        self, step_id: str, step: PlanStep, block: BlockDefinition | None, lookup: DefinitionLookup
    ) -> set[str]:
        """The collected results' key, and ``<step_id>_dropped`` (how many items its bound
        left out; written only when it left some out)."""
        keys = super().outputs(step_id, step, block, lookup)
        if step.loop is not None:
            keys.add(step.loop.collect_key or f"{step_id}_results")
            keys.add(f"{step_id}_dropped")
        return keys


KINDS = (LoopKind(),)
