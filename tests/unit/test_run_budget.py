"""One size budget per run (``domain.limits``), enforced at the doors; no run left behind.

Issue 8, items 1 and 2, on fakes: a webhook body the run could not carry is refused at the door
(it used to be accepted and the run stranded ``queued``), every other door refuses an input over
the budget with its field path, and ``reconcile_runs`` ends runs whose execution ended while
their record did not.
"""

from __future__ import annotations

import json

import pytest

from langorch.app.definitions import register_workflow
from langorch.app.recovery.reconcile import reconcile_runs
from langorch.app.run_failures import note_segment_error
from langorch.app.runs import StartRun, launch_run, mark_failed, start_run
from langorch.app.triggers import ScheduleFired, handle_schedule
from langorch.domain.errors import InputValidationError, RecordTooLargeError, UnknownInterruptError
from langorch.domain.limits import (
    MAX_INPUT_BYTES,
    MAX_PENDING_BYTES,
    MAX_RECORD_BODY_BYTES,
    bounded_request,
    json_bytes,
)
from langorch.domain.loading import load_text
from langorch.domain.runs import RunError, RunStatus, TimelineEvent, TimelineEventType, transition
from tests.fakes import Fakes
from tests.integration.triggers_support import load_event, signed
from tests.support.definitions import workflow
from tests.unit.triggers_support import all_runs, executions, make_deps, webhook_answer


@pytest.fixture
def deps() -> Fakes:
    return make_deps()


def test_a_signed_250_kb_webhook_body_is_refused_at_the_door_with_413(deps: Fakes) -> None:
    # Given a signed delivery of 250 KB: inside the raw body limit, over what a run can carry
    # (before: 202, then the run stayed `queued` forever)
    body = json.dumps({"amount": 1, "note": "x" * 250_000})
    assert len(body) < deps.settings.webhook_max_body_bytes

    # When it arrives
    status, answer = webhook_answer(signed(body, delivery="dlv-big"), deps)

    # Then it is refused with 413, the limit and the field path, and nothing started
    assert status == 413
    assert str(MAX_INPUT_BYTES) in answer["error"]
    assert answer["problems"][0]["path"] == "body"
    assert all_runs(deps) == []
    assert executions(deps) == []


def test_a_webhook_body_just_inside_the_budget_starts_a_run_whose_record_fits(deps: Fakes):
    # Given a signed delivery whose input is just under the budget
    body = json.dumps({"amount": 1, "note": "x" * (MAX_INPUT_BYTES - 200)})

    # When it arrives
    status, answer = webhook_answer(signed(body, delivery="dlv-fits"), deps)

    # Then it starts a run, whose record is within the record budget
    assert status == 202
    run = deps.runs.get_run(answer["run_id"])
    assert len(run.model_dump_json().encode()) <= MAX_RECORD_BODY_BYTES


def test_runs_start_input_over_the_budget_is_refused_with_the_field_path(deps: Fakes):
    # Given an input over the budget (the CLI's `runs start --input` comes here)
    data = {"amount": 1, "note": "é" * MAX_INPUT_BYTES}

    # When a run of it is started
    with pytest.raises(InputValidationError) as refused:
        launch_run(StartRun("invoices", input=data), deps)

    # Then it is refused whole, naming the field, its size and the limit; nothing exists
    problem = refused.value.problems[0]
    assert problem.path == "input"
    assert str(MAX_INPUT_BYTES) in problem.message
    assert all_runs(deps) == []
    assert executions(deps) == []


def test_a_schedule_whose_input_is_over_the_budget_starts_nothing_and_says_why(deps: Fakes):
    # Given a scheduled workflow whose trigger input is over the budget
    blob = "x" * (MAX_INPUT_BYTES + 1)
    text = json.dumps(
        {
            "workflows": [
                {
                    "plan_id": "nightly",
                    "memory": False,
                    "triggers": [
                        {
                            "type": "schedule",
                            "schedule": {"cron_expression": "0 17 * * 1-5"},
                            "input": {"blob": blob},
                        }
                    ],
                    "steps": [{"step_id": "noop", "kind": "transform", "transform": {"x": "1"}}],
                }
            ]
        }
    )
    for plan in load_text(text, source="big.json", fmt="json").workflows:
        register_workflow(deps.definitions, plan)

    # When its slot fires
    outcome = handle_schedule(
        ScheduleFired.model_validate(load_event("scheduler_invoke.json")), deps
    )

    # Then nothing starts, and the skip names the field and the limit
    assert outcome.started == []
    assert "input" in outcome.skipped[0][1]
    assert executions(deps) == []


