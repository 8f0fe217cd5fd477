"""A schedule trigger's ``catch_up`` (issue 31): after downtime, the slots missed since the
schedule's last recorded slot are started all (``all``), the most recent only (``latest``) or
none (``none``, the count recorded); without it nothing is caught up, as before. The runs store
(where the last slot is read and each slot's run is deduped) is the fake, SQLite or DynamoDB."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from langorch.app.schedules import catch_up_schedules, set_schedules_paused
from langorch.app.trigger_sync import sync_triggers
from langorch.app.triggers import handle_schedule
from langorch.domain.runs import RunStatus
from langorch.domain.triggers import ScheduleFired, schedule_name
from tests.fakes import Fakes
from tests.fakes.approvals import InMemoryApprovals
from tests.integration.conftest import register_text

HOURLY = """
workflows:
  - plan_id: {id}
    memory: false
    triggers:
      - type: schedule
        schedule: {{cron_expression: "0 * * * *"}}
        {catch_up}
    steps:
      - {{step_id: work, kind: transform, transform: {{done: "1"}}}}
"""

MODES = {"all": "catch_up: all", "latest": "catch_up: latest", "none": "catch_up: none", "off": ""}


@pytest.fixture(params=["fake", "sqlite", "dynamodb"])
def deps(request: pytest.FixtureRequest) -> Fakes:
    fakes = Fakes(
        seed_builtins=False,
        trigger_function_arn="arn:aws:lambda:eu-west-1:123456789012:function:trigger",
        scheduler_role_arn="arn:aws:iam::123456789012:role/scheduler",
    )
    if request.param == "sqlite":
        from langorch.adapters.sqlite.runs import SqliteRuns

        fakes.runs = SqliteRuns(request.getfixturevalue("sqlite_db"))  # type: ignore[assignment]
    elif request.param == "dynamodb":
        from langorch.adapters.dynamodb.runs import RunsRepository

        runs = RunsRepository(request.getfixturevalue("dynamodb"), "runs")
        runs.create_table()
        fakes.runs = runs  # type: ignore[assignment]
    fakes.approvals = InMemoryApprovals()  # type: ignore[attr-defined]
    for mode, line in MODES.items():
        register_text(fakes, HOURLY.format(id=f"h_{mode}", catch_up=line))  # type: ignore[arg-type]
        plan = fakes.definitions.get_workflow(f"h_{mode}")
        assert plan is not None
        sync_triggers(plan, fakes)
    return fakes


def fired(deps: Fakes, workflow: str, slot: str) -> None:
    event = ScheduleFired(
        source="langorch.schedule",
        workflow_id=workflow,
        schedule=schedule_name(workflow, 0),
        scheduled_time=slot,
    )
    handle_schedule(event, deps)


def slots_of(deps: Fakes, workflow: str) -> list[tuple[str, str]]:
    runs = deps.runs.list_runs(workflow_id=workflow, limit=100)
    return sorted((r.trigger.detail["scheduled_time"], r.status.value) for r in runs)


def after_downtime(deps: Fakes, workflow: str) -> Any:
    """The schedule fired 09:00, then the stack was down until 14:30 (10-14 missed)."""
    fired(deps, workflow, "2026-11-27T09:00:00Z")
    [done] = [
        c
        for c in catch_up_schedules(deps, until=datetime(2026, 11, 27, 14, 30, tzinfo=UTC))
        if c.workflow_id == workflow
    ]
    return done


def test_catch_up_all_starts_each_missed_slot_once(deps: Fakes) -> None:
    # When the scheduler comes back after missing 5 hourly slots
    done = after_downtime(deps, "h_all")
    # Then each missed slot started one run
    assert (len(done.missed), len(done.started), done.skipped) == (5, 5, 0)
    hours = [slot[11:13] for slot, _ in slots_of(deps, "h_all")]
    assert hours == ["09", "10", "11", "12", "13", "14"]
    # And catching up again starts nothing more
    again = catch_up_schedules(deps, until=datetime(2026, 11, 27, 14, 30, tzinfo=UTC))
    assert [c for c in again if c.workflow_id == "h_all"] == []


def test_catch_up_latest_starts_only_the_most_recent_missed_slot(deps: Fakes) -> None:
    done = after_downtime(deps, "h_latest")
    assert (len(done.started), done.skipped) == (1, 4)
    assert slots_of(deps, "h_latest")[-1][0] == "2026-11-27T14:00:00Z"
    latest = deps.runs.get_run(done.started[0].run_id)
    assert latest.trigger.detail["catch_up"] == {"mode": "latest", "missed": 5, "skipped": 4}


def test_catch_up_none_starts_nothing_and_records_the_skipped_count(deps: Fakes) -> None:
    before = set(deps.executions.names)
    done = after_downtime(deps, "h_none")
    # Then no execution started for a missed slot
    assert (done.started, done.skipped) == ([], 5)
    assert len(set(deps.executions.names) - before) == 1  # the 09:00 slot's own
    # And the latest missed slot holds one record, cancelled with the count
    slot, status = slots_of(deps, "h_none")[-1]
    assert (slot, status) == ("2026-11-27T14:00:00Z", RunStatus.cancelled.value)
    [record] = [
        r for r in deps.runs.list_runs(workflow_id="h_none") if r.status is RunStatus.cancelled
    ]
    assert record.status_reason == "catch_up: none — 5 missed slot(s) not run"
    assert record.trigger.detail["catch_up"]["skipped"] == 5


def test_without_catch_up_missed_slots_are_left_as_before(deps: Fakes) -> None:
    fired(deps, "h_off", "2026-11-27T09:00:00Z")
    done = catch_up_schedules(deps, until=datetime(2026, 11, 27, 14, 30, tzinfo=UTC))
    assert [c for c in done if c.workflow_id == "h_off"] == []
    assert len(slots_of(deps, "h_off")) == 1


def test_a_paused_schedule_is_not_caught_up(deps: Fakes) -> None:
    fired(deps, "h_all", "2026-11-27T09:00:00Z")
    set_schedules_paused("h_all", True, deps)
    done = catch_up_schedules(deps, until=datetime(2026, 11, 27, 14, 30, tzinfo=UTC))
    assert [c for c in done if c.workflow_id == "h_all"] == []


def test_triggers_show_counts_the_missed_slots_not_run(deps: Fakes) -> None:
    from langorch.app.trigger_view import show_triggers

    after_downtime(deps, "h_none")
    view = show_triggers("h_none", deps)
    assert view.missed_slots == 5
    assert view.dropped == {"catch_up: none — 5 missed slot(s) not run": 1}
