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

Searching (``query_memory`` with a query) reads the same namespaces and keeps the items that
match (:mod:`langorch.app.memory_search`): by keyword, or by meaning when an embedding model is
given. The stores are not asked to search: ``DynamoDBStore`` searches by meaning only with a
DynamoDB vector index, ``SqliteStore`` only with the sqlite-vec extension, and a user's memory
is small (a few preferences, ``history_keep`` runs per workflow), so reading it and ranking it
here behaves the same on every store.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from langgraph.store.base import BaseStore, Item

from langorch.app.memory_search import (
    Embeddings,
    item_text,
    keyword_matches,
    semantic_matches,
)
from langorch.domain.errors import LangorchError

MAX_VALUE_BYTES = 16_000
"""Largest preference value or history summary (as JSON): memory is loaded into every run's
state, so it must stay small."""
_PAGE = 100
_VECTORS_KEPT = 1024
"""Embeddings of item texts kept per process: a warm function re-embeds only what changed."""

DEFAULT_MIN_SCORE = 0.35
"""Least cosine similarity of a semantic match (``Settings.memory_min_score``)."""


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
        embeddings: an embedding model; searches then match by meaning (``None``: by keyword).
        min_score: the least cosine similarity of a match by meaning.
    """

    def __init__(
        self,
        store: BaseStore,
        *,
        clock: Callable[[], datetime] = _utc_now,
        history_keep: int = 50,
        embeddings: Embeddings | None = None,
        min_score: float = DEFAULT_MIN_SCORE,
    ) -> None:
        if history_keep < 1:
            raise ValueError(f"history_keep must be at least 1, not {history_keep}")
        self._store = store
        self._clock = clock
        self._keep = history_keep
        self._embeddings = embeddings
        self._min_score = min_score
        self._vectors: OrderedDict[str, list[float]] = OrderedDict()
        self._vectors_lock = threading.Lock()

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

    # ----------------------------------------------------------------------------------------
    # Search
    # ----------------------------------------------------------------------------------------

    def search_preferences(
        self, user_id: str, query: str, keys: Sequence[str] = ()
    ) -> dict[str, Any]:
        """The user's preferences that match ``query``, as ``{name: value}``.

        Args:
            user_id: whose preferences.
            query: what to look for (the namespace, names and values are searched).
            keys: only these preferences are candidates (empty: all of them).

        Returns:
            The matches, best first when searching by meaning; empty when nothing matches.
        """
        namespace = preferences_namespace(user_id)
        items = [i for i in self._all(namespace) if not keys or i.key in keys]
        found = self._search(namespace, items, [i.value.get("value") for i in items], query)
        return {item.key: item.value.get("value") for item in found}

    def search_history(
        self, user_id: str, workflow_id: str, query: str, limit: int = 10
    ) -> list[dict[str, Any]]:
        """The user's remembered runs of the workflow that match ``query``.

        Returns:
            Up to ``limit`` entries (as :meth:`get_history` returns them), newest first when
            searching by keyword, best first by meaning; empty when nothing matches.
        """
        namespace = history_namespace(user_id, workflow_id)
        items = self._all(namespace)
        if self._embeddings is None:
            items.sort(key=lambda i: (str(i.value.get("saved_at", "")), i.key), reverse=True)
        found = self._search(namespace, items, [i.value for i in items], query)
        return [item.value for item in found[: max(limit, 0)]]

    def _search(
        self, namespace: tuple[str, ...], items: list[Item], values: list[Any], query: str
    ) -> list[Item]:
        labels = namespace[2:]  # below ("users", user_id): the user is not a search term
        texts = [item_text(labels, i.key, v) for i, v in zip(items, values, strict=True)]
        if not texts or not query.strip():
            return []
        if self._embeddings is None:
            return [items[i] for i in keyword_matches(query, texts)]
        vectors = self._embed(texts)
        wanted = self._embeddings.embed_query(query)
        return [items[i] for i in semantic_matches(wanted, vectors, self._min_score)]

    def _embed(self, texts: list[str]) -> list[list[float]]:
        """The texts' embeddings, computing only those not kept from an earlier search."""
        assert self._embeddings is not None
        with self._vectors_lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        made = self._embeddings.embed_documents(missing) if missing else []
        with self._vectors_lock:
            self._vectors.update(zip(missing, made, strict=True))
            vectors = [self._vectors[t] for t in texts]
            for text in texts:
                self._vectors.move_to_end(text)
            while len(self._vectors) > _VECTORS_KEPT:
                self._vectors.popitem(last=False)
        return vectors

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
