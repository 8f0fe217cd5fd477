"""A CKP procedure's ``status`` and ``effective_date`` are honoured: a draft never runs from a
trigger, a version not yet in effect does not either, an earlier active version runs in their
place — and a person can still start a draft by hand to try it."""

from __future__ import annotations

from typing import Any

from langorch.app.definitions import register_workflow
from langorch.app.runs import StartRun, start_run
from langorch.app.triggers import handle_schedule
from langorch.domain.triggers import ScheduleFired, schedule_name
from tests.ckp_support import compiled, procedure
from tests.fakes import Fakes
from tests.integration.triggers_support import NOW, SECRET, signed
from tests.unit.triggers_support import all_runs, webhook_answer

END = {"type": "terminate", "status": "success", "outputs": {"version": "{{ marker }}"}}


def hooked(status: str = "active", **fields: Any) -> Any:
    """A procedure `hooked` started by webhooks; its variable `marker` tells versions apart."""
    return compiled(
        procedure(
            "e",
            {"e": END},
            procedure_id="hooked",
            status=status,
            trigger={"type": "webhook"},
            description=f"{status} {fields}",
            **fields,
        )
    )


def deps_with(*versions: Any) -> Fakes:
    deps = Fakes(seed_builtins=False)
    deps.clock.set(NOW)
    for plan in versions:
        register_workflow(deps.definitions, plan)
    deps.secrets.put_json("langorch/webhooks/hooked", {"current": SECRET})
    return deps


def test_a_draft_is_not_started_by_its_webhook() -> None:
    # Given a procedure stored as a draft only
    deps = deps_with(hooked("draft"))
    # When its webhook is called, Then it answers 404 saying why, and no run starts
    status, body = webhook_answer(signed("{}", workflow_id="hooked"), deps)
    assert status == 404
    assert "has status draft" in body["error"]
    assert all_runs(deps) == []


def test_an_earlier_active_version_runs_while_the_latest_is_a_draft() -> None:
    # Given version 1 active and version 2 a draft
    deps = deps_with(hooked("active"), hooked("draft"))
    # When the webhook is called, Then version 1 runs
    status, body = webhook_answer(signed("{}", workflow_id="hooked"), deps)
    assert status == 202
    assert deps.runs.get_run(body["run_id"]).workflow_version == 1


def test_a_version_not_yet_in_effect_is_not_started_by_its_schedule() -> None:
    # Given a scheduled procedure that takes effect next year
    plan = compiled(
        procedure(
            "e",
            {"e": END},
            procedure_id="monthly",
            effective_date="2027-01-01",
            trigger={"type": "scheduled", "schedule": "0 9 1 * *"},
        )
    )
    deps = deps_with(plan)
    # When its schedule fires, Then it is skipped with the reason, and nothing starts
    fired = ScheduleFired(
        source="langorch.schedule",
        workflow_id="monthly",
        schedule=schedule_name("monthly", 0),
        scheduled_time="2026-11-18T09:00:00Z",
    )
    outcome = handle_schedule(fired, deps)
    assert outcome.started == []
    [(workflow, reason)] = outcome.skipped
    assert workflow == "monthly"
    assert "effective from 2027-01-01" in reason


def test_a_draft_can_be_started_by_hand() -> None:
    deps = deps_with(hooked("draft"))
    run, created = start_run(StartRun("hooked"), deps)
    assert created and run.workflow_version == 1
