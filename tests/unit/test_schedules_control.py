"""A workflow's schedules can be paused and resumed, and the slots they missed started once
each by a backfill.

On fakes (``tests/fakes``), with the trigger tests' ``nightly`` workflow: weekdays at 17:00
Europe/Paris (16:00 UTC in November); the clock is Wednesday 2026-11-18 11:06 UTC. What the
adapters store for a paused schedule is in ``tests/contracts/test_schedule_store.py``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from langorch.app.schedules import backfill_schedules, set_schedules_paused
from langorch.app.trigger_sync import sync_triggers
from langorch.domain.errors import NotFoundError, RequestRejectedError
from langorch.local.ticker import Ticker, _read_schedules
from tests.fakes import Fakes
from tests.unit.triggers_support import all_runs, executions, make_deps


@pytest.fixture
def deps() -> Fakes:
    deps = make_deps()
    plan = deps.definitions.get_workflow("nightly")
    assert plan is not None
    sync_triggers(plan, deps)
    return deps


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# Wednesday 4 to Tuesday 17 November: ten weekdays, each a 16:00 UTC slot.
FROM, TO = at("2026-11-04T00:00:00"), at("2026-11-18T00:00:00")


# --- Backfill ---------------------------------------------------------------------------------


def test_a_backfill_over_ten_missed_slots_starts_ten_runs(deps: Fakes):
    # Given a schedule that fired none of its slots between the 4th and the 18th

    # When the range is backfilled
    done = backfill_schedules("nightly", FROM, TO, deps)

    # Then each weekday's slot started one run, with the trigger's input and its slot
    assert done.slots[0] == "2026-11-04T16:00:00Z"
    assert done.slots[-1] == "2026-11-17T16:00:00Z"
    assert (len(done.slots), len(done.started), done.found, done.skipped) == (10, 10, [], [])
    runs = all_runs(deps)
    assert len(runs) == 10 and len(executions(deps)) == 10
    assert {r.input["mode"] for r in runs} == {"full"}
    assert sorted(r.trigger.detail["scheduled_time"] for r in runs) == done.slots


def test_backfilling_the_same_range_again_starts_nothing(deps: Fakes):
    # Given a range already backfilled
    first = backfill_schedules("nightly", FROM, TO, deps)

    # When it is backfilled again
    again = backfill_schedules("nightly", FROM, TO, deps)

    # Then every slot finds its run and no run or execution is added
    assert (len(again.started), len(again.found)) == (0, 10)
    assert {r.run_id for r in again.found} == {r.run_id for r in first.started}
    assert len(all_runs(deps)) == 10 and len(executions(deps)) == 10


def test_a_slot_the_scheduler_fired_is_not_started_again_by_a_backfill(deps: Fakes):
    # Given the Scheduler fired Monday the 16th's slot (its Input, substituted)
    from langorch.app.triggers import handle_schedule
    from langorch.domain.triggers import ScheduleFired

    fired = ScheduleFired(
        source="langorch.schedule",
        workflow_id="nightly",
        schedule="langorch-nightly",
        scheduled_time="2026-11-16T16:00:00Z",
    )
    handle_schedule(fired, deps)

    # When the week is backfilled
    done = backfill_schedules("nightly", FROM, TO, deps)

    # Then that slot found its run and only the nine others started
    assert (len(done.started), len(done.found)) == (9, 1)
    assert len(all_runs(deps)) == 10


def test_a_backfill_does_not_start_slots_that_are_not_due_yet(deps: Fakes):
    # Given a range reaching past now (Wednesday 18th, 11:06 UTC)

    # When it is backfilled
    done = backfill_schedules("nightly", at("2026-11-17T00:00:00"), at("2026-11-30T00:00:00"), deps)

    # Then only Tuesday's slot started; today's 16:00 is not missed yet
    assert done.slots == ["2026-11-17T16:00:00Z"]


def test_a_range_with_more_slots_than_max_starts_nothing(deps: Fakes):
    # Given a range of ten slots

    # When it is backfilled with at most five
    with pytest.raises(RequestRejectedError, match=r"more than 5 slots.*--max"):
        backfill_schedules("nightly", FROM, TO, deps, max_slots=5)

    # Then no run started
    assert all_runs(deps) == []


def test_a_backfill_of_a_workflow_without_a_schedule_trigger_says_so(deps: Fakes):
    with pytest.raises(NotFoundError, match="invoices has no schedule trigger"):
        backfill_schedules("invoices", FROM, TO, deps)


# --- Pause and resume -------------------------------------------------------------------------


def _ticker(deps: Fakes, fired: list[dict[str, Any]], since: datetime) -> Ticker:
    return Ticker(_read_schedules(deps.settings, deps.schedules), fired.append, since=since)


def test_a_paused_schedule_is_not_fired_by_the_local_tick(deps: Fakes):
    # Given the nightly schedule, paused
    names = set_schedules_paused("nightly", True, deps)
    fired: list[dict[str, Any]] = []
    tick = _ticker(deps, fired, since=at("2026-11-18T15:59:00"))

    # When the tick passes its 16:00 UTC slot
    tick.fire_due(at("2026-11-18T16:00:30"))

    # Then the schedule is DISABLED and nothing fired
    assert names == ["langorch-nightly"]
    schedule = deps.schedules.get("langorch-nightly")
    assert schedule is not None and schedule.state == "DISABLED"
    assert fired == []


def test_a_resumed_schedule_fires_its_next_slot(deps: Fakes):
    # Given the schedule paused over Wednesday's slot, then resumed
    set_schedules_paused("nightly", True, deps)
    fired: list[dict[str, Any]] = []
    tick = _ticker(deps, fired, since=at("2026-11-18T15:59:00"))
    tick.fire_due(at("2026-11-18T16:00:30"))
    set_schedules_paused("nightly", False, deps)

    # When the tick passes Thursday's slot
    tick.fire_due(at("2026-11-19T16:00:30"))

    # Then Thursday's slot fired, and Wednesday's (missed while paused) did not
    assert [event["scheduled_time"] for event in fired] == ["2026-11-19T16:00:00Z"]


def test_re_registering_a_workflow_keeps_its_paused_schedule_paused(deps: Fakes):
    # Given a paused schedule
    set_schedules_paused("nightly", True, deps)
    plan = deps.definitions.get_workflow("nightly")
    assert plan is not None
    trigger = plan.triggers[0]
    assert trigger.schedule is not None
    changed = trigger.model_copy(
        update={"schedule": trigger.schedule.model_copy(update={"cron_expression": "0 6 * * *"})}
    )

    # When the workflow's schedule changes and its triggers are synced
    sync = sync_triggers(plan.model_copy(update={"triggers": [changed]}), deps)

    # Then the schedule is updated and still paused
    assert [c.action for c in sync.schedules] == ["updated"]
    schedule = deps.schedules.get("langorch-nightly")
    assert schedule is not None
    assert (schedule.expression, schedule.state) == ("cron(0 6 * * ? *)", "DISABLED")


def test_pausing_a_workflow_whose_schedules_were_never_written_says_how_to_fix_it():
    # Given the nightly workflow stored, its triggers never synced
    deps = make_deps()

    # When it is paused
    with pytest.raises(NotFoundError, match="langorch workflows put"):
        set_schedules_paused("nightly", True, deps)
