"""``decision``: pick a branch label by ``cases``, a ``condition``, or the block's LLM."""

from __future__ import annotations

from typing import Any

from langorch.domain.errors import StepFailedError
from langorch.domain.kinds.decision import label_of
from langorch.domain.templates import evaluate
from langorch.engine.context import EngineContext
from langorch.engine.kinds.base import (
    Executor,
    Outcome,
    Preparer,
    StepSpec,
    scope_of,
    summarize,
)
from langorch.engine.kinds.llm import call_llm, prepare_llm
from langorch.engine.state import OrchestrationState


async def run_decision(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    """Choose a label; ``<step_id>_branch`` records it."""
    labels = list(spec.branch_targets)
    step = spec.step
    scope = scope_of(spec, state)
    if step.cases:
        label = step.default_branch
        for case in step.cases:
            if evaluate(case.when, scope):
                label = case.branch
                break
        if label is None:
            raise StepFailedError(f"step {spec.step_id}: no case matched and no default_branch")
        return Outcome(label=label, context={f"{spec.step_id}_branch": label})
    if step.condition:
        label = label_of(evaluate(step.condition, scope), labels)
        return _routed(spec, label, {})
    outputs, tokens, usage = await call_llm(spec, state, ctx, attempt, choices=labels)
    keys = spec.block.output_keys if spec.block else []
    context = {k: outputs[k] for k in keys if k in outputs and k != "branch"}
    outcome = _routed(spec, str(outputs.get("branch")), context)
    outcome.tokens, outcome.state = tokens, {"usage": [usage]}
    return outcome


def _routed(spec: StepSpec, label: str, context: dict[str, Any]) -> Outcome:
    """The chosen label, or ``default_branch`` when the label has no branch (seed 002)."""
    fallback = spec.step.default_branch
    if label in spec.branch_targets or fallback is None:
        # No default: the node fails the step naming the label and the known ones.
        context[f"{spec.step_id}_branch"] = label
        return Outcome(label=label, context=context)
    context[f"{spec.step_id}_branch"] = fallback
    summary = summarize(context)
    summary[f"{spec.step_id}_branch"] = f"{fallback} (default_branch: {label!r} has no branch)"
    return Outcome(label=fallback, context=context, summary=summary)


async def prepare_decision(spec: StepSpec, ctx: EngineContext) -> None:
    """A decision made by the block's LLM loads its provider first (see ``prepare_llm``)."""
    if not (spec.step.cases or spec.step.condition):
        await prepare_llm(spec, ctx)


EXECUTORS: dict[str, Executor] = {"decision": run_decision}
PREPARERS: dict[str, Preparer] = {"decision": prepare_decision}
