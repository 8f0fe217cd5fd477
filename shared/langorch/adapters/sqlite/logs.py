"""The functions' log lines in the local store: what CloudWatch Logs keeps in the cloud.

The local stack ships every invocation's lines here (:class:`langorch.local.logs.CloudWatchSink`
writes through the same methods it calls on :class:`langorch.adapters.logs.CloudWatchLogs`), and
``langorch runs logs`` reads a run's lines back: one row per line, the run id copied out of the
JSON line into an indexed column, so a run's lines are one index range however long the history.
Log groups and streams need no creating here; retention is the home's (delete the home).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from langorch.adapters.log_lines import Event, LogLine
from langorch.adapters.sqlite._db import Database

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS log_lines ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, log_group TEXT NOT NULL, stream TEXT NOT NULL,"
    " timestamp INTEGER NOT NULL, run_id TEXT, message TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS log_lines_by_run ON log_lines (run_id, timestamp)",
    "CREATE TABLE IF NOT EXISTS log_groups (name TEXT PRIMARY KEY)",
)


def _run_id(message: str) -> str | None:
    """The ``run_id`` field of a JSON line (Powertools writes one object per line)."""
    if '"run_id"' not in message:
        return None
    try:
        value = json.loads(message)
    except ValueError:
        return None
    run_id = value.get("run_id") if isinstance(value, dict) else None
    return run_id if isinstance(run_id, str) else None


class SqliteLogs:
    """Log groups and lines in the local store, with :class:`CloudWatchLogs`' methods.

    Args:
        db: the home's database.
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        db.ensure_schema("log_lines", SCHEMA)

    def ensure_group(self, group: str, *, retention_days: int | None = None) -> None:
        """Note the log group (its lines need nothing created; retention is not applied)."""
        with self._db.write() as connection:
            connection.execute("INSERT OR IGNORE INTO log_groups (name) VALUES (?)", (group,))

    def put(self, group: str, stream: str, events: Sequence[Event]) -> None:
        """Write ``(epoch ms, message)`` events to a stream of ``group``."""
        self.put_batch(group, stream, events)

    def create_stream(self, group: str, stream: str) -> None:
        """Streams exist as their lines do: nothing to create."""

    def put_batch(self, group: str, stream: str, batch: Sequence[Event]) -> None:
        """Write events in one transaction (any number: no PutLogEvents limits here)."""
        if not batch:
            return
        rows = [(group, stream, ts, _run_id(message), message) for ts, message in batch]
        with self._db.write() as connection:
            connection.execute("INSERT OR IGNORE INTO log_groups (name) VALUES (?)", (group,))
            connection.executemany(
                "INSERT INTO log_lines (log_group, stream, timestamp, run_id, message)"
                " VALUES (?, ?, ?, ?, ?)",
                rows,
            )

    def groups(self, prefix: str) -> list[str]:
        """The names of the log groups starting with ``prefix``."""
        with self._db.read() as connection:
            rows = connection.execute(
                "SELECT name FROM log_groups WHERE substr(name, 1, ?) = ? ORDER BY name",
                (len(prefix), prefix),
            ).fetchall()
        return [name for (name,) in rows]

    def lines_for_run(
        self, run_id: str, groups: Sequence[str], *, start_ms: int | None = None
    ) -> list[LogLine]:
        """Every line of ``groups`` whose ``run_id`` field is the run's, oldest first."""
        if not groups:
            return []
        marks = ", ".join("?" for _ in groups)
        query = (  # only placeholders are formatted in; the values are bound
            "SELECT log_group, stream, timestamp, message FROM log_lines"  # noqa: S608
            f" WHERE run_id = ? AND log_group IN ({marks}) AND timestamp >= ?"
            " ORDER BY timestamp, id"
        )
        with self._db.read() as connection:
            rows = connection.execute(query, (run_id, *groups, start_ms or 0)).fetchall()
        return [LogLine(group=g, stream=s, timestamp=t, message=m) for g, s, t, m in rows]
