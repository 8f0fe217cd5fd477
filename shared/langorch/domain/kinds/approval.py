"""``approval``: park for a human. Branches ``approved`` / ``rejected`` / ``timed_out``; a
rejection may route back to an earlier step, bounded by ``max_iterations`` (seed 003)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from langorch.domain.approvals.policy import policy_problems
from langorch.domain.errors import Problem
from langorch.domain.identities import identity_problems
from langorch.domain.kinds.base import Read, StepCheck, StepKind, Template, root_key
from langorch.domain.step_settings import APPROVAL_LABELS, ApprovalSpec

if TYPE_CHECKING:
    from langorch.domain.definitions import BlockDefinition, PlanStep
    from langorch.domain.lookup import DefinitionLookup


class ApprovalKind(StepKind):
    """Wait for a person's decision."""

    name = "approval"
    step_fields = frozenset({"approval", "branches"})
    block_fields = frozenset({"branches"})
    branching = True
    parks = True

    def max_iterations(self, step: PlanStep) -> int | None:
        """``approval.max_iterations`` bounds a review loop."""
        return step.approval.max_iterations if step.approval is not None else None

    def routes(self, step: PlanStep) -> Iterator[tuple[str, str]]:
        """``approval.on_max_iterations``: where the run goes when the bound is reached."""
        if step.approval is not None and step.approval.on_max_iterations:
            yield "approval.on_max_iterations", step.approval.on_max_iterations

    def check_step(self, c: StepCheck) -> Iterator[Problem]:
        """Outcome labels, approvers, and where timeouts and the bound lead."""
        spec = c.step.approval or ApprovalSpec()
        path, labels = c.path, c.branches
        for label in labels:
            if label not in APPROVAL_LABELS:
                yield Problem(
                    f"{path}.branches.{label}",
                    f"{label!r} is not an approval outcome",
                    f"use {', '.join(APPROVAL_LABELS)}",
                )
        yield from _approver_problems(c, spec)
        policy = spec.policy()
        yield from policy_problems(policy, spec.approvers or c.plan.approvers, f"{path}.approval")
        if policy.counts_votes and spec.editable_keys:
            yield Problem(
                f"{path}.approval.editable_keys",
                "edits need one decider, but this quorum counts several votes",
                "remove editable_keys, or use quorum: any",
            )
        timeout_target = labels.get("timed_out") or labels.get("rejected")
        if spec.on_timeout == "branch" and labels and timeout_target is None:
            yield Problem(
                f"{path}.approval.on_timeout",
                "on a timeout the run has nowhere to go: no 'timed_out' or 'rejected' branch",
                "add a timed_out (or rejected) branch, or set on_timeout to reject, approve "
                "or fail",
            )
        if spec.on_max_iterations is not None and spec.max_iterations is None:
            yield Problem(
                f"{path}.approval.on_max_iterations",
                "on_max_iterations has no effect without max_iterations",
                "set approval.max_iterations, or remove on_max_iterations",
            )
        # max_iterations without on_max_iterations is legal: the run fails with
        # ReviewLoopExhaustedError when the last round is rejected (never goes on as approved).

    def advice(self, step: PlanStep, path: str) -> Iterator[Problem]:
        """A bounded review loop that declares no route for its last rejection."""
        spec = step.approval
        if spec is not None and spec.max_iterations is not None and not spec.on_max_iterations:
            yield Problem(
                f"{path}.approval.max_iterations",
                f"when round {spec.max_iterations} is rejected the run fails with "
                "ReviewLoopExhaustedError",
                "declare approval.on_max_iterations (e.g. a terminate step with status failed "
                "and outputs) to route it",
            )

    def step_templates(
        self, step: PlanStep, block: BlockDefinition | None, path: str
    ) -> Iterator[Template]:
        """Title and message."""
        if step.approval is not None:
            yield f"{path}.approval.title", step.approval.title, "template"
            yield f"{path}.approval.message", step.approval.message, "template"

    def reads(self, step: PlanStep, block: BlockDefinition | None, path: str) -> Iterator[Read]:
        """The keys shown to the approver."""
        if step.approval is not None:
            for j, key in enumerate(step.approval.show_keys):
                yield f"{path}.approval.show_keys[{j}]", root_key(key), "shows"

    def outputs(
        self, step_id: str, step: PlanStep, block: BlockDefinition | None, lookup: DefinitionLookup
    ) -> set[str]:
        """``<step_id>_decision``, the editable keys and the feedback key."""
        spec = step.approval or ApprovalSpec()
        keys = super().outputs(step_id, step, block, lookup)
        return keys | {f"{step_id}_decision", *spec.editable_keys, spec.feedback_key}


def _approver_problems(c: StepCheck, spec: ApprovalSpec) -> Iterator[Problem]:
    if not spec.approvers and not c.plan.approvers and not spec.policy().group_approvers():
        yield Problem(
            f"{c.path}.approval.approvers",
            f"approval step {c.step.step_id!r} has no approvers",
            "list approver emails in approval.approvers, or in the workflow's approvers",
        )
    yield from identity_problems(spec.approvers, f"{c.path}.approval.approvers")


KINDS = (ApprovalKind(),)
