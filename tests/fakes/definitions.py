"""In-memory definitions store: identical content is a no-op, a change adds a version."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import datetime

from langorch.domain.definitions import BlockDefinition, TaskPlan
from langorch.domain.errors import NotFoundError
from langorch.domain.promotions import Promotion
from langorch.domain.stored import StoredDefinition
from langorch.domain.validation import InMemoryLookup
from tests.fakes.clock import T0


class InMemoryDefinitions(InMemoryLookup):
    """The definitions table's contract in memory (``tests/contracts/test_definitions_store``):
    a workflow's ``get_workflow(id)`` is its active version.

    Args:
        blocks: stored blocks (each version as given).
        workflows: stored workflows (the latest of each active).
        clock: when a version is stored (``created_at`` in :meth:`stored_workflows`).
    """

    def __init__(
        self,
        blocks: Iterable[BlockDefinition] = (),
        workflows: Iterable[TaskPlan] = (),
        *,
        clock: Callable[[], datetime] = lambda: T0,
    ) -> None:
        self._active: dict[str, int | None] = {}
        self._promotions: dict[str, list[Promotion]] = {}
        self._clock = clock
        self._created: dict[tuple[str, int], datetime] = {}
        super().__init__(blocks, workflows)

    def add_workflow(self, plan: TaskPlan) -> None:
        """Store one workflow version as it is (version included), stored now."""
        super().add_workflow(plan)
        self._created[plan.plan_id, plan.version] = self._clock()

    def put_block(self, block: BlockDefinition) -> tuple[BlockDefinition, bool]:
        """Store a block; returns the stored version and whether it is new."""
        latest = self.get_block(block.block_id)
        if latest is not None and latest.content_hash() == block.content_hash():
            return latest, False
        stored = block.model_copy(update={"version": 1 if latest is None else latest.version + 1})
        self.add_block(stored)
        return stored, True

    def put_workflow(self, plan: TaskPlan, *, activate: bool = True) -> tuple[TaskPlan, bool]:
        """Store a workflow (a draft unless ``activate``); returns the stored version and
        whether it is new."""
        latest = self.latest_workflow(plan.plan_id)
        if latest is not None and latest.content_hash() == plan.content_hash():
            return latest, False
        active = self.active_version(plan.plan_id)
        stored = plan.model_copy(update={"version": 1 if latest is None else latest.version + 1})
        self.add_workflow(stored)
        self._active[plan.plan_id] = stored.version if activate else active
        return stored, True

    def get_workflow(self, workflow_id: str, version: int | None = None) -> TaskPlan | None:
        """The workflow at ``version`` (``None``: the active one), or ``None``."""
        if version is None:
            version = self.active_version(workflow_id)
            if version is None:
                return None
        return super().get_workflow(workflow_id, version)

    def latest_workflow(self, workflow_id: str) -> TaskPlan | None:
        """The newest stored version, active or a draft."""
        return super().get_workflow(workflow_id)

    def latest_version(self, kind: str, definition_id: str) -> int | None:
        """The newest stored version (active or a draft), or ``None``."""
        if kind == "block":
            block = self.get_block(definition_id)
            return None if block is None else block.version
        latest = self.latest_workflow(definition_id)
        return None if latest is None else latest.version

    def active_version(self, workflow_id: str) -> int | None:
        """The active version (added with :meth:`add_workflow`: the latest)."""
        if workflow_id in self._active:
            return self._active[workflow_id]
        latest = self.latest_workflow(workflow_id)
        return None if latest is None else latest.version

    def promote(self, promotion: Promotion) -> Promotion:
        """Make ``promotion.version`` active and keep the record."""
        if super().get_workflow(promotion.workflow_id, promotion.version) is None:
            raise NotFoundError(f"workflow {promotion.workflow_id}@{promotion.version} not found")
        recorded = replace(promotion, previous_version=self.active_version(promotion.workflow_id))
        self._active[promotion.workflow_id] = promotion.version
        self._promotions.setdefault(promotion.workflow_id, []).append(recorded)
        return recorded

    def promotions(self, workflow_id: str) -> list[Promotion]:
        """Every promotion of a workflow, oldest first."""
        return list(self._promotions.get(workflow_id, []))

    def list_blocks(self) -> list[BlockDefinition]:
        """The latest version of every block, by id."""
        return sorted(self.blocks(), key=lambda b: b.block_id)

    def workflows(self) -> list[TaskPlan]:
        """The active version of every workflow that has one."""
        found = (self.get_workflow(p.plan_id) for p in super().workflows())
        return [p for p in found if p is not None]

    def list_workflows(self) -> list[TaskPlan]:
        """The active version of every workflow that has one, by id."""
        return sorted(self.workflows(), key=lambda p: p.plan_id)

    def stored_workflows(self) -> list[StoredDefinition[TaskPlan]]:
        """Every stored workflow's latest version (active or a draft) with its
        ``active_version``, by id."""
        latest = sorted(super().workflows(), key=lambda p: p.plan_id)
        return [
            StoredDefinition(
                kind="workflow",
                id=plan.plan_id,
                version=plan.version,
                content_hash=plan.content_hash(),
                created_at=self._created[plan.plan_id, plan.version],
                definition=plan,
                active_version=self.active_version(plan.plan_id),
            )
            for plan in latest
        ]
