"""Recorded side effects of steps (seed 001 §5) in the local store; satisfies ``TaskStore`` as
:class:`langorch.adapters.dynamodb.tasks.TasksRepository` does.

One row per record, keyed as DynamoDB's sort key orders them (run, step, visit, attempt, call
index); the result is JSON in ``body``, with the call's ``state`` (``started``/``done``) and its
idempotency key (``call_key``). A step's visit reads every attempt's records with one query.
Bodies are bounded by the recorder (:mod:`langorch.app.tasks`) before they get here.
"""

from __future__ import annotations

import json

from langorch.adapters.sqlite._db import Database
from langorch.domain.tasks import TaskRecord

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS run_tasks ("
    " run_id TEXT NOT NULL, step_id TEXT NOT NULL, visit INTEGER NOT NULL,"
    " attempt INTEGER NOT NULL, call_index INTEGER NOT NULL, kind TEXT NOT NULL,"
    " fingerprint TEXT NOT NULL, body TEXT NOT NULL,"
    " state TEXT NOT NULL DEFAULT 'done', call_key TEXT NOT NULL DEFAULT '',"
    " PRIMARY KEY (run_id, step_id, visit, attempt, call_index))",
)

ADDED_COLUMNS = {"state": "TEXT NOT NULL DEFAULT 'done'", "call_key": "TEXT NOT NULL DEFAULT ''"}
"""Columns a home written before tool calls had states lacks (its records read as done)."""


class SqliteTasks:
    """Recorded tasks in the local store.

    Args:
        db: the home's database.
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        db.ensure_schema("tasks", SCHEMA)
        db.ensure_columns("run_tasks", ADDED_COLUMNS)

    def load(self, run_id: str, step_id: str, visit: int) -> list[TaskRecord]:
        """Every record of this visit of the step, all attempts, in key order."""
        with self._db.read() as connection:
            rows = connection.execute(
                "SELECT attempt, call_index, kind, fingerprint, body, state, call_key"
                " FROM run_tasks WHERE run_id = ? AND step_id = ? AND visit = ?"
                " ORDER BY attempt, call_index",
                (run_id, step_id, visit),
            ).fetchall()
        return [
            TaskRecord(
                step_id=step_id,
                visit=visit,
                attempt=attempt,
                index=index,
                kind=kind,
                fingerprint=fingerprint,
                result=json.loads(body),
                state="started" if state == "started" else "done",
                key=key,
            )
            for attempt, index, kind, fingerprint, body, state, key in rows
        ]

    def put(self, run_id: str, record: TaskRecord) -> None:
        """Store one record (a record with the same key is replaced)."""
        body = json.dumps(record.result, sort_keys=True, default=str)
        with self._db.write() as connection:
            connection.execute(
                "INSERT OR REPLACE INTO run_tasks (run_id, step_id, visit, attempt, call_index,"
                " kind, fingerprint, body, state, call_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    record.step_id,
                    record.visit,
                    record.attempt,
                    record.index,
                    record.kind,
                    record.fingerprint,
                    body,
                    record.state,
                    record.key,
                ),
            )
