"""Approval policies as data (issue 13): validated with paths and hints, counted exactly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from langorch.domain.approvals.policy import (
    ApprovalPolicy,
    BusinessHours,
    Vote,
    duration_seconds,
    next_business_time,
)
from langorch.domain.approvals.record import Approval, new_approval
from langorch.domain.approvals.votes import (
    SelfApprovalError,
    check_may_vote,
    due_timers,
    next_timer,
    progress,
    timers,
)
from langorch.domain.definitions import TaskPlan
from langorch.domain.errors import DefinitionError, Problem
from langorch.domain.loading import parse_definitions
from langorch.domain.validation import InMemoryLookup, validate_workflow

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)  # a Monday
A, B, C, D = (f"{n}@example.com" for n in ("ann", "bob", "cat", "dan"))
LEGAL, FIN1, FIN2, FIN3 = (f"{n}@example.com" for n in ("lea", "fay", "fin", "fox"))
BOSS = "boss@example.com"


def workflow(approval: dict[str, Any]) -> dict[str, Any]:
    return {
        "plan_id": "wf",
        "steps": [
            {
                "step_id": "review",
                "kind": "approval",
                "approval": {"approvers": [A, B, C], **approval},
                "branches": {"approved": "done", "rejected": "done"},
            },
            {"step_id": "done", "kind": "terminate", "depends_on": ["review"]},
        ],
    }


def problems(approval: dict[str, Any]) -> list[Problem]:
    plan = TaskPlan.model_validate(workflow(approval))
    return validate_workflow(plan, InMemoryLookup([], []), tools=frozenset(), providers=frozenset())


def test_a_full_policy_validates() -> None:
    assert (
        problems(
            {
                "quorum": {
                    "groups": {
                        "legal": {"approvers": [LEGAL]},
                        "finance": {"approvers": [FIN1, FIN2], "at_least": 2},
                    }
                },
                "rejection": "count",
                "reminders": ["4h", "24h"],
                "escalation": [{"after": "1d", "approvers": [BOSS], "group": "finance"}],
                "business_hours": {"timezone": "Europe/Berlin", "days": ["mon", "tue"]},
                "delegation": True,
                "separation_of_duties": True,
            }
        )
        == []
    )


@pytest.mark.parametrize(
    ("approval", "path", "hint"),
    [
        ({"quorum": {"at_least": 4}}, "steps[0].approval.quorum.at_least", "lower at_least"),
        ({"quorum": {}}, "steps[0].approval.quorum", "quorum: {at_least: 2}"),
        (
            {"quorum": {"groups": {"legal": {"approvers": [LEGAL], "at_least": 2}}}},
            "steps[0].approval.quorum.groups.legal.at_least",
            "lower at_least",
        ),
        ({"reminders": ["soon"]}, "steps[0].approval.reminders.after[0]", "4h"),
        ({"reminders": {"after": ["0h"]}}, "steps[0].approval.reminders.after[0]", "positive"),
        (
            {"escalation": [{"after": "1d", "approvers": ["boss"]}]},
            "steps[0].approval.escalation[0].approvers[0]",
            "email",
        ),
        (
            {"escalation": [{"after": "1d", "approvers": [BOSS], "group": "legal"}]},
            "steps[0].approval.escalation[0].group",
            "groups",
        ),
        (
            {"business_hours": {"timezone": "Mars/Olympus"}},
            "steps[0].approval.business_hours.timezone",
            "IANA",
        ),
        (
            {"business_hours": {"days": ["funday"]}},
            "steps[0].approval.business_hours.days[0]",
            "mon",
        ),
        ({"business_hours": {"start": "18:00"}}, "steps[0].approval.business_hours.end", "after"),
        (
            {"quorum": "all", "editable_keys": ["x"], "editable_types": {"x": "text"}},
            "steps[0].approval.editable_keys",
            "quorum: any",
        ),
    ],
)
def test_a_bad_policy_is_reported_with_its_path_and_a_hint(
    approval: dict[str, Any], path: str, hint: str
) -> None:
    found = problems(approval)
    assert [p.path for p in found] == [path], [str(p) for p in found]
    assert hint in found[0].hint


def test_an_unknown_policy_field_or_rule_is_a_load_problem_with_its_path() -> None:
    doc = workflow({"quorum": "most", "reminder": ["4h"]})
    with pytest.raises(DefinitionError) as raised:
        parse_definitions({"workflows": [doc]}, source="wf.yaml")
    paths = {p.path for p in raised.value.problems}
    assert any(p.endswith("steps[0].approval.quorum") for p in paths), paths
    assert any(p.endswith("steps[0].approval.reminder") for p in paths), paths


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("30m", 1800), ("4h", 14400), ("1d", 86400), (60, 60)]
)
def test_durations_read_as_people_write_them(text: str | int, seconds: int) -> None:
    assert duration_seconds(text) == seconds


# --------------------------------------------------------------------------------------------
# Counting
# --------------------------------------------------------------------------------------------


def approval(
    policy: dict[str, Any] | None, approvers: list[str] | None = None, **extra: Any
) -> Approval:
    request: dict[str, Any] = {
        "interrupt_id": "i-1",
        "step_id": "review",
        "approvers": approvers or [A, B, C],
        "timeout_seconds": 7 * 86400,
        **extra,
    }
    if policy is not None:
        request["policy"] = policy
    return new_approval(run_id="run-1", workflow_id="wf", request=request, now=NOW)


def votes(*pairs: tuple[str, str]) -> list[Vote]:
    return [
        Vote(approver=who, decision=what, at=NOW + timedelta(minutes=i))  # type: ignore[arg-type]
        for i, (who, what) in enumerate(pairs)
    ]


def test_any_is_decided_by_the_first_vote() -> None:
    found = progress(approval({"quorum": "any"}), votes((B, "approved")))
    assert found.outcome == "approved"
    assert found.deciding is not None and found.deciding.approver == B


def test_at_least_two_waits_for_the_second_approval_and_says_so() -> None:
    subject = approval({"quorum": {"at_least": 2}})
    one = progress(subject, votes((A, "approved")))
    assert one.outcome is None
    assert one.summary == f"1 of 2 approvals; waiting for {B}, {C}"
    two = progress(subject, votes((A, "approved"), (C, "approved"), (B, "rejected")))
    assert two.outcome == "approved"
    assert two.deciding is not None and two.deciding.approver == C


def test_all_needs_every_approver() -> None:
    subject = approval({"quorum": "all", "rejection": "count"})
    assert progress(subject, votes((A, "approved"), (B, "approved"))).outcome is None
    assert (
        progress(subject, votes((A, "approved"), (B, "approved"), (C, "approved"))).outcome
        == "approved"
    )


def test_any_reject_ends_it_at_the_first_rejection() -> None:
    subject = approval({"quorum": {"at_least": 2}})
    assert progress(subject, votes((A, "approved"), (B, "rejected"))).outcome == "rejected"


def test_counted_rejections_end_it_only_when_the_quorum_is_out_of_reach() -> None:
    subject = approval({"quorum": {"at_least": 2}, "rejection": "count"}, [A, B, C, D])
    assert progress(subject, votes((A, "rejected"), (B, "rejected"))).outcome is None
    assert (
        progress(subject, votes((A, "rejected"), (B, "rejected"), (C, "rejected"))).outcome
        == "rejected"
    )


def test_groups_need_each_group_and_the_summary_names_who_is_awaited() -> None:
    policy = {
        "quorum": {
            "groups": {
                "legal": {"approvers": [LEGAL]},
                "finance": {"approvers": [FIN1, FIN2, FIN3], "at_least": 2},
            }
        }
    }
    subject = approval(policy, [LEGAL, FIN1, FIN2, FIN3])
    two = progress(subject, votes((FIN1, "approved"), (FIN2, "approved")))
    assert two.outcome is None
    assert two.summary == "legal 0 of 1, finance 2 of 2; waiting for legal"
    # A third finance vote does not stand in for legal
    assert (
        progress(subject, votes((FIN1, "approved"), (FIN2, "approved"), (FIN3, "approved"))).outcome
        is None
    )
    done = progress(subject, votes((FIN1, "approved"), (LEGAL, "approved"), (FIN2, "approved")))
    assert done.outcome == "approved"


def test_a_delegates_vote_fills_the_delegators_place() -> None:
    subject = approval({"quorum": "all", "delegation": True}, [A, B]).model_copy(
        update={"delegations": {D: B}}
    )
    found = progress(
        subject,
        [
            Vote(approver=A, decision="approved", at=NOW),
            Vote(approver=D, decision="approved", at=NOW, on_behalf_of=B),
        ],
    )
    assert found.outcome == "approved"


def test_separation_of_duties_refuses_the_starters_approval_and_leaves_them_out_of_all() -> None:
    subject = approval({"quorum": "all", "separation_of_duties": True}, started_by=A)
    with pytest.raises(SelfApprovalError):
        check_may_vote(subject, A, "approved")
    check_may_vote(subject, A, "rejected")  # rejecting one's own run stays allowed
    check_may_vote(subject, B, "approved")
    assert progress(subject, votes((B, "approved"), (C, "approved"))).outcome == "approved"


def test_without_the_policy_the_starter_may_approve() -> None:
    check_may_vote(approval({"quorum": "all"}, started_by=A), A, "approved")


# --------------------------------------------------------------------------------------------
# Timers
# --------------------------------------------------------------------------------------------


def test_reminders_and_escalations_are_due_after_their_delays() -> None:
    subject = approval(
        {
            "reminders": {"after": ["4h"], "max": 2},
            "escalation": [{"after": "1d", "approvers": [BOSS]}],
        }
    )
    assert [(t.kind, t.due - NOW) for t in timers(subject)] == [
        ("reminder", timedelta(hours=4)),
        ("reminder", timedelta(hours=8)),
        ("escalation", timedelta(days=1)),
    ]
    assert due_timers(subject, NOW + timedelta(hours=3)) == []
    due = due_timers(subject, NOW + timedelta(hours=5))
    assert [(t.kind, t.index) for t in due] == [("reminder", 0)]
    assert "4h" in due[0].why
    sent = subject.model_copy(update={"reminders_sent": 1})
    upcoming = next_timer(sent, NOW + timedelta(hours=5))
    assert upcoming is not None and (upcoming.kind, upcoming.index) == ("reminder", 1)


def test_a_decided_approval_has_no_timers_due() -> None:
    subject = approval({"reminders": ["1h"]}).model_copy(update={"status": "approved"})
    assert due_timers(subject, NOW + timedelta(hours=2)) == []
    assert next_timer(subject, NOW) is None


def test_business_hours_move_a_timer_to_the_next_opening() -> None:
    hours = BusinessHours(
        timezone="UTC", days=["mon", "tue", "wed", "thu", "fri"], start="09:00", end="17:00"
    )
    friday_evening = datetime(2026, 1, 9, 18, 0, tzinfo=UTC)
    assert next_business_time(friday_evening, hours) == datetime(2026, 1, 12, 9, 0, tzinfo=UTC)
    inside = datetime(2026, 1, 6, 10, 0, tzinfo=UTC)
    assert next_business_time(inside, hours) == inside
    subject = approval({"reminders": ["8h"], "business_hours": hours.model_dump()})
    assert timers(subject)[0].due == datetime(2026, 1, 6, 9, 0, tzinfo=UTC)


def test_a_plain_step_carries_no_policy() -> None:
    assert approval(None).policy is None
    assert ApprovalPolicy().counts_votes is False
