"""Pausing and resuming on fakes (issue 28 item 3): the orderings the pipeline's timing rarely
shows — a pause asked before a segment starts, a park that comes after the resume."""

from __future__ import annotations

import pytest

from langorch.app.pause import ParkOnPause, park_on_pause, pause_run, resume_run
from langorch.app.runs import RunSegment, StartRun, run_segment, start_run
from langorch.domain.errors import TaskClosedError
from langorch.domain.runs import RunStatus, TimelineEventType
from tests.fakes import Fakes
from tests.integration.conftest import register_text
from tests.support.definitions import workflow

FLOW = workflow("flow").steps("""
      - {step_id: first, kind: transform, transform: {a: "1"}}
      - {step_id: second, kind: transform, depends_on: [first], transform: {b: "a + 1"}}
""")


@pytest.fixture
def deps() -> Fakes:
    fakes = Fakes()
    register_text(fakes, FLOW)  # type: ignore[arg-type]
    return fakes


def test_a_pause_asked_before_the_first_segment_stops_the_run_before_any_step(
    deps: Fakes,
) -> None:
    # Given a queued run an operator asked to pause
    run, _ = start_run(StartRun("flow"), deps)
    asked = pause_run(run.run_id, deps, actor="cli:alice", reason="hold on")

    # When its first segment starts
    result = run_segment(RunSegment(run.run_id), deps)

    # Then it answers paused (to park on the pause) with no step run, and says who and why
    assert asked.asked and asked.state == "pausing"
    assert (result.status, result.steps_run) == ("paused", 0)
    assert result.seconds == deps.settings.pause_recheck_seconds
    stored = deps.runs.get_run(run.run_id)
    assert stored.status is RunStatus.paused and stored.outputs == {}
    [event] = [
        e for e in deps.runs.get_timeline(run.run_id) if e.type is TimelineEventType.run_paused
    ]
    assert (event.actor, event.detail) == ("cli:alice", {"reason": "hold on"})


def test_an_execution_that_parks_after_the_resume_wakes_itself(deps: Fakes) -> None:
    # Given a run paused before its first step, resumed before its execution parked
    run, _ = start_run(StartRun("flow"), deps)
    pause_run(run.run_id, deps, actor="cli:alice")
    run_segment(RunSegment(run.run_id), deps)
    resume_run(run.run_id, deps, actor="cli:alice")
    token = deps.executions.park(run.run_id)

    # When it parks on the pause
    woken = park_on_pause(ParkOnPause(run.run_id, token), deps)

    # Then nobody was left to wake it, so it woke itself: its token is answered
    assert woken
    with pytest.raises(TaskClosedError):
        deps.executions.send_success(token, {})


def test_a_resume_wakes_the_execution_parked_on_the_pause_and_the_run_goes_on(
    deps: Fakes,
) -> None:
    # Given a run paused before its first step, its execution parked on the pause
    run, _ = start_run(StartRun("flow"), deps)
    pause_run(run.run_id, deps, actor="cli:alice")
    run_segment(RunSegment(run.run_id), deps)
    token = deps.executions.park(run.run_id)
    assert not park_on_pause(ParkOnPause(run.run_id, token), deps)

    # When it is resumed
    resumed = resume_run(run.run_id, deps, actor="console:bob", reason="go")

    # Then the parked execution was woken, and its next segment runs the run to its end
    assert resumed.resumed
    with pytest.raises(TaskClosedError):
        deps.executions.send_success(token, {})
    assert run_segment(RunSegment(run.run_id), deps).status == "succeeded"
    assert deps.runs.get_run(run.run_id).outputs["b"] == 2


def test_a_run_that_is_not_paused_is_not_resumed(deps: Fakes) -> None:
    run, _ = start_run(StartRun("flow"), deps)
    resumed = resume_run(run.run_id, deps, actor="cli:alice")
    assert not resumed.resumed and resumed.run.status is RunStatus.queued
    assert not [
        e for e in deps.runs.get_timeline(run.run_id) if e.type is TimelineEventType.run_resumed
    ]
