"""A deterministic embedding model: a word's vector is the topic it belongs to.

Texts about the same topic point the same way even when they share no word ("food" and
"Chipotle"), which a keyword search cannot see: what a real embedding model adds. Words outside
every topic count for nothing.
"""

from __future__ import annotations

import re

TOPICS: tuple[frozenset[str], ...] = (
    frozenset({"food", "lunch", "meal", "restaurant", "chipotle", "burrito", "bowl", "eat"}),
    frozenset({"travel", "flight", "seat", "aisle", "window", "airline", "trip"}),
    frozenset({"money", "budget", "price", "cost", "total", "dollar"}),
)


class TopicEmbeddings:
    """LangChain's ``Embeddings`` interface, answered from :data:`TOPICS`; counts its calls."""

    def __init__(self) -> None:
        self.embedded: list[str] = []
        """Every text embedded as a document, in order."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.embedded.extend(texts)
        return [self._vector(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)

    @staticmethod
    def _vector(text: str) -> list[float]:
        found = re.findall(r"[a-z]+", text.lower())
        return [float(sum(word in topic for word in found)) for topic in TOPICS]
