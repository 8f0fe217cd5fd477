"""Use-cases for resource locks (seed 001 §7b): declare a resource's limit, list resources, and
give back what a run held or queued for when it ends outside a segment (failed, cancelled).

Taking and giving back a lease around a step is the engine's (``engine/resources.py``); these
are the operator's and the run's end.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from langorch.domain.errors import DefinitionError
from langorch.domain.resources import check_limit, check_name

if TYPE_CHECKING:
    from langorch.app.ports import ResourceLocks
    from langorch.domain.resources import ResourceState

logger = logging.getLogger(__name__)


class ResourceDeps(Protocol):
    """What the resource use-cases need: the resource locks."""

    @property
    def resources(self) -> ResourceLocks: ...


@dataclass(frozen=True)
class ResourceView:
    """A resource as ``langorch resources list`` shows it, at one moment."""

    name: str
    limit: int
    declared: bool
    held_by: tuple[str, ...]
    """Holders (``run_id/step_id``) of unexpired leases."""
    queued: tuple[str, ...]
    """Waiting holders, first in line first."""


def declare_resource(name: str, limit: int, deps: ResourceDeps) -> ResourceState:
    """Set ``name``'s ``concurrency_limit`` for this deployment.

    Lowering the limit takes no lease away: holders keep theirs, and no new one is granted
    until fewer than ``limit`` are held.

    Raises:
        DefinitionError: the name or the limit is invalid (with the field and a hint).
        StorageError: the store failed.
    """
    problems = [*check_name(name, "name"), *check_limit(limit, "limit")]
    if problems:
        raise DefinitionError(f"resource {name}", problems)
    deps.resources.set_limit(name, limit)
    logger.info("resource declared", extra={"resource": name, "limit": limit})
    return deps.resources.get(name)


def list_resources(deps: ResourceDeps, *, now: float) -> list[ResourceView]:
    """Every resource declared or used, with its live leases and queue at ``now``."""
    views = []
    for state in deps.resources.list():
        live = state.live(now)
        views.append(
            ResourceView(
                name=state.name,
                limit=state.limit,
                declared=state.declared,
                held_by=tuple(sorted(live.leases)),
                queued=tuple(w.holder for w in live.queue),
            )
        )
    return views


def release_ended_run(run_id: str, resources: ResourceLocks) -> list[str]:
    """Give back every lease and queue place of a run that ended outside a segment.

    A run failed by the state machine (its segment crashed while a step held a lease) or
    cancelled while queued would otherwise block the runs behind it until its lease or its
    place expired.

    Returns:
        The resources it held or queued for.
    """
    touched = resources.release_run(run_id)
    if touched:
        logger.info("resources released", extra={"run_id": run_id, "resources": touched})
    return touched
