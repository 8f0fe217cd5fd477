"""Redrive many runs: the plan first (which runs, by status, workflow and age), then each one at a
bounded rate, so a bulk redrive after an outage does not become the next outage (Step Functions
``StartExecution`` and the LLM provider both have quotas).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from langorch.app.recovery.redrive import RedriveDeps, Version, redrive
from langorch.domain.errors import LangorchError
from langorch.domain.runs import RunRecord, RunStatus

logger = logging.getLogger(__name__)

DEFAULT_PER_SECOND = 2.0
"""Redrives started per second by default: well under ``StartExecution``'s quota, and slow
enough that the runs' first LLM calls do not all land at once."""
MAX_PER_SECOND = 25.0

Outcome = Literal["redriven", "already", "refused"]


@dataclass(frozen=True)
class BulkItem:
    """One run of a bulk redrive: what happened to it."""

    run_id: str
    workflow_id: str
    outcome: Outcome
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The item as JSON."""
        return {
            "run_id": self.run_id,
            "workflow_id": self.workflow_id,
            "outcome": self.outcome,
            "detail": self.detail,
        }


def plan_redrives(
    deps: RedriveDeps,
    *,
    status: RunStatus = RunStatus.failed,
    workflow_id: str | None = None,
    since: timedelta | None = None,
    limit: int = 1000,
) -> list[RunRecord]:
    """The runs a bulk redrive would take, oldest first.

    Args:
        deps: the runs and a clock.
        status: the runs' status (``failed`` unless asked otherwise).
        workflow_id: only runs of this workflow.
        since: only runs that ended (or last changed) at most this long ago.
        limit: at most this many (newest kept).
    """
    runs = deps.runs.list_runs(workflow_id=workflow_id, status=status, limit=limit)
    if since is not None:
        cutoff = deps.clock() - since
        runs = [r for r in runs if (r.ended_at or r.updated_at) >= cutoff]
    return sorted(runs, key=lambda r: (r.created_at, r.run_id))


def redrive_many(
    deps: RedriveDeps,
    runs: list[RunRecord],
    *,
    version: Version = None,
    reason: str | None = None,
    actor: str | None = None,
    force: bool = False,
    per_second: float = DEFAULT_PER_SECOND,
    on_progress: Callable[[int, int, BulkItem], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> list[BulkItem]:
    """Redrive each run, at most ``per_second`` a second; one run's refusal stops nothing.

    Args:
        deps: as :func:`~langorch.app.recovery.redrive.redrive`'s.
        runs: the plan (:func:`plan_redrives`).
        version: each run's new version (``"latest"``; ``None``: its own).
        reason: why (recorded on each run).
        actor: who (likewise).
        force: accept incompatible version moves (recorded).
        per_second: the rate bound (``0 <`` rate ``<=`` :data:`MAX_PER_SECOND`).
        on_progress: told ``(done, total, item)`` after each run.
        sleep: how to wait (injected in tests).
        monotonic: the clock the rate is kept with.

    Returns:
        One item per run, in the plan's order.
    """
    if not 0 < per_second <= MAX_PER_SECOND:
        raise ValueError(f"per_second must be in (0, {MAX_PER_SECOND}], not {per_second}")
    interval = 1.0 / per_second
    items: list[BulkItem] = []
    next_at = monotonic()
    for index, run in enumerate(runs):
        wait = next_at - monotonic()
        if wait > 0:
            sleep(wait)
        next_at = max(next_at, monotonic()) + interval
        item = _one(deps, run, version=version, reason=reason, actor=actor, force=force)
        items.append(item)
        if on_progress is not None:
            on_progress(index + 1, len(runs), item)
    logger.info(
        "bulk redrive done",
        extra={"runs": len(items), "redriven": sum(i.outcome == "redriven" for i in items)},
    )
    return items


def _one(
    deps: RedriveDeps,
    run: RunRecord,
    *,
    version: Version,
    reason: str | None,
    actor: str | None,
    force: bool,
) -> BulkItem:
    try:
        done = redrive(deps, run.run_id, version=version, reason=reason, actor=actor, force=force)
    except LangorchError as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return BulkItem(
            run.run_id, run.workflow_id, "refused", f"{type(exc).__name__}: {first_line}"
        )
    if not done.started:
        return BulkItem(run.run_id, run.workflow_id, "already", done.execution_name)
    return BulkItem(
        run.run_id,
        run.workflow_id,
        "redriven",
        f"attempt {done.attempt}, version {done.from_version} -> {done.to_version}",
    )
