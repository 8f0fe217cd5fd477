# ruff: noqa: F811 - the ``stack`` fixture is imported from test_approvals
"""Approval policies on moto (issue 13): one decision, exactly once, under 30 concurrent voters.

The real approvals adapter, the real Step Functions task (moto executing the state machine)
and the real page use-cases: the run resumes once, with the decision and every vote.
"""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from typing import Any

from langorch.app.approvals.decisions import (
    decide_approval,
    view_approval,
)
from langorch.domain.approvals.outcomes import AlreadyDecided, Decided, Shown, Voted
from langorch.domain.approvals.record import ApprovalStatus
from tests.integration.test_approvals import (  # noqa: F401 - the fixtures
    Parked,
    Stack,
    _task_token,
    stack,
)
from tests.unit.approvals_support import decide_command, view_command

VOTERS = [f"voter{n:02d}@example.com" for n in range(30)]


def park_with_policy(stack: Stack, approvers: list[str], policy: dict[str, Any]) -> Parked:
    """A run waiting on its task token for an approval under ``policy``."""
    stack.runs_seen += 1
    run_id = f"run-{stack.runs_seen}"
    request = {
        "kind": "approval",
        "step_id": "review",
        "title": "Pay invoice 42",
        "context": {"amount": 1200},
        "approvers": approvers,
        "timeout_seconds": 300,
        "on_timeout": "reject",
        "iteration": 1,
        "interrupt_id": f"int-{stack.runs_seen}",
        "policy": policy,
    }
    return stack.park_request(run_id, request)


def _forms(
    stack: Stack, parked: Parked, who: list[str], decision: str
) -> dict[str, dict[str, str]]:
    forms = {}
    for person in who:
        shown = view_approval(view_command(parked.links[person]), stack.container)
        assert isinstance(shown, Shown)
        forms[person] = {"nonce": shown.nonce, "decision": decision}
    stack.clock.now += timedelta(seconds=stack.container.settings.approval_form_dwell_seconds)
    return forms


def test_thirty_concurrent_voters_with_quorum_three_reach_one_decision(stack: Stack) -> None:
    # Given 30 approvers of a step that needs 3 approvals, each with the page open
    parked = park_with_policy(stack, VOTERS, {"quorum": {"at_least": 3}})
    forms = _forms(stack, parked, VOTERS, "approved")
    outcomes: dict[str, Any] = {}
    start = threading.Barrier(len(VOTERS))

    def press(who: str) -> None:
        start.wait()
        try:
            outcomes[who] = decide_approval(
                decide_command(parked.links[who], forms[who]), stack.container
            )
        except Exception as exc:  # kept: a thread's exception would otherwise go unseen
            outcomes[who] = exc

    # When all 30 press Approve at the same moment
    threads = [threading.Thread(target=press, args=(who,)) for who in VOTERS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Then every press was answered (none raised), and the run resumed exactly once, approved,
    # with every vote accepted before the decision
    assert [o for o in outcomes.values() if isinstance(o, Exception)] == []
    assert len(outcomes) == len(VOTERS)
    assert len(stack.steps.sent) == 1
    output = json.loads(stack.wait_status(parked, "SUCCEEDED")["output"])
    assert output["decision"] == "approved"
    store = stack.container.approvals
    recorded = store.votes(parked.approval_id)
    assert len(recorded) >= 3
    assert sorted(v["approver"] for v in output["votes"]) == sorted(v.approver for v in recorded)
    assert all(v["decision"] == "approved" for v in output["votes"])
    # and the decision names a voter whose vote is among them
    assert output["approver"] in {v.approver for v in recorded}
    # exactly one request decided; the others recorded a vote that waited, or read the outcome
    decided = [w for w, o in outcomes.items() if type(o) is Decided]
    assert len(decided) == 1
    assert all(
        isinstance(o, Voted | AlreadyDecided) for w, o in outcomes.items() if w not in decided
    )
    voted = {v.approver for v in recorded}
    assert all(isinstance(o, AlreadyDecided) for w, o in outcomes.items() if w not in voted)
    late = [o for o in outcomes.values() if isinstance(o, AlreadyDecided)]
    assert all(o.notice.outcome is ApprovalStatus.approved for o in late)
    # and the audit lists every vote and the one decision
    trail = store.audit(parked.approval_id)
    assert sum(1 for e in trail if e.action == "vote") == len(recorded)
    assert [e.outcome for e in trail if e.action == "decide"] == ["approved"]


def test_a_later_voter_sees_the_outcome_and_no_second_resume(stack: Stack) -> None:
    # Given a step needing 2 of 3, approved by the first two
    people = VOTERS[:3]
    parked = park_with_policy(stack, people, {"quorum": {"at_least": 2}})
    forms = _forms(stack, parked, people, "approved")
    first = decide_approval(
        decide_command(parked.links[people[0]], forms[people[0]]), stack.container
    )
    assert isinstance(first, Voted)
    assert first.progress.startswith("1 of 2 approvals")
    assert stack.status(parked) == "RUNNING"
    second = decide_approval(
        decide_command(parked.links[people[1]], forms[people[1]]), stack.container
    )
    assert type(second) is Decided
    # When the third votes after the decision
    third = decide_approval(
        decide_command(parked.links[people[2]], forms[people[2]]), stack.container
    )
    # Then they read the outcome, and nothing resumes twice
    assert isinstance(third, AlreadyDecided)
    assert third.notice.outcome is ApprovalStatus.approved
    assert len(stack.steps.sent) == 1
    output = json.loads(stack.wait_status(parked, "SUCCEEDED")["output"])
    assert [v["approver"] for v in output["votes"]] == people[:2]
