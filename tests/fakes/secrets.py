"""In-memory Secrets Manager, with the adapter's per-process read cache."""

from __future__ import annotations

import copy
from typing import Any

from langorch.domain.errors import SecretNotFoundError


class InMemorySecrets:
    """JSON secrets by name.

    Like :class:`langorch.adapters.secrets.Secrets` (Powertools' cached provider), a read is
    reused until a ``fresh=True`` read: a value changed by someone else is not seen before.
    """

    def __init__(self, values: dict[str, dict[str, Any]] | None = None) -> None:
        self._values: dict[str, dict[str, Any]] = copy.deepcopy(values or {})
        self._cache: dict[str, dict[str, Any]] = {}
        self.reads = 0
        """Reads that reached the store (not served from the cache)."""

    def get_json(self, name: str, *, fresh: bool = False) -> dict[str, Any]:
        """The secret's JSON value (``SecretNotFoundError`` when missing)."""
        if not fresh and name in self._cache:
            return copy.deepcopy(self._cache[name])
        self.reads += 1
        if name not in self._values:
            raise SecretNotFoundError(f"secret {name} does not exist")
        self._cache[name] = copy.deepcopy(self._values[name])
        return copy.deepcopy(self._values[name])

    def put_json(self, name: str, value: dict[str, Any], *, description: str = "") -> bool:
        """Create or update; returns whether it was created."""
        created = name not in self._values
        self._values[name] = copy.deepcopy(value)
        return created

    def replace_json(self, name: str, value: dict[str, Any]) -> None:
        """Store a new value of an existing secret (``SecretNotFoundError`` when missing)."""
        if name not in self._values:
            raise SecretNotFoundError(f"secret {name} does not exist")
        self._values[name] = copy.deepcopy(value)

    def exists(self, name: str) -> bool:
        """Whether the secret exists."""
        return name in self._values

    def delete(self, name: str) -> None:
        """Delete the secret (a missing one is fine)."""
        self._values.pop(name, None)

    def another_process(self) -> InMemorySecrets:
        """The same secrets seen by another process: its own, empty, read cache."""
        other = InMemorySecrets()
        other._values = self._values
        return other

    def stored(self, name: str) -> dict[str, Any]:
        """What is stored now, bypassing the cache (for assertions)."""
        return copy.deepcopy(self._values[name])
