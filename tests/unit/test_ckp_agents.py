"""Agents perform CKP steps (seed 001 §7): bound by the capability contract, called over HTTP
(a real local agent), batched when the agent takes batches with every step's outcome on the
timeline, recorded so a replay never calls again, holding their resource through the existing
resource locks — and a step nothing performs is a warning when stored and a named failure when
it runs."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from langorch.adapters.http import http_call
from langorch.adapters.mcp import McpConnection
from langorch.app.agent_calls import AgentCalls
from langorch.app.definitions import validate_files
from langorch.app.step_tools import RecordedSideEffects
from langorch.domain.agents import AgentRegistration
from langorch.domain.ckp.binding import Catalog, bind, bind_procedure, plan_calls
from langorch.domain.errors import DefinitionError
from tests.agent_desk import AgentDesk, agent_desk
from tests.ckp_support import Runner, compiled, procedure
from tests.fakes import InMemoryResourceLocks, InMemorySecrets, InMemoryTasks, InMemoryToolServers
from tests.fakes.agents import InMemoryAgents

END = {"type": "terminate", "status": "success"}
TOKEN = "Bearer agent-token-never-shown"


@pytest.fixture
def desk() -> Iterator[AgentDesk]:
    with agent_desk() as running:
        yield running


def registration(desk: AgentDesk, **fields: Any) -> AgentRegistration:
    return AgentRegistration.model_validate(
        {
            "name": "DESKTOP",
            "url": desk.url,
            "supported_actions": ["click", "type", "fail"],
            "headers": {"Authorization": "agents/desktop"},
            **fields,
        }
    )


class Deployment:
    """The ports a run reaches agents through, in memory (the agent itself is real)."""

    def __init__(self, *agents: AgentRegistration) -> None:
        self.agents = InMemoryAgents()
        for agent in agents:
            self.agents.put(agent)
        self.secrets = InMemorySecrets({"agents/desktop": {"value": TOKEN}})
        self.tasks = InMemoryTasks()
        self.locks = InMemoryResourceLocks()

    def catalog(self) -> Catalog:
        return Catalog(agents={a.name: a for a in self.agents.list()})

    def context(self, run_id: str = "r1") -> dict[str, Any]:
        return {
            "actions": AgentCalls(
                agents=self.agents,
                tool_servers=InMemoryToolServers(),
                secrets=self.secrets,
                connect=McpConnection,
                http=http_call,
            ),
            "secrets": self.secrets,
            "side_effects": RecordedSideEffects(
                run_id,
                tasks=self.tasks,
                tool_servers=None,
                secrets=self.secrets,
                max_calls=8,
                call_timeout=10,
            ),
            "resources": self.locks,
            "http": http_call,
        }

    def runner(self, document: dict[str, Any]) -> Runner:
        # Stored as `workflows put` stores it: bound to this deployment's agents.
        run = Runner(document, context=self.context())
        run.plan, _ = bind_procedure(run.plan, self.catalog())
        run.graph = run.compiler.compile(run.plan)
        return run


def desktop(*steps: dict[str, Any], **node: Any) -> dict[str, Any]:
    """A procedure of one DESKTOP node with these steps."""
    post = {"type": "sequence", "agent": "DESKTOP", "steps": list(steps), "next_node": "e"}
    variables = {"user": {"type": "string"}, "amount": {"type": "number"}}
    return procedure(
        "post", {"post": {**post, **node}, "e": END}, variables_schema={"optional": variables}
    )


def desktop_failing_to_an_end(*steps: dict[str, Any]) -> dict[str, Any]:
    """A procedure of one DESKTOP node with these steps whose failure ends the run ``failed``."""
    post = {"type": "sequence", "agent": "DESKTOP", "steps": list(steps), "next_node": "e"}
    failed = {"type": "terminate", "status": "failed"}
    return procedure(
        "post", {"post": post, "e": END, "failed": failed}, global_config={"on_failure": "failed"}
    )


TYPE_CLICK = (
    {"step_id": "user", "action": "type", "target": "login", "value": "{{user}}"},
    {"step_id": "amount", "action": "type", "target": "amount", "value": "{{amount}}"},
    {"step_id": "post", "action": "click", "target": "post", "output_variable": "posted"},
)


# --- binding ----------------------------------------------------------------------------------


def test_an_action_binds_to_the_nodes_agent_then_a_built_in_then_a_tool() -> None:
    agent = AgentRegistration(name="WEB", url="http://127.0.0.1:1/a", supported_actions=("log",))
    catalog = Catalog(agents={"WEB": agent}, tools=frozenset({"orders"}))
    # The agent lists `log`: it performs it, before the built-in of that name
    assert bind("log", "WEB", catalog).kind == "agent"
    assert bind("log", "MasterAgent", catalog).kind == "builtin"
    assert bind("orders.lookup_order", "WEB", catalog).kind == "tool"
    unbound = bind("click", "WEB", catalog)
    assert unbound.kind == "unbound"
    assert "agent 'WEB' does not list action 'click'" in unbound.why


def test_an_unregistered_agent_is_named_with_the_command_that_registers_it() -> None:
    why = bind("click", "DESKTOP", Catalog(agents={})).why
    assert "agent 'DESKTOP' is not registered" in why
    assert "langorch agents add DESKTOP --http URL --actions click" in why


def test_batch_mode_groups_adjacent_steps_up_to_its_limit() -> None:
    agent = AgentRegistration(
        name="D",
        url="http://127.0.0.1:1/a",
        supported_actions=("type", "click"),
        execution_mode="batch",
        max_steps_per_batch=2,
    )
    calls = plan_calls(
        ["type", "type", "log", "type", "click", "click"],
        "D",
        Catalog(agents={"D": agent}),
        reads=[frozenset()] * 6,
        writes=[frozenset()] * 6,
    )
    assert [c.steps for c in calls] == [(0, 1), (2,), (3, 4), (5,)]


def test_a_step_reading_an_output_of_its_batch_starts_the_next_call() -> None:
    agent = AgentRegistration(
        name="D", url="http://127.0.0.1:1/a", supported_actions=("a",), execution_mode="node"
    )
    calls = plan_calls(
        ["a", "a", "a"],
        "D",
        Catalog(agents={"D": agent}),
        reads=[frozenset(), frozenset(), frozenset({"first"})],
        writes=[frozenset({"first"}), frozenset(), frozenset()],
    )
    assert [c.steps for c in calls] == [(0, 1), (2,)]


def test_an_unbound_step_is_a_warning_at_its_path_and_strict_refuses_it(tmp_path: Any) -> None:
    # Given a procedure whose DESKTOP agent is not registered
    document = desktop(*TYPE_CLICK)
    file = tmp_path / "p.ckp.json"
    file.write_text(json.dumps(document))
    # When it is validated, Then each unbound step is a warning at its JSON path
    batch = validate_files([file])
    assert [w.path.split(": ")[-1] for w in batch.warnings] == [
        "workflow_graph.nodes.post.steps[0].action",
        "workflow_graph.nodes.post.steps[1].action",
        "workflow_graph.nodes.post.steps[2].action",
    ]
    # And --strict refuses it, storing nothing
    with pytest.raises(DefinitionError):
        validate_files([file], strict=True)


def test_storing_binds_the_agents_resource_key_to_its_nodes(desk: AgentDesk) -> None:
    agent = registration(desk, resource_key="desktop:vm-01:session-1", concurrency_limit=1)
    plan, warnings = bind_procedure(
        compiled(desktop(*TYPE_CLICK)), Catalog(agents={"DESKTOP": agent})
    )
    assert warnings == []
    assert plan.steps[0].resource == "desktop:vm-01:session-1"


# --- calls ------------------------------------------------------------------------------------


def test_a_batch_agent_gets_one_call_and_the_timeline_each_steps_outcome(
    desk: AgentDesk,
) -> None:
    # Given a batch agent and a node of three steps it supports
    deployment = Deployment(registration(desk, execution_mode="batch"))
    run = deployment.runner(desktop(*TYPE_CLICK))
    # When the node runs
    run.start(user="svc", amount=12)
    # Then the agent was called once with the three steps, rendered
    assert desk.actions() == [["type", "type", "click"]]
    sent = desk.requests[0]["body"]["steps"]
    assert [s["params"].get("value") for s in sent] == ["svc", 12, None]
    # And the timeline has each step's outcome, as one batch
    events = [e for e in run.events if e.get("event") == "tool_called"]
    assert [(e["action_step"], e["tool"], e["outcome"], e["batch"]) for e in events] == [
        ("user", "DESKTOP.type", "ok", 3),
        ("amount", "DESKTOP.type", "ok", 3),
        ("post", "DESKTOP.click", "ok", 3),
    ]
    assert run.shared["posted"] == {"did": "click", "target": "post"}


def test_a_step_agent_gets_one_call_per_step_with_its_header_and_a_stable_key(
    desk: AgentDesk,
) -> None:
    deployment = Deployment(registration(desk))
    run = deployment.runner(desktop(*TYPE_CLICK))
    run.start(user="svc", amount=12)
    assert desk.actions() == [["type"], ["type"], ["click"]]
    assert {r["headers"]["authorization"] for r in desk.requests} == {TOKEN}
    keys = [r["headers"]["idempotency-key"] for r in desk.requests]
    assert len(set(keys)) == 3


def test_a_replayed_node_gets_the_recorded_results_and_calls_nothing(desk: AgentDesk) -> None:
    # Given a node that ran and recorded its calls
    deployment = Deployment(registration(desk, execution_mode="batch"))
    deployment.runner(desktop(*TYPE_CLICK)).start(user="svc", amount=12)
    assert len(desk.requests) == 1
    # When the same run's node runs again (a segment that crashed before its checkpoint)
    again = deployment.runner(desktop(*TYPE_CLICK))
    again.start(user="svc", amount=12)
    # Then the agent was not called again, and the timeline says the results were recorded
    assert len(desk.requests) == 1
    assert all(e.get("replayed") for e in again.events if e.get("event") == "tool_called")
    assert again.shared["posted"] == {"did": "click", "target": "post"}


def test_a_step_the_agent_fails_fails_the_node_with_its_words(desk: AgentDesk) -> None:
    deployment = Deployment(registration(desk))
    document = desktop_failing_to_an_end({"action": "fail", "what": "find the window"})
    run = deployment.runner(document)
    run.start()
    assert run.state["error"]["type"] == "ActionFailedError"
    assert "could not find the window" in run.state["error"]["message"]
    assert ("post", "DESKTOP.fail", "error") in run.calls()


def test_an_unbound_action_fails_its_node_with_unbound_action_error(desk: AgentDesk) -> None:
    deployment = Deployment()  # nothing registered
    document = desktop_failing_to_an_end({"action": "click"})
    run = deployment.runner(document)
    run.start()
    assert run.state["error"]["type"] == "UnboundActionError"
    assert "agent 'DESKTOP' is not registered" in run.state["error"]["message"]
    assert desk.requests == []


def test_an_agent_answering_503_is_retried_and_400_is_not(desk: AgentDesk) -> None:
    from langorch.domain.agents import AgentCallError

    calls = Deployment(registration(desk)).context()["actions"]
    agent = registration(desk)
    for status, retryable in ((503, True), (400, False)):
        desk.status = status
        with pytest.raises(AgentCallError) as raised:
            asyncio.run(
                calls.call_agent(
                    agent, {"steps": [{"action": "click"}]}, idempotency_key="k", timeout=5
                )
            )
        assert raised.value.retryable is retryable


def test_a_changed_resource_key_fails_the_node_until_it_is_stored_again(desk: AgentDesk) -> None:
    # Given a procedure stored while DESKTOP held no resource, then re-registered with one
    deployment = Deployment(registration(desk))
    run = deployment.runner(desktop(*TYPE_CLICK))
    deployment.agents.put(registration(desk, resource_key="desktop:vm-02", concurrency_limit=1))
    # When it runs, Then the node fails naming the fix, and the agent is not called
    with pytest.raises(Exception, match="store the procedure again"):
        run.start(user="svc", amount=1)
    assert desk.requests == []


# --- resource locks ---------------------------------------------------------------------------


def test_a_desktop_agent_with_limit_1_makes_a_second_run_wait_for_the_first(
    desk: AgentDesk,
) -> None:
    # Given a desktop agent with limit 1 whose session another run holds
    deployment = Deployment(registration(desk, resource_key="desktop:vm-01", concurrency_limit=1))
    deployment.locks.set_limit("desktop:vm-01", 1)
    held = deployment.locks.acquire(
        "desktop:vm-01", "r0/post", now=time.time(), lease_seconds=60, wait_seconds=60
    )
    assert held.acquired
    run = deployment.runner(desktop(*TYPE_CLICK))
    # When this run reaches the node, Then it waits in line and the agent is not called
    run.start(user="svc", amount=1)
    assert run.interrupted
    assert desk.requests == []
    assert [e["event"] for e in run.events if e["event"].startswith("resource")] == [
        "resource_waiting"
    ]
    # When the first run gives the session back and this one is woken
    deployment.locks.release("desktop:vm-01", "r0/post")
    run.wake()
    # Then it holds the session, calls the agent, and gives the session back
    assert len(desk.requests) == 3
    assert [e["event"] for e in run.events if e["event"].startswith("resource")] == [
        "resource_waiting",
        "resource_acquired",
        "resource_released",
    ]
