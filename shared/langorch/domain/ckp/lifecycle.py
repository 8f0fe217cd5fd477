"""Which version of a CKP procedure a trigger may start (seed 001 §3.1: ``status``,
``effective_date``).

A trigger — a schedule, a webhook, a dropped file — starts the latest version that is **active**
(``active`` or ``approved``) and **in effect** (its ``effective_date``, a date in UTC, is today
or earlier). A ``draft`` or ``inactive`` version, or one whose date is still to come, never runs
from a trigger; an earlier version that may still runs instead, so a draft can be stored beside
the procedure in production. Started by hand (``langorch runs start``), any version runs: that
is how a draft is tried. A workflow written in langorch's own format is always active.
"""

from __future__ import annotations

import json
from datetime import date, datetime
from typing import Any

from langorch.domain.definitions import TaskPlan

RUNNABLE = frozenset({"active", "approved"})
"""The statuses a trigger starts."""


def inactive_reason(plan: TaskPlan, today: date) -> str | None:
    """Why a trigger may not start this version today (``None``: it may).

    Args:
        plan: A stored workflow version.
        today: The date now, in UTC.

    Returns:
        ``"status draft"``, ``"effective from 2027-01-01"``, or ``None``.
    """
    if plan.ckp is None:
        return None
    document = json.loads(plan.ckp)
    status = document.get("status", "active")
    if status not in RUNNABLE:
        return f"status {status}"
    effective = effective_date_of(document.get("effective_date"))
    if effective is not None and effective > today:
        return f"effective from {effective.isoformat()}"
    return None


def effective_date_of(value: Any) -> date | None:
    """A procedure's ``effective_date`` as a date (``None`` when it is not one)."""
    if isinstance(value, date):
        return value
    if not isinstance(value, str):
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).date()
    except ValueError:
        return None
