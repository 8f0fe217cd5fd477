"""In-memory workflow budget counters (``BudgetCounters``)."""

from __future__ import annotations

import threading


class InMemoryBudgetCounters:
    """Counters in a dict; a lock makes each reservation one atomic check-and-add."""

    def __init__(self) -> None:
        self._spent: dict[str, int] = {}
        self._lock = threading.Lock()

    def reserve(self, key: str, amount: int, limit: int) -> bool:
        """Add ``amount`` if the total stays within ``limit``."""
        with self._lock:
            total = self._spent.get(key, 0) + amount
            if total > limit:
                return False
            self._spent[key] = total
            return True

    def settle(self, key: str, amount: int) -> None:
        """Add ``amount`` (may be negative)."""
        with self._lock:
            self._spent[key] = self._spent.get(key, 0) + amount

    def spent(self, key: str) -> int:
        """What ``key`` holds."""
        return self._spent.get(key, 0)
