"""``subflow``: run the pinned child workflow's graph inside this node, copy outputs back."""

from __future__ import annotations

from dataclasses import replace

from langorch.domain.errors import StepFailedError
from langorch.domain.templates import render_value
from langorch.engine.context import EngineContext
from langorch.engine.kinds.base import Executor, Outcome, StepSpec, scope_of
from langorch.engine.state import OrchestrationState


async def run_subflow(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    """Invoke the child (it checkpoints under this run's thread) and fail when it fails."""
    sub = spec.step.subflow
    if sub is None or ctx.subflows is None:
        raise StepFailedError(f"step {spec.step_id}: subflow settings or resolver missing")
    plan, graph = ctx.subflows(sub.workflow_id, sub.version)
    scope = scope_of(spec, state)
    child_input = {
        k: render_value(v, scope) if "{" in v else scope.get(v) for k, v in sub.inputs.items()
    }
    child_ctx = replace(ctx, workflow_id=plan.plan_id, workflow_version=plan.version)
    result = await graph.ainvoke(
        {
            "run_id": ctx.run_id,
            "agent_id": plan.plan_id,
            "user_id": ctx.user_id,
            "shared_context": child_input,
        },
        context=child_ctx,
    )
    if result.get("status") == "failed":
        raise StepFailedError(f"subflow {plan.plan_id} failed: {result.get('last_error')}")
    child_shared = result.get("shared_context") or {}
    keys = sub.outputs or list(child_shared)
    context = {k: child_shared.get(k) for k in keys}
    return Outcome(context=context, state={"usage": result.get("usage") or []})


EXECUTORS: dict[str, Executor] = {"subflow": run_subflow}
