"""Tool-call policies as data (issue 29, item 3): the verdict of the rules, and their validation."""

from __future__ import annotations

import pytest

from langorch.domain.errors import DefinitionError
from langorch.domain.loading import load_text
from langorch.domain.tool_policies import ToolPolicy, decide, parse_policies, rule_on
from langorch.domain.validation import check_workflow
from tests.fakes import Fakes
from tests.support.definitions import workflow

REFUND = 'tool == "issue_refund" and args.amount > 500'


def test_the_first_enforce_rule_that_matches_decides() -> None:
    # Given a rule holding big refunds for approval, then one denying every refund
    rules = [
        ToolPolicy(when=REFUND, action="require_approval", approvers=["f@example.com"]),
        ToolPolicy(when='tool == "issue_refund"', action="deny"),
    ]

    # Then a big refund needs approval, a small one is denied, another tool is allowed
    assert decide(rules, "issue_refund", {"amount": 900}).action == "require_approval"
    assert decide(rules, "issue_refund", {"amount": 20}).rule == 1
    assert decide(rules, "look_up", {}).action == "allow"


def test_a_rule_whose_expression_fails_on_a_call_does_not_match_it() -> None:
    # Given a rule over args.amount, and a call without an amount
    rules = [ToolPolicy(when="args.amount > 500", action="deny")]

    # Then the call is allowed
    assert decide(rules, "issue_refund", {}).action == "allow"


def test_shadow_rules_are_reported_and_decide_nothing() -> None:
    rules = [ToolPolicy(when=REFUND, action="deny", mode="shadow")]
    verdict = decide(rules, "issue_refund", {"amount": 900})
    assert (verdict.action, verdict.shadows) == ("allow", [(0, "deny")])


def test_bad_rules_are_refused_with_their_paths() -> None:
    # Given a workflow with a rule that does not parse and one that asks no one
    plan = load_text(
        workflow(
            "desk",
            tool_policies=[
                {"when": "tool == ", "action": "deny"},
                {"when": 'tool == "issue_refund"', "action": "require_approval"},
            ],
        ).steps("""
      - {step_id: t, kind: transform, transform: {x: "1"}}
"""),
        source="t.yaml",
        fmt="yaml",
    ).workflows[0]

    # When it is validated, then both problems are named at their paths
    found = check_workflow(plan, Fakes().definitions, tools=None, providers=None)  # type: ignore[arg-type]
    assert [p.path for p in found.errors] == [
        "tool_policies[0].when",
        "tool_policies[1].approvers",
    ]


# --- the places rules come from ----------------------------------------------------------------

DENY_REFUNDS = ToolPolicy(when='tool == "issue_refund"', action="deny")
ALLOW_REFUNDS = ToolPolicy(when='tool == "issue_refund"', action="allow")
ASK_REFUNDS = ToolPolicy(
    when='tool == "issue_refund"', action="require_approval", approvers=["f@example.com"]
)


def test_a_workflows_allow_does_not_lift_the_deployments_deny() -> None:
    # Given the deployment denying refunds and the workflow allowing them
    places = [("deployment", [DENY_REFUNDS]), ("workflow", [ALLOW_REFUNDS])]

    # Then the deployment's rule decides
    ruling = rule_on(places, "issue_refund", {})
    assert (ruling.action, ruling.where, ruling.rule) == ("deny", "deployment", 0)


def test_a_workflow_may_hold_for_approval_what_its_tool_server_allows() -> None:
    # Given a tool server allowing refunds and a workflow asking for approval of them
    places = [("tool server desk", [ALLOW_REFUNDS]), ("workflow", [ASK_REFUNDS])]

    # Then the stricter verdict, the workflow's, decides
    ruling = rule_on(places, "issue_refund", {})
    assert (ruling.action, ruling.where) == ("require_approval", "workflow")


def test_among_equal_verdicts_the_earlier_place_decides() -> None:
    places = [("tool server desk", [ASK_REFUNDS]), ("workflow", [ASK_REFUNDS])]
    assert rule_on(places, "issue_refund", {}).where == "tool server desk"


def test_a_policy_file_names_each_bad_rule_by_its_path() -> None:
    # Given a deployment's rules: one with an unknown action, one asking no one
    data = [
        {"when": 'tool == "x"', "action": "block"},
        {"when": 'tool == "y"', "action": "require_approval"},
    ]
    # When they are read, Then the unknown action is named at its path
    with pytest.raises(DefinitionError) as first:
        parse_policies(data, "tool-policy file p.yaml")
    assert first.value.problems[0].path == "tool_policies[0].action"

    # And once valid, a rule with nobody to ask is named at its path
    with pytest.raises(DefinitionError) as second:
        parse_policies(data[1:], "tool-policy file p.yaml")
    assert [p.path for p in second.value.problems] == ["tool_policies[0].approvers"]
