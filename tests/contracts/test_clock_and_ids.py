"""Contract of the clock and id ports: the container's real ones and the fakes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from langorch.composition.container import Container
from langorch.config import Settings
from tests.fakes import FakeClock, SequentialIds


@pytest.fixture(params=["fake", "real"])
def clock(request: pytest.FixtureRequest) -> Callable[[], datetime]:
    return FakeClock() if request.param == "fake" else Container(Settings()).clock


@pytest.fixture(params=["fake", "real"])
def ids(request: pytest.FixtureRequest) -> Callable[[], str]:
    return SequentialIds() if request.param == "fake" else Container(Settings()).ids


def test_the_clock_tells_timezone_aware_utc(clock: Callable[[], datetime]) -> None:
    now = clock()
    assert now.tzinfo is not None and now.utcoffset() == UTC.utcoffset(now)


def test_the_clock_never_goes_back(clock: Callable[[], datetime]) -> None:
    assert clock() <= clock()


def test_ids_are_unique_32_hex_digits(ids: Callable[[], str]) -> None:
    made = [ids() for _ in range(100)]
    assert len(set(made)) == 100
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in made)


def test_the_fake_clock_is_settable_and_advances() -> None:
    clock = FakeClock(datetime(2025, 1, 1, tzinfo=UTC))
    clock.advance(90)
    assert clock() == datetime(2025, 1, 1, 0, 1, 30, tzinfo=UTC)
    with pytest.raises(ValueError, match="timezone-aware"):
        clock.set(datetime(2025, 1, 1))
