"""``decision``: choose a branch label, by LLM (output constrained to the labels), by a
``condition`` that renders to a label, or by ``cases`` (the first true ``when`` wins)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from langorch.domain.errors import Problem
from langorch.domain.kinds.base import StepCheck, StepKind, Template
from langorch.domain.templates import expression_outcomes

if TYPE_CHECKING:
    from langorch.domain.definitions import BlockDefinition, PlanStep
    from langorch.domain.lookup import DefinitionLookup


class DecisionKind(StepKind):
    """Route by a label; the ``branches`` map labels to steps."""

    name = "decision"
    step_fields = frozenset({"condition", "cases", "default_branch", "branches"})
    block_fields = frozenset({"branches"})
    branching = True

    def check_step(self, c: StepCheck) -> Iterator[Problem]:
        """Branches exist, one way to choose, cases and default name real labels."""
        step, block, path, labels = c.step, c.block, c.path, c.branches
        if not labels:
            yield Problem(
                f"{path}.branches",
                "a decision without branches has nowhere to go",
                "add branches: {label: step_id, ...}",
            )
        if (
            step.branches
            and block is not None
            and block.branches
            and set(step.branches) != set(block.branches)
        ):
            yield Problem(
                f"{path}.branches",
                f"labels {sorted(step.branches)} differ from block {block.block_id!r}'s "
                f"labels {sorted(block.branches)}",
                "map exactly the block's labels to steps",
            )
        by_llm = block is not None and bool(block.prompt_template.strip())
        if not (by_llm or step.condition or step.cases):
            yield Problem(
                path,
                f"decision {step.step_id!r} has no way to choose a branch",
                "reference an LLM decision block (block_id), or add a condition or cases",
            )
        if step.condition and step.cases:
            yield Problem(
                f"{path}.condition",
                "both condition and cases are set",
                "keep one: a condition that renders to a label, or cases",
            )
        elif step.condition and labels:
            yield from _condition_labels(f"{path}.condition", step.condition, labels)
        for k, case in enumerate(step.cases or []):
            if labels and case.branch not in labels:
                yield _not_a_label(f"{path}.cases[{k}].branch", case.branch, labels)
        if step.default_branch is not None and labels and step.default_branch not in labels:
            yield _not_a_label(f"{path}.default_branch", step.default_branch, labels)

    def step_templates(
        self, step: PlanStep, block: BlockDefinition | None, path: str
    ) -> Iterator[Template]:
        """The condition (a template) and each case's ``when`` (an expression)."""
        if step.condition is not None:
            yield f"{path}.condition", step.condition, "template"
        for k, case in enumerate(step.cases or []):
            yield f"{path}.cases[{k}].when", case.when, "expression"

    def outputs(
        self, step_id: str, step: PlanStep, block: BlockDefinition | None, lookup: DefinitionLookup
    ) -> set[str]:
        """The block's outputs and ``<step_id>_branch``, the label chosen."""
        return super().outputs(step_id, step, block, lookup) | {f"{step_id}_branch"}


def label_of(value: Any, labels: Iterable[str]) -> str:
    """The branch label a condition's value chooses: a bool picks ``true``/``yes`` or
    ``false``/``no`` among the labels; anything else is its text."""
    if isinstance(value, bool):
        for candidate in ("true", "yes") if value else ("false", "no"):
            if candidate in labels:
                return candidate
    return str(value)


def _condition_labels(path: str, condition: str, labels: Mapping[str, str]) -> Iterator[Problem]:
    """A condition whose outcomes are known from its text alone must choose among the labels
    (one that depends on run data is checked when it runs)."""
    outcomes = expression_outcomes(condition)
    if outcomes is None:
        return
    for label in dict.fromkeys(label_of(value, list(labels)) for value in outcomes):
        if label not in labels:
            yield Problem(
                path,
                f"can choose {label!r}, which is not one of the branch labels {sorted(labels)}",
                f"add a branch for {label!r}, or make the condition choose one of the labels",
            )


def _not_a_label(path: str, label: str, labels: Mapping[str, str]) -> Problem:
    return Problem(
        path,
        f"{label!r} is not one of the branch labels {sorted(labels)}",
        "use a label of branches, or add it to branches",
    )


KINDS = (DecisionKind(),)
