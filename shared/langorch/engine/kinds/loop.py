"""``loop``: keep a cursor in the ``loops`` channel; each visit starts the next iteration (or,
after the last, collects the results and goes on)."""

from __future__ import annotations

from typing import Any

from langgraph.config import get_stream_writer

from langorch.domain.errors import StepFailedError
from langorch.domain.step_settings import LoopSpec
from langorch.domain.templates import evaluate
from langorch.engine.context import EngineContext
from langorch.engine.kinds.base import (
    LOOP_LIMIT_REACHED,
    Executor,
    Outcome,
    StepSpec,
    scope_of,
    step_event,
)
from langorch.engine.state import OrchestrationState


async def run_loop(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    """Start, continue or finish the for-each."""
    loop = spec.step.loop
    if loop is None:
        raise StepFailedError(f"step {spec.step_id}: loop settings missing")
    cursor = dict((state.get("loops") or {}).get(spec.step_id) or {})
    shared = state.get("shared_context") or {}
    if not cursor.get("active"):
        cursor = _start(spec, state, loop)
    else:
        collect = loop.collect or list(spec.loop_collect)
        cursor["results"] = [*cursor["results"], {k: shared.get(k) for k in collect}]
        cursor["index"] += 1
    index = cursor["index"]
    if index < len(cursor["items"]):
        item = cursor["items"][index]
        return Outcome(
            context={loop.item_key: item, loop.index_key: index},
            goto=list(spec.loop_entries),
            state={"loops": {spec.step_id: cursor}},
        )
    done = {"active": False, "index": index, "items": [], "results": [], "total": cursor["total"]}
    context: dict[str, Any] = {loop.collect_key or f"{spec.step_id}_results": cursor["results"]}
    goto = list(spec.successors) or [spec.end_node]
    dropped = cursor["total"] - len(cursor["items"])
    if dropped > 0:
        # Items past max_iterations are left out, never silently: in outputs, on the timeline.
        context[f"{spec.step_id}_dropped"] = dropped
        route = spec.step.on_max_iterations
        goto = [route] if route else goto
        get_stream_writer()(
            step_event(
                "loop_limit_reached",
                spec,
                outcome=LOOP_LIMIT_REACHED,
                max_iterations=loop.max_iterations,
                dropped=dropped,
                total=cursor["total"],
                routed_to=route,
            )
        )
    return Outcome(context=context, goto=goto, state={"loops": {spec.step_id: done}})


def _start(spec: StepSpec, state: OrchestrationState, loop: LoopSpec) -> dict[str, Any]:
    shared = state.get("shared_context") or {}
    over = loop.over
    items = shared.get(over) if over in shared else evaluate(over, scope_of(spec, state))
    if items is None:
        items = []
    if not isinstance(items, list):
        raise StepFailedError(
            f"loop {spec.step_id}: 'over' must give a list, got {type(items).__name__}"
        )
    return {
        "active": True,
        "index": 0,
        "items": items[: loop.max_iterations],
        "results": [],
        "total": len(items),
    }


EXECUTORS: dict[str, Executor] = {"loop": run_loop}
