"""``action`` / ``extraction``: render the block's prompt from its inputs, call its LLM with
structured output whose fields are the ``output_keys``, merge them into ``shared_context``."""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict
from typing import Any

from langorch.domain.errors import StepFailedError
from langorch.domain.templates import prompt_char_limit, render
from langorch.engine.context import EngineContext, StepEffects
from langorch.engine.kinds.base import (
    Executor,
    Outcome,
    Preparer,
    StepSpec,
    input_scope,
    visits_of,
)
from langorch.engine.state import OrchestrationState


async def prepare_llm(spec: StepSpec, ctx: EngineContext) -> None:
    """Load the step's LLM provider (its SDK, its key, a client) before the step's time starts.

    A cold import of an LLM SDK takes seconds: paid inside ``timeout_seconds``, it cost a short
    step its first attempt before any request was sent. In a worker thread, so steps running
    beside this one keep the event loop.
    """
    from langorch.llm.calls import prepare  # light: no SDK

    provider = spec.provider or ctx.default_provider or "offline"
    await asyncio.to_thread(prepare, ctx.llm, provider, budget_seconds=spec.timeout_seconds)


async def call_llm(
    spec: StepSpec,
    state: OrchestrationState,
    ctx: EngineContext,
    attempt: int,
    *,
    choices: list[str] | None = None,
) -> tuple[dict[str, Any], dict[str, int], dict[str, Any]]:
    """Call the step's LLM: ``(outputs, tokens, usage record)``.

    Args:
        spec: The step (its block holds the prompt).
        state: The run's state.
        ctx: The segment's context (the LLM registry).
        attempt: Which attempt this is (offline scripts answer per attempt).
        choices: For decisions: the labels the answer must be one of.
    """
    started = time.monotonic()
    from langorch.llm import LLMRequest, LLMResult  # light; prepare_llm loaded the provider
    from langorch.llm.calls import call_model

    block = spec.block
    if block is None:
        raise StepFailedError(f"step {spec.step_id}: an LLM step needs a block with a prompt")
    scope = input_scope(spec, state)
    provider = spec.provider or ctx.default_provider or "offline"
    prompt = render(
        block.prompt_template,
        scope,
        max_chars=prompt_char_limit(provider, block.max_prompt_chars),
        too_long_hint=f"the prompt limit of block {block.block_id} ({provider}); shorten its "
        "inputs, or raise the block's max_prompt_chars (at most 4,000,000)",
    )
    system = block.system_prompt or f"You are executing: {block.name or block.block_id}. " + (
        block.description or ""
    )
    system = render(system, scope)
    granted, held = _within_budget(spec, state, ctx, provider, len(system) + len(prompt))
    visit = visits_of(spec, state)
    effects = _begin(spec, ctx, visit, attempt, list(block.tools_required))
    tool_cost = 0.0
    request = LLMRequest(
        run_id=ctx.run_id,
        step_id=spec.step_id,
        block_id=block.block_id,
        provider=provider,
        model=spec.model,  # None: the registry applies the default provider's model
        system_prompt=system,
        prompt=prompt,
        output_keys=[k for k in block.output_keys if not (choices and k == "branch")],
        output_types=dict(block.output_types),
        choices=choices,
        temperature=spec.temperature,
        tools=list(block.tools_required),
        call_index=visit,
        attempt=attempt,
        max_tokens=spec.max_tokens,
        max_attempts=spec.max_attempts,
        toolbox=effects.toolbox if effects is not None else None,
    )

    async def answer() -> dict[str, Any]:
        # Within the step's time, cancelled with it, every attempt's tokens counted.
        try:
            made = await call_model(
                ctx.llm, request, budget_seconds=spec.timeout_seconds, started=started
            )
        except Exception as exc:
            _charge_failure(exc, request, ctx)  # a refused or cut answer is billed too
            raise
        answered = asdict(made)
        if effects is not None:  # kept with the answer: a replay makes no calls, costs the same
            answered[TOOL_COST] = effects.tool_cost_usd
        return answered

    try:
        if effects is None:
            result = LLMResult(**await answer())
        else:
            # Recorded (seed 001 §5): a step run again after a crash reuses the answer, and
            # the tool calls made on the way to it, instead of making them again.
            try:
                recorded, _ = await effects.once("llm", _digest(request), answer)
            finally:
                await effects.aclose()
            tool_cost = float(recorded.pop(TOOL_COST, 0.0) or 0.0)
            result = LLMResult(**recorded)
    except BaseException as exc:
        _settle(ctx, held, getattr(exc, "cost_usd", 0.0))  # parked or failed: what it cost
        raise
    tokens, usage = _usage(spec, result)
    cost = _charge(ctx, result.provider, result.model, tokens)
    if tool_cost:
        ctx.spent_usd += tool_cost
        usage["tool_cost_usd"] = round(tool_cost, 9)
        cost = round((cost or 0.0) + tool_cost, 9)
    _settle(ctx, held, cost or 0.0)
    if cost is not None:
        usage["cost_usd"] = cost
    if granted:
        usage["budget_granted"] = granted
    return dict(result.outputs), tokens, usage