def test_shown_approval_values_are_cut_with_a_marker_to_fit_the_pending_budget() -> None:
    # Given an approval request showing a 150 KB value (before: the record grew to 450 KB and
    # the run failed with a retry's UnknownInterruptError)
    request = {"step_id": "ok", "approvers": ["a@example.com"], "shown": {"menu": "m" * 150_000}}

    # When it is bounded for the record
    bounded = bounded_request(request)

    # Then it fits, keeps its keys, and says it was cut
    assert json_bytes(bounded) <= MAX_PENDING_BYTES
    assert bounded["step_id"] == "ok"
    assert bounded["approvers"] == ["a@example.com"]
    assert "[truncated: 150000 bytes" in bounded["shown"]["menu"]


# --- reconcile ------------------------------------------------------------------------------


def _started(deps: Fakes, note: str = "ok") -> str:
    run, _ = launch_run(StartRun("invoices", input={"amount": 1, "note": note}), deps)
    return run.run_id


def test_reconcile_ends_a_run_whose_execution_failed_with_the_executions_cause(deps: Fakes):
    # Given a run still `queued` whose execution ended FAILED (its record never followed)
    run_id = _started(deps)
    deps.executions.end(
        run_id, "FAILED", error="StorageError", cause="Item size has exceeded the maximum"
    )

    # When the runs are reconciled
    repairs = reconcile_runs(deps)

    # Then the run is failed, record and timeline naming the execution's status and cause
    assert [(r.run_id, r.record_status, r.execution_status, r.repaired) for r in repairs] == [
        (run_id, "queued", "FAILED", True)
    ]
    run = deps.runs.get_run(run_id)
    assert run.status is RunStatus.failed
    assert run.error is not None
    assert run.error.type == "StorageError"
    assert "Item size has exceeded" in run.error.message
    finished = [
        e for e in deps.runs.get_timeline(run_id) if e.type is TimelineEventType.run_finished
    ]
    assert [e.error.message if e.error else None for e in finished] == [run.error.message]
    assert [r.run_id for r in deps.runs.list_runs(status=RunStatus.failed)] == [run_id]


def test_reconcile_dry_run_reports_and_changes_nothing(deps: Fakes):
    # Given a stranded run
    run_id = _started(deps)
    deps.executions.end(run_id, "TIMED_OUT")

    # When reconciled with --dry-run
    repairs = reconcile_runs(deps, dry_run=True)

    # Then it is reported, not repaired
    assert [(r.run_id, r.execution_status, r.repaired) for r in repairs] == [
        (run_id, "TIMED_OUT", False)
    ]
    assert deps.runs.get_run(run_id).status is RunStatus.queued


def test_reconcile_leaves_live_runs_and_runs_without_an_execution_alone(deps: Fakes):
    # Given a run whose execution is running, and one that has no execution (started only)
    live = _started(deps, "live")
    unlaunched, _ = start_run(StartRun("invoices", input={"amount": 2}), deps)

    # When reconciled (twice: the second finds nothing new)
    assert reconcile_runs(deps) == []

    # Then both keep their status
    assert deps.runs.get_run(live).status is RunStatus.queued
    assert deps.runs.get_run(unlaunched.run_id).status is RunStatus.queued


def test_reconcile_is_idempotent(deps: Fakes):
    # Given a stranded run that was repaired
    run_id = _started(deps)
    deps.executions.end(run_id, "TIMED_OUT")
    assert [r.repaired for r in reconcile_runs(deps)] == [True]

    # When reconciled again
    again = reconcile_runs(deps)

    # Then nothing is left to repair
    assert again == []
    assert deps.runs.get_run(run_id).status is RunStatus.failed


# --- first cause ----------------------------------------------------------------------------


