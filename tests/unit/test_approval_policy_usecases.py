"""Approval policies through the page use-cases, on fakes (issue 13): votes, separation of
duties, delegation, reminders and escalations with an injected clock, timers cancelled."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from langorch.app.approvals.decisions import view_approval
from langorch.app.approvals.votes import fire_timers
from langorch.domain.approvals.outcomes import AlreadyDecided, Decided, FormAgain, Shown, Voted
from langorch.domain.approvals.votes import DelegatedAwayError, SelfApprovalError
from tests.support.definitions import workflow
from tests.unit.approvals_support import FakeStack, Parked, press, view_command

ANN, BOB, CAT = "ann@example.com", "bob@example.com", "cat@example.com"
BOSS, DEPUTY = "boss@example.com", "deputy@example.com"


def park(stack: FakeStack, policy: dict[str, Any], **kw: Any) -> Parked:
    return stack.park(approvers=[ANN, BOB, CAT], editable={}, policy=policy, **kw)


def actions(stack: FakeStack, parked: Parked) -> list[tuple[str, str, str | None]]:
    return [a for a in stack.audit(parked) if a[0] not in ("view", "emailed", "requested")]


def test_all_resumes_the_run_once_the_last_approver_votes(stack: FakeStack) -> None:
    parked = park(stack, {"quorum": "all"})
    first = press(stack, parked.links[ANN], "approved", comment="fine")
    assert (
        isinstance(first, Voted) and first.progress == f"1 of 3 approvals; waiting for {BOB}, {CAT}"
    )
    assert isinstance(press(stack, parked.links[BOB], "approved"), Voted)
    assert stack.steps.sent == []
    last = press(stack, parked.links[CAT], "approved")
    assert type(last) is Decided
    (output,) = stack.steps.sent
    assert output["decision"] == "approved" and output["approver"] == CAT
    assert [v["approver"] for v in output["votes"]] == [ANN, BOB, CAT]
    assert actions(stack, parked) == [
        ("vote", "approved", ANN),
        ("vote", "approved", BOB),
        ("vote", "approved", CAT),
        ("decide", "approved", CAT),
    ]


def test_a_second_press_by_the_same_approver_counts_once(stack: FakeStack) -> None:
    parked = park(stack, {"quorum": {"at_least": 2}})
    assert isinstance(press(stack, parked.links[ANN], "approved"), Voted)
    again = press(stack, parked.links[ANN], "approved")
    assert isinstance(again, Voted) and not again.recorded
    assert again.progress.startswith("1 of 2 approvals")
    assert stack.steps.sent == []


def test_one_rejection_ends_it_under_any_reject(stack: FakeStack) -> None:
    parked = park(stack, {"quorum": "all"})
    press(stack, parked.links[ANN], "approved")
    assert type(press(stack, parked.links[BOB], "rejected", comment="no")) is Decided
    assert stack.steps.sent[0]["decision"] == "rejected"
    assert isinstance(press(stack, parked.links[CAT], "approved"), AlreadyDecided)


def test_separation_of_duties_refuses_the_starter_and_does_not_email_them(
    stack: FakeStack,
) -> None:
    parked = park(stack, {"quorum": "any", "separation_of_duties": True}, started_by=ANN)
    assert ANN not in parked.links  # the starter is not asked
    # Even with a link of their own (forwarded, or from a reissue), their approval is refused
    from langorch.app.approvals.requests import reissue_approval

    stack.container.email.sent.clear()
    reissue_approval(parked.approval_id, stack.container)
    links = {m.to: m.link for m in stack.container.email.sent}
    with pytest.raises(SelfApprovalError):
        press(stack, links[ANN], "approved")
    assert stack.steps.sent == []
    assert ("refused", "self_approval", ANN) in stack.audit(parked)
    assert type(press(stack, links[BOB], "approved")) is Decided


def test_delegation_hands_the_vote_over_and_is_audited(stack: FakeStack) -> None:
    parked = park(stack, {"quorum": "all", "delegation": True})
    before = len(stack.container.email.sent)
    handed = press(stack, parked.links[BOB], "delegate", delegate_to=DEPUTY)
    assert isinstance(handed, Voted) and handed.delegated_to == DEPUTY
    (mail,) = stack.container.email.sent[before:]
    assert mail.to == DEPUTY and f"{BOB} handed you their vote" in mail.text
    assert "Reminder" not in mail.subject
    # Bob's own link no longer votes
    with pytest.raises(DelegatedAwayError):
        press(stack, parked.links[BOB], "approved")
    press(stack, parked.links[ANN], "approved")
    press(stack, parked.links[CAT], "approved")
    assert stack.steps.sent == []  # Bob's place is still open
    assert type(press(stack, mail.link, "approved")) is Decided
    votes = stack.steps.sent[0]["votes"]
    assert {"approver": DEPUTY.lower(), "on_behalf_of": BOB} in [
        {k: v[k] for k in ("approver", "on_behalf_of") if k in v} for v in votes
    ]
    assert ("delegated", DEPUTY, BOB) in stack.audit(parked)


def test_delegation_is_refused_when_the_policy_does_not_allow_it(stack: FakeStack) -> None:
    parked = park(stack, {"quorum": "all"})
    again = press(stack, parked.links[BOB], "delegate", delegate_to=DEPUTY)
    assert isinstance(again, FormAgain)
    assert stack.container.approvals.get(parked.approval_id).delegations == {}  # type: ignore[union-attr]


def test_reminders_and_escalation_fire_on_the_injected_clock_then_stop(stack: FakeStack) -> None:
    policy = {
        "quorum": {"at_least": 2},
        "reminders": ["4h"],
        "escalation": [{"after": "1d", "approvers": [BOSS]}],
    }
    parked = stack.park(approvers=[ANN, BOB, CAT], editable={}, policy=policy, timeout=3 * 86400)
    timers = stack.container.approval_timers
    created = stack.clock()
    assert timers.scheduled[parked.approval_id] == created + timedelta(hours=4)
    press(stack, parked.links[ANN], "approved")
    # Nothing is due before 4 h
    assert fire_timers(parked.approval_id, stack.container).fired == []
    # At 4 h the ones who have not answered are reminded, and told why
    stack.clock.advance(4 * 3600)
    before = len(stack.container.email.sent)
    fired = fire_timers(parked.approval_id, stack.container)
    assert [t.kind for t in fired.fired] == ["reminder"]
    reminded = stack.container.email.sent[before:]
    assert sorted(m.to for m in reminded) == [BOB, CAT]
    assert all("no decision 4h after the request" in m.text for m in reminded)
    assert all("1 of 2 approvals" in m.text for m in reminded)
    assert all("Reminder: Pay invoice 42" in m.subject for m in reminded)
    assert timers.scheduled[parked.approval_id] == created + timedelta(days=1)
    # A second wake-up at the same time sends nothing again
    assert fire_timers(parked.approval_id, stack.container).fired == []
    # After a day the manager joins, is told, and can decide
    stack.clock.advance(20 * 3600)
    before = len(stack.container.email.sent)
    assert [t.kind for t in fire_timers(parked.approval_id, stack.container).fired] == [
        "escalation"
    ]
    (escalated,) = stack.container.email.sent[before:]
    assert escalated.to == BOSS and "Escalated to you" in escalated.text
    assert parked.approval_id not in timers.scheduled  # no timer left
    assert type(press(stack, escalated.link, "approved")) is Decided
    assert [
        (a, o.split(":")[0]) for a, o, _ in stack.audit(parked) if a in ("reminded", "escalated")
    ] == [
        ("reminded", "reminder 1"),
        ("escalated", "escalation 1"),
    ]


def test_the_decision_cancels_pending_timers(stack: FakeStack) -> None:
    parked = stack.park(
        approvers=[ANN, BOB],
        editable={},
        policy={"quorum": "any", "reminders": ["4h"]},
        timeout=86400,
    )
    timers = stack.container.approval_timers
    assert parked.approval_id in timers.scheduled
    press(stack, parked.links[ANN], "approved")
    assert parked.approval_id not in timers.scheduled
    assert timers.cancelled == [parked.approval_id]
    # and a wake-up that was already on its way sends nothing
    stack.clock.advance(5 * 3600)
    before = len(stack.container.email.sent)
    assert fire_timers(parked.approval_id, stack.container).fired == []
    assert len(stack.container.email.sent) == before


def test_groups_wait_for_the_missing_group(stack: FakeStack) -> None:
    legal, fin1, fin2 = "lea@example.com", "fay@example.com", "fin@example.com"
    policy = {
        "quorum": {
            "groups": {
                "legal": {"approvers": [legal]},
                "finance": {"approvers": [fin1, fin2], "at_least": 2},
            }
        }
    }
    parked = stack.park(approvers=[legal, fin1, fin2], editable={}, policy=policy)
    press(stack, parked.links[fin1], "approved")
    waiting = press(stack, parked.links[fin2], "approved")
    assert isinstance(waiting, Voted)
    assert waiting.progress == "legal 0 of 1, finance 2 of 2; waiting for legal"
    assert type(press(stack, parked.links[legal], "approved")) is Decided


# --------------------------------------------------------------------------------------------
# The run gets the decision and every vote; the page shows the policy
# --------------------------------------------------------------------------------------------

POLICY_WORKFLOW = workflow("pay", inputs={"amount": "number"}).steps("""
      - step_id: review
        kind: approval
        approval:
          approvers: [ann@example.com, bob@example.com, cat@example.com]
          quorum: {at_least: 2}
          show_keys: [amount]
        branches: {approved: paid, rejected: refused}
      - {step_id: paid, kind: terminate, terminate: {outputs: {decision: review_decision}}}
      - {step_id: refused, kind: terminate, terminate: {outputs: {refusal: review_decision}}}
