"""``loop``: keep a cursor in the ``loops`` channel; each visit starts the next round (or, after
the last, collects the results and goes on). A for-each runs a round per item; a ``while``
checks its condition before each round, a ``do_while`` after each; the bound (``max_iterations``
items, ``max_loops`` rounds) ends the loop with the outcome ``LoopLimitReached``."""

from __future__ import annotations

from typing import Any, Literal

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

Next = Literal["round", "done", "limit"]
"""What a loop visit does: start a round, end the loop, or end it at its bound."""


async def run_loop(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    """Start, continue or finish the loop."""
    loop = spec.step.loop
    if loop is None:
        raise StepFailedError(f"step {spec.step_id}: loop settings missing")
    cursor = dict((state.get("loops") or {}).get(spec.step_id) or {})
    first = not cursor.get("active")
    if first:
        cursor = _start(spec, state, loop)
    else:
        shared = state.get("shared_context") or {}
        collect = loop.collect or list(spec.loop_collect)
        cursor["results"] = [*cursor["results"], {k: shared.get(k) for k in collect}]
        cursor["index"] += 1
    step = _next(spec, state, loop, cursor, first=first)
    if step == "round":
        index = cursor["index"]
        context: dict[str, Any] = {loop.index_key: index}
        if loop.mode == "for_each":
            context = {loop.item_key: cursor["items"][index], **context}
        return Outcome(
            context=context, goto=list(spec.loop_entries), state={"loops": {spec.step_id: cursor}}
        )
    return _finish(spec, loop, cursor, at_limit=step == "limit")


def _next(
    spec: StepSpec,
    state: OrchestrationState,
    loop: LoopSpec,
    cursor: dict[str, Any],
    *,
    first: bool,
) -> Next:
    index = cursor["index"]
    if loop.mode == "for_each":
        if index < len(cursor["items"]):
            return "round"
        return "limit" if cursor["total"] > len(cursor["items"]) else "done"
    if first and loop.mode == "do_while":
        return "round"  # the body runs once before the condition is asked
    if not evaluate(loop.condition or "false", scope_of(spec, state)):
        return "done"
    return "round" if index < loop.bound else "limit"


def _finish(spec: StepSpec, loop: LoopSpec, cursor: dict[str, Any], *, at_limit: bool) -> Outcome:
    """Collect the results and go on; at the bound, say so and follow ``on_max_iterations``."""
    ran = cursor["index"]
    done = {"active": False, "index": ran, "items": [], "results": [], "total": cursor["total"]}
    context: dict[str, Any] = {loop.collect_key or f"{spec.step_id}_results": cursor["results"]}
    goto = list(spec.successors) or [spec.end_node]
    if at_limit:
        # A bound that cut the loop short is never silent: in outputs, on the timeline.
        route = spec.step.on_max_iterations
        goto = [route] if route else goto
        if loop.mode == "for_each":
            dropped = cursor["total"] - len(cursor["items"])
            context[f"{spec.step_id}_dropped"] = dropped
            told: dict[str, Any] = {
                "max_iterations": loop.max_iterations,
                "dropped": dropped,
                "total": cursor["total"],
            }
        else:
            context[f"{spec.step_id}_limit_reached"] = True
            told = {"max_loops": loop.bound, "ran": ran}
        get_stream_writer()(
            step_event(
                "loop_limit_reached", spec, outcome=LOOP_LIMIT_REACHED, routed_to=route, **told
            )
        )
    return Outcome(context=context, goto=goto, state={"loops": {spec.step_id: done}})


def _start(spec: StepSpec, state: OrchestrationState, loop: LoopSpec) -> dict[str, Any]:
    if loop.mode != "for_each":
        return {"active": True, "index": 0, "items": [], "results": [], "total": 0}
    shared = state.get("shared_context") or {}
    over = loop.over or ""
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
