"""Binding each CKP action to what performs it, and grouping a node's steps into calls
(seed 001 §4.1, §7).

Deterministic: the same steps and the same registrations give the same bindings and calls, when
a procedure is stored (to warn about what nothing performs, and to bind the agents' resource
keys) and when a node runs (to perform it). For each step, in this order:

1. the node's **agent**, when it is registered and lists the action in ``supported_actions``;
2. a **built-in** action (:data:`langorch.domain.ckp.actions.BUILTIN_ACTIONS`);
3. an **MCP tool**, for an action written ``server.tool`` whose ``server`` is a registered tool;
4. otherwise the step is **unbound**: a warning when the procedure is stored (an error with
   ``--strict``); when it runs, its node fails with ``UnboundActionError``.

Calls: a ``step`` agent gets one call per step. A ``batch`` agent gets adjacent steps bound to it
in one call, at most ``max_steps_per_batch``, and a step joins the call only if it reads no
variable an earlier step of the same call writes (its parameters are rendered before the call).
A ``node`` agent gets as many adjacent steps as that rule allows, without a size limit. Built-in
actions and tools are one call per step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from langorch.domain.agents import AgentRegistration, ExecutionMode
from langorch.domain.ckp.actions import BUILTIN_ACTIONS, KNOWN_ACTIONS
from langorch.domain.definitions import TaskPlan
from langorch.domain.errors import Problem
from langorch.domain.tool_servers import ToolServer

ORCHESTRATOR_AGENTS = frozenset({"MasterAgent", "Orchestrator", "LLMAgent"})
"""Agent names meaning langorch itself: their nodes bind only built-in actions and tools."""

BindingKind = Literal["agent", "builtin", "tool", "unbound"]


@dataclass(frozen=True)
class Catalog:
    """What this deployment can bind: its registered agents and tool names."""

    agents: Mapping[str, AgentRegistration]
    tools: frozenset[str] = frozenset()
    """Registered tool servers' names (``server`` of ``server.tool``)."""
    servers: Mapping[str, ToolServer] = field(default_factory=dict)
    """The registrations of those tool servers (their rules and declared costs)."""


@dataclass(frozen=True)
class Binding:
    """What performs one step."""

    kind: BindingKind
    target: str = ""
    """The agent's name, the tool server's name, or the built-in action."""
    tool: str | None = None
    """For a tool: the server's tool to call."""
    why: str = ""
    """For an unbound step: why, and how to fix it."""

    def label(self, action: str) -> str:
        """How the timeline names the executor: ``DESKTOP.click``, ``orders.lookup``, ``log``."""
        if self.kind == "agent":
            return f"{self.target}.{action}"
        if self.kind == "tool":
            return f"{self.target}.{self.tool}"
        return action


@dataclass(frozen=True)
class Call:
    """One call to an executor: a step, or a batch of steps for one agent."""

    binding: Binding
    steps: tuple[int, ...]
    """Indexes into the node's steps, in order."""


def bind(action: str, agent: str | None, catalog: Catalog) -> Binding:
    """The executor of one step whose node names ``agent``.

    Args:
        action: The step's ``action``.
        agent: The node's ``agent`` (``None`` or an orchestrator name: langorch itself).
        catalog: The registered agents and tools.

    Returns:
        The binding; ``kind == "unbound"`` with the reason and the fix when nothing performs it.
    """
    registered = catalog.agents.get(agent) if agent else None
    if registered is not None and registered.supports(action):
        return Binding("agent", registered.name)
    if action in BUILTIN_ACTIONS:
        return Binding("builtin", action)
    server, dot, tool = action.partition(".")
    if dot and server in catalog.tools and tool:
        return Binding("tool", server, tool=tool)
    return Binding("unbound", why=_unbound_reason(action, agent, registered, catalog))


