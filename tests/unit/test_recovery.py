"""Redriving runs (issue 10) on fakes: from the last good checkpoint, from a step, onto a new
version, and idempotently."""

from __future__ import annotations

import json
from collections import Counter
from functools import partial
from typing import Any

import pytest

from langorch.app.recovery.redrive import (
    IncompatibleVersionError,
    RedriveRefusedError,
    redrive,
)
from langorch.app.runs import RunSegment, StartRun, drive, launch_run, run_segment
from langorch.domain.errors import NotFoundError
from langorch.domain.runs import RunStatus, TimelineEventType, execution_name
from tests.fakes import Fakes
from tests.integration.conftest import register_text
from tests.support.parking import ask_for_approval, parked_on_approval, with_approvals
from tests.support.threads import at_once
from tests.workflows import pay_after_approval


def _brief_plan(digest_version: int) -> str:
    """The `brief` plan (gather, then digest at `digest_version`), as a YAML `workflows:` list."""
    return f"""workflows:
  - plan_id: brief
    memory: false
    inputs_schema: {{properties: {{topic: {{type: string}}}}, required: [topic]}}
    steps:
      - {{step_id: gather, block_id: gather, block_version: 1}}
      - {{step_id: digest, block_id: digest, block_version: {digest_version}, depends_on: [gather]}}
"""


FLOW = """
blocks:
  - block_id: gather
    input_keys: [topic]
    output_keys: [notes]
    prompt_template: "Research {{ topic }}"
  - block_id: digest
    input_keys: [notes]
    output_keys: [summary]
    prompt_template: "Summarize {{ notes }}"
    max_retries: 1
""" + _brief_plan(digest_version=1)

FIXED = """
blocks:
  - block_id: digest
    input_keys: [notes]
    output_keys: [summary]
    prompt_template: "Summarize briefly: {{ notes }}"
    max_retries: 1
""" + _brief_plan(digest_version=2)

INCOMPATIBLE = """
blocks:
  - block_id: digest
    input_keys: [notes, audience]
    output_keys: [summary]
    prompt_template: "Summarize {{ notes }} for {{ audience }}"
workflows:
  - plan_id: brief
    memory: false
    inputs_schema:
      properties: {topic: {type: string}, audience: {type: string}}
      required: [topic]
    steps:
      - {step_id: gather, block_id: gather, block_version: 1}
      - {step_id: digest, block_id: digest, block_version: 2, depends_on: [gather]}
"""

BROKEN_SUMMARY = {"digest": {"raise": "model overloaded", "retryable": False}}