TOOL_COST = "tool_cost_usd"
"""Where a recorded answer keeps what its tool calls declared they cost."""


def charge_declared(ctx: EngineContext, cost: float) -> None:
    """Count a call's declared cost (a tool's, an agent's): the run's spend and the workflow's
    day and month counters (added, as nothing was reserved for it)."""
    from langorch.domain.budgets import micros

    if cost <= 0:
        return
    ctx.spent_usd += cost
    if ctx.budget_counters is None:
        return
    for key, _ in ctx.budget_periods:
        ctx.budget_counters.settle(key, micros(cost))


class UnpricedModelError(StepFailedError):
    """A budgeted workflow's step uses a model no price table prices: its cost cannot be kept
    within the budget."""


def _within_budget(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, provider: str, chars: int
) -> tuple[float, list[tuple[str, int]]]:
    """Before the call: ask a person (or fail) when its estimate would cross the run's budget.

    The estimate is the prompt (``chars``) and the whole output limit, priced. Asking parks the
    run on an approval like an ``approval`` step's; an approval raises the budget (the usage
    record keeps the raise, so later steps and segments see it), a rejection or a timeout ends
    the run ``budget_exceeded``.

    Then the workflow's day and month counters (``per_day``, ``per_month``) are reserved the
    estimate, each by one conditional write: of runs racing for the last of a day's budget,
    those whose estimate no longer fits are refused, so the day overspends by at most what one
    call costs past its estimate. Refused, the run asks (or fails) as for its own budget;
    approved, the reservation is made past the limit.

    Returns:
        What approvals asked here added to the run's budget (US dollars), and the counters
        reserved (key, micro-dollars) for :func:`_settle` once the call's cost is known.

    Raises:
        BudgetExceededError: ``on_budget: fail``, or the question was not approved.
    """
    from langorch.domain.budgets import (
        BudgetExceededError,
        budget_message,
        budget_request,
        granted_raise,
        over_budget,
    )

    budget = ctx.budget
    if budget is None or ctx.prices is None:
        return 0.0, []
    model = priced_model(provider, spec.model, ctx)
    estimate = ctx.prices.estimate(
        provider,
        model,
        prompt_chars=chars,
        max_output_tokens=spec.max_tokens or ctx.default_max_tokens,
    )
    if estimate is None:
        # Fail closed: a budget that cannot be kept must not look kept.
        raise UnpricedModelError(
            f"step {spec.step_id}: the workflow has a budget, but model {model!r} of provider "
            f"{provider!r} has no price; add '{provider}/{model}' to the workflow's prices: (or "
            "to the deployment's LANGORCH_PRICES_FILE), in US dollars per million tokens"
        )
    granted = 0.0
    earlier = sum(float(u.get("budget_granted") or 0) for u in state.get("usage") or ())
    limit = (budget.per_run or 0.0) + earlier
    while budget.per_run is not None and over_budget(ctx.spent_usd, estimate, limit + granted):
        message = budget_message(ctx.spent_usd, limit + granted, estimate)
        if budget.on_budget == "fail":
            raise BudgetExceededError(f"step {spec.step_id}: {message} (on_budget: fail)")
        from langgraph.types import interrupt

        request = budget_request(
            step_id=spec.step_id,
            spent=ctx.spent_usd,
            limit=limit + granted,
            estimate=estimate,
            budget=budget,
            approvers=list(budget.approvers or ctx.default_approvers),
        )
        answer = interrupt(request)
        decision = answer if isinstance(answer, dict) else {"decision": str(answer)}
        if decision.get("decision") != "approved":
            who = f" by {decision['approver']}" if decision.get("approver") else ""
            raise BudgetExceededError(
                f"step {spec.step_id}: {message}; the raise was {decision.get('decision')}{who}"
            )
        granted += granted_raise(decision, budget)
    return granted, _reserve(spec, ctx, budget, estimate)


