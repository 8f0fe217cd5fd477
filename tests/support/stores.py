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


def runs_on_dynamodb(client: Any) -> Any:
    """The runs table's adapter (``RunsRepository``) on a table it has just created."""
    from langorch.adapters.dynamodb.runs import RunsRepository

    repository = RunsRepository(client, "runs")
    repository.create_table()
    return repository
