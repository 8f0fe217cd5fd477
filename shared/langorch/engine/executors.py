"""The one generic executor: every step of every workflow runs through :func:`make_step_node`.

A step's definition (its ``PlanStep`` and block, resolved at compile time into a
:class:`StepSpec`) tells the node what to do; the kind's executor, looked up by name in
:mod:`langorch.engine.kinds.registry`, knows how. Each node returns a ``Command`` that merges its
outputs into ``shared_context`` and routes to the next steps, so branches, loops, error routes
and joins are all decided here, from the state, with no hidden control flow elsewhere.

Retries use LangGraph's ``RetryPolicy``: the node raises on every attempt but the last, and on
the last attempt (or for an error that retrying cannot fix) it routes to ``on_error`` /
``on_failure`` with the normalised ``error`` object in state, asks a person to fix it
(``ask``: :mod:`langorch.engine.fixes`), or fails the run.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt

from langorch.domain.approvals.fixes import FixAnswer, fix_answer
from langorch.domain.errors import (
    DefinitionError,
    LoopLimitReachedError,
    StepFailedError,
    StepTimeoutError,
)
from langorch.domain.templates import TemplateError
from langorch.engine import fixes, hooks, resources
from langorch.engine.context import EngineContext
from langorch.engine.kinds import registry
from langorch.engine.kinds.base import (
    LOOP_LIMIT_REACHED,
    SUMMARY_CHARS,
    TRIED,
    Executor,
    Outcome,
    StepSpec,
    scope_of,
    step_event,
    summarize,
)
from langorch.engine.state import CLEARED_BY, OrchestrationState

__all__ = [
    "SUMMARY_CHARS",
    "Executor",
    "Outcome",
    "StepSpec",
    "is_retryable",
    "make_step_node",
    "scope_of",
    "summarize",
]

logger = logging.getLogger(__name__)

Emit = Callable[[Any], None]


def is_retryable(exc: BaseException) -> bool:
    """Whether another attempt could succeed: definition and template errors never do."""
    if isinstance(exc, DefinitionError | TemplateError):
        return False
    retryable = getattr(exc, "retryable", None)
    if retryable is not None:
        return bool(retryable)
    return True


def make_step_node(spec: StepSpec) -> Any:
    """Build the LangGraph node function for one step.

    Args:
        spec: The resolved step; its kind's executor is looked up when the node is built, so
            a kind without one fails the compile, not the run.

    Returns:
        ``async (state, runtime) -> Command``.
    """
    run_kind = registry.executor(spec.kind)
    prepare = registry.preparer(spec.kind)

    async def node(state: OrchestrationState, runtime: Runtime[EngineContext]) -> Any:
        ctx = runtime.context
        done = (state.get("visits") or {}).get(spec.step_id, 0)
        if not _joined(spec, state, done):
            return Command(goto=[])  # a join waits: another dependency will trigger it again
        info = runtime.execution_info
        attempt = info.node_attempt if info is not None else 1
        emit = runtime.stream_writer
        bound = spec.step.max_iterations
        if bound is not None and done >= bound:
            # Back at a step that has used its bound: it does not run again (LoopLimitReached).
            return await _limit_reached(spec, ctx, attempt, done=done, emit=emit)
        fixing = fixes.pending_fix(spec, state)
        answer: FixAnswer | None = None
        if fixing is not None:
            # Parks here, before any work, until the person answers (see engine/fixes.py).
            answer = fix_answer(interrupt(fixes.fix_request(spec, state, ctx, fixing)))
            if answer.choice != fixes.RETRY:
                return _fixed_without_retry(answer, spec, fixing, done=done, emit=emit)
            state = fixes.with_inputs(state, answer.inputs)
        queued = resources.enter(spec, ctx, attempt, emit, step_event, visit=done)
        if queued is not None:
            return queued  # woken while still queued for the step's resource: ask again
        started = time.monotonic()
        if attempt == 1:
            fix = fixes.answered(answer) if answer is not None else None
            emit(step_event("step_started", spec, segment=ctx.segment, fix=fix))
        try:
            if prepare is not None:
                await prepare(spec, ctx)  # its SDK loaded before the step's time starts
            outcome = await _attempt(run_kind, spec, state, ctx, attempt)
        except GraphBubbleUp:
            raise  # interrupts park the run; they are not failures
        except Exception as exc:
            final = not (is_retryable(exc) and attempt < spec.max_attempts)
            try:
                return await _failed(
                    exc, spec, ctx, attempt, done=done, started=started, emit=emit,
                    fixing=fixing, fix=answer,
                )  # fmt: skip
            finally:
                if final:
                    resources.leave(spec, ctx, emit, step_event)
        clears = (state.get("error") or {}).get("step_id") == spec.step_id
        try:
            finished = _finished(
                outcome,
                spec,
                attempt,
                done=done,
                started=started,
                emit=emit,
                clears=clears,
                hidden=ctx.redacted,
            )
            return _after_fix(finished, spec, answer) if fixing is not None else finished
        finally:
            resources.leave(spec, ctx, emit, step_event)

    node.__name__ = f"step_{spec.step_id}"
    return node


async def _limit_reached(
    spec: StepSpec, ctx: EngineContext, attempt: int, *, done: int, emit: Emit
) -> Command[Any]:
    """The outcome ``LoopLimitReached``: go to ``on_max_iterations``, else fail as an error
    would (``on_error`` / ``on_failure`` may catch it; with neither the run fails)."""
    bound = spec.step.max_iterations
    target = spec.step.on_max_iterations
    if target is None:
        error = LoopLimitReachedError(
            f"LoopLimitReached at step {spec.step_id}: it ran {done} times (max_iterations "
            f"{bound}) and the run came back to it; declare on_max_iterations to route the "
            "run on, or raise max_iterations"
        )
        return await _failed(
            error, spec, ctx, attempt, done=done, started=time.monotonic(), emit=emit
        )
    emit(
        step_event(
            "loop_limit_reached",
            spec,
            outcome=LOOP_LIMIT_REACHED,
            max_iterations=bound,
            routed_to=target,
        )
    )
    result = _result(spec, success=True, label=LOOP_LIMIT_REACHED)
    return Command(update={"block_results": [result]}, goto=[target])


def _joined(spec: StepSpec, state: OrchestrationState, done: int) -> bool:
    visits = state.get("visits") or {}
    return not spec.join_deps or all(visits.get(d, 0) > done for d in spec.join_deps)


async def _attempt(
    run_kind: Executor,
    spec: StepSpec,
    state: OrchestrationState,
    ctx: EngineContext,
    attempt: int,
) -> Outcome:
    timeout = spec.timeout_seconds
    work = hooks.around(spec, state, ctx, attempt, lambda seen: run_kind(spec, seen, ctx, attempt))
    return await (asyncio.wait_for(work, timeout) if timeout else work)


async def _failed(
    exc: Exception,
    spec: StepSpec,
    ctx: EngineContext,
    attempt: int,
    *,
    done: int,
    started: float,
    emit: Emit,
    fixing: dict[str, Any] | None = None,
    fix: FixAnswer | None = None,
) -> Command[Any]:
    """Raise to retry or to fail the run; else route the error to ``on_error``/``on_failure``,
    or record it for a person to fix (``ask``: the node runs again and asks). ``fixing`` and
    ``fix``: the failure an earlier round asked about and its answer, whose retry this was
    (the next round follows it, showing the inputs as edited)."""
    from langorch.llm.calls import error_tokens, is_throttled, retry_delay  # light: no SDK

    error = _normalise(exc, spec, attempt)
    duration = _ms(started)
    tokens = error_tokens(exc)  # a refused or cut answer is billed all the same
    request = getattr(exc, TRIED, None)  # what an http step sent, for the timeline
    cost = getattr(exc, "cost_usd", None)  # what the failed attempt was billed, priced
    if is_retryable(exc) and attempt < spec.max_attempts:
        emit(
            step_event(
                "step_retried",
                spec,
                attempt=attempt,
                duration_ms=duration,
                error=error,
                tokens=tokens,
                cost_usd=cost,
                request=request,
            )
        )
        logger.warning(
            "step attempt failed; retrying",
            extra={"run_id": ctx.run_id, "step_id": spec.step_id, "attempt": attempt},
        )
        # The server's Retry-After, within the step's own time; LangGraph's backoff follows.
        await asyncio.sleep(retry_delay(exc, limit_seconds=spec.timeout_seconds))
        raise exc
    if is_throttled(exc):
        _park_throttled(exc, spec, attempt, duration=duration, emit=emit)
    # on_error, else the plan's on_failure (resolved at compile); nothing catches an error
    # that ends the run (its budget), and nobody is asked to fix it.
    ends_run = getattr(exc, "ends_run", False)
    route = None if ends_run else spec.on_error
    if spec.ask is not None and not ends_run:
        route = "ask"
    emit(
        step_event(
            "step_failed",
            spec,
            attempt=attempt,
            duration_ms=duration,
            error=error,
            routed_to=route,
            tokens=tokens,
            cost_usd=cost,
            request=request,
        )
    )
    logger.error(
        "step failed",
        extra={
            "run_id": ctx.run_id,
            "step_id": spec.step_id,
            "error_type": error["type"],
            "routed_to": route,
        },
    )
    if route is None:
        if isinstance(exc, StepTimeoutError | StepFailedError):
            raise exc
        raise StepFailedError(f"step {spec.step_id} failed: {error['message']}") from exc
    if spec.ask is not None:
        update: dict[str, Any] = {
            "error": dict(error),
            "last_error": error["message"],
            "block_results": [_result(spec, success=False, error=error)],
            **fixes.asked(spec, error, fixing),
        }
        if fix is not None and fix.inputs:
            update["shared_context"] = fix.inputs  # the next round shows them as edited
        return Command(update=update, goto=spec.step_id)  # runs again, and asks first
    return Command(
        update={
            "error": dict(error),
            "last_error": error["message"],
            "visits": {spec.step_id: done + 1},
            "block_results": [_result(spec, success=False, error=error)],
            **_retries(attempt),
        },
        goto=route,
    )


def _park_throttled(
    exc: Exception, spec: StepSpec, attempt: int, *, duration: int, emit: Emit
) -> None:
    """Park the run instead of failing the step: the provider is over its quota (issue 33).

    A ``wait`` interrupt (the run sleeps in Step Functions, no Lambda runs); when it wakes the
    step runs again from its start. Each park this step already came back from answers one
    ``interrupt`` call at once (LangGraph replays a task's resumes in order), so the loop parks
    at the first unanswered one, for longer each time, with jitter. Never returns.
    """
    from langorch.llm.calls import throttle_park_seconds

    parks = 0
    while True:
        seconds = throttle_park_seconds(exc, parks)
        request = {"kind": "wait", "step_id": spec.step_id, "seconds": seconds}
        try:
            interrupt({**request, "reason": "throttled"})
        except GraphBubbleUp:
            error = _normalise(exc, spec, attempt)
            emit(step_event("step_retried", spec, attempt=attempt, duration_ms=duration,
                            error=error, parked_seconds=seconds))  # fmt: skip
            raise
        parks += 1


def _retries(attempt: int) -> dict[str, int]:
    """The ``retry_count`` this attempt adds: one per attempt before it (none: no write)."""
    return {"retry_count": attempt - 1} if attempt > 1 else {}


def _finished(
    outcome: Outcome,
    spec: StepSpec,
    attempt: int,
    *,
    done: int,
    started: float,
    emit: Emit,
    clears: bool = False,
    hidden: frozenset[str] = frozenset(),
) -> Command[Any]:
    """Record the step's result and route on; ``clears``: the standing error is this step's,
    and this success ends it; ``hidden`` keys are shown as ``[redacted]``."""
    duration = _ms(started)
    shown = outcome.summary if outcome.summary is not None else summarize(outcome.context)
    if hidden & set(shown):
        shown = {k: "[redacted]" if k in hidden else v for k, v in shown.items()}
    emit(
        step_event(
            "step_finished",
            spec,
            attempt=attempt,
            duration_ms=duration,
            tokens=outcome.tokens,
            cost_usd=step_cost(outcome.state.get("usage")),
            llm_calls=llm_calls(outcome.state.get("usage")),
            branch=outcome.label,
            outputs_summary=shown,
        )
    )
    update: dict[str, Any] = {
        **outcome.state,
        **_retries(attempt),
        "visits": {spec.step_id: done + 1},
        "current_block": {
            "block_id": spec.block.block_id if spec.block else None,
            "step_id": spec.step_id,
            "kind": spec.kind.value,
        },
        "block_results": [
            _result(
                spec,
                success=True,
                # A bounded summary: the full outputs are in shared_context already, and a
                # log that copied them would grow every checkpoint by every step's outputs.
                output=shown,
                label=outcome.label,
                duration_ms=duration,
            )
        ],
    }
    if outcome.context:
        update["shared_context"] = outcome.context
    update["results"] = {spec.step_id: list(outcome.context)}
    if clears:
        update["error"] = {CLEARED_BY: spec.step_id}
    return Command(update=update, goto=_route(spec, outcome))


def _after_fix(finished: Command[Any], spec: StepSpec, answer: FixAnswer | None) -> Command[Any]:
    """A retry after a fix succeeded: nothing is pending, and the edited inputs stay."""
    update = dict(finished.update or {})
    if answer is not None and answer.inputs:
        update["shared_context"] = {**answer.inputs, **(update.get("shared_context") or {})}
    return Command(update={**update, **fixes.settled(spec)}, goto=finished.goto)


def _fixed_without_retry(
    answer: FixAnswer, spec: StepSpec, fixing: dict[str, Any], *, done: int, emit: Emit
) -> Command[Any]:
    """The person skipped the step (giving its outputs) or failed the run with its error."""
    said = fixes.answered(answer)
    error = dict(fixing.get("error") or {})
    if answer.choice == fixes.FAIL:
        emit(step_event("step_failed", spec, attempt=error.get("attempts"), error=error, fix=said))
        raise StepFailedError(
            f"step {spec.step_id} failed: {error.get('message', '')}"
            + (f" (failed by {answer.by})" if answer.by else " (nobody fixed it in time)")
        )
    outputs = dict(answer.outputs)
    shown = summarize(outputs)
    emit(step_event("step_finished", spec, duration_ms=0, outputs_summary=shown, fix=said))
    update: dict[str, Any] = {
        "visits": {spec.step_id: done + 1},
        "block_results": [_result(spec, success=True, output=shown, duration_ms=0)],
        **fixes.settled(spec),
    }
    if outputs:
        update["shared_context"] = outputs
    return Command(update=update, goto=_route(spec, Outcome(context=outputs)))


def llm_calls(usage: Any) -> list[dict[str, Any]] | None:
    """A step's LLM calls for its traces (provider, model, tokens, cost; never content);
    ``None``: it made none. The timeline does not keep them (its tokens and cost are totals)."""
    keys = ("provider", "model", "input", "output", "cost_usd")
    calls = [{k: u[k] for k in keys if k in u} for u in usage or () if isinstance(u, dict)]
    return calls or None


def step_cost(usage: Any) -> float | None:
    """What a step's LLM calls cost (its ``usage`` records' ``cost_usd``); ``None``: no
    priced call."""
    costs = [u["cost_usd"] for u in usage or () if isinstance(u.get("cost_usd"), int | float)]
    return round(sum(costs), 9) if costs else None


def _route(spec: StepSpec, outcome: Outcome) -> list[str]:
    if outcome.goto is not None:
        return outcome.goto
    if outcome.label is not None:
        target = spec.branch_targets.get(outcome.label)
        if target is None:
            raise StepFailedError(
                f"step {spec.step_id} chose {outcome.label!r}, which has no branch; "
                f"known: {sorted(spec.branch_targets)}"
            )
        return [target]
    if spec.loop_parent is not None:
        return [spec.loop_parent]
    return list(spec.successors) or [spec.end_node]


# --------------------------------------------------------------------------------------------
# Results, errors, events
# --------------------------------------------------------------------------------------------


def _normalise(exc: BaseException, spec: StepSpec, attempt: int) -> dict[str, Any]:
    if isinstance(exc, TimeoutError):
        exc = StepTimeoutError(f"step {spec.step_id} ran past {spec.timeout_seconds:.0f}s")
    message = str(exc) or type(exc).__name__
    return {
        "step_id": spec.step_id,
        "node_id": spec.step_id,  # seed 001's name for it: a CKP node is a step
        "type": getattr(type(exc), "error_type", None) or type(exc).__name__,
        "message": message[:1000],
        "attempts": attempt,
    }


def _result(
    spec: StepSpec,
    *,
    success: bool,
    output: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
    label: str | None = None,
    duration_ms: int | None = None,
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "step_id": spec.step_id,
        "block_id": spec.block.block_id if spec.block else None,
        "kind": spec.kind.value,
        "success": success,
        "output": output or {},
    }
    if label is not None:
        result["branch"] = label
    if error is not None:
        result["error"] = error
    if duration_ms is not None:
        result["duration_ms"] = duration_ms
    return result


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
