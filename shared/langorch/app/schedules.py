"""Use-cases for a workflow's schedules: pause, resume, and backfill the slots they missed.

* :func:`set_schedules_paused` — the workflow's schedules ``DISABLED`` (paused) or ``ENABLED``:
  EventBridge Scheduler does not fire a disabled schedule, and neither does the local tick.
  Slots that fall while paused are not caught up on resume; :func:`backfill_schedules` does that.
* :func:`backfill_schedules` — start each slot of the workflow's schedule triggers in a range,
  through :func:`langorch.app.triggers.handle_schedule` with the same Input the Scheduler sends.
  The run's dedupe key is the slot (``schedule:<name>:<time>``), so a slot that already ran, by
  the Scheduler or an earlier backfill, starts nothing new.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from langorch.app.triggers import TriggerDeps, handle_schedule
from langorch.domain.cron import cron_slots
from langorch.domain.errors import NotFoundError, RequestRejectedError
from langorch.domain.triggers import (
    ScheduleFired,
    StartedRun,
    schedule_name,
    schedule_triggers,
)

if TYPE_CHECKING:
    from langorch.app.ports import ScheduleStore
    from langorch.domain.definitions import TaskPlan

MAX_BACKFILL_SLOTS = 1000
"""The most slots one backfill may start (``--max`` defaults lower): a wrong range must not
turn into a storm of runs."""


class ScheduleDeps(TriggerDeps, Protocol):
    """What pausing and backfilling need: starting runs (:class:`TriggerDeps`), the schedules."""

    @property
    def schedules(self) -> ScheduleStore: ...


@dataclass
class Backfill:
    """What one backfill did.

    Attributes:
        slots: every slot in the range, oldest first (``2026-11-22T09:00:00Z``, as the
            Scheduler writes them).
        started: runs started by this backfill.
        found: runs that slots already had (fired by the Scheduler or an earlier backfill).
        skipped: ``(slot, reason)`` for slots that cannot start a run.
    """

    slots: list[str] = field(default_factory=list)
    started: list[StartedRun] = field(default_factory=list)
    found: list[StartedRun] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


def _workflow(workflow_id: str, deps: ScheduleDeps) -> TaskPlan:
    plan = deps.definitions.get_workflow(workflow_id)
    if plan is None:
        raise NotFoundError(f"workflow {workflow_id} not found (langorch workflows list)")
    if not schedule_triggers(plan):
        raise NotFoundError(
            f"workflow {workflow_id} has no schedule trigger "
            '(add one: triggers: [{type: schedule, schedule: {cron_expression: "0 9 * * *"}}])'
        )
    return plan


def set_schedules_paused(workflow_id: str, paused: bool, deps: ScheduleDeps) -> list[str]:
    """Pause (``DISABLED``) or resume (``ENABLED``) every schedule of the workflow.

    Args:
        workflow_id: the workflow.
        paused: ``True`` to pause, ``False`` to resume.
        deps: the definitions and the schedules.

    Returns:
        The names of the schedules set (idempotent: pausing a paused one sets it again).

    Raises:
        NotFoundError: no such workflow, it has no schedule trigger, or its schedules were never
            written (the workflow was stored without syncing its triggers).
        StorageError: the Scheduler refused.
    """
    plan = _workflow(workflow_id, deps)
    state = "DISABLED" if paused else "ENABLED"
    names = [schedule_name(plan.plan_id, i) for i in range(len(schedule_triggers(plan)))]
    done = [name for name in names if deps.schedules.set_state(name, state)]
    if not done:
        raise NotFoundError(
            f"workflow {workflow_id}'s schedules ({', '.join(names)}) are not stored: register "
            "the workflow (langorch workflows put) so its schedules are written"
        )
    return done


def backfill_schedules(
    workflow_id: str,
    start: datetime,
    end: datetime,
    deps: ScheduleDeps,
    *,
    max_slots: int = 100,
) -> Backfill:
    """Start each slot of the workflow's schedule triggers in ``[start, end]`` once.

    Slots after now are not in the range (they are not missed yet). Nothing is started when
    the range holds more than ``max_slots`` slots.

    Args:
        workflow_id: the workflow.
        start: the range's first moment (timezone-aware).
        end: its last moment (timezone-aware).
        deps: starting runs and the definitions.
        max_slots: the most slots this backfill may start (1 to :data:`MAX_BACKFILL_SLOTS`).

    Returns:
        The slots, and the runs started, found or skipped for each.

    Raises:
        NotFoundError: no such workflow, or it has no schedule trigger.
        RequestRejectedError: ``end`` is before ``start``, ``max_slots`` is out of range, or
            the range holds more slots than ``max_slots``.
        StorageError: a backend failed (a backfill run again starts only what is missing).
    """
    if not 1 <= max_slots <= MAX_BACKFILL_SLOTS:
        raise RequestRejectedError(
            f"max slots is {max_slots}: use 1 to {MAX_BACKFILL_SLOTS} (or narrow the range)"
        )
    if end < start:
        raise RequestRejectedError(f"the range ends ({end}) before it starts ({start})")
    plan = _workflow(workflow_id, deps)
    end = min(end, deps.clock())
    due: list[tuple[datetime, str]] = []
    for index, trigger in enumerate(schedule_triggers(plan)):
        assert trigger.schedule is not None  # schedule_triggers keeps only those with one
        name = schedule_name(plan.plan_id, index)
        slots = cron_slots(
            trigger.schedule.cron_expression,
            trigger.schedule.timezone,
            start,
            end,
            limit=max_slots,
        )
        due += [(slot, name) for slot in slots]
    if len(due) > max_slots:
        raise RequestRejectedError(
            f"the range holds more than {max_slots} slots of workflow {workflow_id}: nothing "
            "was started; narrow --from/--to or raise --max"
        )
    result = Backfill()
    for slot, name in sorted(due):
        moment = slot.strftime("%Y-%m-%dT%H:%M:%SZ")  # the Scheduler's form: the dedupe key
        result.slots.append(moment)
        fired = ScheduleFired(
            source="langorch.schedule",
            workflow_id=plan.plan_id,
            schedule=name,
            scheduled_time=moment,
        )
        outcome = handle_schedule(fired, deps)
        for run in outcome.started:
            (result.started if run.created else result.found).append(run)
        result.skipped += [(moment, why) for _, why in outcome.skipped]
    return result
