"""Secrets the local stack keeps itself: link-signing keys, webhook secrets, tool credentials.

The file is the home's (readable by its owner only); values are never logged. Reads are cached
per process for ``max_age`` seconds, as the Secrets Manager adapter's are (Powertools' cache), so
a rotation takes effect locally exactly as it does in the cloud: within the cache's age, or at
once for a ``fresh`` read.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from langorch.adapters.sqlite._db import Database
from langorch.domain.errors import SecretNotFoundError, StorageError

DEFAULT_MAX_AGE_SECONDS = 300
"""As :data:`langorch.adapters.secrets.DEFAULT_MAX_AGE_SECONDS`."""

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS secrets ("
    " name TEXT PRIMARY KEY, value TEXT NOT NULL, description TEXT NOT NULL DEFAULT '',"
    " updated_at REAL NOT NULL)",
)


class SqliteSecrets:
    """JSON secrets by name in the local store; satisfies ``SecretsStore``.

    Args:
        db: the home's database.
        max_age: seconds a read value is reused.
        monotonic: the cache's clock.
    """

    def __init__(
        self,
        db: Database,
        *,
        max_age: float = DEFAULT_MAX_AGE_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._db = db
        self._max_age = max_age
        self._monotonic = monotonic
        self._cache: dict[str, tuple[float, dict[str, Any]]] = {}
        db.ensure_schema("secrets", SCHEMA)

    def get_json(self, name: str, *, fresh: bool = False) -> dict[str, Any]:
        """The secret's JSON value.

        Raises:
            SecretNotFoundError: no such secret.
        """
        cached = self._cache.get(name)
        if not fresh and cached is not None and self._monotonic() - cached[0] < self._max_age:
            return dict(json.loads(json.dumps(cached[1])))
        with self._db.read() as connection:
            row = connection.execute("SELECT value FROM secrets WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise SecretNotFoundError(f"secret {name} does not exist")
        value = json.loads(row[0])
        if not isinstance(value, dict):
            raise StorageError(f"secret {name} is not a JSON object")
        self._cache[name] = (self._monotonic(), value)
        return dict(json.loads(row[0]))  # a copy of its own: the caller may change it

    def put_json(self, name: str, value: dict[str, Any], *, description: str = "") -> bool:
        """Create the secret, or store a new value of it; returns whether it was created."""
        with self._db.write() as connection:
            existed = connection.execute("SELECT 1 FROM secrets WHERE name = ?", (name,)).fetchone()
            connection.execute(
                "INSERT INTO secrets (name, value, description, updated_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (name) DO UPDATE SET value = excluded.value,"
                " updated_at = excluded.updated_at",
                (name, json.dumps(value), description, time.time()),
            )
        return existed is None

    def replace_json(self, name: str, value: dict[str, Any]) -> None:
        """Store a new value of an existing secret.

        Raises:
            SecretNotFoundError: no such secret.
        """
        with self._db.write() as connection:
            cursor = connection.execute(
                "UPDATE secrets SET value = ?, updated_at = ? WHERE name = ?",
                (json.dumps(value), time.time(), name),
            )
        if cursor.rowcount == 0:
            raise SecretNotFoundError(f"secret {name} does not exist")

    def exists(self, name: str) -> bool:
        """Whether the secret exists (no value is read into the cache)."""
        with self._db.read() as connection:
            return (
                connection.execute("SELECT 1 FROM secrets WHERE name = ?", (name,)).fetchone()
                is not None
            )

    def delete(self, name: str) -> None:
        """Delete the secret (a missing one is fine)."""
        with self._db.write() as connection:
            connection.execute("DELETE FROM secrets WHERE name = ?", (name,))
        self._cache.pop(name, None)
