"""``query_memory`` / ``save_memory`` against the segment's long-term memory.

What a ``query_memory`` step read is recorded with the run's calls (a ``memory`` task record,
:mod:`langorch.app.tasks`): the step run again after a crash reads the same, and a replay of
the run (``langorch replay``, in a scratch store whose memory is empty) reads what the recorded
run read.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from langorch.domain.errors import StepFailedError
from langorch.domain.kinds.memory import memory_spec
from langorch.domain.step_settings import MemorySpec
from langorch.domain.tasks import fingerprint
from langorch.domain.templates import render
from langorch.engine.context import EngineContext, Memory
from langorch.engine.kinds.base import (
    Executor,
    Outcome,
    StepSpec,
    input_scope,
    output_key,
    recorded_once,
    scope_of,
    visits_of,
)
from langorch.engine.state import OrchestrationState


def _memory(spec: StepSpec, ctx: EngineContext) -> Memory:
    if ctx.memory is None:
        raise StepFailedError(f"step {spec.step_id}: long-term memory is not configured")
    return ctx.memory


async def run_query_memory(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    """Search the scope for the step's query, else read it (or its named keys), into the
    step's result key.

    With a query only the matches come back (``{}`` or ``[]`` when nothing matches, as seed
    000's run of a query with no match shows); the whole scope is still loaded into
    ``user_preferences`` / ``user_history``, where templates read it.
    """
    memory = _memory(spec, ctx)
    mem = memory_spec(spec.step, spec.block)
    query = _query(spec, mem, state)

    async def read() -> dict[str, Any]:
        value, extra = await _read(memory, mem, query, ctx)
        return {"value": value, "extra": extra}

    asked = fingerprint({"scope": mem.scope, "query": query, "keys": list(mem.keys)})
    read_back = await recorded_once(
        spec,
        ctx,
        kind="memory",
        visit=visits_of(spec, state),
        attempt=attempt,
        digest=asked,
        call=read,
    )
    value, extra = read_back["value"], read_back["extra"]
    context = {output_key(spec, None, "memory_results"): value}
    if mem.keys and isinstance(value, dict):
        context.update(value)  # the named keys are also readable directly
    return Outcome(context=context, state=extra)


async def _read(
    memory: Memory, mem: MemorySpec, query: str, ctx: EngineContext
) -> tuple[Any, dict[str, Any]]:
    """The step's result and the whole scope it loads (``user_preferences`` /
    ``user_history``)."""
    value: Any
    extra: dict[str, Any] = {}
    if mem.scope == "history":
        history = await asyncio.to_thread(memory.get_history, ctx.user_id, ctx.workflow_id, 10)
        extra["user_history"] = history
        value = history
        if query:
            value = await asyncio.to_thread(
                memory.search_history, ctx.user_id, ctx.workflow_id, query, 10
            )
    else:
        prefs = await asyncio.to_thread(memory.get_preferences, ctx.user_id)
        extra["user_preferences"] = prefs
        value = {k: prefs[k] for k in mem.keys if k in prefs} if mem.keys else prefs
        if query:
            value = await asyncio.to_thread(memory.search_preferences, ctx.user_id, query, mem.keys)
    return value, extra


def _query(spec: StepSpec, mem: MemorySpec, state: OrchestrationState) -> str:
    """The rendered query: the step's ``memory.query``, else its block's first input."""
    scope = input_scope(spec, state)
    if mem.query is not None:
        return render(mem.query, scope).strip()
    keys = spec.block.input_keys if spec.block else []
    if not keys:
        return ""
    value = scope.get(keys[0])
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return "" if value in ("", None) else text.strip()


async def run_save_memory(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    """Store the keys (default: the block's inputs) that have a value."""
    memory = _memory(spec, ctx)
    mem = memory_spec(spec.step, spec.block)
    scope = scope_of(spec, state)
    keys = mem.keys or (spec.block.input_keys if spec.block else [])
    values = {k: scope[k] for k in keys if k in scope and scope[k] not in ("", None)}
    if mem.scope == "history":
        await asyncio.to_thread(
            memory.save_history, ctx.user_id, ctx.workflow_id, ctx.run_id, values
        )
        return Outcome(context={f"{spec.step_id}_saved": sorted(values)})
    await asyncio.to_thread(memory.update_preferences, ctx.user_id, values)
    prefs = {**(state.get("user_preferences") or {}), **values}
    return Outcome(
        context={f"{spec.step_id}_saved": sorted(values)}, state={"user_preferences": prefs}
    )


EXECUTORS: dict[str, Executor] = {
    "query_memory": run_query_memory,
    "save_memory": run_save_memory,
}
