"""The run record never outgrows an item (issue 8): on the in-memory fake, on DynamoDB (moto) and
on the local SQLite store (which has no item limit but keeps the cloud's budget, so a record the
local stack takes, the cloud takes too).

Before the budget, a record of a 250 KB input could be created but not updated (moto counts the
replaced body and the new one against its 405,000-byte item), so the run stayed ``queued``
forever; and an approval showing a 150 KB value made the record too large to save.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from langorch.adapters.dynamodb._run_items import run_item
from langorch.adapters.dynamodb.runs import RunsRepository
from langorch.adapters.sqlite.runs import SqliteRuns
from langorch.app.runs import mark_failed
from langorch.domain.errors import RecordTooLargeError
from langorch.domain.limits import MAX_INPUT_BYTES, MAX_PENDING_BYTES, json_bytes
from langorch.domain.runs import (
    PendingInterrupt,
    RunError,
    RunRecord,
    RunStatus,
    TimelineEventType,
    transition,
)
from tests.fakes import InMemoryResourceLocks, InMemoryRuns
from tests.support.records import a_run
from tests.support.stores import STORES, runs_on_dynamodb, under_contract

T0 = datetime(2025, 3, 4, 9, 0, tzinfo=UTC)

Runs = RunsRepository | InMemoryRuns | SqliteRuns


@pytest.fixture(params=STORES)
def repo(request: pytest.FixtureRequest) -> Runs:
    return under_contract(request, InMemoryRuns, SqliteRuns, runs_on_dynamodb)


def a_big_run(run_id: str = "run-big", **fields: Any) -> RunRecord:
    return a_run(run_id, trigger="webhook", **fields)


def test_a_run_with_an_input_at_the_budget_can_be_updated_to_every_status(repo: Runs) -> None:
    # Given a run whose input is just under the budget, with outputs far over theirs
    run = a_big_run(input={"note": "x" * (MAX_INPUT_BYTES - 100)})
    repo.create_run(run)
    fence = repo.acquire_lease(run.run_id, "seg-1", now=T0.timestamp(), ttl_seconds=60)

    # When it runs, parks on an approval showing a 150 KB value, and then succeeds
    running = transition(run, RunStatus.running, now=T0)
    repo.save_run(running, fence=fence)
    shown = {"step_id": "ok", "shown": {"menu": "m" * 150_000}}
    parked = transition(
        running,
        RunStatus.waiting_approval,
        now=T0,
        pending=PendingInterrupt(interrupt_id="i-1", kind="approval", request=shown),
    )
    repo.save_run(parked, fence=fence)
    stored = repo.get_run(run.run_id)
    done = transition(transition(stored, RunStatus.running, now=T0), RunStatus.succeeded, now=T0)
    repo.save_run(done.model_copy(update={"outputs": {"all": "o" * 300_000}}), fence=fence)

    # Then every write was stored: the shown value cut with a marker, the outputs summarised
    assert stored.pending is not None
    assert json_bytes(stored.pending.request) <= MAX_PENDING_BYTES
    assert "[truncated: 150000 bytes" in stored.pending.request["shown"]["menu"]
    final = repo.get_run(run.run_id)
    assert final.status is RunStatus.succeeded
    assert final.outputs_truncated is True


def test_a_record_over_the_budget_is_refused_before_it_is_stored(repo: Runs) -> None:
    # Given a run whose input is over the budget (no door lets it in; this is the last guard)
    run = a_big_run(input={"note": "x" * 200_000})

    # When it is created, then it is refused with a named error and nothing is stored
    with pytest.raises(RecordTooLargeError, match="pass large data as a file"):
        repo.create_run(run)
    assert repo.list_runs() == []


@dataclass
class _EndDeps:
    runs: Any
    clock: Any
    resources: Any = field(default_factory=InMemoryResourceLocks)
    executions: Any = None  # nothing is queued behind this run: nothing to start


def test_mark_failed_writes_a_minimal_record_when_the_full_one_does_not_fit(dynamodb: Any):
    # Given a `queued` run stored before the budget existed: its 250 KB record can no longer be
    # rewritten (before: MarkFailed failed too, and the run stayed `queued` forever)
    repository = RunsRepository(dynamodb, "runs")
    repository.create_table()
    legacy = a_big_run("run-legacy", input={"note": "x" * 250_000})
    item = run_item(a_big_run("run-legacy"), fence=0)
    item["body"] = {"S": legacy.model_dump_json()}
    dynamodb.put_item(TableName="runs", Item=item)

    # When the state machine's MarkFailed ends it
    error = RunError(step_id=None, type="StorageError", message="Item size has exceeded")
    failed = mark_failed("run-legacy", error, _EndDeps(repository, lambda: T0))

    # Then a minimal failed record is stored, with the reason, agreeing with the timeline
    assert failed is True
    run = repository.get_run("run-legacy")
    assert run.status is RunStatus.failed
    assert run.error is not None
    assert run.error.message == "Item size has exceeded"
    assert run.input == {}
    assert [r.run_id for r in repository.list_runs(status=RunStatus.failed)] == ["run-legacy"]
    finished = [
        e for e in repository.get_timeline("run-legacy") if e.type is TimelineEventType.run_finished
    ]
    assert [e.error.message if e.error else None for e in finished] == [run.error.message]
