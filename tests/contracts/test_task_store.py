"""Contract of the recorded tasks (``TaskStore``): the runs table on moto, the local SQLite store
and the fake — a visit
reads back every attempt's records in key order, a put with the same key replaces, and nothing
leaks into another step, visit or run."""

from __future__ import annotations

import pytest

from langorch.adapters.dynamodb.runs import RunsRepository
from langorch.adapters.dynamodb.tasks import TasksRepository
from langorch.adapters.sqlite.tasks import SqliteTasks
from langorch.domain.tasks import TaskRecord
from tests.fakes import InMemoryTasks

Store = TasksRepository | InMemoryTasks | SqliteTasks


@pytest.fixture(params=["fake", "sqlite", "dynamodb"])
def store(request: pytest.FixtureRequest) -> Store:
    if request.param == "fake":
        return InMemoryTasks()
    if request.param == "sqlite":
        return SqliteTasks(request.getfixturevalue("sqlite_db"))
    client = request.getfixturevalue("dynamodb")
    RunsRepository(client, "runs").create_table()
    return TasksRepository(client, "runs")


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


def test_tasks_stay_out_of_the_timeline(aws: None) -> None:
    import boto3

    client = boto3.client("dynamodb", region_name="us-east-1")
    runs = RunsRepository(client, "runs")
    runs.create_table()
    TasksRepository(client, "runs").put("r1", _record(0))
    assert runs.get_timeline("r1") == []
    assert runs.next_event_seq("r1") == 1
