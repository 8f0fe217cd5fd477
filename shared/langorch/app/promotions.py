"""Promoting a workflow version: make it the one runs, triggers and schedules start.

``workflows put --draft`` stores a version without activating it; :func:`promote_workflow`
activates one, with the replay gate's result (``langorch replay --out FILE``) recorded beside
who promoted it and when. A failed gate refuses the promotion unless it is forced, and then the
record says it was. The store makes the version active and keeps the record in one conditional
write, so concurrent promotions are all recorded in the order they took effect.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from langorch.domain.errors import NotFoundError
from langorch.domain.promotions import Gate, GateFailedError, Promotion

if TYPE_CHECKING:
    from langorch.app.trigger_sync import SyncDeps, TriggerSync
    from langorch.domain.definitions import TaskPlan


class PromotionStore(Protocol):
    """What promoting needs from the definitions store."""

    def get_workflow(self, workflow_id: str, version: int | None = None) -> TaskPlan | None:
        """The workflow at ``version`` (``None``: the active one), or ``None``."""
        ...

    def promote(self, promotion: Promotion) -> Promotion:
        """Make the version active and keep the record (``previous_version`` set by the store)."""
        ...

    def promotions(self, workflow_id: str) -> list[Promotion]:
        """Every promotion of a workflow, oldest first."""
        ...


class PromoteDeps(Protocol):
    """The ports :func:`promote_workflow` needs: the store and what syncs triggers."""

    @property
    def definitions(self) -> PromotionStore: ...
    @property
    def clock(self) -> Callable[[], datetime]: ...


@dataclass(frozen=True)
class PromoteWorkflow:
    """Make ``version`` of ``workflow_id`` active.

    Attributes:
        workflow_id: the workflow.
        version: the version to activate.
        promoted_by: who asks (the OS user locally, the IAM principal against a stack).
        gate: the replay gate's result, when one was given.
        force: promote although the gate failed (recorded as forced).
    """

    workflow_id: str
    version: int
    promoted_by: str
    gate: Gate | None = None
    force: bool = False


@dataclass(frozen=True)
class Promoted:
    """What :func:`promote_workflow` did.

    Attributes:
        promotion: the record kept (``None``: the version was active already; nothing changed).
        triggers: the active version's triggers after the sync (``None`` when nothing changed).
    """

    promotion: Promotion | None
    triggers: TriggerSync | None = None


def promote_workflow(
    cmd: PromoteWorkflow, deps: PromoteDeps, *, sync: Callable[[TaskPlan], TriggerSync]
) -> Promoted:
    """Activate a stored version, check its gate, record the promotion, sync its triggers.

    Args:
        cmd: what to promote, by whom, with which gate.
        deps: the definitions store and the clock.
        sync: makes the cloud side of the newly active version's triggers match it
            (:func:`~langorch.app.trigger_sync.sync_triggers`): its schedules now start it.

    Returns:
        The promotion recorded, or ``None`` in it when the version was active already.

    Raises:
        NotFoundError: the workflow or the version is not stored.
        GateFailedError: the gate's verdict failed and ``force`` was not given; nothing changed.
    """
    plan = deps.definitions.get_workflow(cmd.workflow_id, cmd.version)
    if plan is None:
        raise NotFoundError(
            f"workflow {cmd.workflow_id}@{cmd.version} not found: store it with "
            "`langorch workflows put --draft FILE` first (`langorch workflows show "
            f"{cmd.workflow_id}` lists its versions)"
        )
    gate = cmd.gate
    if gate is not None and not gate.passed and not cmd.force:
        raise GateFailedError(
            f"promotion of {cmd.workflow_id}@{cmd.version} refused: {gate.text()}; fix the "
            "candidate and replay again, or promote with --force (recorded as forced)"
        )
    active = deps.definitions.get_workflow(cmd.workflow_id)
    if active is not None and active.version == cmd.version:
        return Promoted(None)
    promotion = Promotion(
        workflow_id=cmd.workflow_id,
        version=cmd.version,
        previous_version=None,
        promoted_by=cmd.promoted_by,
        promoted_at=deps.clock(),
        gate=gate,
        forced=cmd.force and gate is not None and not gate.passed,
    )
    recorded = deps.definitions.promote(promotion)
    return Promoted(recorded, sync(plan))


def sync_for(deps: SyncDeps) -> Callable[[TaskPlan], TriggerSync]:
    """:func:`~langorch.app.trigger_sync.sync_triggers` on ``deps`` (the CLI's ``sync``)."""
    from langorch.app.trigger_sync import sync_triggers

    return lambda plan: sync_triggers(plan, deps)
