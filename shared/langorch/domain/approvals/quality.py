"""Approval quality: how approvals are decided, from their records and audit trails.

For each decided approval: how long the decision took from the question (``seconds_to_decide``)
and from the decider's first opening of the evidence (the first ``view`` line before the
``decide`` line); a decision made within ``within`` seconds of that view, or without any view
at all (a button pressed in a chat, a form posted without its page), is a **rubber stamp**
signal. Aggregated: the share of rubber stamps, the time to decide, and the approve rate per
approver and per policy (the workflow step that asked: an ``approval`` step, a budget question
``step:budget``, a tool call ``step:tool``).

Pure: the records come from the approvals store (``langorch approvals stats``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any

from langorch.domain.approvals.audit import AuditEntry
from langorch.domain.approvals.record import Approval, ApprovalStatus

RUBBER_STAMP_SECONDS = 10.0
"""A decision this soon after the evidence was first opened is a rubber-stamp signal."""


@dataclass(frozen=True)
class DecisionFacts:
    """One decided approval, as the quality figures count it.

    Attributes:
        approver: Who decided.
        policy: ``workflow/step`` that asked.
        approved: Whether it was approved.
        seconds_to_decide: From the question to the decision.
        seconds_after_view: From the first view of its evidence to the decision (``None``:
            decided without opening it).
    """

    approver: str
    policy: str
    approved: bool
    seconds_to_decide: float
    seconds_after_view: float | None

    def rubber_stamp(self, within: float) -> bool:
        """Decided without opening the evidence, or within ``within`` seconds of opening it."""
        return self.seconds_after_view is None or self.seconds_after_view < within


def decision_facts(approval: Approval, audit: Sequence[AuditEntry]) -> DecisionFacts | None:
    """The facts of a decided approval (``None``: not decided by a person)."""
    if approval.status not in (ApprovalStatus.approved, ApprovalStatus.rejected):
        return None
    if approval.decided_at is None or not approval.decided_by:
        return None
    decided_at = approval.decided_at
    views = [e.at for e in audit if e.action == "view" and e.at <= decided_at]
    return DecisionFacts(
        approver=approval.decided_by,
        policy=f"{approval.workflow_id or '?'}/{approval.step_id}",
        approved=approval.status is ApprovalStatus.approved,
        seconds_to_decide=(decided_at - approval.created_at).total_seconds(),
        seconds_after_view=(decided_at - min(views)).total_seconds() if views else None,
    )


def quality(
    facts: Iterable[DecisionFacts], *, within: float = RUBBER_STAMP_SECONDS
) -> dict[str, Any]:
    """The quality figures of these decisions.

    Returns:
        ``decided``, ``median_seconds_to_decide``, ``rubber_stamp_rate`` (share decided without
        opening the evidence or within ``within`` seconds of it), ``unopened`` (decided without
        opening it), and ``by_approver`` / ``by_policy``: each with ``decided``,
        ``approve_rate`` and ``rubber_stamp_rate``.
    """
    decided = list(facts)
    return {
        "within_seconds": within,
        **_figures(decided, within),
        "median_seconds_to_decide": (
            round(median(f.seconds_to_decide for f in decided), 1) if decided else None
        ),
        "unopened": sum(1 for f in decided if f.seconds_after_view is None),
        "by_approver": _grouped(decided, within, lambda f: f.approver),
        "by_policy": _grouped(decided, within, lambda f: f.policy),
    }


def _figures(decided: Sequence[DecisionFacts], within: float) -> dict[str, Any]:
    count = len(decided)
    return {
        "decided": count,
        "approve_rate": round(sum(f.approved for f in decided) / count, 3) if count else None,
        "rubber_stamp_rate": (
            round(sum(f.rubber_stamp(within) for f in decided) / count, 3) if count else None
        ),
    }


def _grouped(decided: Sequence[DecisionFacts], within: float, key: Any) -> dict[str, Any]:
    groups: dict[str, list[DecisionFacts]] = {}
    for fact in decided:
        groups.setdefault(key(fact), []).append(fact)
    return {name: _figures(group, within) for name, group in sorted(groups.items())}
