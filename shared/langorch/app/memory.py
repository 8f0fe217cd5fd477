"""Long-term memory across runs: a user's preferences and their history per workflow (seed 000 §8).

Namespaces are seed 000's::

    ("users", user_id, "preferences")                      one item per preference
    ("users", user_id, "agents", workflow_id, "history")   one item per run

:class:`MemoryManager` works with any LangGraph ``BaseStore`` (DynamoDB in the pipeline,
``InMemoryStore`` in tests), so it relies only on ``get``/``put``/``delete``/``search`` and never
on a store's ordering: ``search`` returns DynamoDB's key order on one store and insertion order
on another. History is therefore kept short (``history_keep`` runs, oldest pruned on save) and
sorted here.

Ids become namespace labels, and stores forbid ``.`` in labels (an email address as a user id
would be refused) while ``DynamoDBStore`` joins labels with ``:``. Those characters are
percent-encoded (``%2E``, ``%3A``; ``%`` itself as ``%25``), so an ordinary id is its own label
and the namespaces are exactly the seed's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from langgraph.store.base import BaseStore, Item

from langorch.domain.errors import LangorchError

MAX_VALUE_BYTES = 16_000
"""Largest preference value or history summary (as JSON): memory is loaded into every run's
state, so it must stay small."""
_PAGE = 100


class MemoryTooLargeError(LangorchError):
    """A preference value or a history summary is too large to remember."""


def _label(identifier: str, what: str) -> str:
    if not identifier:
        raise ValueError(f"{what} must not be empty")
    return identifier.replace("%", "%25").replace(".", "%2E").replace(":", "%3A")


def preferences_namespace(user_id: str) -> tuple[str, ...]:
    """Where a user's preferences live: ``("users", user_id, "preferences")``."""
    return ("users", _label(user_id, "user_id"), "preferences")


def history_namespace(user_id: str, workflow_id: str) -> tuple[str, ...]:
    """Where a user's runs of a workflow are remembered.

    ``("users", user_id, "agents", workflow_id, "history")`` (seed 000 calls a workflow an agent).
    """
    return (
        "users",
        _label(user_id, "user_id"),
        "agents",
        _label(workflow_id, "workflow_id"),
        "history",
    )


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _checked_size(value: Any, what: str) -> None:
    size = len(json.dumps(value, default=str, ensure_ascii=False).encode("utf-8"))
    if size > MAX_VALUE_BYTES:
        raise MemoryTooLargeError(
            f"{what} is {size} bytes as JSON (limit {MAX_VALUE_BYTES}); remember a summary, "
            "not the whole output"
        )


class MemoryManager:
    """Preferences and history for the ``query_memory`` / ``save_memory`` steps.

    Args:
        store: any LangGraph ``BaseStore``.
        clock: the time a history entry is saved at (injected for tests).
        history_keep: how many runs to remember per user and workflow; older ones are pruned.
    """

    def __init__(
        self,
        store: BaseStore,
        *,
        clock: Callable[[], datetime] = _utc_now,
        history_keep: int = 50,
    ) -> None:
        if history_keep < 1:
            raise ValueError(f"history_keep must be at least 1, not {history_keep}")
        self._store = store
        self._clock = clock
        self._keep = history_keep

    # ----------------------------------------------------------------------------------------
    # Preferences
    # ----------------------------------------------------------------------------------------

    def get_preferences(self, user_id: str) -> dict[str, Any]:
        """The user's preferences as ``{name: value}`` (empty when none)."""
        return {
            item.key: item.value.get("value") for item in self._all(preferences_namespace(user_id))
        }

    def update_preferences(self, user_id: str, values: Mapping[str, Any]) -> None:
        """Set the given preferences; the others stay as they are.

        Each preference is its own item, so two runs updating different preferences never
        overwrite each other.

        Args:
            user_id: whose preferences.
            values: ``{name: value}``; a ``None`` value forgets that preference.

        Raises:
            MemoryTooLargeError: a value is larger than :data:`MAX_VALUE_BYTES` as JSON.
        """
        namespace = preferences_namespace(user_id)
        for name, value in values.items():
            if not name:
                raise ValueError("a preference name must not be empty")
            if value is None:
                self._store.delete(namespace, name)
                continue
            _checked_size(value, f"preference {name!r}")
            self._store.put(namespace, name, {"value": value})

    # ----------------------------------------------------------------------------------------
    # History
    # ----------------------------------------------------------------------------------------

    def get_history(self, user_id: str, workflow_id: str, limit: int = 10) -> list[dict[str, Any]]:
        """The user's most recent runs of the workflow, newest first.

        Returns:
            Up to ``limit`` entries ``{"run_id", "workflow_id", "saved_at", "summary"}``
            (``saved_at`` in ISO-8601 UTC).
        """
        if limit < 1:
            return []
        entries = [item.value for item in self._all(history_namespace(user_id, workflow_id))]
        entries.sort(key=lambda e: (str(e.get("saved_at", "")), str(e.get("run_id"))), reverse=True)
        return entries[:limit]

    def save_history(
        self, user_id: str, workflow_id: str, run_id: str, summary: Mapping[str, Any]
    ) -> None:
        """Remember a run. Saving the same run again replaces its entry (retried steps).

        Args:
            user_id: whose history.
            workflow_id: the workflow the run belongs to.
            run_id: the run (the entry's key).
            summary: what to remember about it (small, JSON-like).

        Raises:
            MemoryTooLargeError: the summary is larger than :data:`MAX_VALUE_BYTES` as JSON.
        """
        if not run_id:
            raise ValueError("run_id must not be empty")
        _checked_size(dict(summary), f"history summary of run {run_id}")
        namespace = history_namespace(user_id, workflow_id)
        entry = {
            "run_id": run_id,
            "workflow_id": workflow_id,
            "saved_at": self._clock().astimezone(UTC).isoformat(),
            "summary": dict(summary),
        }
        self._store.put(namespace, run_id, entry)
        self._prune(namespace)

    def _prune(self, namespace: tuple[str, ...]) -> None:
        items = self._all(namespace)
        if len(items) <= self._keep:
            return
        items.sort(key=lambda i: (str(i.value.get("saved_at", "")), i.key), reverse=True)
        for stale in items[self._keep :]:
            self._store.delete(namespace, stale.key)

    def _all(self, namespace: tuple[str, ...]) -> list[Item]:
        # Page by offset: the BaseStore contract has no cursor. The namespaces stay small
        # (history is pruned), so re-reading from the start per page costs little.
        items: list[Item] = []
        while True:
            page = self._store.search(namespace, limit=_PAGE, offset=len(items))
            items.extend(page)
            if len(page) < _PAGE:
                return items
