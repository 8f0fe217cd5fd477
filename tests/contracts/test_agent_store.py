"""Contract of the registered agents (``AgentStore``): the definitions table on moto, the local
SQLite store and the fake — replace by name, list by name, remove once, the capability contract
read back whole, and never a secret value stored."""

from __future__ import annotations

import pytest

from langorch.adapters.dynamodb.agents import AgentsRepository
from langorch.adapters.dynamodb.definitions import DefinitionsRepository
from langorch.adapters.dynamodb.tool_servers import ToolServersRepository
from langorch.adapters.sqlite.agents import SqliteAgents
from langorch.domain.agents import AgentRegistration
from tests.fakes.agents import InMemoryAgents
from tests.support.stores import STORES, on_definitions_table, under_contract

Store = AgentsRepository | InMemoryAgents | SqliteAgents


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest) -> Store:
    cloud = on_definitions_table(AgentsRepository)
    return under_contract(request, InMemoryAgents, SqliteAgents, cloud)


def _agent(name: str = "DESKTOP", **changes: object) -> AgentRegistration:
    fields: dict[str, object] = {
        "name": name,
        "url": "http://127.0.0.1:9000/agent",
        "supported_actions": ("click", "type"),
        "execution_mode": "batch",
        "max_steps_per_batch": 5,
        "resource_key": "desktop:vm-01:session-1",
        "concurrency_limit": 1,
        "headers": {"Authorization": "langorch/agents/desktop"},
        **changes,
    }
    return AgentRegistration.model_validate(fields)


def test_a_registration_reads_back_whole_and_is_new_once(store: Store) -> None:
    # Given a batch agent with a resource key; When it is stored, Then it reads back as it was
    assert store.put(_agent()) is True
    assert store.get("DESKTOP") == _agent()
    # When it is registered again with another URL, Then it is replaced, not new
    assert store.put(_agent(url="http://127.0.0.1:9001/agent")) is False
    assert store.get("DESKTOP") == _agent(url="http://127.0.0.1:9001/agent")


def test_an_unknown_name_is_none(store: Store) -> None:
    assert store.get("nothing") is None


def test_list_is_by_name(store: Store) -> None:
    store.put(_agent("WEB"))
    store.put(_agent("EMAIL"))
    assert [a.name for a in store.list()] == ["EMAIL", "WEB"]


def test_remove_says_whether_there_was_one(store: Store) -> None:
    store.put(_agent())
    assert store.delete("DESKTOP") is True
    assert store.delete("DESKTOP") is False
    assert store.get("DESKTOP") is None
    assert store.list() == []


def test_agents_stay_out_of_the_definition_and_tool_listings(aws: None) -> None:
    import boto3

    # Given an agent registered in the definitions table
    client = boto3.client("dynamodb", region_name="us-east-1")
    definitions = DefinitionsRepository(client, "definitions")
    definitions.create_table()
    AgentsRepository(client, "definitions").put(_agent())
    # Then neither the definitions nor the tools list it
    assert definitions.list_blocks() == []
    assert definitions.list_workflows() == []
    assert ToolServersRepository(client, "definitions").list() == []
