"""The store a contract test runs against: the in-memory fake, the SQLite store or the cloud's
adapter on moto, chosen by the parametrised fixture's ``request.param``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

STORES = ["fake", "sqlite", "dynamodb"]
"""The params of a contract fixture whose cloud store is DynamoDB."""


def under_contract(
    request: pytest.FixtureRequest,
    fake: Callable[[], T],
    sqlite: Callable[[Any], T],
    cloud: Callable[[Any], T],
    *,
    cloud_fixture: str = "dynamodb",
) -> T:
    """Build the store ``request.param`` names.

    Args:
        request: the parametrised fixture's request (``"fake"``, ``"sqlite"`` or the cloud's).
        fake: builds the fake.
        sqlite: builds the SQLite store on the test's fresh database (``sqlite_db``).
        cloud: builds the cloud's adapter from the value of ``cloud_fixture`` (by default
            moto's DynamoDB client, its requests atomic as DynamoDB's are).
        cloud_fixture: the fixture the cloud's adapter is built on.
    """
    if request.param == "fake":
        return fake()
    if request.param == "sqlite":
        return sqlite(request.getfixturevalue("sqlite_db"))
    return cloud(request.getfixturevalue(cloud_fixture))


def on_runs_table(adapter: Callable[[Any, str], T]) -> Callable[[Any], T]:
    """The cloud builder ``under_contract`` takes for an adapter on the runs table: it creates the
    table (``RunsRepository``), then builds ``adapter(client, "runs")``."""

    def build(client: Any) -> T:
        runs_on_dynamodb(client)
        return adapter(client, "runs")

    return build


def on_definitions_table(adapter: Callable[[Any, str], T]) -> Callable[[Any], T]:
    """The cloud builder for an adapter on the definitions table: it creates the table
    (``DefinitionsRepository``), then builds ``adapter(client, "definitions")``."""

    def build(client: Any) -> T:
        from langorch.adapters.dynamodb.definitions import DefinitionsRepository

        DefinitionsRepository(client, "definitions").create_table()
        return adapter(client, "definitions")

    return build


def runs_on_dynamodb(client: Any) -> Any:
    """The runs table's adapter (``RunsRepository``) on a table it has just created."""
    from langorch.adapters.dynamodb.runs import RunsRepository

    repository = RunsRepository(client, "runs")
    repository.create_table()
    return repository


def fakes_on_resource_locks(request: pytest.FixtureRequest, definitions: str) -> Any:
    """The fakes (``tests.fakes.Fakes``) with the resource locks ``request.param`` names: the
    fake's, the embedded stack's (SQLite) or the cloud's (DynamoDB on moto); ``definitions``
    (YAML) registered, and an approvals store."""
    from tests.fakes import Fakes
    from tests.fakes.approvals import InMemoryApprovals
    from tests.integration.conftest import register_text

    fakes = Fakes()
    fakes.resources = under_contract(
        request, lambda: fakes.resources, _sqlite_locks, _dynamodb_locks
    )
    register_text(fakes, definitions)  # type: ignore[arg-type]
    fakes.approvals = InMemoryApprovals()  # type: ignore[attr-defined]
    return fakes


def _sqlite_locks(db: Any) -> Any:
    from langorch.adapters.sqlite.resources import SqliteResourceLocks

    return SqliteResourceLocks(db)


def _dynamodb_locks(client: Any) -> Any:
    from langorch.adapters.dynamodb.resources import ResourceLocksRepository

    runs_on_dynamodb(client)  # creates the runs table the locks live in
    return ResourceLocksRepository(client, "runs")
