"""The timeout path on moto: ``run_segment`` resumes a timed-out run with a decision that was
recorded in time but lost on its way (the runs table, the approvals items and the engine wired
for real). The timeout's other outcomes, on fakes: tests/unit/test_approvals_timeout.py."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from langorch.app.approvals.decisions import (
    RequestApproval,
    ensure_signing_key,
    request_approval,
)
from langorch.app.runs import RunSegment, StartRun, run_segment, start_run
from langorch.domain.approvals.record import ApprovalStatus
from langorch.domain.runs import TimelineEventType
from tests.unit.test_approvals_timeout import GATED as APPROVAL

from .conftest import MakeContainer, register_text


def test_a_decision_recorded_but_lost_is_what_the_timed_out_run_resumes_with(
    make_container: MakeContainer, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    # Given a run parked at an approval, whose approver's decision (with an edit) was recorded
    # but whose process died before SendTaskSuccess, so the task waited until it timed out
    container = make_container(outbox_dir=str(tmp_path / "outbox"))
    register_text(container, APPROVAL)
    ensure_signing_key(container.secrets, container.settings.link_signing_secret)
    run, _ = start_run(StartRun("gated", input={"amount": 2}), container)
    parked = run_segment(RunSegment(run.run_id), container)
    assert parked.approval is not None
    requested = request_approval(
        RequestApproval(run.run_id, parked.approval, task_token="token-not-used-here"), container
    )
    container.approvals.decide(
        requested.approval_id,
        ApprovalStatus.approved,
        "boss@example.com",
        "fine",
        {"doubled": 40},
        container.clock(),
    )
    caplog.set_level(logging.WARNING, logger="langorch")

    # When Step Functions times the task out and the run resumes with timed_out
    done = run_segment(RunSegment(run.run_id, resume={"decision": "timed_out"}), container)

    # Then the run took the approved branch with the recorded edit, its timeline shows the
    # boss's decision, and the approval still says approved, now delivered and audited
    assert done.status == "succeeded" and done.outputs["paid"] == 40
    timeline = container.runs.get_timeline(run.run_id)
    assert TimelineEventType.approval_timed_out not in [e.type for e in timeline]
    decided = [e for e in timeline if e.type == TimelineEventType.approval_decided]
    assert [(e.actor, e.detail["decision"]) for e in decided] == [("boss@example.com", "approved")]
    approval = container.approvals.get(requested.approval_id)
    assert approval is not None and approval.status is ApprovalStatus.approved
    assert approval.delivered_at is not None
    last = container.approvals.audit(requested.approval_id)[-1]
    assert (last.action, last.outcome) == ("redeliver", "at_timeout")
    assert "decision recovered at timeout" in caplog.text