def _reserve(
    spec: StepSpec, ctx: EngineContext, budget: Any, estimate: float
) -> list[tuple[str, int]]:
    """Reserve ``estimate`` on each of the workflow's period counters, asking (or failing)
    when one is spent; the reservations made."""
    from langorch.domain.budgets import BudgetExceededError, budget_request, micros

    counters = ctx.budget_counters
    if counters is None or not ctx.budget_periods:
        return []
    amount = micros(estimate)
    held: list[tuple[str, int]] = []
    for key, limit in ctx.budget_periods:
        if counters.reserve(key, amount, limit):
            held.append((key, amount))
            continue
        period = {"day": "today", "month": "this month"}.get(key.split("/")[-2], "")
        whose = f"workflow {ctx.workflow_id} {period}".rstrip()
        spent, cap = counters.spent(key) / 1e6, limit / 1e6
        message = budget_message_for(whose, spent, cap, estimate)
        if budget.on_budget == "fail":
            _release(ctx, held)
            raise BudgetExceededError(f"step {spec.step_id}: {message} (on_budget: fail)")
        from langgraph.types import interrupt

        request = budget_request(
            step_id=spec.step_id,
            spent=spent,
            limit=cap,
            estimate=estimate,
            budget=budget,
            approvers=list(budget.approvers or ctx.default_approvers),
            whose=whose,
        )
        request["editable"] = {}  # the approval lets this call past; it raises no limit
        answer = interrupt(request)
        decision = answer if isinstance(answer, dict) else {"decision": str(answer)}
        if decision.get("decision") != "approved":
            _release(ctx, held)
            who = f" by {decision['approver']}" if decision.get("approver") else ""
            raise BudgetExceededError(
                f"step {spec.step_id}: {message}; going past it was {decision.get('decision')}{who}"
            )
        counters.settle(key, amount)  # approved: reserved past the limit
        held.append((key, amount))
    return held


def budget_message_for(whose: str, spent: float, limit: float, estimate: float) -> str:
    """The budget message of a period counter (``workflow X (daily budget) has spent …``)."""
    from langorch.domain.budgets import budget_message

    return budget_message(spent, limit, estimate, whose=whose)


def _release(ctx: EngineContext, held: list[tuple[str, int]]) -> None:
    """Give back reservations of a call that will not be made."""
    _settle(ctx, held, 0.0)


def _settle(ctx: EngineContext, held: list[tuple[str, int]], cost: float) -> None:
    """Replace each reservation by what the call cost (``cost``, US dollars)."""
    from langorch.domain.budgets import micros

    if ctx.budget_counters is None:
        return
    for key, amount in held:
        ctx.budget_counters.settle(key, micros(cost) - amount)


def _charge(ctx: EngineContext, provider: str, model: str, tokens: dict[str, int]) -> float | None:
    """What one attempt's ``tokens`` cost (``None``: unpriced), added to the run's spend."""
    if ctx.prices is None:
        return None
    cost = ctx.prices.cost(provider, model, tokens)
    if cost is not None:
        ctx.spent_usd += cost
    return cost


