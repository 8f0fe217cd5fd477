"""Approvals' reminders and escalations fire from one-time schedules, which the local ticker
fires in ``make dev`` as the Scheduler does in AWS: on an injected clock, never real hours."""

from __future__ import annotations

import json
from typing import Any

from langorch.adapters.scheduler import (
    APPROVAL_TIMER_KIND,
    ApprovalTimerSchedules,
)
from langorch.app.approvals.votes import fire_timers
from langorch.local.ticker import Ticker, to_schedule
from tests.unit.approvals_support import FakeStack
from tests.unit.test_approval_policy_usecases import ANN, BOB, BOSS, CAT, press

POLICY = {
    "quorum": {"at_least": 2},
    "reminders": ["4h"],
    "escalation": [{"after": "1d", "approvers": [BOSS]}],
}


def _wired() -> tuple[FakeStack, Ticker, list[dict[str, Any]]]:
    """A stack whose wake-ups are real one-time schedules, and the ticker that fires them at
    the trigger (here: what the trigger handler does with a wake-up)."""
    stack = FakeStack()
    schedules = stack.container.schedules.configured_as(
        role_arn="arn:aws:iam::123456789012:role/langorch-scheduler",
        target_arn="arn:aws:lambda:us-east-1:123456789012:function:trigger",
        dead_letter_arn=None,
    )
    stack.container.schedules = schedules
    stack.container.approval_timers = ApprovalTimerSchedules(schedules)  # type: ignore[assignment]
    delivered: list[dict[str, Any]] = []

    def invoke(event: dict[str, Any]) -> None:
        delivered.append(event)
        assert event["kind"] == APPROVAL_TIMER_KIND
        fire_timers(event["approval_id"], stack.container)

    def read() -> list[Any]:
        found = (to_schedule(s, region="us-east-1", group="langorch") for s in schedules.list())
        return [s for s in found if s is not None]

    return stack, Ticker(read, invoke, since=stack.clock()), delivered


def test_the_ticker_fires_the_reminder_then_the_escalation_on_the_injected_clock() -> None:
    stack, ticker, delivered = _wired()
    parked = stack.park(approvers=[ANN, BOB, CAT], editable={}, policy=POLICY, timeout=3 * 86400)
    name = ApprovalTimerSchedules.name(parked.approval_id)
    (scheduled,) = stack.container.schedules.list()
    assert scheduled.name == name and scheduled.expression.startswith("at(")
    assert json.loads(json.dumps(scheduled.input))["approval_id"] == parked.approval_id
    press(stack, parked.links[ANN], "approved")

    # Before 4 h nothing fires
    stack.clock.advance(3 * 3600)
    assert ticker.fire_due(stack.clock()) == []
    # At 4 h the reminder goes to those who have not answered
    stack.clock.advance(3600 + 1)
    before = len(stack.container.email.sent)
    assert [n for n, _ in ticker.fire_due(stack.clock())] == [name]
    assert sorted(m.to for m in stack.container.email.sent[before:]) == [BOB, CAT]
    # After a day, the escalation (the same schedule, moved to its next time)
    stack.clock.advance(20 * 3600)
    before = len(stack.container.email.sent)
    assert [n for n, _ in ticker.fire_due(stack.clock())] == [name]
    assert [m.to for m in stack.container.email.sent[before:]] == [BOSS]
    assert len(delivered) == 2
    # Nothing is left: the schedule is gone
    assert stack.container.schedules.list() == []


def test_the_decision_deletes_the_wake_up_so_the_ticker_fires_nothing() -> None:
    stack, ticker, delivered = _wired()
    parked = stack.park(approvers=[ANN, BOB, CAT], editable={}, policy=POLICY, timeout=3 * 86400)
    press(stack, parked.links[ANN], "approved")
    press(stack, parked.links[BOB], "approved")  # 2 of 2: decided
    assert stack.container.schedules.list() == []
    stack.clock.advance(2 * 86400)
    assert ticker.fire_due(stack.clock()) == []
    assert delivered == []
    assert [a for a, _, _ in stack.audit(parked) if a in ("reminded", "escalated")] == []
