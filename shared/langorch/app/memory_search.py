"""How ``query_memory`` decides which remembered items answer a query (seed 000 §8).

An item is searched as one text: the labels of its namespace below the user
(``preferences``; ``agents``, the workflow id, ``history``), its key and its value as JSON. Two
ways to match:

- **keyword** (always available): the query's words against the item's
  (:func:`langorch.domain.words.words`: "what did I order last time?" asks for ``order``,
  ``last`` and ``time``; ``items_to_order`` has ``order``). An item matches when it shares at
  least one word with the query.
- **semantic** (when an embedding model is configured, ``Settings.memory_embedding_model``):
  the cosine similarity of the query's embedding and the item's, kept from
  ``min_score`` up, best first.

Either way a query that matches nothing finds nothing: ``memory_results`` is then empty, never
everything.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from langorch.domain.words import words


class Embeddings(Protocol):
    """An embedding model: LangChain's ``Embeddings`` interface (``embed_documents`` and
    ``embed_query``), so any LangChain embeddings object fits."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One vector per text."""
        ...

    def embed_query(self, text: str) -> list[float]:
        """The vector of a query."""
        ...


def item_text(labels: Sequence[str], key: str, value: Any) -> str:
    """What an item is searched as: its namespace labels, its key and its value as JSON."""
    shown = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return " ".join([*labels, key, shown])


def keyword_matches(query: str, texts: Iterable[str]) -> list[int]:
    """The positions of the texts sharing at least one word with ``query``, in order."""
    wanted = words(query)
    if not wanted:
        return []
    return [i for i, text in enumerate(texts) if wanted & words(text)]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine similarity of two vectors (0 when either is all zeros)."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def semantic_matches(
    query: Sequence[float], vectors: Sequence[Sequence[float]], min_score: float
) -> list[int]:
    """The positions of the vectors at least ``min_score`` similar to ``query``, best first."""
    scored = [(cosine(query, vector), i) for i, vector in enumerate(vectors)]
    return [i for score, i in sorted(scored, key=lambda s: (-s[0], s[1])) if score >= min_score]