def _unbound_reason(
    action: str, agent: str | None, registered: AgentRegistration | None, catalog: Catalog
) -> str:
    if agent and agent not in ORCHESTRATOR_AGENTS and registered is None:
        known = ", ".join(sorted(catalog.agents)) or "none"
        return (
            f"agent {agent!r} is not registered (registered: {known}); register it with "
            f"`langorch agents add {agent} --http URL --actions {action}`"
        )
    if registered is not None:
        return (
            f"agent {agent!r} does not list action {action!r} "
            f"(it supports {', '.join(registered.supported_actions)}); add it with "
            f"`langorch agents add {agent} … --actions {','.join(registered.supported_actions)},"
            f"{action}`"
        )
    catalog_note = "" if action in KNOWN_ACTIONS else " (it is not in the action catalog either)"
    return (
        f"no built-in action, agent or tool performs {action!r}{catalog_note}; give its node an "
        "agent that supports it, or register a tool server and write the action as server.tool"
    )


def plan_calls(
    actions: Sequence[str],
    agent: str | None,
    catalog: Catalog,
    *,
    reads: Sequence[frozenset[str]],
    writes: Sequence[frozenset[str]],
) -> list[Call]:
    """Group a node's steps into calls.

    Args:
        actions: Each step's action, in order.
        agent: The node's agent.
        catalog: The registered agents and tools.
        reads: Per step, the variables its parameters read.
        writes: Per step, the variables it writes.

    Returns:
        The calls in order; every step is in exactly one.
    """
    calls: list[Call] = []
    batch: list[int] = []
    batch_writes: set[str] = set()
    for index, action in enumerate(actions):
        binding = bind(action, agent, catalog)
        registered = catalog.agents.get(binding.target) if binding.kind == "agent" else None
        groups = registered is not None and registered.execution_mode != ExecutionMode.step
        if batch and groups and registered is not None:
            limit = (
                registered.max_steps_per_batch
                if registered.execution_mode == ExecutionMode.batch
                else len(actions)
            )
            if len(batch) < limit and not reads[index] & batch_writes:
                batch.append(index)
                batch_writes |= writes[index]
                continue
        if batch:
            calls.append(Call(bind(actions[batch[0]], agent, catalog), tuple(batch)))
            batch, batch_writes = [], set()
        if groups:
            batch, batch_writes = [index], set(writes[index])
        else:
            calls.append(Call(binding, (index,)))
    if batch:
        calls.append(Call(bind(actions[batch[0]], agent, catalog), tuple(batch)))
    return calls


def bind_procedure(plan: TaskPlan, catalog: Catalog) -> tuple[TaskPlan, list[Problem]]:
    """Bind a compiled procedure to this deployment's agents and tools (when it is stored).

    Each node whose steps an agent with a ``resource_key`` performs holds a lease on that
    resource while it runs (the step's ``resource``: the existing resource locks). Steps that
    nothing performs are reported as warnings at their JSON path; they fail their node with
    :class:`~langorch.domain.ckp.errors.UnboundActionError` if they run while still unbound.

    Args:
        plan: A plan compiled from a CKP procedure (others are returned unchanged).
        catalog: The registered agents and tools.

    Returns:
        The plan with its nodes' resources bound, and the unbound steps as warnings.
    """
    from langorch.domain.ckp.compiler import node_path
    from langorch.domain.kinds.sequence import settings_of

    if plan.ckp is None:
        return plan, []
    warnings: list[Problem] = []
    steps = []
    for step in plan.steps:
        if str(step.kind) != "sequence":
            steps.append(step)
            continue
        settings = settings_of(step)
        actions = [*settings.steps, *(a for h in settings.handlers for a in h.recovery_steps)]
        resource = None
        for action in actions:
            binding = bind(action.action, settings.agent, catalog)
            where = f"{node_path(step.step_id.split('__')[0])}.{action.at}.action"
            if binding.kind == "unbound":
                warnings.append(
                    Problem(
                        where,
                        f"action {action.action!r} is not bound in this deployment",
                        f"{binding.why}; until then the node fails with UnboundActionError "
                        "when it runs",
                    )
                )
            elif binding.kind == "agent":
                resource = catalog.agents[binding.target].resource_key or resource
        steps.append(step.model_copy(update={"resource": resource}) if resource else step)
    return plan.model_copy(update={"steps": steps}), warnings
