"""Registered agents in the local store; satisfies ``AgentStore``.

One row per registration, its :class:`~langorch.domain.agents.AgentRegistration` as JSON (secret
ids only, never a value). No versions: ``agents add`` again replaces it.
"""

from __future__ import annotations

from langorch.adapters.sqlite._db import Database
from langorch.domain.agents import AgentRegistration

SCHEMA = ("CREATE TABLE IF NOT EXISTS agents (name TEXT PRIMARY KEY, body TEXT NOT NULL)",)


class SqliteAgents:
    """Registered agents in the local store.

    Args:
        db: the home's database.
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        db.ensure_schema("agents", SCHEMA)

    def put(self, agent: AgentRegistration) -> bool:
        """Store (or replace) a registration; returns whether it is new."""
        with self._db.write() as connection:
            existed = connection.execute(
                "SELECT 1 FROM agents WHERE name = ?", (agent.name,)
            ).fetchone()
            connection.execute(
                "INSERT OR REPLACE INTO agents (name, body) VALUES (?, ?)",
                (agent.name, agent.model_dump_json()),
            )
        return existed is None

    def get(self, name: str) -> AgentRegistration | None:
        """The registration named ``name``, or ``None``."""
        with self._db.read() as connection:
            row = connection.execute("SELECT body FROM agents WHERE name = ?", (name,)).fetchone()
        return None if row is None else AgentRegistration.model_validate_json(row[0])

    def list(self) -> list[AgentRegistration]:
        """Every registration, by name."""
        with self._db.read() as connection:
            rows = connection.execute("SELECT body FROM agents ORDER BY name").fetchall()
        return [AgentRegistration.model_validate_json(body) for (body,) in rows]

    def delete(self, name: str) -> bool:
        """Remove a registration; returns whether there was one."""
        with self._db.write() as connection:
            cursor = connection.execute("DELETE FROM agents WHERE name = ?", (name,))
        return cursor.rowcount > 0
