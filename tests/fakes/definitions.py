"""In-memory definitions store: identical content is a no-op, a change adds a version."""

from __future__ import annotations

from langorch.domain.definitions import BlockDefinition, TaskPlan
from langorch.domain.validation import InMemoryLookup


class InMemoryDefinitions(InMemoryLookup):
    """The definitions table's contract in memory (``tests/contracts/test_definitions_store``)."""

    def put_block(self, block: BlockDefinition) -> tuple[BlockDefinition, bool]:
        """Store a block; returns the stored version and whether it is new."""
        latest = self.get_block(block.block_id)
        if latest is not None and latest.content_hash() == block.content_hash():
            return latest, False
        stored = block.model_copy(update={"version": 1 if latest is None else latest.version + 1})
        self.add_block(stored)
        return stored, True

    def put_workflow(self, plan: TaskPlan) -> tuple[TaskPlan, bool]:
        """Store a workflow; returns the stored version and whether it is new."""
        latest = self.get_workflow(plan.plan_id)
        if latest is not None and latest.content_hash() == plan.content_hash():
            return latest, False
        stored = plan.model_copy(update={"version": 1 if latest is None else latest.version + 1})
        self.add_workflow(stored)
        return stored, True

    def list_blocks(self) -> list[BlockDefinition]:
        """The latest version of every block, by id."""
        return sorted(self.blocks(), key=lambda b: b.block_id)

    def list_workflows(self) -> list[TaskPlan]:
        """The latest version of every workflow, by id."""
        return sorted(self.workflows(), key=lambda p: p.plan_id)
