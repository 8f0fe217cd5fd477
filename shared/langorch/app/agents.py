"""Use-cases of the agent registry: ``langorch agents add | list | show | remove`` (seed 001
§7, §8.1).

An agent's header credentials stay in the secrets store (a registration names the secret;
adding one checks that it exists without reading it). An agent with a ``resource_key`` and a
``concurrency_limit`` declares that limit on the deployment's resource locks, the ones steps'
``resource`` leases use: a desktop agent with limit 1 serialises the runs that drive it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from langorch.domain.agents import (
    AgentError,
    AgentRegistration,
    UnknownAgentError,
)
from langorch.domain.tool_servers import ToolServerError, parse_header

if TYPE_CHECKING:
    from langorch.app.ports import AgentStore, ResourceLocks, SecretsStore


class AgentDeps(Protocol):
    """What registering an agent needs: the registry, the secrets its headers name, and the
    resource locks its limit goes to."""

    @property
    def agents(self) -> AgentStore: ...
    @property
    def secrets(self) -> SecretsStore: ...
    @property
    def resources(self) -> ResourceLocks: ...


@dataclass(frozen=True)
class AddAgent:
    """``agents add NAME --http URL|--mcp URL --actions a,b [--mode …] [--header …] …``."""

    name: str
    url: str
    transport: str = "http"
    actions: Sequence[str] = ()
    mode: str = "step"
    headers: Sequence[str] = ()
    """``NAME=secret:ID`` options."""
    resource_key: str | None = None
    limit: int | None = None
    max_steps_per_batch: int | None = None
    max_duration_seconds: int | None = None
    description: str = ""
    cost_per_step_usd: float = 0.0
    """What the agent charges per step it performs (US dollars)."""


def add_agent(cmd: AddAgent, deps: AgentDeps) -> tuple[AgentRegistration, bool]:
    """Register (or replace) an agent; returns it and whether it is new.

    Raises:
        AgentError: an option is malformed or a header's secret does not exist. Nothing is
            stored then.
    """
    from pydantic import ValidationError

    try:
        headers = dict(parse_header(option) for option in cmd.headers)
    except ToolServerError as exc:
        raise AgentError(f"agent {cmd.name}: {exc}") from exc
    fields: dict[str, object] = {
        "name": cmd.name,
        "transport": cmd.transport,
        "url": cmd.url,
        "headers": headers,
        "supported_actions": tuple(a.strip() for a in cmd.actions if a.strip()),
        "execution_mode": cmd.mode,
        "resource_key": cmd.resource_key,
        "concurrency_limit": cmd.limit,
        "description": cmd.description,
        "cost_per_step_usd": cmd.cost_per_step_usd,
    }
    if cmd.max_steps_per_batch is not None:
        fields["max_steps_per_batch"] = cmd.max_steps_per_batch
    if cmd.max_duration_seconds is not None:
        fields["max_duration_seconds"] = cmd.max_duration_seconds
    try:
        agent = AgentRegistration.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"{_option(e['loc'])}: {e['msg'].removeprefix('Value error, ')}" for e in exc.errors()
        )
        raise AgentError(f"agent {cmd.name}: {problems}") from exc
    missing = [secret for secret in headers.values() if not deps.secrets.exists(secret)]
    if missing:
        raise AgentError(
            f"agent {cmd.name}: secret(s) {', '.join(missing)} do not exist; store each header "
            "value first with `langorch secrets put ID` (read from standard input), then add "
            "the agent again"
        )
    new = deps.agents.put(agent)
    if agent.resource_key is not None and agent.concurrency_limit is not None:
        deps.resources.set_limit(agent.resource_key, agent.concurrency_limit)
    return agent, new


_OPTIONS = {
    "supported_actions": "--actions",
    "execution_mode": "--mode",
    "resource_key": "--resource-key",
    "concurrency_limit": "--limit",
    "url": "--http/--mcp",
    "max_steps_per_batch": "--max-steps",
    "max_duration_seconds": "--max-duration",
}


def _option(loc: tuple[int | str, ...]) -> str:
    name = str(loc[0]) if loc else "agent"
    return _OPTIONS.get(name, name)


def show_agent(name: str, store: AgentStore) -> AgentRegistration:
    """The registration named ``name``.

    Raises:
        UnknownAgentError: none; the message lists the registered names.
    """
    agent = store.get(name)
    if agent is None:
        known = ", ".join(a.name for a in store.list()) or "none"
        raise UnknownAgentError(
            f"no agent registered as {name!r} (registered: {known}); add it with "
            f"`langorch agents add {name} --http URL --actions A,B`"
        )
    return agent


def remove_agent(name: str, store: AgentStore) -> None:
    """Remove a registration (nodes that name it then fail with ``UnboundActionError``).

    Raises:
        UnknownAgentError: there was none.
    """
    if not store.delete(name):
        show_agent(name, store)  # raises, listing the registered names
