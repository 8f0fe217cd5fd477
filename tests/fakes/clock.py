"""A settable clock and deterministic ids."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

T0 = datetime(2025, 3, 4, 9, 0, tzinfo=UTC)


class FakeClock:
    """Returns the time it was set to; ``advance`` moves it forward."""

    def __init__(self, now: datetime = T0) -> None:
        if now.tzinfo is None:
            raise ValueError("the fake clock keeps timezone-aware times (pass tzinfo=UTC)")
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        """Move the clock ``seconds`` forward; returns the new time."""
        self.now += timedelta(seconds=seconds)
        return self.now

    def set(self, now: datetime) -> None:
        """Set the clock to ``now`` (timezone-aware)."""
        if now.tzinfo is None:
            raise ValueError("the fake clock keeps timezone-aware times (pass tzinfo=UTC)")
        self.now = now


class SequentialIds:
    """``0000…01``, ``0000…02``, …: 32 hex digits like ``uuid4().hex``, in order."""

    def __init__(self, start: int = 1) -> None:
        self._next = start

    def __call__(self) -> str:
        value = f"{self._next:032x}"
        self._next += 1
        return value