def _charge_failure(exc: Exception, request: Any, ctx: EngineContext) -> None:
    """Price a failed attempt's billed tokens; the cost travels on the error to the timeline."""
    from langorch.llm.calls import error_tokens

    tokens = error_tokens(exc)
    if tokens is None:
        return
    cost = _charge(
        ctx, request.provider, priced_model(request.provider, request.model, ctx), tokens
    )
    if cost is not None:
        exc.cost_usd = cost  # type: ignore[attr-defined]  # read by the executor's _failed


LLM_KINDS = frozenset({"action", "extraction", "llm_action"})
"""Kinds whose every run calls the step's model (a ``decision`` does when it has no
``cases`` and no ``condition``)."""


def model_of(spec: StepSpec, ctx: EngineContext) -> tuple[str, str] | None:
    """The provider and model the step's LLM calls go to, as the registry resolves them
    (``model_limits`` key them); ``None``: the step calls no model."""
    kind = spec.kind.value
    if kind == "decision":
        if spec.step.cases or spec.step.condition:
            return None
    elif kind not in LLM_KINDS:
        return None
    provider = spec.provider or ctx.default_provider or "offline"
    return provider, priced_model(provider, spec.model, ctx)


def priced_model(provider: str, model: str | None, ctx: EngineContext) -> str:
    """The model a call with ``model`` goes to, as the registry resolves it (for prices)."""
    if model:
        return model
    if provider == (ctx.default_provider or "offline") and ctx.default_model:
        return ctx.default_model
    from langorch.llm.bedrock import DEFAULT_BEDROCK_MODEL
    from langorch.llm.offline import OFFLINE_MODEL
    from langorch.llm.openai import DEFAULT_OPENAI_MODEL

    defaults = {
        "bedrock": DEFAULT_BEDROCK_MODEL,
        "openai": DEFAULT_OPENAI_MODEL,
        "offline": OFFLINE_MODEL,
    }
    return defaults.get(provider, "*")


def _begin(
    spec: StepSpec, ctx: EngineContext, visit: int, attempt: int, tools: list[str]
) -> StepEffects | None:
    """The attempt's recorded calls and tools (``None``: the context records nothing)."""
    if ctx.side_effects is None:
        return None
    from langgraph.config import get_stream_writer

    from langorch.engine.kinds._tool_gate import tool_gate

    emit = get_stream_writer()  # tool calls go on the timeline with the step's events
    return ctx.side_effects.begin(
        step_id=spec.step_id,
        visit=visit,
        attempt=attempt,
        tools=tools,
        emit=emit,
        gate=tool_gate(spec, ctx, emit) if tools else None,
    )


def _usage(spec: StepSpec, result: Any) -> tuple[dict[str, int], dict[str, Any]]:
    tokens = {"input": result.input_tokens, "output": result.output_tokens}
    usage = {
        "step_id": spec.step_id,
        "provider": result.provider,
        "model": result.model,
        "input": result.input_tokens,
        "output": result.output_tokens,
    }
    return tokens, usage


def _digest(request: Any) -> str:
    return request_digest(request)


def request_digest(request: Any) -> str:
    """The fingerprint an LLM call is recorded under: the same prompt to the same model, with
    the same keys, choices and tools, is the same call (``langorch replay`` serves it)."""
    from langorch.domain.tasks import fingerprint

    return fingerprint(
        request.provider,
        request.model,
        request.system_prompt,
        request.prompt,
        request.output_keys,
        request.choices,
        request.tools,
    )


async def run_llm(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    """Ask the LLM and keep the block's output keys it answered."""
    outputs, tokens, usage = await call_llm(spec, state, ctx, attempt)
    keys = spec.block.output_keys if spec.block else []
    context = {key: outputs[key] for key in keys if key in outputs}
    return Outcome(context=context, tokens=tokens, state={"usage": [usage]})


EXECUTORS: dict[str, Executor] = {"action": run_llm, "extraction": run_llm}
PREPARERS: dict[str, Preparer] = {"action": prepare_llm, "extraction": prepare_llm}