class CountingLLM:
    """The offline registry, counting calls per step (a decorator of the LLM port)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.calls: Counter[str] = Counter()

    def invoke(self, request: Any) -> Any:
        self.calls[str(getattr(request, "step_id", "?"))] += 1
        return self._inner.invoke(request)


def _no_approval(request: dict[str, Any]) -> dict[str, Any]:
    raise AssertionError(f"no approval expected: {request}")


def _failed_run(deps: Fakes) -> tuple[str, Fakes, CountingLLM]:
    """A run whose summarize step failed past its retries; returns its id and the process."""
    broken = deps.with_script(BROKEN_SUMMARY)
    counting = CountingLLM(broken.llm)
    broken.llm = counting  # type: ignore[assignment]
    run, _ = launch_run(StartRun("brief", input={"topic": "otters"}), broken)
    result = drive(run.run_id, broken, on_approval=_no_approval)
    assert result.status == "failed"
    return run.run_id, broken, counting


@pytest.fixture
def deps() -> Fakes:
    from tests.fakes.approvals import InMemoryApprovals

    fakes = Fakes()
    fakes.approvals = InMemoryApprovals()  # type: ignore[attr-defined]
    register_text(fakes, FLOW)  # type: ignore[arg-type]
    return fakes


def _fixed(deps: Fakes) -> tuple[Fakes, CountingLLM]:
    fixed = deps.with_script(None)
    counting = CountingLLM(fixed.llm)
    fixed.llm = counting  # type: ignore[assignment]
    return fixed, counting


def test_a_failed_run_redriven_on_a_fixed_version_succeeds_without_calling_earlier_steps(
    deps: Fakes,
) -> None:
    # Given a run whose summarize step failed past its retries
    run_id, _, before = _failed_run(deps)
    assert before.calls["gather"] == 1
    # ... and the block fixed in a new version of the workflow
    register_text(deps, FIXED)  # type: ignore[arg-type]
    # When it is redriven onto the latest version
    fixed, after = _fixed(deps)
    done = redrive(fixed, run_id, version="latest", reason="prompt fixed", actor="ops@x")
    # Then a new execution named by the attempt started, and the run succeeds
    assert done.started and done.attempt == 1 and (done.from_version, done.to_version) == (1, 2)
    assert execution_name(run_id, 1) in deps.executions.names
    result = drive(run_id, fixed, on_approval=_no_approval)
    assert result.status == "succeeded"
    assert "summary" in result.outputs
    # ... without calling the research step's LLM again
    assert after.calls == Counter({"digest": 1})
    run = deps.runs.get_run(run_id)
    assert (run.status, run.workflow_version, run.attempt) == (RunStatus.succeeded, 2, 1)
    [note] = run.redrives
    assert (note.actor, note.reason, note.from_version, note.to_version) == (
        "ops@x",
        "prompt fixed",
        1,
        2,
    )
    redriven = [
        e for e in deps.runs.get_timeline(run_id) if e.type is TimelineEventType.run_redriven
    ]
    assert len(redriven) == 1 and redriven[0].actor == "ops@x"
    assert redriven[0].detail["version"] == "1 -> 2"


def test_a_redrive_onto_a_version_the_state_cannot_carry_is_refused_with_paths(
    deps: Fakes,
) -> None:
    run_id, _, _ = _failed_run(deps)
    register_text(deps, INCOMPATIBLE)  # type: ignore[arg-type]
    with pytest.raises(IncompatibleVersionError) as refused:
        redrive(deps, run_id, version="latest")
    [problem] = refused.value.problems
    assert (problem.path, "audience" in problem.message) == ("steps[1].block_id", True)
    assert deps.runs.get_run(run_id).status is RunStatus.failed
    assert deps.executions.names == [run_id]


def test_a_forced_incompatible_redrive_is_recorded_with_its_problems(deps: Fakes) -> None:
    run_id, _, _ = _failed_run(deps)
    register_text(deps, INCOMPATIBLE)  # type: ignore[arg-type]
    done = redrive(deps, run_id, version="latest", force=True, actor="ops@x")
    assert done.forced and any("audience" in p for p in done.problems)
    assert deps.runs.get_run(run_id).redrives[-1].forced


def test_a_redrive_from_a_step_runs_that_step_again_and_keeps_the_ones_before(
    deps: Fakes,
) -> None:
    # Given a run that succeeded
    fixed, counting = _fixed(deps)
    run, _ = launch_run(StartRun("brief", input={"topic": "otters"}), fixed)
    assert drive(run.run_id, fixed, on_approval=_no_approval).status == "succeeded"
    assert counting.calls == Counter({"gather": 1, "digest": 1})
    # When it is redriven from summarize
    done = redrive(fixed, run.run_id, from_step="digest", reason="again")
    assert done.checkpoint_id is not None
    # Then only digest runs again (its LLM answer may be replayed: same run, step and prompt)
    assert drive(run.run_id, fixed, on_approval=_no_approval).status == "succeeded"
    assert counting.calls["gather"] == 1
    finished = [
        e.step_id
        for e in deps.runs.get_timeline(run.run_id)
        if e.type is TimelineEventType.step_finished
    ]
    assert (finished.count("gather"), finished.count("digest")) == (1, 2)


def test_a_succeeded_run_is_not_redriven_without_a_step(deps: Fakes) -> None:
    run, _ = launch_run(StartRun("brief", input={"topic": "otters"}), deps)
    drive(run.run_id, deps, on_approval=_no_approval)
    with pytest.raises(RedriveRefusedError, match="--from"):
        redrive(deps, run.run_id)


def test_a_redrive_from_an_unknown_step_names_the_steps(deps: Fakes) -> None:
    run_id, _, _ = _failed_run(deps)
    with pytest.raises(NotFoundError, match="gather, digest"):
        redrive(deps, run_id, from_step="nope")


def test_a_run_whose_execution_is_still_running_is_not_redriven(deps: Fakes) -> None:
    run, _ = launch_run(StartRun("brief", input={"topic": "otters"}), deps)
    with pytest.raises(RedriveRefusedError, match="RUNNING"):
        redrive(deps, run.run_id)


def test_a_stranded_run_whose_execution_ended_is_redriven(deps: Fakes) -> None:
    # Given a run whose execution ended before its record followed (it still says queued)
    run, _ = launch_run(StartRun("brief", input={"topic": "otters"}), deps)
    deps.executions.end(run.run_id, "ABORTED")
    # When it is redriven
    done = redrive(deps, run.run_id, reason="execution lost")
    # Then it continues from its checkpoint in a new execution
    assert done.started and done.checkpoint_id is None
    assert drive(run.run_id, deps, on_approval=_no_approval).status == "succeeded"


def test_two_concurrent_redrives_start_one_execution(deps: Fakes) -> None:
    run_id, _, _ = _failed_run(deps)
    processes = [deps.another_process() for _ in range(2)]
    results = at_once([partial(redrive, p, run_id, reason="twice") for p in processes])
    assert sorted(r.started for r in results) == [False, True]
    assert {r.attempt for r in results} == {1}
    assert deps.executions.names == [run_id, execution_name(run_id, 1)]
    assert deps.runs.get_run(run_id).attempt == 1


def test_reconcile_follows_the_redriven_execution_not_the_first_one(deps: Fakes) -> None:
    from langorch.app.recovery.reconcile import reconcile_runs

    # Given a failed run whose first execution ended FAILED, redriven into a running execution
    run_id, _, _ = _failed_run(deps)
    deps.executions.end(run_id, "FAILED", error="StepFailedError")
    redrive(deps, run_id, reason="retry")
    # When the reconciler looks for stranded runs
    repairs = reconcile_runs(deps)
    # Then the redriven run is left alone: its current execution is still running
    assert repairs == []
    assert deps.runs.get_run(run_id).status is RunStatus.queued


GATED = pay_after_approval("boss@example.com", timeout_seconds=600)


def test_a_pending_approval_survives_a_redrive_and_is_decided_from_its_original_link() -> None:
    from langorch.app.approvals.decisions import Shown, decide_approval, view_approval
    from tests.unit.approvals_support import decide_command, view_command

    deps = with_approvals(Fakes(public_base_url="https://approve.example.com"), GATED)
    # Given a run parked on an approval whose email (and link) went out
    parked = parked_on_approval(deps)
    run_id, first = parked.run_id, parked.requested
    [mail] = deps.email.sent
    # ... whose execution was then lost (the record still says waiting_approval)
    deps.executions.end(run_id, "FAILED", error="States.Runtime")
    # When it is redriven
    done = redrive(deps, run_id, reason="execution lost")
    assert done.approval_kept == parked.approval["interrupt_id"]
    # Then the new execution parks on the same approval: same id, no second email
    again = ask_for_approval(deps, run_id, execution_name(run_id, 1))
    assert again.approval["interrupt_id"] == parked.approval["interrupt_id"]
    second = again.requested
    assert (second.approval_id, second.emailed) == (first.approval_id, [])
    assert len(deps.email.sent) == 1
    # ... and the original link decides it, resuming the new execution
    shown = view_approval(view_command(mail.link), deps)  # type: ignore[arg-type]
    assert isinstance(shown, Shown)
    deps.clock.advance(deps.settings.approval_form_dwell_seconds)
    form = {"nonce": shown.nonce, "decision": "approved"}
    decide_approval(decide_command(mail.link, form), deps)  # type: ignore[arg-type]
    described = deps.executions.describe(execution_name(run_id, 1))
    assert described["status"] == "SUCCEEDED"
    decision = json.loads(described["output"])
    assert decision["decision"] == "approved"
    # ... and the run finishes with it
    final = run_segment(RunSegment(run_id, resume=decision), deps)
    assert final.status == "succeeded" and final.outputs["paid"] == 42


# --- forks -----------------------------------------------------------------------------------


def test_a_fork_with_an_edited_key_runs_from_its_step_on_the_edited_state(deps: Fakes) -> None:
    from langorch.app.recovery.forks import fork

    # Given a run that succeeded
    fixed, counting = _fixed(deps)
    run, _ = launch_run(StartRun("brief", input={"topic": "otters"}), fixed)
    drive(run.run_id, fixed, on_approval=_no_approval)
    # When it is forked at digest with other notes
    forked = fork(
        fixed, run.run_id, at_step="digest", edits={"notes": "corrected notes"}, actor="ops@x"
    )
    # Then a new run started at digest, on the edited state, without gathering again
    assert forked.run_id != run.run_id and forked.edited == ("notes",)
    assert forked.run_id in deps.executions.names
    result = drive(forked.run_id, fixed, on_approval=_no_approval)
    assert result.status == "succeeded"
    assert result.outputs["notes"] == "corrected notes"
    assert counting.calls == Counter({"gather": 1, "digest": 2})
    # ... and both records and timelines carry the lineage
    child = deps.runs.get_run(forked.run_id)
    assert child.forked_from is not None
    assert (child.forked_from.run_id, child.forked_from.at_step) == (run.run_id, "digest")
    [link] = deps.runs.get_run(run.run_id).forks
    assert (link.run_id, link.actor) == (forked.run_id, "ops@x")
    original_events = [e.type for e in deps.runs.get_timeline(run.run_id)]
    assert TimelineEventType.run_forked in original_events
    # ... while the original keeps its own outputs
    assert deps.runs.get_run(run.run_id).outputs["notes"] != "corrected notes"


def test_a_fork_at_a_step_the_run_never_reached_is_refused(deps: Fakes) -> None:
    from langorch.app.recovery.forks import fork

    run, _ = launch_run(StartRun("brief", input={"topic": "otters"}), deps)
    with pytest.raises(NotFoundError, match="never reached"):
        fork(deps, run.run_id, at_step="digest")


# --- bulk ------------------------------------------------------------------------------------


def test_twenty_failed_runs_are_redriven_in_bulk_at_a_bounded_rate(deps: Fakes) -> None:
    from langorch.app.recovery.bulk import plan_redrives, redrive_many

    # Given 20 runs that failed at digest, and one that succeeded
    broken = deps.with_script(BROKEN_SUMMARY)
    failed = []
    for n in range(20):
        run, _ = launch_run(StartRun("brief", input={"topic": f"t{n}"}), broken)
        drive(run.run_id, broken, on_approval=_no_approval)
        failed.append(run.run_id)
    ok, _ = launch_run(StartRun("brief", input={"topic": "fine"}), deps)
    drive(ok.run_id, deps, on_approval=_no_approval)
    # When they are planned and redriven at 4 a second (time as a fake clock)
    plan = plan_redrives(deps, workflow_id="brief")
    assert sorted(r.run_id for r in plan) == sorted(failed)
    now = [0.0]
    progress: list[tuple[int, int]] = []
    items = redrive_many(
        deps,
        plan,
        reason="outage over",
        per_second=4.0,
        on_progress=lambda done, total, item: progress.append((done, total)),
        sleep=lambda seconds: now.__setitem__(0, now[0] + seconds),
        monotonic=lambda: now[0],
    )
    # Then each was redriven once, one progress line per run, and no faster than the rate
    assert [i.outcome for i in items] == ["redriven"] * 20
    assert progress == [(n, 20) for n in range(1, 21)]
    assert now[0] == pytest.approx(19 / 4.0)
    assert {execution_name(r, 1) for r in failed} <= set(deps.executions.names)
    fixed = deps.with_script(None)
    for run_id in failed:
        assert drive(run_id, fixed, on_approval=_no_approval).status == "succeeded"
    # ... and a second bulk redrive finds nothing left to do
    assert plan_redrives(deps) == []


def test_a_bulk_redrive_reports_a_refused_run_and_goes_on(deps: Fakes) -> None:
    from langorch.app.recovery.bulk import redrive_many

    first, _, _ = _failed_run(deps)
    second, _, _ = _failed_run(deps)
    register_text(deps, INCOMPATIBLE)  # type: ignore[arg-type]
    plan = [deps.runs.get_run(first), deps.runs.get_run(second)]
    items = redrive_many(deps, plan, version="latest", sleep=lambda s: None)
    assert [i.outcome for i in items] == ["refused", "refused"]
    assert "IncompatibleVersionError" in items[0].detail
    items = redrive_many(deps, plan, sleep=lambda s: None)
    assert [i.outcome for i in items] == ["redriven", "redriven"]


def test_a_plan_since_a_duration_leaves_older_failures_out(deps: Fakes) -> None:
    from datetime import timedelta

    from langorch.app.recovery.bulk import plan_redrives

    old, _, _ = _failed_run(deps)
    deps.clock.advance(3 * 3600)
    recent, _, _ = _failed_run(deps)
    assert [r.run_id for r in plan_redrives(deps, since=timedelta(hours=1))] == [recent]
    assert {r.run_id for r in plan_redrives(deps)} == {old, recent}


def test_an_approval_closed_while_the_run_was_stranded_is_asked_again_after_a_redrive() -> None:
    from langorch.app.recovery.reconcile import reconcile_runs

    deps = with_approvals(Fakes(public_base_url="https://approve.example.com"), GATED)
    parked = parked_on_approval(deps)
    run_id, first = parked.run_id, parked.requested
    # Given the reconciler ended the stranded run, closing its approval
    deps.executions.end(run_id, "FAILED", error="States.Runtime")
    assert [r.run_id for r in reconcile_runs(deps)] == [run_id]
    # When the run is redriven
    done = redrive(deps, run_id, reason="execution lost")
    # Then the approval step is asked again: a new approval, a new email
    assert done.approval_kept is None and done.from_step == "gate"
    again = ask_for_approval(deps, run_id, done.execution_name)
    assert again.approval["interrupt_id"] != parked.approval["interrupt_id"]
    second = again.requested
    assert second.approval_id != first.approval_id and second.emailed == ["boss@example.com"]


def test_a_run_whose_checkpoints_expired_is_not_silently_restarted(deps: Fakes) -> None:
    # Given a failed run whose checkpoints are gone (the TTL removed them)
    run_id, _, _ = _failed_run(deps)
    deps.checkpointer.delete_thread(run_id)
    # When it is redriven, then it is refused rather than run again from its input
    with pytest.raises(RedriveRefusedError, match="no checkpoint left"):
        redrive(deps, run_id)
    assert deps.runs.get_run(run_id).status is RunStatus.failed
