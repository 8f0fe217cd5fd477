"""``subflow``: run another workflow, pinned to a version, as part of this run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from langorch.domain.errors import Problem
from langorch.domain.kinds.base import (
    Read,
    StepCheck,
    StepKind,
    key_or_template,
)

if TYPE_CHECKING:
    from langorch.domain.definitions import BlockDefinition, PlanStep
    from langorch.domain.lookup import DefinitionLookup


class SubflowKind(StepKind):
    """Delegate to a child workflow."""

    name = "subflow"
    step_fields = frozenset({"subflow"})
    parks = True

    def check_step(self, c: StepCheck) -> Iterator[Problem]:
        """Settings exist and name another, existing workflow version."""
        spec, path = c.step.subflow, c.path
        if spec is None:
            yield Problem(
                f"{path}.subflow",
                "a subflow step needs subflow settings",
                "add subflow: {workflow_id: <id>}",
            )
            return
        if spec.workflow_id == c.plan.plan_id:
            yield Problem(
                f"{path}.subflow.workflow_id",
                "a workflow cannot run itself as a subflow",
                "use a loop, or a review loop bounded by max_iterations",
            )
            return
        if c.lookup.get_workflow(spec.workflow_id, spec.version) is not None:
            return
        latest = c.lookup.get_workflow(spec.workflow_id)
        if spec.version is not None and latest is not None:
            yield Problem(
                f"{path}.subflow.version",
                f"workflow {spec.workflow_id!r} has no version {spec.version}",
                f"the latest version is {latest.version}; pin an existing version",
            )
        else:
            yield Problem(
                f"{path}.subflow.workflow_id",
                f"unknown workflow {spec.workflow_id!r}",
                "register the workflow first (langorch workflows put), or fix the id",
            )

    def reads(self, step: PlanStep, block: BlockDefinition | None, path: str) -> Iterator[Read]:
        """What it passes to the child."""
        if step.subflow is not None:
            for child_key, source in step.subflow.inputs.items():
                for name in sorted(key_or_template(source)):
                    yield f"{path}.subflow.inputs.{child_key}", name, "passes"

    def outputs(
        self, step_id: str, step: PlanStep, block: BlockDefinition | None, lookup: DefinitionLookup
    ) -> set[str]:
        """The keys copied back: ``outputs``, else what the child's steps may write."""
        keys = super().outputs(step_id, step, block, lookup)
        if step.subflow is not None:
            keys |= set(step.subflow.outputs) or _workflow_outputs(step.subflow.workflow_id, lookup)
        return keys


def _workflow_outputs(workflow_id: str, lookup: DefinitionLookup) -> set[str]:
    """What a subflow that copies everything back may write: its steps' outputs."""
    child = lookup.get_workflow(workflow_id)
    if child is None:
        return set()
    keys: set[str] = set()
    for step in child.steps:
        block = lookup.get_block(step.block_id, step.block_version) if step.block_id else None
        keys |= set(block.output_keys) if block else set()
        keys |= set(step.transform or {})
    return keys


KINDS = (SubflowKind(),)
