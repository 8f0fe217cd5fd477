"""People compared canonically in approvals (issue 35, item 3): separation of duties,
delegation, quorum slots and approver lookup cannot be sidestepped by spelling an address
another way. Through the approval use-cases on fakes, and the definitions' validation."""

from __future__ import annotations

from typing import Any

import pytest

from langorch.app.approvals.keys import load_signing_keys
from langorch.app.approvals.requests import reissue_approval
from langorch.domain.approvals.outcomes import Decided, FormAgain, Voted
from langorch.domain.approvals.policy import Vote
from langorch.domain.approvals.record import link_url, new_approval, sign_link
from langorch.domain.approvals.votes import SelfApprovalError, progress
from langorch.domain.definitions import TaskPlan
from langorch.domain.validation import InMemoryLookup, validate_workflow
from tests.unit.approvals_support import (
    BASE_URL,
    FakeStack,
    Parked,
    press,
    waiting_run,
)

ANA, BOB, CAT = "ana@example.com", "bob@example.com", "cat@example.com"
CYRILLIC_A = "\u0430"
FULLWIDTH_ANA = "".join(chr(ord(c) + 0xFEE0) for c in "ana") + "@example.com"
STARTER_SPELLINGS = [
    ANA,
    "ANA@Example.COM",
    " ana@example.com ",
    "ana+x@example.com",
    "Ana <ana@example.com>",
    "ana@example.com.",
    f"{CYRILLIC_A}na@example.com",
    FULLWIDTH_ANA,
]
"""Ana's address as the attackers spelled it when starting her own run (issue 35)."""
SOD = {"quorum": "any", "separation_of_duties": True}


def links_after_reissue(stack: FakeStack, parked: Parked) -> dict[str, str]:
    """Every approver's fresh link (the starter gets one too: a forwarded or reissued link)."""
    stack.container.email.sent.clear()
    reissue_approval(parked.approval_id, stack.container)
    return {mail.to: mail.link for mail in stack.container.email.sent}


# --------------------------------------------------------------------------------------------
# Separation of duties
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("starter", STARTER_SPELLINGS)
def test_the_starter_is_not_asked_under_any_spelling(stack: FakeStack, starter: str) -> None:
    # Given a run ana started, her address spelled another way
    # When its approval is requested of ana, bob and cat
    parked = stack.park(approvers=[ANA, BOB, CAT], editable={}, policy=SOD, started_by=starter)
    # Then ana is not emailed: her approval would be refused
    assert sorted(parked.links) == [BOB, CAT]


@pytest.mark.parametrize("starter", STARTER_SPELLINGS)
def test_the_starter_cannot_approve_under_any_spelling(stack: FakeStack, starter: str) -> None:
    # Given a run ana started, her address spelled another way, and a link of her own
    parked = stack.park(approvers=[ANA, BOB, CAT], editable={}, policy=SOD, started_by=starter)
    links = links_after_reissue(stack, parked)
    # When she approves / Then it is refused as self-approval, and nothing resumed
    with pytest.raises(SelfApprovalError):
        press(stack, links[ANA], "approved")
    assert stack.steps.sent == []
    assert ("refused", "self_approval", ANA) in stack.audit(parked)


def test_an_approver_listed_under_another_spelling_is_still_the_starter(stack: FakeStack) -> None:
    # Given ana listed as "Ana <ANA@Example.com>" and the run started by ana+runs@
    approvers = ["Ana <ANA@Example.com>", BOB]
    parked = stack.park(
        approvers=approvers, editable={}, policy=SOD, started_by="ana+runs@example.com"
    )
    links = links_after_reissue(stack, parked)
    # When she approves with her link / Then it is refused
    with pytest.raises(SelfApprovalError):
        press(stack, links["Ana <ANA@Example.com>"], "approved")


# --------------------------------------------------------------------------------------------
# Delegation
# --------------------------------------------------------------------------------------------


DELEGATING = {"quorum": "all", "delegation": True, "separation_of_duties": True}


@pytest.mark.parametrize(
    "to",
    [
        "bob+me@example.com",  # the delegator's own plus-address
        "Bob <BOB@example.com.>",  # the delegator under a display name and trailing dot
        "cat+x@example.com",  # someone who decides already
        "ana+x@example.com",  # the run's starter
        f"dep{CYRILLIC_A}ty@example.com",  # a look-alike address
    ],
)
def test_a_delegation_to_someone_who_may_not_take_the_vote_is_refused(
    stack: FakeStack, to: str
) -> None:
    # Given a run ana started, approved by bob and cat, who may hand over their votes
    parked = stack.park(approvers=[BOB, CAT], editable={}, policy=DELEGATING, started_by=ANA)
    emails = len(stack.container.email.sent)
    # When bob hands his vote to an address that is, by another spelling, himself, an
    # approver or the starter (or imitates someone)
    answer = press(stack, parked.links[BOB], "delegate", delegate_to=to)
    # Then it is refused: the form again, nothing delegated, nobody emailed
    assert isinstance(answer, FormAgain)
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.delegations == {}
    assert len(stack.container.email.sent) == emails


# --------------------------------------------------------------------------------------------
# Quorum slots and approver lookup
# --------------------------------------------------------------------------------------------


ANA_SPELLINGS = [ANA, "ANA+2@example.com", "Ana <ana@example.com.>"]


def test_an_approver_listed_under_three_spellings_is_emailed_once(stack: FakeStack) -> None:
    # Given a step listing ana three times, spelled three ways
    parked = stack.park(
        approvers=[*ANA_SPELLINGS, BOB, CAT], editable={}, policy={"quorum": {"at_least": 3}}
    )
    # Then she is one approver: one email, in the spelling first given
    assert sorted(parked.links) == [ANA, BOB, CAT]


