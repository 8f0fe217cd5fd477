"""Contract of the registered tools (``ToolServerStore``): the definitions table on moto, the
local SQLite store and the fake — replace by name, list by name, remove once, and never a secret
value stored."""

from __future__ import annotations

import pytest

from langorch.adapters.dynamodb.definitions import DefinitionsRepository
from langorch.adapters.dynamodb.tool_servers import ToolServersRepository
from langorch.adapters.sqlite.tool_servers import SqliteToolServers
from langorch.domain.tool_servers import ToolServer
from tests.fakes import InMemoryToolServers
from tests.support.stores import STORES, on_definitions_table, under_contract

Store = ToolServersRepository | InMemoryToolServers | SqliteToolServers


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest) -> Store:
    cloud = on_definitions_table(ToolServersRepository)
    return under_contract(request, InMemoryToolServers, SqliteToolServers, cloud)


def _server(name: str = "orders", **changes: object) -> ToolServer:
    fields: dict[str, object] = {
        "name": name,
        "url": "http://127.0.0.1:9000/mcp",
        "allow": ("lookup_order",),
        "headers": {"Authorization": "langorch/tools/orders"},
        **changes,
    }
    return ToolServer.model_validate(fields)


def test_a_registration_reads_back_and_is_new_once(store: Store) -> None:
    assert store.put(_server()) is True
    assert store.get("orders") == _server()
    assert store.put(_server(url="http://127.0.0.1:9001/mcp")) is False
    assert store.get("orders") == _server(url="http://127.0.0.1:9001/mcp")


def test_an_unknown_name_is_none(store: Store) -> None:
    assert store.get("nothing") is None


def test_list_is_by_name(store: Store) -> None:
    store.put(_server("weather"))
    store.put(_server("orders"))
    assert [s.name for s in store.list()] == ["orders", "weather"]


def test_remove_says_whether_there_was_one(store: Store) -> None:
    store.put(_server())
    assert store.delete("orders") is True
    assert store.delete("orders") is False
    assert store.get("orders") is None
    assert store.list() == []


def test_registrations_stay_out_of_the_definition_listings(aws: None) -> None:
    import boto3

    client = boto3.client("dynamodb", region_name="us-east-1")
    definitions = DefinitionsRepository(client, "definitions")
    definitions.create_table()
    ToolServersRepository(client, "definitions").put(_server())
    assert definitions.list_blocks() == []
    assert definitions.list_workflows() == []
