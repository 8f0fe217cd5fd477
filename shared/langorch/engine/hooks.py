"""A step's ``pre`` and ``post`` hooks (seed 004's hooks on action nodes): transforms and tool
calls around the step's own work, in the same attempt.

``pre`` hooks see the step's names and each earlier hook's outputs; their outputs are inputs of
the step (its templates and expressions read them). ``post`` hooks see the step's outputs too.
Everything the hooks write is part of the step's outputs. A tool call goes through the run's
recorded side effects under ``<step_id>.pre`` / ``<step_id>.post``, so a step run again after a
crash (or resumed after an approval) replays the answer instead of calling again, and the call
is on the timeline like an LLM step's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from langorch.domain.errors import HookFailedError
from langorch.domain.step_settings import Hook
from langorch.domain.templates import evaluate, render_value
from langorch.domain.tool_servers import ToolServerError
from langorch.engine.context import EngineContext
from langorch.engine.kinds.base import Outcome, StepSpec, scope_of, summarize, visits_of
from langorch.engine.state import OrchestrationState
from langorch.llm.toolbox import UnboundToolError

Phase = Literal["pre", "post"]
Work = Callable[[OrchestrationState], Awaitable[Outcome]]


async def around(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int, work: Work
) -> Outcome:
    """Run the step's ``pre`` hooks, its own ``work`` over their outputs, then its ``post``
    hooks; the outcome carries every key they wrote.

    Raises:
        HookFailedError: a hook's tool failed or is not bound.
    """
    hooks = spec.step.hooks
    if hooks is None or not (hooks.pre or hooks.post):
        return await work(state)
    before = await _run(hooks.pre, "pre", spec, state, ctx, attempt)
    inside = _with(state, before)
    outcome = await work(inside)
    after = await _run(hooks.post, "post", spec, _with(inside, outcome.context), ctx, attempt)
    outcome.context = {**before, **outcome.context, **after}
    if outcome.summary is not None:
        outcome.summary = {**summarize(before), **outcome.summary, **summarize(after)}
    return outcome


def _with(state: OrchestrationState, context: dict[str, Any]) -> OrchestrationState:
    """``state`` as the step sees it once ``context`` is merged into ``shared_context``."""
    if not context:
        return state
    merged = dict(state)
    merged["shared_context"] = {**(state.get("shared_context") or {}), **context}
    return merged  # type: ignore[return-value]


async def _run(
    hooks: list[Hook],
    phase: Phase,
    spec: StepSpec,
    state: OrchestrationState,
    ctx: EngineContext,
    attempt: int,
) -> dict[str, Any]:
    written: dict[str, Any] = {}
    for index, hook in enumerate(hooks):
        scope = {**scope_of(spec, _with(state, written)), **written}
        if hook.transform is not None:
            for key, expression in hook.transform.items():
                written[key] = evaluate(expression, {**scope, **written})
        elif hook.tool is not None:
            answer = await _call(hook, f"{phase}[{index}]", spec, scope, state, ctx, attempt, phase)
            written[hook.output_key or hook.tool] = answer
    return written


async def _call(
    hook: Hook,
    where: str,
    spec: StepSpec,
    scope: dict[str, Any],
    state: OrchestrationState,
    ctx: EngineContext,
    attempt: int,
    phase: Phase,
) -> str:
    tool = hook.tool or ""
    if ctx.side_effects is None:
        raise HookFailedError(
            f"step {spec.step_id}: hooks.{where} calls tool {tool!r}, but no tool runner is "
            "configured here"
        )
    from langgraph.config import get_stream_writer

    effects = ctx.side_effects.begin(
        step_id=f"{spec.step_id}.{phase}",  # its own record: never mixed with the step's calls
        visit=visits_of(spec, state),
        attempt=attempt,
        tools=[tool],
        emit=get_stream_writer(),
    )
    try:
        toolbox = effects.toolbox
        text, outcome = await toolbox.call_with_outcome(tool, render_value(hook.args, scope))
    except (UnboundToolError, ToolServerError) as exc:
        raise HookFailedError(f"step {spec.step_id}: hooks.{where}: {exc}") from exc
    finally:
        await effects.aclose()
    if outcome != "ok":
        raise HookFailedError(f"step {spec.step_id}: hooks.{where}: tool {tool} {outcome}: {text}")
    return str(text)
