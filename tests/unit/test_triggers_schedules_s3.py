"""Schedules fire once per slot and are kept in step with the workflow; S3 drops start the
workflows that watch them, once per object version.

On fakes (``tests/fakes``); what the Scheduler adapter writes is in
``tests/contracts/test_schedule_store.py`` and ``tests/integration/test_trigger_sync.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from langorch.adapters.scheduler import ScheduleInfo
from langorch.app.definitions import register_workflow
from langorch.app.trigger_sync import register_and_sync, sync_triggers
from langorch.app.triggers import handle_s3_object, handle_schedule
from langorch.domain.definitions import TaskPlan, Trigger
from langorch.domain.errors import DefinitionError
from langorch.domain.triggers import S3ObjectCreated, ScheduleFired
from tests.fakes import Fakes
from tests.integration.triggers_support import SCHEDULER_ROLE, TRIGGER_FN, load_event
from tests.unit.triggers_support import all_runs, executions, make_deps


@pytest.fixture
def deps() -> Fakes:
    return make_deps()


def _store(deps: Fakes, plan: TaskPlan) -> TaskPlan:
    return register_workflow(deps.definitions, plan).definition  # type: ignore[return-value]


def _nightly(deps: Fakes, **changes: object) -> TaskPlan:
    plan = deps.definitions.get_workflow("nightly")
    assert plan is not None
    return plan.model_copy(update=changes)


def _schedule(deps: Fakes, name: str) -> ScheduleInfo:
    stored = deps.schedules.get(name)
    assert stored is not None, f"no schedule {name}"
    return stored


# --- Registering schedules -------------------------------------------------------------------


def test_registering_a_schedule_trigger_creates_the_schedule_in_aws_cron(deps: Fakes):
    # Given the stored workflow with "0 17 * * 1-5" in Europe/Paris
    plan = _nightly(deps)

    # When its triggers are synced
    sync = sync_triggers(plan, deps)

    # Then the schedule exists with AWS's cron, the timezone, and our Input
    assert [(c.name, c.action) for c in sync.schedules] == [("langorch-nightly", "created")]
    stored = _schedule(deps, "langorch-nightly")
    assert stored.expression == "cron(0 17 ? * MON-FRI *)"
    assert stored.timezone == "Europe/Paris"
    assert stored.target_arn == TRIGGER_FN and stored.role_arn == SCHEDULER_ROLE
    assert stored.input == {
        "source": "langorch.schedule",
        "workflow_id": "nightly",
        "schedule": "langorch-nightly",
        "scheduled_time": "<aws.scheduler.scheduled-time>",
    }


SCHEDULE_DLQ = "arn:aws:sqs:us-east-1:123456789012:langorch-prod-ScheduleDlq"


def test_a_schedule_written_before_the_dlq_existed_gets_it_on_the_next_sync() -> None:
    # Given a schedule written without a DLQ
    before = make_deps()
    sync_triggers(_nightly(before), before)

    # When the workflow is synced again by a deployment that has a DLQ
    deps = before.redeployed(schedule_dlq_arn=SCHEDULE_DLQ)
    sync = sync_triggers(_nightly(deps), deps)

    # Then the schedule is updated to use it
    assert [c.action for c in sync.schedules] == ["updated"]
    assert _schedule(deps, "langorch-nightly").dead_letter_arn == SCHEDULE_DLQ


def test_syncing_again_without_changes_leaves_the_schedule_alone(deps: Fakes):
    # Given a synced schedule
    sync_triggers(_nightly(deps), deps)

    # When the same workflow is synced again
    sync = sync_triggers(_nightly(deps), deps)

    # Then nothing is written
    assert [c.action for c in sync.schedules] == ["unchanged"]
    assert deps.schedules.writes == 1


def test_changing_the_cron_updates_the_schedule(deps: Fakes):
    # Given a synced schedule
    sync_triggers(_nightly(deps), deps)
    trigger = _nightly(deps).triggers[0]
    assert trigger.schedule is not None
    changed = trigger.model_copy(
        update={
            "schedule": trigger.schedule.model_copy(
                update={"cron_expression": "30 6 1 * *", "timezone": "America/New_York"}
            )
        }
    )

    # When a new version with another cron and timezone is stored and synced
    plan = _store(deps, _nightly(deps, triggers=[changed]))
    sync = sync_triggers(plan, deps)

    # Then the same schedule now has the new expression and timezone
    assert [c.action for c in sync.schedules] == ["updated"]
    stored = _schedule(deps, "langorch-nightly")
    assert stored.expression == "cron(30 6 1 * ? *)"
    assert stored.timezone == "America/New_York"


def test_removing_the_schedule_trigger_deletes_the_schedule(deps: Fakes):
    # Given a synced schedule
    sync_triggers(_nightly(deps), deps)

    # When a version without schedule triggers is stored and synced
    plan = _store(deps, _nightly(deps, triggers=[Trigger(type="manual")]))
    sync = sync_triggers(plan, deps)

    # Then the schedule is gone
    assert [(c.name, c.action) for c in sync.schedules] == [("langorch-nightly", "deleted")]
    assert deps.schedules.get("langorch-nightly") is None


def test_another_workflows_schedule_with_a_longer_name_is_left_alone(deps: Fakes):
    # Given schedules for "nightly" and "nightly_eu" (same name prefix)
    sync_triggers(_nightly(deps), deps)
    other = _store(deps, _nightly(deps, plan_id="nightly_eu"))
    sync_triggers(other, deps)

    # When "nightly" drops its schedule trigger
    sync_triggers(_store(deps, _nightly(deps, triggers=[Trigger(type="manual")])), deps)

    # Then only its own schedule is deleted
    assert deps.schedules.get("langorch-nightly") is None
    assert deps.schedules.get("langorch-nightly_eu") is not None


def test_schedules_read_back_give_what_the_local_tick_needs(deps: Fakes):
    # Given a synced schedule
    sync_triggers(_nightly(deps), deps)

    # When the group's schedules are listed
    listed = deps.schedules.list()

    # Then each has its name, expression, timezone, Input and state
    assert [(s.name, s.expression, s.timezone, s.state) for s in listed] == [
        ("langorch-nightly", "cron(0 17 ? * MON-FRI *)", "Europe/Paris", "ENABLED")
    ]
    assert listed[0].input["workflow_id"] == "nightly"


def test_without_a_target_configured_schedules_are_not_written_and_it_says_why() -> None:
    # Given a deployment with no trigger function ARN
    deps = make_deps(trigger_function_arn=None)

    # When a workflow with a schedule trigger is synced
    plan = deps.definitions.get_workflow("nightly")
    assert plan is not None
    sync = sync_triggers(plan, deps)

    # Then nothing is written and the warning names the missing settings
    assert sync.schedules == []
    assert "LANGORCH_TRIGGER_FUNCTION_ARN" in sync.warnings[0]


def test_a_cron_aws_cannot_express_is_refused_before_anything_is_stored(
    deps: Fakes, tmp_path: Path
):
    # Given a file whose schedule restricts both day-of-month and day-of-week
    path = tmp_path / "both.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "workflows": [
                    {
                        "plan_id": "both_days",
                        "memory": False,
                        "schedule": {"cron_expression": "0 9 1 * 1"},
                        "steps": [{"step_id": "s", "kind": "transform", "transform": {"x": "1"}}],
                    }
                ]
            }
        )
    )

    # When it is registered
    with pytest.raises(DefinitionError) as raised:
        register_and_sync([path], deps)

    # Then the problem names the field, and the workflow was not stored
    assert raised.value.problems[0].path.endswith("schedule.cron_expression")
    assert deps.definitions.get_workflow("both_days") is None


def test_the_webhook_secret_is_created_once_and_returned_once(deps: Fakes):
    # Given a workflow with a webhook trigger and no secret yet
    deps.secrets.delete("langorch/webhooks/invoices")
    plan = deps.definitions.get_workflow("invoices")
    assert plan is not None

    # When its triggers are synced twice
    first = sync_triggers(plan, deps, new_secret=lambda: "whsec_once")
    second = sync_triggers(plan, deps, new_secret=lambda: "whsec_twice")

    # Then the first sync created and returned it, the second kept it and returned nothing
    assert first.webhook_secret == "whsec_once"
    assert second.webhook_secret is None
    stored = deps.secrets.get_json("langorch/webhooks/invoices", fresh=True)
    assert stored == {"current": "whsec_once"}


# --- Schedules firing ------------------------------------------------------------------------


def test_a_slot_delivered_twice_starts_one_run(deps: Fakes):
    # Given the recorded Scheduler invocation for one slot
    event = ScheduleFired.model_validate(load_event("scheduler_invoke.json"))

    # When it is delivered twice (a Scheduler retry has a new execution id, same slot)
    first = handle_schedule(event, deps)
    second = handle_schedule(event, deps)

    # Then one run exists, with the trigger's input, and one execution
    assert first.started[0].created is True
    assert second.started[0].created is False
    assert second.started[0].run_id == first.started[0].run_id
    run = deps.runs.get_run(first.started[0].run_id)
    assert run.input == {"mode": "full"}
    assert run.trigger.detail["scheduled_time"] == "2026-11-24T17:00:00Z"
    assert len(executions(deps)) == 1


def test_the_next_slot_starts_another_run(deps: Fakes):
    # Given one slot that fired
    event = load_event("scheduler_invoke.json")
    handle_schedule(ScheduleFired.model_validate(event), deps)

    # When the next slot fires
    later = ScheduleFired.model_validate({**event, "scheduled_time": "2026-11-25T17:00:00Z"})
    outcome = handle_schedule(later, deps)

    # Then it is a new run
    assert outcome.started[0].created is True
    assert len(all_runs(deps)) == 2


def test_a_schedule_no_longer_in_the_workflow_starts_nothing(deps: Fakes):
    # Given a slot of a schedule the workflow does not have (a leftover after a change)
    event = ScheduleFired.model_validate(
        {**load_event("scheduler_invoke.json"), "schedule": "langorch-nightly-2"}
    )

    # When it fires
    outcome = handle_schedule(event, deps)

    # Then it is skipped with the reason and nothing starts
    assert outcome.started == []
    assert "no longer" in outcome.skipped[0][1]
    assert executions(deps) == []


# --- S3 drops --------------------------------------------------------------------------------


def test_an_s3_drop_starts_only_the_workflows_whose_trigger_matches(deps: Fakes):
    # Given the recorded event for invoices/march 2026+final (1).json in the drop bucket
    event = S3ObjectCreated.from_event(load_event("eventbridge_s3_object_created.json"))

    # When it is handled
    outcome = handle_s3_object(event, deps)

    # Then only the .json watcher of the drop bucket runs, with the decoded key as input
    assert [r.workflow_id for r in outcome.started] == ["json_drop"]
    run = deps.runs.get_run(outcome.started[0].run_id)
    assert run.input == {
        "format": "json",
        "bucket": "langorch-files",
        "key": "invoices/march 2026+final (1).json",
        "size": 1024,
        "etag": "b1946ac92492d2347c6235b4d2611184",
        "version_id": "IYV3p45BT0ac8hjHg1houSdS1a.Mro8e",
    }


def test_the_same_object_event_twice_starts_one_run(deps: Fakes):
    # Given an object event that was handled
    event = S3ObjectCreated.from_event(load_event("eventbridge_s3_object_created.json"))
    handle_s3_object(event, deps)

    # When EventBridge delivers it again
    again = handle_s3_object(event, deps)

    # Then the run is found, not started again
    assert [r.created for r in again.started] == [False]
    assert len(all_runs(deps)) == 1
    assert len(executions(deps)) == 1


def test_a_new_version_of_the_same_key_starts_a_new_run(deps: Fakes):
    # Given a handled object event
    raw = load_event("eventbridge_s3_object_created.json")
    handle_s3_object(S3ObjectCreated.from_event(raw), deps)

    # When the key is written again (new version id)
    raw["detail"]["object"]["version-id"] = "second-version"
    outcome = handle_s3_object(S3ObjectCreated.from_event(raw), deps)

    # Then that is a new run
    assert [r.created for r in outcome.started] == [True]


def test_an_object_in_another_bucket_starts_that_buckets_watchers_only(deps: Fakes):
    # Given an object event from the bucket "elsewhere"
    raw = load_event("eventbridge_s3_object_created.json")
    raw["detail"]["bucket"]["name"] = "elsewhere"

    # When it is handled
    outcome = handle_s3_object(S3ObjectCreated.from_event(raw), deps)

    # Then only the workflow watching that bucket runs
    assert [r.workflow_id for r in outcome.started] == ["elsewhere_drop"]


@pytest.mark.parametrize(
    "key",
    [
        pytest.param("checkpoints/run-abc/0001.json", id="checkpoint-offload"),
        # a run attaching a .json would otherwise start itself again
        pytest.param("artifacts/run-abc/fetch/invoice.json", id="file-a-run-attached"),
    ],
)
def test_langorchs_own_objects_in_the_drop_bucket_start_nothing(deps: Fakes, key: str):
    # Given an event for langorch's own object in the drop bucket (a checkpoint offload, or a
    # file a run attached)
    raw = load_event("eventbridge_s3_object_created.json")
    raw["detail"]["object"]["key"] = key

    # When it is handled, even though a workflow watches every .json file in that bucket
    plan = deps.definitions.get_workflow("json_drop")
    assert plan is not None
    _store(deps, plan.model_copy(update={"triggers": [Trigger(type="s3", suffix=".json")]}))
    outcome = handle_s3_object(S3ObjectCreated.from_event(raw), deps)

    # Then nothing starts
    assert outcome.started == []
    assert all_runs(deps) == []
