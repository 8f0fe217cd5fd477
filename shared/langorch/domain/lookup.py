"""Where validation and the compiler find the blocks and workflows a plan refers to."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

from langorch.domain.definitions import BlockDefinition, TaskPlan

_D = TypeVar("_D", BlockDefinition, TaskPlan)


class DefinitionLookup(Protocol):
    """Where validation finds the blocks and workflows a plan refers to."""

    def get_block(self, block_id: str, version: int | None = None) -> BlockDefinition | None:
        """The block at this version (``None``: the latest), or ``None`` when absent."""
        ...

    def get_workflow(self, workflow_id: str, version: int | None = None) -> TaskPlan | None:
        """The workflow at this version (``None``: the latest), or ``None`` when absent."""
        ...


class InMemoryLookup:
    """A :class:`DefinitionLookup` over definitions held in memory (tests, ``validate``, local)."""

    def __init__(
        self,
        blocks: Iterable[BlockDefinition] = (),
        workflows: Iterable[TaskPlan] = (),
    ) -> None:
        """Index the definitions by id and version; a later one replaces an equal id+version.

        Args:
            blocks: Block definitions (any versions).
            workflows: Workflow definitions (any versions).
        """
        self._blocks: dict[str, dict[int, BlockDefinition]] = {}
        self._workflows: dict[str, dict[int, TaskPlan]] = {}
        for block in blocks:
            self.add_block(block)
        for plan in workflows:
            self.add_workflow(plan)

    def add_block(self, block: BlockDefinition) -> None:
        """Add (or replace) one block version."""
        self._blocks.setdefault(block.block_id, {})[block.version] = block

    def add_workflow(self, plan: TaskPlan) -> None:
        """Add (or replace) one workflow version."""
        self._workflows.setdefault(plan.plan_id, {})[plan.version] = plan

    def get_block(self, block_id: str, version: int | None = None) -> BlockDefinition | None:
        """The block at this version (``None``: the latest), or ``None`` when absent."""
        return _pick(self._blocks.get(block_id), version)

    def get_workflow(self, workflow_id: str, version: int | None = None) -> TaskPlan | None:
        """The workflow at this version (``None``: the latest), or ``None`` when absent."""
        return _pick(self._workflows.get(workflow_id), version)

    def blocks(self) -> list[BlockDefinition]:
        """The latest version of every block."""
        return [versions[max(versions)] for versions in self._blocks.values()]

    def workflows(self) -> list[TaskPlan]:
        """The latest version of every workflow."""
        return [versions[max(versions)] for versions in self._workflows.values()]


def _pick(versions: dict[int, _D] | None, version: int | None) -> _D | None:
    if not versions:
        return None
    return versions.get(max(versions) if version is None else version)
