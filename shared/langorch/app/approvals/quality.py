"""Approval quality over the approvals store: one use-case for ``langorch approvals stats``
and the console's "Approval quality" page, so both show the same figures.

The figures themselves (time to decide, rubber stamps, approve rate per approver and per
policy) are :mod:`langorch.domain.approvals.quality`'s.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from langorch.app.approvals.ports import ApprovalsStore
from langorch.domain.approvals.quality import RUBBER_STAMP_SECONDS, decision_facts, quality


def approval_quality(
    store: ApprovalsStore,
    *,
    since: datetime | None = None,
    within: float = RUBBER_STAMP_SECONDS,
    limit: int = 1000,
) -> dict[str, Any]:
    """The quality figures of the newest ``limit`` approvals asked since ``since``.

    Args:
        store: The approvals store (records and audit trails).
        since: Only approvals asked at or after this moment (``None``: all).
        within: A decision this soon after the first view of its evidence is a rubber stamp.
        limit: How many of the newest approvals to read.

    Returns:
        The report of :func:`langorch.domain.approvals.quality.quality`.
    """
    found = [a for a in store.list(limit=limit) if since is None or a.created_at >= since]
    facts = [decision_facts(a, store.audit(a.approval_id)) for a in found if not a.is_pending]
    return quality([f for f in facts if f is not None], within=within)
