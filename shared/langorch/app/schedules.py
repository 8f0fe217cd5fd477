"""Use-cases for a workflow's schedules: pause, resume, and backfill the slots they missed.

* :func:`set_schedules_paused` — the workflow's schedules ``DISABLED`` (paused) or ``ENABLED``:
  EventBridge Scheduler does not fire a disabled schedule, and neither does the local tick.
  Slots that fall while paused are not caught up on resume; :func:`backfill_schedules` does that.
* :func:`backfill_schedules` — start each slot of the workflow's schedule triggers in a range,
  through :func:`langorch.app.triggers.handle_schedule` with the same Input the Scheduler sends.
  The run's dedupe key is the slot (``schedule:<name>:<time>``), so a slot that already ran, by
  the Scheduler or an earlier backfill, starts nothing new.
* :func:`catch_up_schedules` — after downtime, each schedule trigger with ``catch_up`` looks for
  the slots missed since its last recorded slot (the newest run it started) and starts them
  all (``all``), only the most recent (``latest``), or none (``none``); the decision is recorded
  on one run (the latest missed slot's: started, or ended ``cancelled`` for ``none``) as
  ``trigger.detail.catch_up = {mode, missed, skipped}``. A trigger without ``catch_up`` is left
  as before: its missed slots are not caught up (run a backfill).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
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


CATCH_UP = "catch_up"
"""The ``trigger.detail`` key of a caught-up slot's run: ``{mode, missed, skipped}``."""

LAST_SLOT_RUNS = 200
"""The newest runs of a workflow read to find a schedule's last recorded slot."""


@dataclass
class CatchUp:
    """What catching up one schedule did.

    Attributes:
        workflow_id: the workflow.
        schedule: the schedule's name.
        mode: its ``catch_up``.
        missed: the slots missed since its last recorded slot, oldest first (the newest
            :data:`MAX_BACKFILL_SLOTS` of them).
        count: how many slots were missed.
        started: runs started (``all``: one per missed slot; ``latest``: the last one).
        skipped: missed slots not run.
    """

    workflow_id: str
    schedule: str
    mode: str
    missed: list[str] = field(default_factory=list)
    count: int = 0
    started: list[StartedRun] = field(default_factory=list)
    skipped: int = 0


def catch_up_schedules(deps: ScheduleDeps, *, until: datetime) -> list[CatchUp]:
    """Catch up the slots every ``catch_up`` schedule missed before ``until`` (when the
    scheduler came back: the slots after it are its own to fire).

    A schedule that never started a run has no last slot, so nothing counts as missed; a
    paused one (``DISABLED``) is skipped (its slots are not missed, they are paused). ``all``
    starts at most the newest :data:`MAX_BACKFILL_SLOTS` (older ones are counted skipped).
    Running it again finds nothing more: each missed slot's run (or the ``none`` record) is
    stored under the slot's dedupe key and becomes the last recorded slot.

    Raises:
        StorageError: a backend failed (running it again starts only what is missing).
    """
    done: list[CatchUp] = []
    paused = {s.name for s in deps.schedules.list() if s.state == "DISABLED"}
    for plan in deps.definitions.list_workflows():
        for index, trigger in enumerate(schedule_triggers(plan)):
            name = schedule_name(plan.plan_id, index)
            if trigger.catch_up is None or trigger.schedule is None or name in paused:
                continue
            last = _last_slot(plan.plan_id, name, deps)
            if last is None:
                continue
            cron = trigger.schedule.cron_expression, trigger.schedule.timezone
            slots, count = _missed(*cron, last + timedelta(seconds=1), until)
            if slots:
                done.append(_catch_up(plan.plan_id, name, trigger.catch_up, slots, count, deps))
    return done


def _missed(
    expression: str, timezone: str, start: datetime, end: datetime
) -> tuple[list[datetime], int]:
    """The newest :data:`MAX_BACKFILL_SLOTS` slots in ``[start, end]`` and how many there are
    (read a page at a time: a long downtime of a frequent schedule is counted, not listed)."""
    slots: list[datetime] = []
    count = 0
    while True:
        page = cron_slots(expression, timezone, start, end, limit=MAX_BACKFILL_SLOTS)
        more = len(page) > MAX_BACKFILL_SLOTS
        page = page[:MAX_BACKFILL_SLOTS]
        count += len(page)
        slots = (slots + page)[-MAX_BACKFILL_SLOTS:]
        if not more:
            return slots, count
        start = page[-1] + timedelta(seconds=1)


def _catch_up(
    workflow_id: str,
    name: str,
    mode: str,
    slots: list[datetime],
    count: int,
    deps: ScheduleDeps,
) -> CatchUp:
    missed = [slot.strftime("%Y-%m-%dT%H:%M:%SZ") for slot in slots]
    result = CatchUp(workflow_id, name, mode, missed, count)
    run_all = mode == "all"
    ran = len(missed) if run_all else (1 if mode == "latest" else 0)
    result.skipped = count - ran
    facts = {CATCH_UP: {"mode": mode, "missed": count, "skipped": result.skipped}}
    for moment in missed if run_all else missed[-1:]:
        fired = ScheduleFired(
            source="langorch.schedule",
            workflow_id=workflow_id,
            schedule=name,
            scheduled_time=moment,
        )
        skip = None
        if mode == "none":
            skip = f"catch_up: none — {count} missed slot(s) not run"
        outcome = handle_schedule(fired, deps, detail=facts, skip=skip)
        result.started += [run for run in outcome.started if run.created and skip is None]
    return result


def _last_slot(workflow_id: str, name: str, deps: ScheduleDeps) -> datetime | None:
    """The newest slot the schedule has a run for (among the workflow's newest runs)."""
    slots = [
        str(run.trigger.detail.get("scheduled_time"))
        for run in deps.runs.list_runs(workflow_id=workflow_id, limit=LAST_SLOT_RUNS)
        if run.trigger.type == "schedule" and run.trigger.detail.get("schedule") == name
    ]
    if not slots:
        return None
    return datetime.fromisoformat(max(slots).replace("Z", "+00:00"))
