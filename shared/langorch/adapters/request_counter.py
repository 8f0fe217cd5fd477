"""Count the AWS API calls a boto3 client makes, per operation.

Benchmarks and tests use it to hold adapters to their request budgets (PERFORMANCE.md P1, P7):
attach it to the client an adapter was given, run the workload, read the counts.

It listens on botocore's ``before-call`` event, which fires once per API call (not once per
HTTP retry): the figure is what the adapter asked for, which is what a budget is about.
"""

from __future__ import annotations

import threading
from collections import Counter
from types import TracebackType
from typing import Any, Self

_EVENT = "before-call"


class RequestCounter:
    """Counts API calls per operation name on one boto3 client.

    Example:
        >>> counter = RequestCounter(dynamodb_client)          # doctest: +SKIP
        >>> graph.invoke(...)                                   # doctest: +SKIP
        >>> counter.total, counter.counts["BatchWriteItem"]     # doctest: +SKIP

    Args:
        client: Any boto3 client (``boto3.client("dynamodb")``, ``boto3.client("s3")``, ...).
        attach: Start counting at once; pass ``False`` to call :meth:`attach` later.
    """

    def __init__(self, client: Any, *, attach: bool = True) -> None:
        self._client = client
        self._counts: Counter[str] = Counter()
        # Savers call the client from LangGraph's thread pool, so increments must not race.
        self._lock = threading.Lock()
        self._attached = False
        # One unique id per counter, so two counters on one client never replace each other.
        self._unique_id = f"langorch-request-counter-{id(self)}"
        if attach:
            self.attach()

    def attach(self) -> None:
        """Start counting (idempotent)."""
        if not self._attached:
            self._client.meta.events.register(_EVENT, self._on_call, unique_id=self._unique_id)
            self._attached = True

    def detach(self) -> None:
        """Stop counting (idempotent); the counts so far are kept."""
        if self._attached:
            self._client.meta.events.unregister(_EVENT, unique_id=self._unique_id)
            self._attached = False

    def reset(self) -> None:
        """Forget every count."""
        with self._lock:
            self._counts.clear()

    @property
    def counts(self) -> dict[str, int]:
        """A snapshot of the calls per operation name (``{"Query": 2, "BatchWriteItem": 11}``)."""
        with self._lock:
            return dict(self._counts)

    @property
    def total(self) -> int:
        """All calls counted so far."""
        with self._lock:
            return sum(self._counts.values())

    def __enter__(self) -> Self:
        self.attach()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.detach()

    def _on_call(self, model: Any = None, **_: Any) -> None:
        name = getattr(model, "name", None) or "unknown"
        with self._lock:
            self._counts[name] += 1
