"""Tool-call policies (issue 29, item 3) against a real MCP server started by the test
(``tests.mcp_servers.KeyedDesk`` over streamable HTTP on 127.0.0.1), which keeps every call it
receives: a denied call never reaches it, a call that requires approval parks the run showing the
exact call and, approved, reaches it once (also when the process dies after the call and the
segment is run again), a refused one never; a shadow rule changes nothing but the record.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from langorch.app.runs import RunSegment, SegmentResult, StartRun, run_segment, start_run
from langorch.domain.runs import RunStatus, TimelineEventType
from langorch.domain.tool_policies import ToolPolicy
from langorch.domain.tool_servers import ToolServer
from tests.fakes import Fakes
from tests.mcp_servers import KeyedDesk, serving
from tests.support.crashes import Crash, DyingTasks
from tests.support.definitions import put_ordering

FINANCE = "finance@example.com"
BIG = 'tool == "place_order" and args.order_id == "BIG-1"'


@pytest.fixture(scope="module")
def desk() -> Iterator[Any]:
    with serving(KeyedDesk()) as running:
        yield running


def _fakes(desk: Any, *policies: ToolPolicy) -> Fakes:
    desk.desk.clear()
    script = {
        "order": {
            "tool_calls": [
                {"tool": "place_order", "args": {"order_id": "BIG-1"}, "result_key": "confirmation"}
            ]
        }
    }
    fakes = Fakes(script)
    fakes.tool_servers.put(ToolServer(name="desk", url=desk.url, allow=("place_order",)))
    put_ordering(fakes, approvers=[FINANCE], tool_policies=list(policies))
    return fakes


def _start(fakes: Fakes) -> tuple[str, SegmentResult]:
    run, _ = start_run(StartRun("ordering", input={"order_id": "BIG-1"}), fakes)
    return run.run_id, run_segment(RunSegment(run.run_id), fakes)


def _types(fakes: Fakes, run_id: str) -> list[TimelineEventType]:
    return [e.type for e in fakes.runs.get_timeline(run_id)]


def _detail(fakes: Fakes, run_id: str, kind: TimelineEventType) -> list[dict[str, Any]]:
    return [e.detail for e in fakes.runs.get_timeline(run_id) if e.type is kind]


APPROVED = {"decision": "approved", "approver": FINANCE}


def test_a_denied_call_never_reaches_the_server_and_the_model_is_told(desk: Any) -> None:
    # Given a rule denying big orders
    fakes = _fakes(desk, ToolPolicy(when=BIG, action="deny", reason="too big"))

    # When the model calls place_order for BIG-1
    run_id, ended = _start(fakes)

    # Then the server saw nothing, the model was told why, and the timeline says denied
    assert ended.status == "succeeded"
    assert desk.desk.seen == []
    told = fakes.runs.get_run(run_id).outputs["confirmation"]
    assert "not allowed by this workflow's tool policies (too big)" in told
    (denied,) = _detail(fakes, run_id, TimelineEventType.tool_call_denied)
    assert (denied["tool"], denied["rule"], denied["outcome"]) == ("place_order", 0, "denied")
    assert TimelineEventType.tool_called not in _types(fakes, run_id)


def test_a_call_requiring_approval_parks_showing_the_exact_call(desk: Any) -> None:
    # Given a rule requiring finance's approval for big orders
    fakes = _fakes(desk, ToolPolicy(when=BIG, action="require_approval"))

    # When the model calls place_order for BIG-1
    run_id, parked = _start(fakes)

    # Then the run waits on an approval asked of finance, showing the tool and its arguments,
    # and the server has not been called
    assert parked.status == "waiting_approval"
    request = parked.approval or {}
    assert request["approvers"] == [FINANCE]
    assert request["context"]["tool"] == "place_order"
    assert request["context"]["arguments"] == {"order_id": "BIG-1"}
    assert fakes.runs.get_run(run_id).status is RunStatus.waiting_approval
    assert desk.desk.seen == []


def test_an_approved_call_reaches_the_server_exactly_once(desk: Any) -> None:
    # Given a run parked on a big order's approval
    fakes = _fakes(desk, ToolPolicy(when=BIG, action="require_approval"))
    run_id, _ = _start(fakes)

    # When finance approves
    ended = run_segment(RunSegment(run_id, resume=APPROVED), fakes)

    # Then the order was placed once, and the model got its answer
    assert ended.status == "succeeded", ended.error
    assert [order for order, _, _ in desk.desk.seen] == ["BIG-1"]
    assert fakes.runs.get_run(run_id).outputs["confirmation"] == "order BIG-1 placed as #1"
    assert len(_detail(fakes, run_id, TimelineEventType.tool_called)) == 1


def test_a_refused_call_never_reaches_the_server_and_the_model_is_told(desk: Any) -> None:
    # Given a run parked on a big order's approval
    fakes = _fakes(desk, ToolPolicy(when=BIG, action="require_approval"))
    run_id, _ = _start(fakes)

    # When finance rejects it, with a comment
    refusal = {"decision": "rejected", "approver": FINANCE, "comment": "call the customer"}
    ended = run_segment(RunSegment(run_id, resume=refusal), fakes)

    # Then the server saw nothing, and the model was told it was refused, and why
    assert ended.status == "succeeded"
    assert desk.desk.seen == []
    told = fakes.runs.get_run(run_id).outputs["confirmation"]
    assert "refused by the person asked to approve it" in told and "call the customer" in told
    (denied,) = _detail(fakes, run_id, TimelineEventType.tool_call_denied)
    assert (denied["outcome"], denied["decided_by"]) == ("rejected", FINANCE)


def test_an_approved_call_is_not_sent_again_after_a_crash_and_a_restart(desk: Any) -> None:
    # Given an approved big order whose process died after the call, before the step ended
    fakes = _fakes(desk, ToolPolicy(when=BIG, action="require_approval"))
    run_id, _ = _start(fakes)
    # (the tool call's answer is recorded; the process dies before the step's answer is)
    dying = DyingTasks("llm", kept=False, done_only=True)
    fakes.tasks = dying
    with pytest.raises(Crash):
        run_segment(RunSegment(run_id, resume=APPROVED), fakes)
    assert len(desk.desk.seen) == 1

    # When a new process runs the segment again (the state machine's retry, same input)
    again = fakes.another_process()
    again.tasks = dying.left_behind()
    ended = run_segment(RunSegment(run_id, resume=APPROVED), again)

    # Then the run ends on the recorded answer: the server saw the call once
    assert ended.status == "succeeded", ended.error
    assert len(desk.desk.seen) == 1
    assert again.runs.get_run(run_id).outputs["confirmation"] == "order BIG-1 placed as #1"


def test_a_shadow_rule_changes_nothing_but_the_record(desk: Any) -> None:
    # Given a shadow rule that would deny big orders
    fakes = _fakes(desk, ToolPolicy(when=BIG, action="deny", mode="shadow"))

    # When the model calls place_order for BIG-1
    run_id, ended = _start(fakes)

    # Then the order was placed as without the rule, and the timeline says what it would do
    assert ended.status == "succeeded"
    assert [order for order, _, _ in desk.desk.seen] == ["BIG-1"]
    (shadow,) = _detail(fakes, run_id, TimelineEventType.tool_policy_shadow)
    assert (shadow["tool"], shadow["rule"], shadow["outcome"]) == ("place_order", 0, "deny")
    assert TimelineEventType.tool_call_denied not in _types(fakes, run_id)


def test_a_shadow_rule_on_a_call_that_waited_for_approval_is_recorded_once(desk: Any) -> None:
    # Given a call that requires approval, and a shadow rule matching it too
    fakes = _fakes(
        desk,
        ToolPolicy(when=BIG, action="require_approval"),
        ToolPolicy(when=BIG, action="deny", mode="shadow"),
    )
    run_id, _ = _start(fakes)

    # When finance approves (the step runs again from its start)
    run_segment(RunSegment(run_id, resume=APPROVED), fakes)

    # Then the shadow rule's record is on the timeline once
    assert len(_detail(fakes, run_id, TimelineEventType.tool_policy_shadow)) == 1


def test_a_tool_servers_own_rule_denies_its_tool_whichever_workflow_calls_it(desk: Any) -> None:
    # Given the desk registered with a rule denying big orders, and a workflow with no rules
    fakes = _fakes(desk)
    server = fakes.tool_servers.get("desk")
    assert server is not None
    rule = ToolPolicy(when=BIG, action="deny", reason="the desk takes no big orders")
    fakes.tool_servers.put(server.model_copy(update={"policies": (rule,)}))

    # When the model calls place_order for BIG-1
    run_id, ended = _start(fakes)

    # Then the server saw nothing, and the timeline names the server's rule
    assert ended.status == "succeeded"
    assert desk.desk.seen == []
    (denied,) = _detail(fakes, run_id, TimelineEventType.tool_call_denied)
    assert (denied["policy_of"], denied["rule"]) == ("tool server desk", 0)
    told = fakes.runs.get_run(run_id).outputs["confirmation"]
    assert "not allowed by the tool server desk's tool policies" in told


def test_the_deployments_deny_wins_over_the_workflows_allow(desk: Any) -> None:
    # Given a workflow allowing big orders, and the deployment denying them
    fakes = _fakes(desk, ToolPolicy(when=BIG, action="allow"))
    fakes.deployment_tool_policies = [ToolPolicy(when=BIG, action="deny")]

    # When the model calls place_order for BIG-1
    run_id, _ = _start(fakes)

    # Then the call was refused by the deployment's rule
    assert desk.desk.seen == []
    (denied,) = _detail(fakes, run_id, TimelineEventType.tool_call_denied)
    assert denied["policy_of"] == "deployment"


# --- declared costs ----------------------------------------------------------------------------


def test_a_tool_servers_declared_cost_is_counted_in_the_step_and_the_run(desk: Any) -> None:
    # Given the desk declaring $0.25 a call (and place_order $0.40), under a free model
    fakes = _fakes(desk)
    server = fakes.tool_servers.get("desk")
    assert server is not None
    priced = {"cost_per_call_usd": 0.25, "tool_costs": {"place_order": 0.4}}
    fakes.tool_servers.put(server.model_copy(update=priced))

    # When the model calls place_order once
    run_id, ended = _start(fakes)

    # Then the step and the run cost what the call declared
    assert ended.status == "succeeded", ended.error
    (finished,) = _detail(fakes, run_id, TimelineEventType.step_finished)
    assert finished["cost_usd"] == pytest.approx(0.4)
    assert fakes.runs.get_run(run_id).cost_usd == pytest.approx(0.4)
