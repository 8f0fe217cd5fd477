"""Approval quality (issue 29, item 5): time to decide, rubber-stamp signals (decided without
opening the evidence, or within seconds of opening it), approve rate per approver and policy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from langorch.domain.approvals.audit import AuditEntry
from langorch.domain.approvals.quality import decision_facts, quality
from langorch.domain.approvals.record import Approval, ApprovalStatus, new_approval

ASKED = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)
ANA, BEN = "ana@example.com", "ben@example.com"


def _decided(who: str, status: ApprovalStatus, after: int, step: str = "review") -> Approval:
    asked = new_approval(
        run_id="run-1",
        workflow_id="refunds",
        request={
            "interrupt_id": f"int-{step}",
            "step_id": step,
            "approvers": [ANA, BEN],
            "timeout_seconds": 3600,
        },
        now=ASKED,
    )
    decided_at = ASKED + timedelta(seconds=after)
    return asked.model_copy(update={"status": status, "decided_by": who, "decided_at": decided_at})


def _view(approval: Approval, after: int) -> AuditEntry:
    at = ASKED + timedelta(seconds=after)
    return AuditEntry(approval_id=approval.approval_id, at=at, action="view", outcome="shown")


def test_a_decision_soon_after_the_first_view_or_without_one_is_a_rubber_stamp() -> None:
    # Given three decisions: read for two minutes, decided 3 s after opening, never opened
    read = _decided(ANA, ApprovalStatus.approved, after=600)
    quick = _decided(BEN, ApprovalStatus.approved, after=303)
    blind = _decided(BEN, ApprovalStatus.rejected, after=50)
    facts = [
        decision_facts(read, [_view(read, 480)]),
        decision_facts(quick, [_view(quick, 300), _view(quick, 302)]),
        decision_facts(blind, []),
    ]

    # When the figures are made with a 10-second threshold
    report = quality([f for f in facts if f is not None], within=10)

    # Then two of three are rubber stamps (one unopened), and the time to decide is the median
    assert report["decided"] == 3
    assert report["rubber_stamp_rate"] == round(2 / 3, 3)
    assert report["unopened"] == 1
    assert report["median_seconds_to_decide"] == 303.0
    # And per approver: ana read and approved; ben stamped both, approving one
    assert report["by_approver"][ANA] == {
        "decided": 1,
        "approve_rate": 1.0,
        "rubber_stamp_rate": 0.0,
    }
    assert report["by_approver"][BEN]["approve_rate"] == 0.5
    assert report["by_approver"][BEN]["rubber_stamp_rate"] == 1.0


def test_the_approve_rate_is_kept_per_policy_and_pending_questions_are_not_counted() -> None:
    # Given a budget question approved, a tool call rejected, and one still pending
    budget = _decided(ANA, ApprovalStatus.approved, after=60, step="summary:budget")
    tool = _decided(ANA, ApprovalStatus.rejected, after=60, step="refund:tool")
    pending = _decided(ANA, ApprovalStatus.pending, after=60)

    # When the figures are made
    facts = [decision_facts(a, []) for a in (budget, tool, pending)]
    report = quality([f for f in facts if f is not None])

    # Then each policy has its own approve rate, and the pending one is not counted
    assert report["decided"] == 2
    assert report["by_policy"]["refunds/summary:budget"]["approve_rate"] == 1.0
    assert report["by_policy"]["refunds/refund:tool"]["approve_rate"] == 0.0


def test_the_use_case_reads_decided_approvals_asked_since_a_date_from_the_store() -> None:
    from langorch.app.approvals.quality import approval_quality
    from tests.fakes.approvals import InMemoryApprovals

    # Given a store with an approval decided unopened, one still pending and one asked earlier
    store = InMemoryApprovals()
    blind = _decided(ANA, ApprovalStatus.approved, after=30, step="pay")
    pending = _decided(ANA, ApprovalStatus.approved, after=30, step="ship").model_copy(
        update={"status": ApprovalStatus.pending, "decided_by": None, "decided_at": None}
    )
    old = _decided(BEN, ApprovalStatus.rejected, after=30, step="old").model_copy(
        update={"created_at": ASKED - timedelta(days=2)}
    )
    for approval in (blind, pending, old):
        store.put_pending(approval, "token")
    for decided in (blind, old):
        assert decided.decided_by is not None and decided.decided_at is not None
        store.decide(
            decided.approval_id, decided.status, decided.decided_by, None, {}, decided.decided_at
        )
    # When the figures are asked for since the day before
    report = approval_quality(store, since=ASKED - timedelta(days=1))
    # Then only the decided one since then counts, a rubber stamp by ana on refunds/pay
    assert report["decided"] == 1 and report["unopened"] == 1
    assert report["by_policy"] == {
        "refunds/pay": {"decided": 1, "approve_rate": 1.0, "rubber_stamp_rate": 1.0}
    }
    assert list(report["by_approver"]) == [ANA]
