"""Workflow budget counters (``BudgetCounters``) in the local store: one row per key.

A reservation is one ``INSERT … ON CONFLICT DO UPDATE … WHERE spent + amount <= limit`` in its
own transaction: SQLite serialises writers, so two reservations racing for the last of a day's
budget cannot both see it free.
"""

from __future__ import annotations

from langorch.adapters.sqlite._db import Database

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS budget_counters (key TEXT PRIMARY KEY, spent INTEGER NOT NULL)",
)

_RESERVE = (
    "INSERT INTO budget_counters (key, spent) VALUES (?1, ?2) "
    "ON CONFLICT(key) DO UPDATE SET spent = spent + excluded.spent "
    "WHERE budget_counters.spent + excluded.spent <= ?3"
)
_SETTLE = (
    "INSERT INTO budget_counters (key, spent) VALUES (?1, ?2) "
    "ON CONFLICT(key) DO UPDATE SET spent = spent + excluded.spent"
)


class SqliteBudgetCounters:
    """:class:`langorch.app.ports.BudgetCounters` in the local store.

    Args:
        db: the home's database.
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        db.ensure_schema("budget_counters", SCHEMA)

    def reserve(self, key: str, amount: int, limit: int) -> bool:
        """See :meth:`langorch.app.ports.BudgetCounters.reserve`."""
        if amount > limit:
            return False
        with self._db.write() as connection:
            return connection.execute(_RESERVE, (key, amount, limit)).rowcount == 1

    def settle(self, key: str, amount: int) -> None:
        """See :meth:`langorch.app.ports.BudgetCounters.settle`."""
        with self._db.write() as connection:
            connection.execute(_SETTLE, (key, amount))

    def spent(self, key: str) -> int:
        """See :meth:`langorch.app.ports.BudgetCounters.spent`."""
        with self._db.read() as connection:
            row = connection.execute(
                "SELECT spent FROM budget_counters WHERE key = ?", (key,)
            ).fetchone()
        return int(row[0]) if row else 0
