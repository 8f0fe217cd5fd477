"""Registered tools (MCP servers) in the local store; satisfies ``ToolServerStore``.

One row per registration, its :class:`~langorch.domain.tool_servers.ToolServer` as JSON (secret
ids only, never a value). No versions: ``tools add`` again replaces it.
"""

from __future__ import annotations

from langorch.adapters.sqlite._db import Database
from langorch.domain.tool_servers import ToolServer

SCHEMA = ("CREATE TABLE IF NOT EXISTS tool_servers (name TEXT PRIMARY KEY, body TEXT NOT NULL)",)


class SqliteToolServers:
    """Registered tools in the local store.

    Args:
        db: the home's database.
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        db.ensure_schema("tool_servers", SCHEMA)

    def put(self, server: ToolServer) -> bool:
        """Store (or replace) a registration; returns whether it is new."""
        with self._db.write() as connection:
            existed = connection.execute(
                "SELECT 1 FROM tool_servers WHERE name = ?", (server.name,)
            ).fetchone()
            connection.execute(
                "INSERT OR REPLACE INTO tool_servers (name, body) VALUES (?, ?)",
                (server.name, server.model_dump_json()),
            )
        return existed is None

    def get(self, name: str) -> ToolServer | None:
        """The registration named ``name``, or ``None``."""
        with self._db.read() as connection:
            row = connection.execute(
                "SELECT body FROM tool_servers WHERE name = ?", (name,)
            ).fetchone()
        return None if row is None else ToolServer.model_validate_json(row[0])

    def list(self) -> list[ToolServer]:
        """Every registration, by name."""
        with self._db.read() as connection:
            rows = connection.execute("SELECT body FROM tool_servers ORDER BY name").fetchall()
        return [ToolServer.model_validate_json(body) for (body,) in rows]

    def delete(self, name: str) -> bool:
        """Remove a registration; returns whether there was one."""
        with self._db.write() as connection:
            cursor = connection.execute("DELETE FROM tool_servers WHERE name = ?", (name,))
        return cursor.rowcount > 0
