"""A decision is never lost (issue 35, item 2): deciding a run whose Step Functions execution
ended (stopped, failed, timed out) while its record still says ``waiting_approval``.

The approver is told the truth (the decision is kept, the run is not running), the decision is
kept, and a redrive hands it to the run's next park: no one is asked again, no second email,
and the run finishes with it. On fakes: the run's segments by the real ``run_segment``, the
approval's request and page by the real use-cases, the execution by the executions fake.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from langorch.app.approvals.decisions import (
    REDELIVERY_GRACE,
    decide_approval,
    view_approval,
)
from langorch.app.recovery.reconcile import reconcile_runs
from langorch.app.recovery.redrive import redrive
from langorch.app.runs import RunSegment, run_segment
from langorch.domain.approvals.lifecycle import State, state_of
from langorch.domain.approvals.outcomes import DecisionHeld, Shown
from langorch.domain.approvals.record import ApprovalStatus
from langorch.domain.runs import RunStatus
from tests.fakes import Fakes
from tests.support.parking import ask_for_approval, parked_on_approval, with_approvals
from tests.unit.approvals_support import decide_command, open_and_decide, view_command
from tests.workflows import pay_after_approval

BOSS, DEPUTY = "boss@example.com", "deputy@example.com"
ENDINGS = ["ABORTED", "FAILED", "TIMED_OUT"]

GATED = pay_after_approval(BOSS, DEPUTY, timeout_seconds=3600)


@dataclass
class Stranded:
    """A run parked on an approval whose execution then ended, and the links emailed."""

    deps: Fakes
    run_id: str
    approval_id: str
    links: dict[str, str]


def _stranded(ended: str) -> Stranded:
    deps = with_approvals(Fakes(public_base_url="https://approve.example.com"), GATED)
    parked = parked_on_approval(deps)
    deps.executions.end(parked.run_id, ended, error=f"States.{ended.title()}")
    assert deps.runs.get_run(parked.run_id).status is RunStatus.waiting_approval
    links = {mail.to: mail.link for mail in deps.email.sent}
    return Stranded(deps, parked.run_id, parked.requested.approval_id, links)


def _press(stranded: Stranded, approver: str, decision: str) -> Any:
    deps = stranded.deps
    link = stranded.links[approver]
    shown = view_approval(view_command(link), deps)  # type: ignore[arg-type]
    assert isinstance(shown, Shown)
    deps.clock.advance(deps.settings.approval_form_dwell_seconds)
    form = {"nonce": shown.nonce, "decision": decision, "comment": "fine by me"}
    return decide_approval(decide_command(link, form), deps)  # type: ignore[arg-type]


def _redrive_and_park(stranded: Stranded) -> dict[str, Any]:
    """Redrive the run; its new execution parks and asks for its approval: what it resumed
    with (the new execution's output)."""
    deps = stranded.deps
    done = redrive(deps, stranded.run_id, reason="execution lost")
    ask_for_approval(deps, stranded.run_id, done.execution_name)
    described = deps.executions.describe(done.execution_name)
    assert described["status"] == "SUCCEEDED", "the new execution still waits"
    return dict(json.loads(described["output"]))


@pytest.mark.parametrize("ended", ENDINGS)
def test_deciding_a_stranded_run_says_the_run_is_not_running_and_keeps_the_decision(
    ended: str,
) -> None:
    # Given a run parked on an approval whose execution then ended
    stranded = _stranded(ended)
    # When an approver approves
    answer = _press(stranded, BOSS, "approved")
    # Then the answer says the decision is kept while the run is not running
    assert isinstance(answer, DecisionHeld)
    # ... and the decision is recorded, waiting to be delivered
    approval = stranded.deps.approvals.get(stranded.approval_id)
    assert approval is not None and approval.status is ApprovalStatus.approved
    assert state_of(approval, now=stranded.deps.clock()) is State.decided


def test_the_approval_page_tells_the_approver_their_decision_waits_for_a_redrive() -> None:
    from functions.approval_callback import handler

    # Given a run parked on an approval whose execution was stopped
    stranded = _stranded("ABORTED")
    previous = handler.container.use(stranded.deps)
    try:
        # When an approver approves on the emailed page
        _, answer = open_and_decide(handler, stranded.links[BOSS], "approved")
    finally:
        handler.container.use(previous)
    # Then the page says it is recorded and not acted on yet, and why, not "the run continues"
    assert answer["statusCode"] == 202
    assert "the run is not running" in answer["body"]
    assert "redrives the run" in answer["body"]
    assert "The run continues" not in answer["body"]


@pytest.mark.parametrize("ended", ENDINGS)
def test_a_redrive_resumes_the_stranded_run_with_the_recorded_decision(ended: str) -> None:
    # Given a stranded run whose approval was decided
    stranded = _stranded(ended)
    _press(stranded, BOSS, "approved")
    # When it is redriven and its new execution parks
    resumed = _redrive_and_park(stranded)
    # Then the new execution got the recorded decision, not a new question
    assert (resumed["decision"], resumed["approver"]) == ("approved", BOSS)
    assert resumed["comment"] == "fine by me"
    # ... and the run finishes with it
    final = run_segment(RunSegment(stranded.run_id, resume=resumed), stranded.deps)
    assert final.status == "succeeded" and final.outputs["paid"] == 42


@pytest.mark.parametrize("ended", ENDINGS)
def test_each_approver_of_a_stranded_run_is_emailed_exactly_once(ended: str) -> None:
    # Given a stranded run whose approval was decided
    stranded = _stranded(ended)
    _press(stranded, BOSS, "approved")
    # When it is redriven and its new execution parks
    _redrive_and_park(stranded)
    # Then every approver got the one email of the first park, and no other
    assert sorted(mail.to for mail in stranded.deps.email.sent) == [BOSS, DEPUTY]


def test_a_visit_after_the_grace_leaves_a_held_decision_for_the_redrive() -> None:
    # Given a stranded run whose approval was decided
    stranded = _stranded("FAILED")
    _press(stranded, BOSS, "approved")
    # When the other approver opens their link later (a visit delivers a lost decision again)
    stranded.deps.clock.advance(REDELIVERY_GRACE.total_seconds() + 1)
    view_approval(view_command(stranded.links[DEPUTY]), stranded.deps)  # type: ignore[arg-type]
    # Then the decision is still waiting for the run, and the redrive delivers it
    approval = stranded.deps.approvals.get(stranded.approval_id)
    assert approval is not None and approval.delivered_at is None
    assert _redrive_and_park(stranded)["decision"] == "approved"


def test_reconciling_a_stranded_run_keeps_its_recorded_decision_for_the_redrive() -> None:
    # Given a stranded run whose approval was decided
    stranded = _stranded("FAILED")
    _press(stranded, BOSS, "rejected")
    # When the reconciler ends the run failed
    assert [r.run_id for r in reconcile_runs(stranded.deps)] == [stranded.run_id]
    assert stranded.deps.runs.get_run(stranded.run_id).status is RunStatus.failed
    # Then the redrive still resumes it with the recorded decision, asking nobody again
    assert _redrive_and_park(stranded)["decision"] == "rejected"
    assert len(stranded.deps.email.sent) == 2
