"""``transform``: evaluate each expression in order (later ones see earlier results)."""

from __future__ import annotations

from typing import Any

from langorch.domain.kinds.transform import transform_of
from langorch.domain.templates import evaluate
from langorch.engine.context import EngineContext
from langorch.engine.kinds.base import Executor, Outcome, StepSpec, scope_of
from langorch.engine.state import OrchestrationState


async def run_transform(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    """Compute every key of the step's (else its block's) transform."""
    scope = scope_of(spec, state)
    context: dict[str, Any] = {}
    for key, expression in transform_of(spec.step, spec.block).items():
        context[key] = evaluate(expression, {**scope, **context})
    return Outcome(context=context)


EXECUTORS: dict[str, Executor] = {"transform": run_transform}
