"""An approval email that bounces for good (or is reported as spam) reaches the trigger function
through SES's event destination (SNS): the approver is marked undeliverable on that approval and
the approval escalates by its policy at once (issue 34 item 6)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from functions.trigger import handler as trigger
from langorch.cli.commands.approvals import detail
from tests.support.events import invoke
from tests.unit.approvals_support import FakeStack, Parked

ANN, BOB, BOSS = "ann@example.com", "bob@example.com", "boss@example.com"
POLICY = {"escalation": [{"after": "1d", "approvers": [BOSS]}]}


@pytest.fixture
def stack() -> Iterator[FakeStack]:
    stack = FakeStack()
    previous = trigger.container.use(stack.container)  # type: ignore[arg-type]
    yield stack
    trigger.container.use(previous)


def _sns(notification: dict[str, Any]) -> dict[str, Any]:
    """What SNS hands the function for one SES event notification."""
    return {
        "Records": [
            {
                "EventSource": "aws:sns",
                "EventVersion": "1.0",
                "Sns": {"Type": "Notification", "Message": json.dumps(notification)},
            }
        ]
    }


def _bounce(parked: Parked, address: str, bounce_type: str = "Permanent") -> dict[str, Any]:
    return {
        "eventType": "Bounce",
        "bounce": {
            "bounceType": bounce_type,
            "bounceSubType": "NoEmail" if bounce_type == "Permanent" else "MailboxFull",
            "bouncedRecipients": [{"emailAddress": address}],
        },
        "mail": {"tags": {"approval_id": [parked.approval_id]}},
    }


def test_a_hard_bounce_marks_the_approver_undeliverable_and_escalates_at_once(
    stack: FakeStack,
) -> None:
    # Given an approval asked of ann and bob, escalating to the boss after a day
    parked = stack.park(approvers=[ANN, BOB], editable={}, policy=POLICY, timeout=3 * 86400)
    before = len(stack.container.email.sent)
    # When SES reports ann's email bounced for good (through SNS to the trigger function)
    answer = invoke(trigger, _sns(_bounce(parked, ANN)))
    # Then the boss is asked now, not in a day, and told why
    assert answer == {"email_events": 1, "escalated": [parked.approval_id]}
    (escalated,) = stack.container.email.sent[before:]
    assert escalated.to == BOSS
    assert "Escalated to you: the email to ann@example.com bounced" in escalated.text
    # ...and the trail says ann is unreachable, as `approvals show` prints it
    trail = stack.audit(parked)
    assert ("undeliverable", "bounce (Permanent/NoEmail)", ANN) in trail
    assert [a for a, _, _ in trail if a == "escalated"] == ["escalated"]
    approvals = stack.container.approvals
    shown = detail(approvals.get(parked.approval_id), approvals.audit(parked.approval_id))  # type: ignore[arg-type]
    assert {"action": "undeliverable", "actor": ANN} in [
        {"action": line["action"], "actor": line["actor"]} for line in shown["audit"]
    ]


def test_a_repeated_notice_escalates_no_further_and_a_complaint_counts_as_undeliverable(
    stack: FakeStack,
) -> None:
    # Given an approval that escalated on a bounce, and SNS delivering the same notice again
    parked = stack.park(approvers=[ANN, BOB], editable={}, policy=POLICY, timeout=3 * 86400)
    invoke(trigger, _sns(_bounce(parked, ANN)))
    before = len(stack.container.email.sent)
    again = invoke(trigger, _sns(_bounce(parked, ANN)))
    # Then nobody more is emailed: the policy has no further level
    assert again["escalated"] == []
    assert stack.container.email.sent[before:] == []
    # ...while a complaint from bob is recorded too
    complaint = {
        "eventType": "Complaint",
        "complaint": {"complainedRecipients": [{"emailAddress": BOB}]},
        "mail": {"tags": {"approval_id": [parked.approval_id]}},
    }
    invoke(trigger, _sns(complaint))
    assert ("undeliverable", "complaint (complaint)", BOB) in stack.audit(parked)


def test_a_transient_bounce_is_not_final_and_changes_nothing(stack: FakeStack) -> None:
    # Given a mailbox that is only full (SES retried; the next reminder may get through)
    parked = stack.park(approvers=[ANN, BOB], editable={}, policy=POLICY, timeout=3 * 86400)
    before = len(stack.container.email.sent)
    answer = invoke(trigger, _sns(_bounce(parked, ANN, bounce_type="Transient")))
    # Then nothing is recorded or sent
    assert answer == {"email_events": 1, "escalated": []}
    assert stack.container.email.sent[before:] == []
    assert not [a for a, _, _ in stack.audit(parked) if a == "undeliverable"]
