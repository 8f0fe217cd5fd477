"""The tool-call gate on the calls a step makes itself (issue 29, item 3): an ``http`` step's
request (``tool == "http"``) and a CKP node's agent call (``tool`` the action) pass the same
rules as a model's tool call: a denied call is never sent and the step fails naming the refusal
on the timeline; a call requiring approval parks showing it and, approved, is sent once;
refused, it is never sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from langorch.app.runs import RunSegment, StartRun, run_segment, start_run
from langorch.domain.definitions import PlanStep, TaskPlan
from langorch.domain.runs import TimelineEventType
from langorch.domain.tool_policies import ToolPolicy
from tests.agent_desk import AgentDesk, agent_desk
from tests.fakes import Fakes
from tests.fakes.budgets import InMemoryBudgetCounters
from tests.unit.test_ckp_agents import Deployment, desktop, registration

FINANCE = "finance@example.com"
APPROVED = {"decision": "approved", "approver": FINANCE}
REJECTED = {"decision": "rejected", "approver": FINANCE, "comment": "not today"}


class Service:
    """What ``http`` steps call: keeps every request, answers 201."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, Any]] = []

    def __call__(
        self, method: str, url: str, *, headers: dict[str, str], body: Any, timeout: float
    ) -> tuple[int, Any]:
        self.sent.append((method, url, body))
        return 201, {"id": "r-1"}


def _http_run(*policies: ToolPolicy) -> tuple[Fakes, Service, str, Any]:
    service = Service()
    fakes = Fakes(http=service)
    fakes.definitions.put_workflow(
        TaskPlan.model_validate(
            {
                "plan_id": "refunds",
                "memory": False,
                "approvers": [FINANCE],
                "tool_policies": [p.model_dump() for p in policies],
                "inputs_schema": {"properties": {"amount": {"type": "number"}}},
                "steps": [
                    PlanStep.model_validate(
                        {
                            "step_id": "refund",
                            "kind": "http",
                            "max_retries": 0,
                            "http": {
                                "method": "POST",
                                "url": "https://pay.example.com/refunds",
                                "body": {"amount": "{{ amount }}"},
                            },
                        }
                    ).model_dump(exclude_unset=True)
                ],
            }
        )
    )
    run, _ = start_run(StartRun("refunds", input={"amount": 900}), fakes)
    return fakes, service, run.run_id, run_segment(RunSegment(run.run_id), fakes)


BIG_HTTP = 'tool == "http" and args.host == "pay.example.com" and args.body.amount > 500'


def _denied(fakes: Fakes, run_id: str) -> list[dict[str, Any]]:
    return [
        {**e.detail, "step_id": e.step_id}
        for e in fakes.runs.get_timeline(run_id)
        if e.type is TimelineEventType.tool_call_denied
    ]


def test_a_denied_http_request_is_never_sent_and_the_step_fails_naming_the_rule() -> None:
    # Given a rule denying big refunds over http
    fakes, service, run_id, ended = _http_run(
        ToolPolicy(when=BIG_HTTP, action="deny", reason="over the desk's limit")
    )

    # Then nothing was sent, the run failed with the refusal, and the timeline names the rule
    assert service.sent == []
    assert ended.status == "failed"
    assert "not allowed by this workflow's tool policies (over the desk's limit)" in str(
        ended.error
    )
    (denied,) = _denied(fakes, run_id)
    assert (denied["step_id"], denied["tool"], denied["rule"]) == ("refund", "http", 0)


def test_an_http_request_requiring_approval_parks_showing_it_and_approved_is_sent_once() -> None:
    # Given a rule requiring finance's approval for big refunds over http
    fakes, service, run_id, parked = _http_run(ToolPolicy(when=BIG_HTTP, action="require_approval"))

    # Then the run waits, showing the exact request, and nothing was sent
    assert parked.status == "waiting_approval"
    shown = (parked.approval or {})["context"]
    assert shown["tool"] == "http"
    assert shown["arguments"]["url"] == "https://pay.example.com/refunds"
    assert service.sent == []

    # When finance approves
    ended = run_segment(RunSegment(run_id, resume=APPROVED), fakes)

    # Then the request was sent once
    assert ended.status == "succeeded", ended.error
    assert service.sent == [("POST", "https://pay.example.com/refunds", {"amount": 900})]


def test_a_refused_http_request_is_never_sent() -> None:
    # Given a big refund waiting for finance
    fakes, service, run_id, _ = _http_run(ToolPolicy(when=BIG_HTTP, action="require_approval"))

    # When finance refuses it
    ended = run_segment(RunSegment(run_id, resume=REJECTED), fakes)

    # Then nothing was sent and the step failed, saying who refused
    assert service.sent == []
    assert ended.status == "failed"
    assert "refused by the person asked to approve it" in str(ended.error)
    (denied,) = _denied(fakes, run_id)
    assert (denied["outcome"], denied["decided_by"]) == ("rejected", FINANCE)


# --- CKP agent calls ---------------------------------------------------------------------------


@pytest.fixture
def desk() -> Iterator[AgentDesk]:
    with agent_desk() as running:
        yield running


BIG_POST = 'tool == "type" and args.target == "amount" and args.value > 500'
AMOUNT = {"step_id": "amount", "action": "type", "target": "amount", "value": "{{amount}}"}


def _agent_run(desk: AgentDesk, *policies: ToolPolicy) -> Any:
    deployment = Deployment(registration(desk))
    run = deployment.runner(desktop(AMOUNT))
    run.context.update(tool_policies=list(policies), default_approvers=[FINANCE])
    return run


def test_a_denied_agent_call_never_reaches_the_agent_and_is_named_on_the_timeline(
    desk: AgentDesk,
) -> None:
    # Given a rule denying big amounts typed by the agent
    run = _agent_run(desk, ToolPolicy(when=BIG_POST, action="deny"))

    # When the node runs with 900
    with pytest.raises(Exception, match="not allowed by this workflow's tool policies"):
        run.start(amount=900)

    # Then the agent saw nothing, and the timeline names the refused call
    assert desk.requests == []
    (denied,) = [e for e in run.events if e.get("event") == "tool_call_denied"]
    assert (denied["step_id"], denied["tool"], denied["outcome"]) == ("post", "type", "denied")


def test_an_agent_call_requiring_approval_parks_and_approved_reaches_the_agent_once(
    desk: AgentDesk,
) -> None:
    # Given a rule requiring approval of big amounts
    run = _agent_run(desk, ToolPolicy(when=BIG_POST, action="require_approval"))

    # When the node runs with 900
    run.start(amount=900)

    # Then the run waits, and the agent has not been called
    assert run.interrupted
    assert desk.requests == []

    # When finance approves
    run.resume("approved", approver=FINANCE)

    # Then the agent was called once
    assert desk.actions() == [["type"]]
    assert not run.interrupted


def test_an_agents_declared_cost_per_step_is_counted_in_the_node_and_the_budgets(
    desk: AgentDesk,
) -> None:
    # Given an agent declaring $0.10 a step, and a workflow's day counter
    deployment = Deployment(registration(desk, cost_per_step_usd=0.1))
    run = deployment.runner(desktop(AMOUNT, AMOUNT | {"step_id": "again"}))
    counters = InMemoryBudgetCounters()
    run.context.update(budget_counters=counters, budget_periods=[("p/day/2026-11-27", 10**7)])

    # When the node performs its two steps
    run.start(amount=20)

    # Then the node cost $0.20, and the day's counter holds it
    (usage,) = run.state["usage"]
    assert usage["cost_usd"] == pytest.approx(0.2)
    assert counters.spent("p/day/2026-11-27") == 200_000
