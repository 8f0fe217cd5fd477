"""In-memory registered agents (``AgentStore``)."""

from __future__ import annotations

from langorch.domain.agents import AgentRegistration
from tests.support.by_name import InMemoryByName


class InMemoryAgents(InMemoryByName[AgentRegistration]):
    """Registrations by name (``tests/contracts/test_agent_store.py``)."""
