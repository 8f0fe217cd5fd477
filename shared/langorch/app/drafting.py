"""Draft a workflow from an intent (``langorch workflows draft``): seed 000's decomposition.

The configured model composes a ``TaskPlan`` from the registered blocks; with the offline
provider, the deterministic decomposer does (:mod:`langorch.domain.drafting`). Either way the
plan is validated against the same blocks and returned with its findings; nothing is stored
(``workflows put`` stores it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from langorch.domain.definitions import BlockDefinition, TaskPlan
from langorch.domain.drafting import Pick, decompose
from langorch.domain.errors import DefinitionError, Problem
from langorch.domain.loading import parse_definitions
from langorch.domain.lookup import DefinitionLookup
from langorch.domain.validation import check_workflow
from langorch.llm import KNOWN_PROVIDERS, LLMRequest, LLMResult

OFFLINE = "offline"

SYSTEM_PROMPT = (
    "You compose workflows for langorch from blocks that already exist. A workflow is a "
    "TaskPlan: plan_id (a letter, then letters, digits, _ or -), name, user_intent, steps, and "
    "inputs_schema ({properties: {key: {type: string}}, required: [...]}) for the keys the "
    "user must give. Each step is {step_id, block_id, depends_on: [step ids]} and may add "
    "input_mappings ({block input key: state key}). Use only the blocks listed, by block_id; "
    "a step runs after the steps it depends on, and reads the keys earlier steps wrote (their "
    "output_keys) or the workflow's inputs. Use as few steps as do what is asked. Decision "
    "blocks need branches: {label: step_id} on their step."
)


class DraftLLM(Protocol):
    """The part of the LLM registry drafting uses."""

    def invoke(self, request: LLMRequest) -> LLMResult: ...


@dataclass
class Draft:
    """A drafted workflow and what validating it found.

    Attributes:
        plan: The workflow (not stored).
        composed_by: ``offline decomposer``, or the provider and model that composed it.
        picks: Why each step is there (the offline decomposer's matched words).
        errors: What would stop ``workflows put`` from storing it.
        warnings: What it would store with.
    """

    plan: TaskPlan
    composed_by: str
    picks: tuple[Pick, ...] = ()
    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)


def draft_workflow(
    intent: str,
    blocks: Sequence[BlockDefinition],
    lookup: DefinitionLookup,
    *,
    llm: DraftLLM | None,
    provider: str,
    model: str | None = None,
    tools: frozenset[str] | None = None,
) -> Draft:
    """Compose, then validate, a workflow for ``intent`` from ``blocks``.

    Args:
        intent: What the user wants, in their words.
        blocks: The blocks the plan may use (the registered ones, with the built-ins).
        lookup: Where the plan's references are resolved for validation (the same blocks).
        llm: The model registry (``None``, or ``provider`` offline: the deterministic
            decomposer).
        provider: The configured default provider.
        model: Its model (``None``: the provider's default).
        tools: The tools bound here, for validation's warnings (``None``: not checked).

    Raises:
        NoMatchingBlocksError: offline, no block matches the intent's words.
        DefinitionError: the model's answer is not a workflow (each problem with its path).
        LLMError: the model call failed.
    """
    if llm is None or provider == OFFLINE:
        found = decompose(intent, blocks)
        draft = Draft(found.plan, "offline decomposer", found.picks)
    else:
        plan = _compose(intent, blocks, llm, provider, model)
        draft = Draft(plan, f"{provider}{':' + model if model else ''}")
    checked = check_workflow(draft.plan, lookup, tools=tools, providers=KNOWN_PROVIDERS)
    draft.errors, draft.warnings = checked.errors, checked.warnings
    return draft


def _compose(
    intent: str,
    blocks: Sequence[BlockDefinition],
    llm: DraftLLM,
    provider: str,
    model: str | None,
) -> TaskPlan:
    request = LLMRequest(
        run_id="draft",
        step_id="draft",
        block_id=None,
        provider=provider,
        model=model,
        system_prompt=SYSTEM_PROMPT,
        prompt=_prompt(intent, blocks),
        output_keys=["plan"],
        output_types={"plan": "object"},
    )
    # The registry checked the answer's shape: `plan` is an object.
    answer = dict(llm.invoke(request).outputs["plan"])
    answer.setdefault("user_intent", intent)
    loaded = parse_definitions({"workflows": [answer]}, source="the model's draft")
    if len(loaded.workflows) != 1:
        raise DefinitionError(
            "the model's draft", [Problem("", "the answer is not one workflow", "try again")]
        )
    return loaded.workflows[0]


def _prompt(intent: str, blocks: Sequence[BlockDefinition]) -> str:
    catalog = [
        {
            "block_id": b.block_id,
            "name": b.name,
            "description": b.description,
            "kind": b.block_type.value,
            "input_keys": b.input_keys,
            "output_keys": b.output_keys,
            "tags": b.tags,
            **({"branches": sorted(b.branches)} if b.branches else {}),
        }
        for b in sorted(blocks, key=lambda b: b.block_id)
    ]
    return (
        f"The user's intent: {intent}\n\n"
        f"The blocks (JSON):\n{json.dumps(catalog, ensure_ascii=False, indent=1)}\n\n"
        "Answer with the workflow as the `plan` object."
    )
