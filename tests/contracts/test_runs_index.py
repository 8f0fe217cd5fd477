"""The runs table's indexes on DynamoDB (issue 33): no hot index key, no body in the indexes,
listings still newest first across the shards, runs stored before sharding still listed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from langorch.adapters.dynamodb.runs import RunsRepository
from langorch.domain.runs import RunRecord, RunStatus, RunTrigger, transition

T0 = datetime(2025, 3, 4, 9, 0, tzinfo=UTC)


@pytest.fixture
def runs(dynamodb: Any) -> RunsRepository:
    repository = RunsRepository(dynamodb, "runs")
    repository.create_table()
    return repository


def a_run(n: int, workflow_id: str = "lunch_order") -> RunRecord:
    at = T0 + timedelta(minutes=n)
    return RunRecord(
        run_id=f"run-{n:03d}",
        workflow_id=workflow_id,
        workflow_version=1,
        trigger=RunTrigger(type="webhook"),
        created_at=at,
        updated_at=at,
        input={"note": "x" * 2_000},
    )


def index_items(runs: RunsRepository, index: str) -> list[dict[str, Any]]:
    return list(runs._client.scan(TableName="runs", IndexName=index)["Items"])


def test_the_runs_of_one_workflow_in_one_status_spread_over_several_index_keys(
    runs: RunsRepository,
) -> None:
    # Given 40 running runs of one workflow
    for n in range(40):
        run = a_run(n)
        runs.create_run(run)
        runs.save_run(transition(run, RunStatus.running, now=run.created_at))

    # Then neither index puts them all on one key: each index spreads them over 8 keys
    assert len({i["gsi1pk"]["S"] for i in index_items(runs, "gsi1")}) == 8
    assert len({i["gsi2pk"]["S"] for i in index_items(runs, "gsi2")}) == 8


def test_the_indexes_carry_no_record_body(runs: RunsRepository) -> None:
    # Given a run whose record holds 2 KB of input
    runs.create_run(a_run(1))

    # Then its index entries hold the keys, the run id and the status, not the record
    for index in ("gsi1", "gsi2"):
        (entry,) = index_items(runs, index)
        assert set(entry) == {"pk", "sk", f"{index}pk", f"{index}sk", "run_id", "status"}


def test_listings_merge_the_shards_newest_first_page_by_page(runs: RunsRepository) -> None:
    # Given 30 runs of one workflow a minute apart, every third succeeded, and one of another
    for n in range(30):
        run = a_run(n)
        runs.create_run(run)
        if n % 3 == 0:
            done = transition(
                transition(run, RunStatus.running, now=T0), RunStatus.succeeded, now=T0
            )
            runs.save_run(done)
    runs.create_run(a_run(99, workflow_id="invoice"))

    # When they are listed in pages of 7, by workflow, by status and by both
    def pages(**query: Any) -> list[str]:
        seen: list[RunRecord] = []
        while True:
            cursor = (seen[-1].created_at, seen[-1].run_id) if seen else None
            page = runs.list_runs(limit=7, before=cursor, **query)
            if not page:
                return [r.run_id for r in seen]
            seen += page

    # Then each listing holds exactly its runs, newest first, none twice
    newest_first = [f"run-{n:03d}" for n in range(29, -1, -1)]
    assert pages(workflow_id="lunch_order") == newest_first
    assert pages(status=RunStatus.succeeded) == [r for r in newest_first if int(r[4:]) % 3 == 0]
    assert pages(workflow_id="lunch_order", status=RunStatus.queued) == [
        r for r in newest_first if int(r[4:]) % 3
    ]
    assert pages() == ["run-099", *newest_first]


@pytest.fixture
def earlier_table(dynamodb: Any) -> RunsRepository:
    """A runs table as a stack deployed before the lean indexes has it (``runs_indexes: full``)."""
    repository = RunsRepository(dynamodb, "runs")
    repository.create_table(full_index_projection=True)
    return repository


@pytest.mark.parametrize("table", ["runs", "earlier_table"])
def test_runs_stored_before_sharding_are_still_listed(
    table: str, request: pytest.FixtureRequest
) -> None:
    # Given a table with today's indexes or the earlier full-record ones, a run stored with the
    # unsharded index keys of the earlier layout, and a new one
    runs: RunsRepository = request.getfixturevalue(table)
    runs.create_run(a_run(1))
    runs._client.update_item(
        TableName="runs",
        Key={"pk": {"S": "run#run-001"}, "sk": {"S": "run"}},
        UpdateExpression="SET gsi1pk = :wf, gsi2pk = :status",
        ExpressionAttributeValues={
            ":wf": {"S": "wf#lunch_order"},
            ":status": {"S": "status#queued"},
        },
    )
    runs.create_run(a_run(2))

    # When runs are listed by workflow and by status, then both are there, newest first
    assert [r.run_id for r in runs.list_runs("lunch_order")] == ["run-002", "run-001"]
    assert [r.run_id for r in runs.list_runs(status=RunStatus.queued)] == ["run-002", "run-001"]
