"""``query_memory`` / ``save_memory``: the long-term store (preferences, history), namespaced by
user and workflow (seed 000 §8)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from langorch.domain.kinds.base import Read, StepKind, Template, root_key
from langorch.domain.step_settings import MemorySpec

if TYPE_CHECKING:
    from langorch.domain.definitions import BlockDefinition, PlanStep
    from langorch.domain.lookup import DefinitionLookup


def memory_spec(step: PlanStep, block: BlockDefinition | None) -> MemorySpec:
    """The step's memory settings, else its block's, else the defaults."""
    return step.memory or (block.memory if block else None) or MemorySpec()


class QueryMemoryKind(StepKind):
    """Search (or read) preferences or history into ``shared_context``.

    The query is ``memory.query`` rendered, else the block's first input (seed 000's
    ``memory_query``); only the items that match it are returned
    (:mod:`langorch.engine.kinds.memory`).
    """

    name = "query_memory"
    step_fields = frozenset({"memory"})
    block_fields = frozenset({"memory"})

    def step_templates(
        self, step: PlanStep, block: BlockDefinition | None, path: str
    ) -> Iterator[Template]:
        """The step's search query."""
        if step.memory is not None and step.memory.query is not None:
            yield f"{path}.memory.query", step.memory.query, "template"

    def block_templates(self, block: BlockDefinition) -> Iterator[Template]:
        """The block's search query (it may read only the block's inputs)."""
        if block.memory is not None and block.memory.query is not None:
            yield "memory.query", block.memory.query, "template"

    def outputs(
        self, step_id: str, step: PlanStep, block: BlockDefinition | None, lookup: DefinitionLookup
    ) -> set[str]:
        """The block's first output key, else ``memory_results``."""
        keys = super().outputs(step_id, step, block, lookup)
        return keys or {"memory_results"}


class SaveMemoryKind(StepKind):
    """Store keys of ``shared_context`` as preferences or history."""

    name = "save_memory"
    step_fields = frozenset({"memory"})
    block_fields = frozenset({"memory"})

    def reads(self, step: PlanStep, block: BlockDefinition | None, path: str) -> Iterator[Read]:
        """The keys it saves."""
        if block is not None and block.memory is not None and not step.memory:
            for key in block.memory.keys:
                yield f"{path}.block_id", key, f"block {block.block_id!r} saves"
        if step.memory is not None:
            for j, key in enumerate(step.memory.keys):
                yield f"{path}.memory.keys[{j}]", root_key(key), "saves"

    def outputs(
        self, step_id: str, step: PlanStep, block: BlockDefinition | None, lookup: DefinitionLookup
    ) -> set[str]:
        """The block's outputs and ``<step_id>_saved``, the keys it stored."""
        return super().outputs(step_id, step, block, lookup) | {f"{step_id}_saved"}


KINDS = (QueryMemoryKind(), SaveMemoryKind())
