"""``wait``: park the run on an interrupt saying how long; Step Functions sleeps, not Lambda."""

from __future__ import annotations

from datetime import UTC, datetime

from langgraph.types import interrupt

from langorch.domain.errors import StepFailedError
from langorch.domain.templates import render
from langorch.engine.context import EngineContext
from langorch.engine.kinds.base import Executor, Outcome, StepSpec, scope_of
from langorch.engine.state import OrchestrationState


async def run_wait(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    """Sleep ``seconds``, or until ``until``; ``<step_id>_waited`` records how long."""
    wait = spec.step.wait
    scope = scope_of(spec, state)
    seconds: float
    if wait is not None and wait.until:
        until = datetime.fromisoformat(render(wait.until, scope).replace("Z", "+00:00"))
        if until.tzinfo is None:
            until = until.replace(tzinfo=UTC)
        seconds = max(0.0, (until - datetime.now(UTC)).total_seconds())
    elif wait is not None and wait.seconds is not None:
        raw = wait.seconds if isinstance(wait.seconds, int) else render(str(wait.seconds), scope)
        seconds = float(raw)
    else:
        raise StepFailedError(f"step {spec.step_id}: wait needs seconds or until")
    interrupt({"kind": "wait", "step_id": spec.step_id, "seconds": round(seconds)})
    return Outcome(context={f"{spec.step_id}_waited": round(seconds)})


EXECUTORS: dict[str, Executor] = {"wait": run_wait}
