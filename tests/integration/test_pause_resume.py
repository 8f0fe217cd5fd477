"""Pausing and resuming a run as an operator (issue 28 item 3), on the real pipeline: the
package's ASL executed by moto, segments run by the real ``run_segment`` function, on the
embedded stores (what ``langorch dev`` runs) and on the cloud's (DynamoDB on moto).

A pause lets the current step finish, then parks the execution on a task token
(``AwaitResume``) with no Lambda running, until a resume wakes it; a run parked on an approval
pauses at once and keeps its approval, whose decision is held and delivered on resume.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from langorch.app.approvals.decisions import decide_approval, view_approval
from langorch.app.pause import pause_run, resume_run
from langorch.app.runs import cancel_run
from langorch.domain.approvals.outcomes import Decided, Shown
from langorch.domain.runs import TimelineEvent, TimelineEventType
from tests.gated_kinds import GATED_WORKFLOW, WAIT_SECONDS, GatedKinds, registered
from tests.integration.test_state_machine import APPROVAL
from tests.support.pipeline import Pipeline, pipelines
from tests.unit.approvals_support import decide_command, view_command


@pytest.fixture
def gated() -> Iterator[GatedKinds]:
    """The ``gate`` (holds a segment mid-step until the test opens it) and ``tally`` kinds."""
    with registered() as kinds:
        yield kinds


@pytest.fixture(params=["embedded", "cloud"])
def make(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., Pipeline]]:
    """Pipelines on the embedded stores (``langorch dev``'s) and on the cloud's adapters."""
    cloud = request.param == "cloud"
    with pipelines(tmp_path) as factory:

        def made(**settings: Any) -> Pipeline:
            return factory(cloud=cloud, approval_form_dwell_seconds=0, **settings)

        yield made


def _entered(pipeline: Pipeline, run_id: str, state: str) -> int:
    return sum(
        1
        for e in pipeline.history(run_id)
        if e["type"] == "TaskStateEntered" and e["stateEnteredEventDetails"]["name"] == state
    )


def _events(pipeline: Pipeline, run_id: str, kind: TimelineEventType) -> list[TimelineEvent]:
    return [e for e in pipeline.container.runs.get_timeline(run_id) if e.type is kind]


def _parked_on_pause(pipeline: Pipeline, run_id: str) -> Callable[[], bool]:
    def parked() -> bool:
        return (
            pipeline.run(run_id).status.value == "paused"
            and _entered(pipeline, run_id, "AwaitResume") >= 1
        )

    return parked


@pytest.mark.usefixtures("gated")
def test_a_pause_lets_the_current_step_finish_then_parks_until_resumed(
    make: Callable[..., Pipeline], gated: GatedKinds
) -> None:
    # Given a run whose segment is in the middle of its `pause` step (the gate holds it)
    pipeline = make()
    pipeline.register(GATED_WORKFLOW)
    run_id = pipeline.launch("gated")
    assert gated.gate.reached.wait(WAIT_SECONDS)

    # When an operator pauses it, and the step then finishes
    asked = pause_run(run_id, pipeline.container, actor="cli:alice", reason="month-end freeze")
    gated.gate.open()

    # Then the pause was asked of a run still running, which parked on the pause once its
    # step finished: the next step did not run, and the execution waits with no Lambda running
    assert asked.asked and asked.state == "pausing"
    pipeline.wait_for(_parked_on_pause(pipeline, run_id))
    assert gated.effects == {"before": 1}
    assert pipeline.execution(run_id)["status"] == "RUNNING"
    run = pipeline.run(run_id)
    assert run.status_reason == "paused by cli:alice: month-end freeze"
    [stopped] = _events(pipeline, run_id, TimelineEventType.run_paused)
    assert (stopped.actor, stopped.detail["reason"]) == ("cli:alice", "month-end freeze")
    pipeline.assert_consistent(run_id)

    # And when it is resumed, it goes on from the next step to its end
    resumed = resume_run(run_id, pipeline.container, actor="console:bob", reason="freeze over")
    assert resumed.resumed
    assert pipeline.finished(run_id)["status"] == "SUCCEEDED"
    assert gated.effects == {"before": 1, "after": 1}
    [back] = _events(pipeline, run_id, TimelineEventType.run_resumed)
    assert (back.actor, back.detail["reason"]) == ("console:bob", "freeze over")
    assert back.seq > stopped.seq
    pipeline.assert_consistent(run_id)


def _emails(pipeline: Pipeline) -> list[dict[str, Any]]:
    outbox = pipeline.container.settings.outbox_dir
    assert outbox is not None
    return [json.loads(p.read_text()) for p in sorted(Path(outbox).glob("*.json"))]


def _decide(pipeline: Pipeline, decision: str) -> Any:
    [mail] = _emails(pipeline)
    shown = view_approval(view_command(mail["link"]), pipeline.container)
    assert isinstance(shown, Shown)
    form = {"nonce": shown.nonce, "decision": decision}
    return decide_approval(decide_command(mail["link"], form), pipeline.container)


def test_an_approval_decided_while_paused_is_held_and_delivered_on_resume(
    make: Callable[..., Pipeline],
) -> None:
    # Given a run parked on its approval (its email sent)
    pipeline = make()
    pipeline.register(APPROVAL)
    run_id = pipeline.launch("gated", {"amount": 21})
    pipeline.wait_for(lambda: len(_emails(pipeline)) == 1)

    # When it is paused, then the approver approves through the emailed link
    asked = pause_run(run_id, pipeline.container, actor="cli:alice")
    decided = _decide(pipeline, "approved")

    # Then the run paused at once, still waiting on its approval; the decision was accepted and
    # kept on the run, which parked on the pause instead of going on
    assert asked.state == "paused" and asked.run.pending is not None
    assert isinstance(decided, Decided)
    pipeline.wait_for(_parked_on_pause(pipeline, run_id))
    held = pipeline.run(run_id)
    assert held.held is not None and held.held["decision"] == "approved"
    assert "paid" not in held.outputs
    assert _events(pipeline, run_id, TimelineEventType.approval_decided) == []

    # And when it is resumed, the held decision is delivered and the run pays
    resume_run(run_id, pipeline.container, actor="cli:alice")
    assert pipeline.finished(run_id)["status"] == "SUCCEEDED"
    run = pipeline.run(run_id)
    assert run.outputs["paid"] == 42 and run.held is None
    [decision] = _events(pipeline, run_id, TimelineEventType.approval_decided)
    assert decision.actor == "boss@example.com"
    pipeline.assert_consistent(run_id)


def test_a_run_resumed_before_its_approval_was_decided_waits_on_it_again(
    make: Callable[..., Pipeline],
) -> None:
    # Given a run paused while parked on its approval
    pipeline = make()
    pipeline.register(APPROVAL)
    run_id = pipeline.launch("gated", {"amount": 21})
    pipeline.wait_for(lambda: len(_emails(pipeline)) == 1)
    pause_run(run_id, pipeline.container, actor="cli:alice")

    # When it is resumed before anyone decided
    resumed = resume_run(run_id, pipeline.container, actor="cli:alice")

    # Then it waits on the same approval again, whose link still decides it
    assert resumed.resumed and resumed.run.status.value == "waiting_approval"
    assert isinstance(_decide(pipeline, "approved"), Decided)
    assert pipeline.finished(run_id)["status"] == "SUCCEEDED"
    assert [m["to"] for m in _emails(pipeline)] == ["boss@example.com"]
    pipeline.assert_consistent(run_id)


@pytest.mark.usefixtures("gated")
def test_pausing_twice_keeps_one_pause_and_resuming_twice_resumes_once(
    make: Callable[..., Pipeline], gated: GatedKinds
) -> None:
    # Given a run paused at a step boundary
    pipeline = make()
    pipeline.register(GATED_WORKFLOW)
    run_id = pipeline.launch("gated")
    assert gated.gate.reached.wait(WAIT_SECONDS)
    first = pause_run(run_id, pipeline.container, actor="cli:alice", reason="first")
    gated.gate.open()
    pipeline.wait_for(_parked_on_pause(pipeline, run_id))

    # When it is paused again, then resumed twice
    second = pause_run(run_id, pipeline.container, actor="cli:bob", reason="second")
    once = resume_run(run_id, pipeline.container, actor="cli:alice")
    twice = resume_run(run_id, pipeline.container, actor="cli:alice")

    # Then the second pause asked nothing (the first stands), the second resume resumed nothing,
    # and the run paused once and resumed once on its way to the end
    assert first.asked and not second.asked and second.run.pause == first.run.pause
    assert once.resumed and not twice.resumed
    assert pipeline.finished(run_id)["status"] == "SUCCEEDED"
    assert len(_events(pipeline, run_id, TimelineEventType.run_paused)) == 1
    assert len(_events(pipeline, run_id, TimelineEventType.run_resumed)) == 1
    assert gated.effects == {"before": 1, "after": 1}


@pytest.mark.usefixtures("gated")
def test_a_pause_racing_the_runs_end_answers_that_it_ended(
    make: Callable[..., Pipeline], gated: GatedKinds
) -> None:
    # Given a run in its last step, asked to pause, which then ends at that boundary
    pipeline = make()
    pipeline.register(GATED_WORKFLOW.replace("depends_on: [pause]", "depends_on: [before]"))
    run_id = pipeline.launch("gated")
    assert gated.gate.reached.wait(WAIT_SECONDS)
    # (`after` ran beside `pause` in the same superstep: the gate holds the last boundary)
    pause_run(run_id, pipeline.container, actor="cli:alice")
    gated.gate.open()

    # When the run has ended and the operator asks to pause it again
    assert pipeline.finished(run_id)["status"] == "SUCCEEDED"
    again = pause_run(run_id, pipeline.container, actor="cli:alice")

    # Then the end won: the run succeeded, and the pause answers that it ended
    assert again.state == "ended" and not again.asked
    assert pipeline.run(run_id).status.value == "succeeded"
    assert _events(pipeline, run_id, TimelineEventType.run_paused) == []


def test_a_paused_run_can_be_cancelled(make: Callable[..., Pipeline]) -> None:
    # Given a run paused while parked on its approval
    pipeline = make()
    pipeline.register(APPROVAL)
    run_id = pipeline.launch("gated", {"amount": 21})
    pipeline.wait_for(lambda: len(_emails(pipeline)) == 1)
    pause_run(run_id, pipeline.container, actor="cli:alice")

    # When an operator cancels it
    run, changed = cancel_run(run_id, pipeline.container, actor="cli:alice")

    # Then it is cancelled and its execution stopped; resuming it changes nothing
    assert changed and run.status.value == "cancelled"
    pipeline.wait_for(lambda: pipeline.execution(run_id)["status"] == "ABORTED")
    assert not resume_run(run_id, pipeline.container, actor="cli:alice").resumed
