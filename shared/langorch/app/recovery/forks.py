"""Fork a run: a new run from the checkpoint just before a step of another, with edited state.

To try a fix or to correct bad data without touching the original: the new run starts where the
original stood before ``at_step`` (the steps before it keep their outputs and are not run
again), with ``shared_context`` keys set by the operator, on the same or another workflow
version. Both records carry the link (``forked_from`` on the new run, ``forks`` on the
original) and both timelines say who forked what, when and why.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from langorch.app.recovery.redrive import (
    IncompatibleVersionError,
    RedriveDeps,
    RedrivePoint,
    Version,
    compare_at,
    target_plan,
)
from langorch.domain.errors import NotFoundError
from langorch.domain.limits import ensure_input_fits
from langorch.domain.runs import (
    ForkLink,
    RunRecord,
    RunTrigger,
    TimelineEvent,
    TimelineEventType,
    new_run_id,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Forked:
    """What a fork did."""

    run_id: str
    """The new run."""
    forked_from: str
    at_step: str
    checkpoint_id: str
    workflow_version: int
    edited: tuple[str, ...] = ()
    started: bool = False
    problems: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        """The fork as JSON (``--json``)."""
        return {
            "run_id": self.run_id,
            "forked_from": self.forked_from,
            "at_step": self.at_step,
            "checkpoint_id": self.checkpoint_id,
            "workflow_version": self.workflow_version,
            "edited": list(self.edited),
            "started": self.started,
            "problems": list(self.problems),
        }


def fork(
    deps: RedriveDeps,
    run_id: str,
    *,
    at_step: str,
    edits: dict[str, Any] | None = None,
    version: Version = None,
    reason: str | None = None,
    actor: str | None = None,
    force: bool = False,
) -> Forked:
    """Start a new run from the checkpoint of ``run_id`` just before ``at_step``.

    Args:
        deps: as :func:`~langorch.app.recovery.redrive.redrive`'s.
        run_id: the original run (any status: it is not changed beyond its lineage).
        at_step: the step the new run starts at.
        edits: ``shared_context`` keys to set in the new run's state.
        version: the workflow version of the new run (``"latest"``; ``None``: the original's).
        reason: why (in both timelines).
        actor: who (likewise).
        force: accept a version the state does not fit (the problems are recorded).

    Raises:
        NotFoundError: the run, the version or the step does not exist, or the run never
            reached the step.
        InputValidationError: the edits are larger than a run can carry.
        JsonShapeError: an edit nests deeper than ``MAX_JSON_DEPTH`` or is not strict JSON.
        IncompatibleVersionError: the version does not fit the edited state (without ``force``).
    """
    from langorch.engine import rewind

    edits = dict(edits or {})
    original = deps.runs.get_run(run_id)
    old_plan = deps.compiler.workflow(original.workflow_id, original.workflow_version)
    new_plan = target_plan(deps, original, version)
    ensure_input_fits(original.workflow_id, edits, "shared_context")
    graph = deps.compiler.compile(old_plan)
    found = asyncio.run(rewind.before_step(graph, run_id, at_step))
    if found is None or found.checkpoint_id is None:
        raise NotFoundError(
            f"run {run_id} never reached step {at_step!r}, so it cannot be forked there; "
            f"steps that were due: {', '.join(found.ran) if found else 'none'}"
        )
    values = dict(found.values)
    values["shared_context"] = {**(values.get("shared_context") or {}), **edits}
    point = RedrivePoint(found.checkpoint_id, True, values, found.next, found.ran, ())
    problems: tuple[str, ...] = ()
    if new_plan.version != old_plan.version:
        diff = compare_at(deps, original, old_plan, new_plan, point)
        problems = tuple(str(p) for p in diff.problems)
        if diff.problems and not force:
            raise IncompatibleVersionError(
                f"run {run_id} cannot be forked onto {new_plan.plan_id}@{new_plan.version}", diff
            )
    now = deps.clock()
    child_id = new_run_id(deps.ids)
    link = ForkLink(
        run_id=run_id, at_step=at_step, checkpoint_id=found.checkpoint_id, at=now, actor=actor
    )
    child = RunRecord(
        run_id=child_id,
        workflow_id=original.workflow_id,
        workflow_version=new_plan.version,
        trigger=RunTrigger(type="manual", detail={"forked_from": run_id, "at_step": at_step}),
        input=original.input,
        user_id=original.user_id,
        created_at=now,
        updated_at=now,
        forked_from=link,
    )
    deps.runs.create_run(child)
    rewind.copy_to_head(
        deps.checkpointer,
        source_thread=run_id,
        checkpoint_id=found.checkpoint_id,
        target_thread=child_id,
        edits=edits,
        metadata={"langorch_fork_of": run_id},
    )
    detail = {
        "at_step": at_step,
        "version": f"{old_plan.version} -> {new_plan.version}",
        "edited": sorted(edits)[:20],
        "reason": (reason or "")[:200],
    }
    if problems:
        detail["forced"] = [p[:120] for p in problems[:5]]
    deps.runs.append_events(
        child_id,
        [
            TimelineEvent(
                seq=1,
                at=now,
                type=TimelineEventType.run_forked,
                step_id=at_step,
                actor=actor,
                detail={**detail, "from_run": run_id},
            )
        ],
    )
    _link_original(deps, run_id, child_id, link, detail)
    started = False
    if deps.settings.state_machine_arn:
        _, started = deps.executions.start(child_id, {"run_id": child_id, "resume": None})
    logger.info("run forked", extra={"run_id": child_id, "workflow_id": original.workflow_id})
    return Forked(
        run_id=child_id,
        forked_from=run_id,
        at_step=at_step,
        checkpoint_id=found.checkpoint_id,
        workflow_version=new_plan.version,
        edited=tuple(sorted(edits)),
        started=started or not deps.settings.state_machine_arn,
        problems=problems,
    )


def _link_original(
    deps: RedriveDeps, run_id: str, child_id: str, link: ForkLink, detail: dict[str, Any]
) -> None:
    """Note the fork on the original: its timeline and its record's ``forks``."""
    deps.runs.append_events(
        run_id,
        [
            TimelineEvent(
                seq=deps.runs.next_event_seq(run_id),
                at=link.at or deps.clock(),
                type=TimelineEventType.run_forked,
                step_id=link.at_step,
                actor=link.actor,
                detail={**detail, "into_run": child_id},
            )
        ],
    )
    deps.runs.add_fork(run_id, link.model_copy(update={"run_id": child_id}))
