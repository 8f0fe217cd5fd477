"""In-memory registered agents (``AgentStore``)."""

from __future__ import annotations

from langorch.domain.agents import AgentRegistration


class InMemoryAgents:
    """Registrations by name (``tests/contracts/test_agent_store.py``)."""

    def __init__(self) -> None:
        self._agents: dict[str, AgentRegistration] = {}

    def put(self, agent: AgentRegistration) -> bool:
        """Store or replace; returns whether it is new."""
        new = agent.name not in self._agents
        self._agents[agent.name] = agent
        return new

    def get(self, name: str) -> AgentRegistration | None:
        """The registration, or ``None``."""
        return self._agents.get(name)

    def list(self) -> list[AgentRegistration]:
        """Every registration, by name."""
        return [self._agents[name] for name in sorted(self._agents)]

    def delete(self, name: str) -> bool:
        """Remove; returns whether there was one."""
        return self._agents.pop(name, None) is not None
