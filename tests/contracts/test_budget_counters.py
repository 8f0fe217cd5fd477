"""Contract of the workflow budget counters (``BudgetCounters``): the DynamoDB adapter on moto,
the local SQLite store and the in-memory fake pass the same tests — reservations within the
limit, settling, and no overspend past the limit under 20 concurrent reservations."""

from __future__ import annotations

import pytest

from langorch.adapters.dynamodb.budgets import BudgetCountersRepository
from langorch.adapters.sqlite.budgets import SqliteBudgetCounters
from tests.fakes.budgets import InMemoryBudgetCounters
from tests.support.stores import STORES, on_runs_table, under_contract
from tests.support.threads import at_once

Counters = BudgetCountersRepository | SqliteBudgetCounters | InMemoryBudgetCounters
KEY = "refunds/day/2026-11-27"


@pytest.fixture(params=STORES)
def counters(request: pytest.FixtureRequest) -> Counters:
    """The same tests run against the in-memory fake, the SQLite store and DynamoDB."""
    cloud = on_runs_table(BudgetCountersRepository)
    return under_contract(request, InMemoryBudgetCounters, SqliteBudgetCounters, cloud)


def test_reservations_are_granted_while_they_fit_and_refused_past_the_limit(
    counters: Counters,
) -> None:
    # Given a limit of 10 and reservations of 4
    granted = [counters.reserve(KEY, 4, 10) for _ in range(3)]

    # Then two fit, the third would pass the limit and changes nothing
    assert granted == [True, True, False]
    assert counters.spent(KEY) == 8


def test_a_reservation_larger_than_the_limit_is_refused_on_a_fresh_key(counters: Counters) -> None:
    assert counters.reserve(KEY, 11, 10) is False
    assert counters.spent(KEY) == 0


def test_settling_replaces_a_reservation_by_the_cost(counters: Counters) -> None:
    # Given a reservation of 6 for a call that cost 2
    assert counters.reserve(KEY, 6, 10)
    counters.settle(KEY, 2 - 6)

    # Then the counter holds the cost, and what it gave back is free again
    assert counters.spent(KEY) == 2
    assert counters.reserve(KEY, 8, 10)


def test_keys_are_apart(counters: Counters) -> None:
    assert counters.reserve(KEY, 10, 10)
    assert counters.reserve("refunds/day/2026-11-28", 10, 10)
    assert counters.spent("other/day/2026-11-27") == 0


def test_20_concurrent_reservations_never_pass_the_limit(counters: Counters) -> None:
    # Given 20 runs reserving one call's estimate (1,000) each against a limit of 10,500
    # When they reserve at once
    results = at_once([lambda: counters.reserve(KEY, 1_000, 10_500)] * 20)

    # Then exactly the ten that fit were granted: the day overspends by nothing (at most one
    # call's cost past its estimate, once the calls settle)
    assert results.count(True) == 10
    assert counters.spent(KEY) == 10_000 <= 10_500
