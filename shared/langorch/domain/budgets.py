"""A run's budget: how much its LLM calls may spend, and what happens when the next would cross it.

``budget: {per_run: 5.00, on_budget: ask, approvers: [finance@example.com]}`` on a workflow.
Before each LLM call, its estimate (:meth:`~langorch.domain.prices.PriceTable.estimate`: the
prompt and the whole output limit, priced) is added to what the run has spent; past the budget,
``ask`` parks the run on an approval (the usual links, policies and console), ``fail`` ends it
``budget_exceeded`` at once. An approval raises the run's budget by ``raise_by`` (what the
approver may edit; default: ``per_run`` again); a rejection, or a timeout, ends the run
``budget_exceeded``.

Pure: the engine asks (:mod:`langorch.engine.kinds.llm`), this module says what and how.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from langorch.domain.errors import Problem, StepFailedError
from langorch.domain.identities import identity_problems
from langorch.domain.prices import format_usd

BUDGET_EXCEEDED = "budget_exceeded"
"""The error type of a run its budget ended (``runs show``, ``error.type`` in templates)."""

RAISE_KEY = "budget_increase_usd"
"""The field of a budget approval the approver may edit: by how much the budget rises."""

BUDGET_STEP_SUFFIX = ":budget"
"""A budget approval's ``step_id`` is the LLM step's id plus this (it is no step of the plan)."""


class BudgetSpec(BaseModel):
    """A workflow's ``budget``: US dollars per run, and what to do at the limit."""

    model_config = ConfigDict(extra="forbid")

    per_run: float | None = Field(default=None, gt=0)
    """What one run's LLM calls may spend (US dollars), failed attempts included."""
    per_day: float | None = Field(default=None, gt=0)
    """What all runs of the workflow may spend per UTC day (stored counters)."""
    per_month: float | None = Field(default=None, gt=0)
    """What all runs of the workflow may spend per UTC calendar month (stored counters)."""
    on_budget: Literal["ask", "fail"] = "ask"
    """At the limit: ask a person (park on an approval), or end the run ``budget_exceeded``."""
    approvers: list[str] = Field(default_factory=list)
    """Who is asked (default: the workflow's ``approvers``)."""
    raise_by: float | None = Field(default=None, gt=0)
    """What an approval adds to the run's budget unless the approver edits it (default:
    ``per_run``)."""
    timeout_seconds: int = Field(default=86_400, ge=60, le=31_536_000)
    """How long the question waits; unanswered, the run ends ``budget_exceeded``."""

    @property
    def increment(self) -> float:
        """What an approval adds when the approver does not say otherwise."""
        if self.raise_by is not None:
            return self.raise_by
        return self.per_run if self.per_run is not None else 0.0

    def periods(self, workflow_id: str, now: datetime) -> list[tuple[str, int]]:
        """The workflow's period counters this call reserves against: ``(key, limit in
        micro-dollars)`` for the day and the month of ``now`` (UTC) that have a limit."""
        day, month = now.astimezone(UTC).strftime("%Y-%m-%d"), now.astimezone(UTC).strftime("%Y-%m")
        found = []
        if self.per_day is not None:
            found.append((f"{workflow_id}/day/{day}", micros(self.per_day)))
        if self.per_month is not None:
            found.append((f"{workflow_id}/month/{month}", micros(self.per_month)))
        return found


MICROS = 1_000_000
"""Counters hold micro-dollars: integers, so a conditional add is exact in every store."""


def micros(usd: float) -> int:
    """``usd`` in micro-dollars, rounded up (a reservation never holds less than asked)."""
    return math.ceil(round(usd * MICROS, 3))


class BudgetExceededError(StepFailedError):
    """The run's next LLM call would cross its budget, and no one raised it: the run ends."""

    error_type = BUDGET_EXCEEDED
    """The type the timeline and the run's error carry (not the class name)."""
    ends_run = True
    """No ``on_error`` route catches it: the budget is the run's, not the step's."""


def budget_problems(budget: BudgetSpec | None, plan_approvers: list[str]) -> Iterator[Problem]:
    """What is wrong with a workflow's ``budget`` (paths from the workflow)."""
    if budget is None:
        return
    if budget.per_run is None and budget.per_day is None and budget.per_month is None:
        yield Problem(
            "budget",
            "a budget needs a limit",
            "set per_run, per_day or per_month (US dollars), e.g. budget: {per_run: 5.00}",
        )
    yield from identity_problems(budget.approvers, "budget.approvers")
    if budget.on_budget == "ask" and not (budget.approvers or plan_approvers):
        yield Problem(
            "budget.approvers",
            "a budget that asks needs someone to ask",
            "list budget.approvers (or the workflow's approvers), or set on_budget: fail",
        )


def over_budget(spent: float, estimate: float, limit: float) -> bool:
    """Whether a call estimated at ``estimate`` would take ``spent`` past ``limit``."""
    return spent + estimate > limit + 1e-12


def budget_message(spent: float, limit: float, estimate: float, *, whose: str = "this run") -> str:
    """What the approver (and the run's error) reads; ``whose`` names the budget's holder
    (``this workflow today``)."""
    return (
        f"{whose} has spent {format_usd(spent)} of {format_usd(limit)}; "
        f"the next step is estimated at {format_usd(estimate)}"
    )


def budget_request(
    *,
    step_id: str,
    spent: float,
    limit: float,
    estimate: float,
    budget: BudgetSpec,
    approvers: list[str],
    whose: str = "this run",
) -> dict[str, Any]:
    """The approval request of a budget question, shaped as an ``approval`` step's, so the
    approval machinery (links, policies, reminders, the console) handles it as any other."""
    return {
        "kind": "approval",
        "step_id": step_id + BUDGET_STEP_SUFFIX,
        "title": f"Budget: raise this run's budget to go on with {step_id}?",
        "message": budget_message(spent, limit, estimate, whose=whose),
        "context": {
            "spent_usd": round(spent, 6),
            "budget_usd": round(limit, 6),
            "estimate_usd": round(estimate, 6),
            "step_id": step_id,
        },
        "editable": {RAISE_KEY: round(budget.increment, 6)},
        "approvers": approvers,
        "timeout_seconds": budget.timeout_seconds,
        "on_timeout": "reject",
        "require_code": False,
        "iteration": 1,
        "max_iterations": None,
        "budget": True,
    }


def granted_raise(decision: dict[str, Any], budget: BudgetSpec) -> float:
    """What an approval of a budget question adds: the approver's edit, else the default."""
    edited = (decision.get("edits") or {}).get(RAISE_KEY)
    if isinstance(edited, int | float) and not isinstance(edited, bool) and edited > 0:
        return float(edited)
    return budget.increment