""")


def test_the_run_resumes_with_the_decision_and_every_vote_in_its_state(make_container: Any) -> None:
    from tests.integration.conftest import register_text, run_to_end
    from tests.support.approvers import recording_approver

    container = make_container()
    register_text(container, POLICY_WORKFLOW)
    votes = [
        {"approver": ANN, "decision": "approved", "at": "2026-01-05T12:00:00Z"},
        {"approver": CAT, "decision": "approved", "at": "2026-01-05T12:01:00Z"},
    ]
    asked, decide = recording_approver({"decision": "approved", "approver": CAT, "votes": votes})

    result = run_to_end(container, "pay", {"amount": 12000}, on_approval=decide)

    (request,) = asked
    assert request["policy"] == {"quorum": {"at_least": 2}}
    decision = result.outputs["decision"]
    assert decision["decision"] == "approved" and decision["approver"] == CAT
    assert [v["approver"] for v in decision["votes"]] == [ANN, CAT]


def test_the_page_shows_the_policy_progress_and_the_delegate_field(stack: FakeStack) -> None:
    from langorch.web.pages import approval_page, decided_page

    parked = park(stack, {"quorum": {"at_least": 2}, "delegation": True, "reminders": ["4h"]})
    press(stack, parked.links[ANN], "approved")
    shown = view_approval(view_command(parked.links[BOB]), stack.container)
    assert isinstance(shown, Shown)
    page = approval_page(shown.approval, approver=BOB, nonce=shown.nonce).body
    assert f"1 of 2 approvals; waiting for {BOB}, {CAT}" in page
    assert "Needs 2 approvals." in page and "Reminders after 4h." in page
    assert 'name="delegate_to"' in page and 'value="delegate"' in page
    voted = decided_page(shown.approval, status=200).body
    assert "Vote recorded" in voted and "1 of 2 approvals" in voted