def test_a_quorum_of_three_is_not_met_by_one_person_under_three_spellings(
    stack: FakeStack,
) -> None:
    # Given an approval recorded with ana under three spellings, each with its own link (as
    # a record written before people were compared canonically), and a quorum of three
    links = _recorded_with(stack, [*ANA_SPELLINGS, BOB, CAT], {"quorum": {"at_least": 3}})
    # When ana approves through each of her three links
    answers = [press(stack, links[spelling], "approved") for spelling in ANA_SPELLINGS]
    # Then every link opens the approval, but her vote counts once: nothing resumed
    assert all(isinstance(a, Voted) for a in answers)
    assert [a.recorded for a in answers] == [True, False, False]
    assert answers[-1].progress.startswith("1 of 3 approvals")
    assert stack.steps.sent == []
    # ... and bob and cat complete it
    press(stack, links[BOB], "approved")
    assert type(press(stack, links[CAT], "approved")) is Decided


def test_votes_under_three_spellings_of_one_person_count_once() -> None:
    # Given an approval listing ana under three spellings, and a quorum of two
    request = {
        "interrupt_id": "i-1",
        "approvers": [ANA, BOB],
        "policy": {"quorum": {"at_least": 2}},
    }
    approval = new_approval(run_id="r", workflow_id="wf", request=request, now=_now())
    approval = approval.model_copy(update={"approvers": [*ANA_SPELLINGS, BOB]})
    # When a vote arrives under each of her spellings
    votes = [Vote(approver=who, decision="approved", at=_now()) for who in ANA_SPELLINGS]
    # Then the quorum is not met, and bob is still awaited
    counted = progress(approval, votes)
    assert counted.outcome is None
    assert counted.summary == f"1 of 2 approvals; waiting for {BOB}"


# --------------------------------------------------------------------------------------------
# Definitions
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("place", "path"),
    [
        ("step", "steps[0].approval.approvers[1]"),
        ("workflow", "approvers[1]"),
        ("group", "steps[0].approval.quorum.groups.finance.approvers[1]"),
        ("escalation", "steps[0].approval.escalation[0].approvers[1]"),
    ],
)
def test_a_definition_naming_a_look_alike_approver_is_refused_with_its_path(
    place: str, path: str
) -> None:
    # Given a workflow whose approvers include ana's address with a Cyrillic a
    disguised = [BOB, f"{CYRILLIC_A}na@example.com"]
    # When it is validated
    problems = validate_workflow(
        _gated(place, disguised), InMemoryLookup([], []), tools=frozenset(), providers=frozenset()
    )
    # Then it is refused at that approver's path, naming the letter and how to fix it
    found = [p for p in problems if p.path == path]
    assert len(found) == 1, problems
    assert "U+0430 CYRILLIC SMALL LETTER A" in found[0].message
    assert "one script" in found[0].hint


def test_a_quorum_counts_people_not_spellings_when_validated() -> None:
    plan = _gated("step", ANA_SPELLINGS, quorum={"at_least": 3})
    problems = validate_workflow(
        plan, InMemoryLookup([], []), tools=frozenset(), providers=frozenset()
    )
    assert [p.message for p in problems if p.path.endswith("quorum.at_least")] == [
        "at_least 3 but only 1 approvers can vote"
    ]


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def _now() -> Any:
    from tests.unit.test_approval_policy import NOW

    return NOW


def _gated(place: str, people: list[str], quorum: dict[str, Any] | None = None) -> TaskPlan:
    approval: dict[str, Any] = {"approvers": people if place == "step" else [CAT]}
    if quorum is not None:
        approval["quorum"] = quorum
    if place == "group":
        approval["quorum"] = {"groups": {"finance": {"approvers": people}}}
    if place == "escalation":
        approval["escalation"] = [{"after": "1d", "approvers": people}]
    plan: dict[str, Any] = {
        "plan_id": "wf",
        "steps": [
            {
                "step_id": "review",
                "kind": "approval",
                "approval": approval,
                "branches": {"approved": "done", "rejected": "done"},
            },
            {"step_id": "done", "kind": "terminate", "depends_on": ["review"]},
        ],
    }
    if place == "workflow":
        plan["approvers"] = people
        del approval["approvers"]
    return TaskPlan.model_validate(plan)


def _recorded_with(
    stack: FakeStack, approvers: list[str], policy: dict[str, Any]
) -> dict[str, str]:
    """A run parked on an approval recorded with ``approvers`` exactly as listed; each one's
    link."""
    request = {
        "kind": "approval",
        "step_id": "review",
        "title": "Pay invoice 42",
        "approvers": approvers,
        "timeout_seconds": 600,
        "interrupt_id": "int-spellings",
        "policy": policy,
    }
    run_id = "run-spellings"
    waiting_run(stack.container, run_id, request, stack.clock())
    token = stack.steps.park(run_id)
    recorded = new_approval(
        run_id=run_id, workflow_id="invoices", request=request, now=stack.clock()
    )
    recorded = recorded.model_copy(update={"approvers": approvers})
    stack.container.approvals.put_pending(recorded, token)
    settings = stack.container.settings
    keys = load_signing_keys(stack.container.secrets, settings.link_signing_secret)
    return {
        who: link_url(
            BASE_URL,
            recorded.approval_id,
            sign_link(
                recorded.approval_id, who, recorded.expires_at, keys.current, keys.current_key
            ),
        )
        for who in approvers
    }
