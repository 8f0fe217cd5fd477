"""The timeout path through ``run_segment``, on fakes: a run resumed with ``timed_out`` closes
its approval's page, unless a decision was recorded in time and lost on its way: then the run
resumes with that decision. (The same wiring on moto: tests/integration/test_approvals_timeout.py.)
"""

from __future__ import annotations

import logging

import pytest

from langorch.app.approvals.decisions import RequestApproval, request_approval, view_approval
from langorch.app.runs import RunSegment, StartRun, run_segment, start_run
from langorch.domain.approvals.record import ApprovalStatus, LinkExpiredError
from langorch.domain.runs import TimelineEventType
from langorch.web.errors import http_status, sentence_of
from tests.integration.conftest import register_text
from tests.unit.approvals_support import FakeStack, view_command
from tests.workflows import GATED_APPROVAL

GATED = GATED_APPROVAL


def _parked_run(stack: FakeStack) -> tuple[str, str]:
    """A gated run parked at its approval, whose email went out: (run id, approval id)."""
    container = stack.container
    register_text(container, GATED)
    run, _ = start_run(StartRun("gated", input={"amount": 2}), container)
    parked = run_segment(RunSegment(run.run_id), container)
    assert parked.approval is not None
    token = stack.steps.park(run.run_id)
    requested = request_approval(
        RequestApproval(run.run_id, parked.approval, task_token=token), container
    )
    return run.run_id, requested.approval_id


def test_a_timed_out_resume_closes_the_approval() -> None:
    # Given a run parked at an approval whose email went out
    stack = FakeStack()
    run_id, approval_id = _parked_run(stack)
    container = stack.container

    # When Step Functions times the task out and the run resumes with timed_out
    done = run_segment(RunSegment(run_id, resume={"decision": "timed_out"}), container)

    # Then the approval is closed as timed out, audited, and its page says it expired
    assert done.status == "failed"  # the workflow routes timed_out to a failing terminate
    approval = container.approvals.get(approval_id)
    assert approval is not None and approval.status is ApprovalStatus.timed_out
    assert [e.action for e in container.approvals.audit(approval_id)][-1] == "expired"
    with pytest.raises(LinkExpiredError) as refused:
        view_approval(view_command(container.email.sent[-1].link), container)
    assert http_status(refused.value) == 410 and "expired" in sentence_of(refused.value)


def test_a_decision_recorded_but_lost_is_what_the_timed_out_run_resumes_with(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a run parked at an approval, whose approver's decision (with an edit) was recorded
    # but whose process died before SendTaskSuccess, so the task waited until it timed out
    stack = FakeStack()
    run_id, approval_id = _parked_run(stack)
    container = stack.container
    container.approvals.decide(
        approval_id,
        ApprovalStatus.approved,
        "boss@example.com",
        "fine",
        {"doubled": 40},
        stack.clock(),
    )
    caplog.set_level(logging.WARNING, logger="langorch")

    # When Step Functions times the task out and the run resumes with timed_out
    done = run_segment(RunSegment(run_id, resume={"decision": "timed_out"}), container)

    # Then the run took the approved branch with the recorded edit, its timeline shows the
    # boss's decision, and the approval still says approved, now delivered and audited
    assert done.status == "succeeded" and done.outputs["paid"] == 40
    timeline = container.runs.get_timeline(run_id)
    assert TimelineEventType.approval_timed_out not in [e.type for e in timeline]
    decided = [e for e in timeline if e.type == TimelineEventType.approval_decided]
    assert [(e.actor, e.detail["decision"]) for e in decided] == [("boss@example.com", "approved")]
    approval = container.approvals.get(approval_id)
    assert approval is not None and approval.status is ApprovalStatus.approved
    assert approval.delivered_at is not None
    last = container.approvals.audit(approval_id)[-1]
    assert (last.action, last.outcome) == ("redeliver", "at_timeout")
    assert "decision recovered at timeout" in caplog.text
