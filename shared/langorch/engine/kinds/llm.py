"""``action`` / ``extraction``: render the block's prompt from its inputs, call its LLM with
structured output whose fields are the ``output_keys``, merge them into ``shared_context``."""

from __future__ import annotations

import time
from typing import Any

from langorch.domain.errors import StepFailedError
from langorch.domain.templates import prompt_char_limit, render
from langorch.engine.context import EngineContext
from langorch.engine.kinds.base import Executor, Outcome, StepSpec, input_scope, visits_of
from langorch.engine.state import OrchestrationState


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
    started = time.monotonic()  # before the first import of langorch.llm: it takes a while
    from langorch.llm import LLMRequest  # the package is light; SDKs load per provider
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
    request = LLMRequest(
        run_id=ctx.run_id,
        step_id=spec.step_id,
        block_id=block.block_id,
        provider=provider,
        model=spec.model,  # None: the registry applies the default provider's model
        system_prompt=render(system, scope),
        prompt=prompt,
        output_keys=[k for k in block.output_keys if not (choices and k == "branch")],
        output_types=dict(block.output_types),
        choices=choices,
        temperature=spec.temperature,
        tools=list(block.tools_required),
        call_index=visits_of(spec, state),
        attempt=attempt,
        max_tokens=spec.max_tokens,
        max_attempts=spec.max_attempts,
    )
    # Within the step's time, cancelled with it, every attempt's tokens counted (llm/calls.py).
    result = await call_model(
        ctx.llm, request, budget_seconds=spec.timeout_seconds, started=started
    )
    tokens = {"input": result.input_tokens, "output": result.output_tokens}
    usage = {
        "step_id": spec.step_id,
        "provider": result.provider,
        "model": result.model,
        "input": result.input_tokens,
        "output": result.output_tokens,
    }
    return dict(result.outputs), tokens, usage


async def run_llm(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    """Ask the LLM and keep the block's output keys it answered."""
    outputs, tokens, usage = await call_llm(spec, state, ctx, attempt)
    keys = spec.block.output_keys if spec.block else []
    context = {key: outputs[key] for key in keys if key in outputs}
    return Outcome(context=context, tokens=tokens, state={"usage": [usage]})


EXECUTORS: dict[str, Executor] = {"action": run_llm, "extraction": run_llm}
