"""Registered agents in the definitions table, beside the blocks, workflows and tools:
``agent#<name>`` items (:mod:`.registrations`). ``agents add`` again replaces one; a run reads
it when a node calls the agent."""

from __future__ import annotations

from langorch.adapters.dynamodb.registrations import Registrations
from langorch.domain.agents import AgentRegistration


class AgentsRepository(Registrations[AgentRegistration]):
    """Registered agents in the definitions table; satisfies ``AgentStore``."""

    kind = "agent"
    noun = "agent"
    model = AgentRegistration
