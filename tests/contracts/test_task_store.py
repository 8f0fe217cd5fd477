"""Contract of the recorded tasks (``TaskStore``): the runs table on moto, the local SQLite store
and the fake — a visit reads back every attempt's records in key order, a put with the same key
replaces, nothing leaks into another step, visit or run, and a tool call recorded as started
(with its idempotency key) reads back started until its done record replaces it."""

from __future__ import annotations

from typing import Any

import pytest

from langorch.adapters.dynamodb.runs import RunsRepository
from langorch.adapters.dynamodb.tasks import TasksRepository
from langorch.adapters.sqlite.tasks import SqliteTasks
from langorch.domain.tasks import TaskRecord
from tests.fakes import InMemoryTasks
from tests.support.stores import STORES, on_runs_table, under_contract

Store = TasksRepository | InMemoryTasks | SqliteTasks


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest) -> Store:
    cloud = on_runs_table(TasksRepository)
    return under_contract(request, InMemoryTasks, SqliteTasks, cloud)


def _record(index: int, *, step: str = "lookup", visit: int = 0, attempt: int = 1) -> TaskRecord:
    return TaskRecord(
        step_id=step,
        visit=visit,
        attempt=attempt,
        index=index,
        kind="tool",
        fingerprint=f"fp{index}",
        result={"output": f"result {index}", "error": False, "n": 1.5},
    )


def test_a_visit_reads_back_every_attempt_in_key_order(store: Store) -> None:
    for record in (_record(1), _record(0, attempt=2), _record(0)):
        store.put("r1", record)
    assert store.load("r1", "lookup", 0) == [_record(0), _record(1), _record(0, attempt=2)]


def test_the_same_key_is_replaced(store: Store) -> None:
    store.put("r1", _record(0))
    changed = TaskRecord(**{**_record(0).__dict__, "result": {"output": "again"}})
    store.put("r1", changed)
    assert store.load("r1", "lookup", 0) == [changed]


def test_other_steps_visits_and_runs_are_apart(store: Store) -> None:
    store.put("r1", _record(0))
    store.put("r1", _record(0, step="other"))
    store.put("r1", _record(0, visit=1))
    store.put("r2", _record(0))
    assert store.load("r1", "lookup", 0) == [_record(0)]
    assert store.load("r1", "lookup", 2) == []


def _started(index: int = 0) -> TaskRecord:
    return TaskRecord(
        step_id="lookup",
        visit=0,
        attempt=1,
        index=index,
        kind="tool",
        fingerprint=f"fp{index}",
        state="started",
        key="0f3c9a7e5b1d4c2a8e6f0b9d7c5a3e1f",
    )


def test_a_call_recorded_as_started_reads_back_started_with_its_key(store: Store) -> None:
    # Given a tool call recorded as sent, before anything came back
    store.put("r1", _started())
    # When the visit is read again
    [record] = store.load("r1", "lookup", 0)
    # Then it is the started call, its key kept, no result
    assert record == _started()
    assert (record.done, record.key, record.result) == (False, _started().key, {})


def test_the_done_record_replaces_the_started_one(store: Store) -> None:
    # Given a started call
    store.put("r1", _started())
    # When its result is recorded under the same key
    done = TaskRecord(**{**_started().__dict__, "state": "done", "result": {"output": "ok"}})
    store.put("r1", done)
    # Then only the done record is read back, with the call's key
    assert store.load("r1", "lookup", 0) == [done]


def test_a_home_from_before_call_states_reads_its_records_as_done(sqlite_db: Any) -> None:
    # Given a home whose tasks table was written before calls had states and keys
    with sqlite_db.write() as connection:
        connection.execute(
            "CREATE TABLE run_tasks (run_id TEXT NOT NULL, step_id TEXT NOT NULL,"
            " visit INTEGER NOT NULL, attempt INTEGER NOT NULL, call_index INTEGER NOT NULL,"
            " kind TEXT NOT NULL, fingerprint TEXT NOT NULL, body TEXT NOT NULL,"
            " PRIMARY KEY (run_id, step_id, visit, attempt, call_index))"
        )
        connection.execute(
            "INSERT INTO run_tasks VALUES ('r1', 'lookup', 0, 1, 1, 'tool', 'fp1', ?)",
            ('{"error": false, "n": 1.5, "output": "result 1"}',),
        )
    # When this langorch opens it and records a started call beside the old record
    store = SqliteTasks(sqlite_db)
    store.put("r1", _started())
    # Then the old record reads as done and the new one as started
    assert store.load("r1", "lookup", 0) == [_started(), _record(1)]


def test_tasks_stay_out_of_the_timeline(aws: None) -> None:
    import boto3

    client = boto3.client("dynamodb", region_name="us-east-1")
    runs = RunsRepository(client, "runs")
    runs.create_table()
    TasksRepository(client, "runs").put("r1", _record(0))
    assert runs.get_timeline("r1") == []
    assert runs.next_event_seq("r1") == 1
