"""Our savers pass LangGraph's checkpointer conformance suite: ``DynamoCheckpointSaver`` on moto,
``SqliteCheckpointSaver`` (the local stack's) on a SQLite file.

The suite (``langgraph-checkpoint-conformance``) is not a pytest plugin: a factory is registered
with ``checkpointer_test`` and ``validate`` runs one capability's specs against it and returns a
report. Each base capability is one test here, so a failure names the capability and its specs.

The extended capabilities ``delete_for_runs``, ``copy_thread`` and ``prune`` are optional in the
suite and **not implemented** by these savers; the suite reports them as "not implemented", and
``test_extended_capabilities_are_reported_not_implemented`` pins that, so implementing one later
means adding it to the conformance tests here.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import (
    BASE_CAPABILITIES,
    EXTENDED_CAPABILITIES,
)
from langgraph.checkpoint.conformance.initializer import RegisteredCheckpointer

from langorch.adapters.dynamodb.checkpointer import DynamoCheckpointSaver
from langorch.adapters.sqlite._db import Database
from langorch.adapters.sqlite.checkpointer import SqliteCheckpointSaver

BUCKET = "conformance-checkpoints"


@pytest.fixture(params=["dynamodb", "sqlite"])
def registered(request: pytest.FixtureRequest) -> RegisteredCheckpointer:
    """A conformance factory for each saver: a fresh store per capability suite."""
    if request.param == "sqlite":
        return _sqlite_factory(request.getfixturevalue("tmp_path"))
    return _dynamodb_factory(request.getfixturevalue("dynamodb"), request.getfixturevalue("s3"))


def _dynamodb_factory(dynamodb: Any, s3: Any) -> RegisteredCheckpointer:
    """A fresh table per capability suite (moto's Query scans tables)."""
    s3.create_bucket(Bucket=BUCKET)

    async def factory() -> AsyncIterator[DynamoCheckpointSaver]:
        saver = DynamoCheckpointSaver(
            dynamodb,
            f"checkpoints-{uuid.uuid4().hex[:8]}",
            s3_client=s3,
            bucket=BUCKET,
        )
        await saver.asetup()
        yield saver

    return checkpointer_test(name="DynamoCheckpointSaver")(factory)


def _sqlite_factory(folder: Path) -> RegisteredCheckpointer:
    """A fresh SQLite file per capability suite."""

    async def factory() -> AsyncIterator[SqliteCheckpointSaver]:
        yield SqliteCheckpointSaver(Database(folder / f"{uuid.uuid4().hex[:8]}.db"))

    return checkpointer_test(name="SqliteCheckpointSaver")(factory)


@pytest.mark.parametrize("capability", sorted(c.value for c in BASE_CAPABILITIES))
def test_base_capability_conforms(registered: RegisteredCheckpointer, capability: str) -> None:
    # Given one of our savers (DynamoDB on moto, SQLite on a file)
    # When the conformance suite runs the capability's specs
    report = asyncio.run(validate(registered, capabilities={capability}))

    # Then every spec passes
    result = report.results[capability]
    assert result.detected, f"{capability} is not implemented"
    assert result.passed, "\n".join(result.failures)
    assert result.tests_passed > 0


def test_extended_capabilities_are_reported_not_implemented(
    registered: RegisteredCheckpointer,
) -> None:
    # Given one of our savers, which implement none of the optional extensions
    extended = {c.value for c in EXTENDED_CAPABILITIES}

    # When the suite runs them
    report = asyncio.run(validate(registered, capabilities=extended))

    # Then it reports each as not implemented (not as failed)
    assert {name: r.detected for name, r in report.results.items() if name in extended} == {
        name: False for name in extended
    }
    assert report.passed_all()