def test_mark_failed_records_the_first_cause_not_the_retrys_symptom(deps: Fakes):
    # Given a run whose segment failed (the record could not be stored), and whose retry then
    # failed differently (before: the run ended with the retry's UnknownInterruptError)
    run_id = _started(deps)
    run = deps.runs.get_run(run_id)
    deps.runs.save_run(transition(run, RunStatus.running, now=deps.clock()))
    note_segment_error(run_id, RecordTooLargeError("run record is 450924 bytes"), deps)
    symptom = UnknownInterruptError(f"run {run_id} is parked on approval; resume it")
    note_segment_error(run_id, symptom, deps)

    # When the state machine's MarkFailed ends it with the last error it saw
    mark_failed(run_id, RunError(type="UnknownInterruptError", message=str(symptom)), deps)

    # Then record and timeline both name the first cause
    ended = deps.runs.get_run(run_id)
    assert ended.error is not None
    assert (ended.error.type, ended.error.message) == (
        "RecordTooLargeError",
        "run record is 450924 bytes",
    )
    finished = [e for e in deps.runs.get_timeline(run_id) if e.type.value == "run_finished"]
    assert [e.error for e in finished] == [ended.error]


def test_a_failure_after_a_segment_that_ended_well_is_its_own_first_cause(deps: Fakes):
    # Given a segment that failed and was retried successfully, then a later segment that fails
    run_id = _started(deps)
    run = deps.runs.get_run(run_id)
    running = transition(run, RunStatus.running, now=deps.clock())
    deps.runs.save_run(running)
    note_segment_error(run_id, RecordTooLargeError("an old, recovered failure"), deps)
    again = transition(running, RunStatus.running, now=deps.clock())  # the retry: segment 2
    deps.runs.save_run(again)
    deps.runs.append_events(
        run_id, [TimelineEvent(seq=2_000_001, at=deps.clock(), type="segment_started", segment=2)]
    )
    deps.runs.save_run(transition(again, RunStatus.running, now=deps.clock()))  # segment 3

    # When segment 3 fails and MarkFailed ends the run
    mark_failed(run_id, RunError(type="StepFailedError", message="step x failed"), deps)

    # Then the reason is segment 3's, not the recovered failure of segment 1
    ended = deps.runs.get_run(run_id)
    assert ended.error is not None
    assert ended.error.type == "StepFailedError"


# --- an approval showing a large value, end to end on fakes ---------------------------------

SHOWS_MENU = workflow(
    "menu_gate", approvers=["boss@example.com"], inputs={"size": "integer"}, required=["size"]
).steps("""
      - {step_id: cook, kind: transform, transform: {menu: "'m' * size"}}
      - step_id: gate
        kind: approval
        depends_on: [cook]
        approval: {title: "Order?", timeout_seconds: 60, show_keys: [menu]}
        branches: {approved: done, rejected: done, timed_out: done}
      - {step_id: done, kind: transform, transform: {ok: "1"}}
""")


def test_an_approval_showing_a_150_kb_value_parks_and_its_request_is_stored(deps: Fakes):
    # Given a run whose approval shows a 150 KB value (before: the record was 450,924 bytes,
    # and the run ended `failed` with a retry's UnknownInterruptError)
    from langorch.app.approvals.decisions import (
        RequestApproval,
        ensure_signing_key,
        request_approval,
    )
    from langorch.app.runs import RunSegment, run_segment
    from tests.fakes.approvals import InMemoryApprovals
    from tests.integration.conftest import register_text

    register_text(deps, SHOWS_MENU)  # type: ignore[arg-type]
    deps.approvals = InMemoryApprovals()  # type: ignore[attr-defined]
    ensure_signing_key(deps.secrets, deps.settings.link_signing_secret)
    run, _ = launch_run(StartRun("menu_gate", input={"size": 150_000}), deps)

    # When its segment runs up to the approval and the approval is requested
    parked = run_segment(RunSegment(run.run_id), deps)
    assert parked.status == "waiting_approval", parked.error
    assert parked.approval is not None
    token = deps.executions.park(run.run_id)
    requested = request_approval(
        RequestApproval(run.run_id, parked.approval, task_token=token),
        deps,  # type: ignore[arg-type]
    )

    # Then the run waits with a bounded pending request (cut with a marker), the approval
    # exists, and what travels to Step Functions is far under its payload limit
    stored = deps.runs.get_run(run.run_id)
    assert stored.status is RunStatus.waiting_approval
    assert stored.pending is not None
    assert json_bytes(stored.pending.request) <= MAX_PENDING_BYTES
    assert "[truncated:" in json.dumps(stored.pending.request)
    assert json_bytes(parked.to_dict()) <= MAX_PENDING_BYTES + 1_000
    assert deps.approvals.get(requested.approval_id) is not None  # type: ignore[attr-defined]
