"""A plan from an intent, without a model: seed 000's ``mock_decompose(intent) -> TaskPlan``,
made deterministic (``langorch workflows draft`` with the offline provider).

1. **Pick**: a block is picked when the intent shares a word with its id, name, description,
   category, tags, input or output keys (:func:`langorch.domain.words.words`). Only blocks a
   plan can use as they are: kinds whose step needs nothing more than the block (LLM actions
   and extractions, memory, ``http``, ``read_file``); a decision needs branch targets, an
   approval approvers, which no intent names.
2. **Order**: a block that reads a key another picked block writes runs after it; otherwise the
   best-matching first, then by id.
3. **Wire**: each step depends on the earlier steps that write the keys it reads. Keys no
   picked block writes become the workflow's inputs (``inputs_schema``).

The same intent and blocks always give the same plan. Nothing is stored: the caller validates
the plan and shows it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from langorch.domain.definitions import (
    RESERVED_STEP_IDS,
    BlockDefinition,
    BlockType,
    InputSchema,
    PlanStep,
    TaskPlan,
)
from langorch.domain.errors import LangorchError
from langorch.domain.words import STOP_WORDS, words

DRAFTABLE_KINDS = frozenset(
    {
        BlockType.action,
        BlockType.extraction,
        BlockType.query_memory,
        BlockType.save_memory,
        BlockType.http,
        BlockType.read_file,
    }
)
"""Block kinds a drafted step can use with no settings of its own."""

MAX_ID_WORDS = 5
"""Words of the intent in a drafted plan's id."""


class NoMatchingBlocksError(LangorchError):
    """No registered block shares a word with the intent: there is nothing to compose."""


@dataclass(frozen=True)
class Pick:
    """Why a block is in the draft: the intent's words it matched."""

    step_id: str
    block_id: str
    matched: tuple[str, ...]


@dataclass(frozen=True)
class Decomposition:
    """The drafted plan and why each step is in it."""

    plan: TaskPlan
    picks: tuple[Pick, ...]


def block_words(block: BlockDefinition) -> frozenset[str]:
    """What a block is matched on: its id, name, description, category, tags and keys."""
    texts = [
        block.block_id,
        block.name,
        block.description,
        block.category,
        *block.tags,
        *block.input_keys,
        *block.output_keys,
    ]
    return words(" ".join(texts))


def decompose(intent: str, blocks: Sequence[BlockDefinition]) -> Decomposition:
    """The plan the intent's words pick from ``blocks`` (see the module's docstring).

    Raises:
        NoMatchingBlocksError: the intent has no words, or no usable block matches them.
    """
    wanted = words(intent)
    picked: list[tuple[BlockDefinition, tuple[str, ...]]] = []
    for block in sorted(blocks, key=lambda b: b.block_id):
        if block.block_type not in DRAFTABLE_KINDS:
            continue
        matched = tuple(sorted(wanted & block_words(block)))
        if matched:
            picked.append((block, matched))
    if not picked:
        raise NoMatchingBlocksError(
            f"no registered block matches the intent {intent!r}: say what to do with the words "
            "of the blocks' names, descriptions or tags (`langorch blocks list`), or register "
            "blocks that do it (`langorch blocks put`)"
        )
    ordered = _in_data_order(picked)
    steps: list[PlanStep] = []
    picks: list[Pick] = []
    produced: dict[str, str] = {}
    inputs: dict[str, dict[str, str]] = {}
    for block, matched in ordered:
        step_id = _step_id(block.block_id)
        depends = [produced[key] for key in block.input_keys if key in produced]
        for key in block.input_keys:
            if key not in produced:
                inputs.setdefault(key, {"type": "string"})
        steps.append(
            PlanStep(
                step_id=step_id, block_id=block.block_id, depends_on=list(dict.fromkeys(depends))
            )
        )
        picks.append(Pick(step_id, block.block_id, matched))
        for key in block.output_keys:
            produced.setdefault(key, step_id)
    plan = TaskPlan(
        plan_id=_plan_id(intent),
        name=" ".join(intent.split())[:80],
        user_intent=intent,
        steps=steps,
        inputs_schema=InputSchema(properties=inputs) if inputs else None,
    )
    return Decomposition(plan, tuple(picks))


def _in_data_order(
    picked: list[tuple[BlockDefinition, tuple[str, ...]]],
) -> list[tuple[BlockDefinition, tuple[str, ...]]]:
    """Writers before readers; among the blocks ready at once, the best match first.

    A cycle (two blocks reading each other's outputs) is broken by the same preference.
    """
    remaining = sorted(picked, key=lambda p: (-len(p[1]), p[0].block_id))
    ordered: list[tuple[BlockDefinition, tuple[str, ...]]] = []
    while remaining:
        writers = {key for block, _ in remaining for key in block.output_keys}
        ready = next(
            (
                p
                for p in remaining
                if not (set(p[0].input_keys) & (writers - set(p[0].output_keys)))
            ),
            remaining[0],
        )
        ordered.append(ready)
        remaining.remove(ready)
    return ordered


def _step_id(block_id: str) -> str:
    return f"{block_id}_step" if block_id in RESERVED_STEP_IDS else block_id


def _plan_id(intent: str) -> str:
    """``order_lunch_uber_eats``: the intent's first words (a valid, readable id)."""
    found = [w for w in re.findall(r"[a-z0-9]+", intent.lower()) if w not in STOP_WORDS]
    slug = "_".join(found[:MAX_ID_WORDS]) or "drafted"
    slug = slug[:100]
    return slug if slug[0].isalpha() else f"w_{slug}"
