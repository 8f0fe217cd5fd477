"""``terminate``: end the run now with a status, a message and outputs."""

from __future__ import annotations

from typing import Any

from langorch.domain.templates import render, render_value
from langorch.engine.context import EngineContext
from langorch.engine.kinds.base import Executor, Outcome, StepSpec, scope_of
from langorch.engine.state import OrchestrationState


async def run_terminate(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    """Go to the end; a ``failed`` status records the message as the run's error."""
    term = spec.step.terminate
    scope = scope_of(spec, state)
    status = term.status if term else "succeeded"
    outputs: dict[str, Any] = {}
    if term:
        for name, source in term.outputs.items():
            outputs[name] = render_value(source, scope) if "{" in source else scope.get(source)
    message = render(term.message, scope) if term and term.message else ""
    extra: dict[str, Any] = {"status": status, "outputs": outputs}
    if status == "failed":
        extra["last_error"] = message or f"terminated at {spec.step_id}"
    return Outcome(goto=[spec.end_node], state=extra)


EXECUTORS: dict[str, Executor] = {"terminate": run_terminate}
