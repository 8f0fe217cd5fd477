"""``llm_action``: render the step's own prompt, ask the LLM (a recorded call, as every LLM call
is), and map the answer into variables with the ``outputs`` mappings."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from langorch.domain.definitions import BlockDefinition
from langorch.domain.errors import StepFailedError
from langorch.domain.kinds.llm_action import RESPONSE, LlmActionSettings
from langorch.domain.templates import render_value
from langorch.engine.context import EngineContext
from langorch.engine.kinds.base import Executor, Outcome, Preparer, StepSpec, scope_of
from langorch.engine.kinds.llm import call_llm, prepare_llm
from langorch.engine.state import OrchestrationState


async def run_llm_action(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    """Ask, then map."""
    settings = LlmActionSettings.model_validate(spec.step.settings or {})
    # The prompt lives on the step: the call is made as for a block of one prompt whose inputs
    # are the whole state (the engine's one LLM path, recorded and bounded the same way).
    block = BlockDefinition(
        block_id=spec.step_id,
        name=spec.step.name or spec.step_id,
        prompt_template=settings.prompt,
        system_prompt=settings.system_prompt,
        output_keys=list(settings.output_keys),
        output_types=dict(settings.output_types),
        max_prompt_chars=settings.max_prompt_chars,
    )
    call = dataclasses.replace(
        spec,
        block=block,
        temperature=settings.temperature if settings.temperature is not None else spec.temperature,
        max_tokens=settings.max_tokens or spec.max_tokens,
    )
    answers, tokens, usage = await call_llm(call, state, ctx, attempt)
    response = _response(answers, settings)
    context: dict[str, Any] = {}
    if not settings.outputs:
        context[f"{spec.step_id}_response"] = response
    scope = {**scope_of(spec, state), RESPONSE: response}
    for name, mapping in settings.outputs.items():
        context[name] = _mapped(spec, name, mapping, response, scope)
    return Outcome(context=context, tokens=tokens, state={"usage": [usage]})


async def prepare_llm_action(spec: StepSpec, ctx: EngineContext) -> None:
    """Load the provider first (as every LLM step does)."""
    await prepare_llm(spec, ctx)


def _response(answers: dict[str, Any], settings: LlmActionSettings) -> Any:
    """The whole answer: the structured fields asked for, or the text (parsed when it is JSON)."""
    if settings.output_keys != [RESPONSE]:
        return {k: answers.get(k) for k in settings.output_keys}
    text = answers.get(RESPONSE)
    if isinstance(text, str) and text.strip()[:1] in ("{", "["):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text
    return text


def _mapped(spec: StepSpec, name: str, mapping: str, response: Any, scope: dict[str, Any]) -> Any:
    head, _, rest = mapping.partition(":")
    if head.strip() == "json_extract":
        return _extract(response, rest.strip())
    if head.strip() == "regex":
        try:
            match = re.search(
                rest.strip(), response if isinstance(response, str) else json.dumps(response)
            )
        except re.error as exc:
            raise StepFailedError(
                f"node {spec.step_id}: outputs.{name}: {rest.strip()!r} is not a regular "
                f"expression ({exc})"
            ) from exc
        if match is None:
            return None
        return match.group(1) if match.groups() else match.group(0)
    if mapping.strip() == RESPONSE:
        return response
    return render_value(mapping, scope)


def _extract(value: Any, path: str) -> Any:
    """``a.b[0].c`` of a JSON value (``None`` where the path leads nowhere)."""
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        if part.startswith("["):
            index = int(part[1:-1])
            value = value[index] if isinstance(value, list) and index < len(value) else None
        else:
            value = value.get(part) if isinstance(value, dict) else None
        if value is None:
            return None
    return value


EXECUTORS: dict[str, Executor] = {"llm_action": run_llm_action}
PREPARERS: dict[str, Preparer] = {"llm_action": prepare_llm_action}
