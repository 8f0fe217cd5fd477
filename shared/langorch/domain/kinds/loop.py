"""``loop``: repeat the body steps for each item of a list, or while (``while`` / ``do_while``)
a condition holds, bounded; results collected per round."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from langorch.domain.errors import Problem
from langorch.domain.kinds.base import Read, StepCheck, StepKind, Template, key_or_template
from langorch.domain.step_settings import LoopSpec

if TYPE_CHECKING:
    from langorch.domain.definitions import BlockDefinition, PlanStep
    from langorch.domain.lookup import DefinitionLookup


class LoopKind(StepKind):
    """Repeat the body per item, or while a condition holds (the topology wires body entries,
    exits and what follows)."""

    name = "loop"
    step_fields = frozenset({"loop"})
    parks = True
    is_loop = True

    def loop(self, step: PlanStep) -> LoopSpec | None:
        """The step's loop settings."""
        return step.loop

    def check_step(self, c: StepCheck) -> Iterator[Problem]:
        """Settings exist, name one way to repeat, and only the bound of that way."""
        spec, path = c.step.loop, f"{c.path}.loop"
        if spec is None:
            yield Problem(
                path,
                "a loop step needs loop settings",
                "add loop: {over: <list key>, body: [<step ids>]} (for-each), or "
                "loop: {while: <condition>, body: [...]} (or do_while)",
            )
            return
        if c.step.max_iterations is not None:
            yield Problem(
                f"{c.path}.max_iterations",
                "a loop step runs once per round: max_iterations on the step would count its "
                "visits, not its rounds",
                "bound the loop with loop.max_iterations (for-each) or loop.max_loops (while), "
                "or remove it",
            )
        ways = [name for name in ("over", "while", "do_while") if _way(spec, name) is not None]
        if len(ways) != 1:
            yield Problem(
                path,
                "a loop needs exactly one of over (for-each), while or do_while"
                + (f"; it has {', '.join(ways)}" if ways else ""),
                "keep over: <list key> to repeat per item, or while / do_while: <condition> "
                "to repeat while it holds (do_while runs the body once before checking)",
            )
            return
        given = spec.model_fields_set
        if spec.mode == "for_each":
            if spec.max_loops is not None:
                yield Problem(
                    f"{path}.max_loops",
                    "max_loops bounds while and do_while loops; a for-each runs at most "
                    "max_iterations items",
                    "use max_iterations, or remove max_loops",
                )
            return
        for name, fix in (("max_iterations", "use max_loops"), ("item_key", "use index_key")):
            if name in given:
                yield Problem(
                    f"{path}.{name}",
                    f"{name} is for a for-each; this is a {spec.mode} loop",
                    f"{fix}, or remove {name}",
                )

    def step_templates(
        self, step: PlanStep, block: BlockDefinition | None, path: str
    ) -> Iterator[Template]:
        """A while / do-while condition (an expression)."""
        spec = step.loop
        if spec is not None and spec.mode != "for_each" and spec.condition is not None:
            yield f"{path}.loop.{spec.mode}", spec.condition, "expression"

    def reads(self, step: PlanStep, block: BlockDefinition | None, path: str) -> Iterator[Read]:
        """The list a for-each iterates over."""
        if step.loop is not None and step.loop.over is not None:
            for name in sorted(key_or_template(step.loop.over)):
                yield f"{path}.loop.over", name, "iterates over"

    def outputs(
        self, step_id: str, step: PlanStep, block: BlockDefinition | None, lookup: DefinitionLookup
    ) -> set[str]:
        """The collected results' key; ``<step_id>_dropped`` (how many items a for-each's bound
        left out) or ``<step_id>_limit_reached`` (a while loop stopped by its bound), written
        only when the bound cut the loop short."""
        keys = super().outputs(step_id, step, block, lookup)
        if step.loop is not None:
            keys.add(step.loop.collect_key or f"{step_id}_results")
            if step.loop.mode == "for_each":
                keys.add(f"{step_id}_dropped")
            else:
                keys.add(f"{step_id}_limit_reached")
        return keys


def _way(spec: LoopSpec, name: str) -> str | None:
    return spec.while_ if name == "while" else getattr(spec, name)


KINDS = (LoopKind(),)
