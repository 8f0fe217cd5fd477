"""Contract of the resource locks (``ResourceLocks``): the DynamoDB adapter on moto, the local
SQLite store and the in-memory fake pass the same tests — default limit, FIFO queue, expiry,
release, declared limits, and no more leases than the limit under concurrent acquires."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from langorch.adapters.dynamodb.resources import ResourceLocksRepository
from langorch.adapters.dynamodb.runs import RunsRepository
from langorch.adapters.sqlite.resources import SqliteResourceLocks
from tests.fakes import InMemoryResourceLocks

NOW, LEASE, WAIT = 1_741_078_800.0, 300.0, 60.0

Locks = ResourceLocksRepository | InMemoryResourceLocks | SqliteResourceLocks


@pytest.fixture(params=["fake", "sqlite", "dynamodb"])
def locks(request: pytest.FixtureRequest) -> Locks:
    """The same tests run against the in-memory fake, the SQLite store and the DynamoDB
    adapter."""
    if request.param == "fake":
        return InMemoryResourceLocks()
    if request.param == "sqlite":
        return SqliteResourceLocks(request.getfixturevalue("sqlite_db"))
    return request.getfixturevalue("dynamo_locks")  # type: ignore[no-any-return]


@pytest.fixture
def dynamo_locks(dynamodb: Any) -> ResourceLocksRepository:
    RunsRepository(dynamodb, "runs").create_table()
    return ResourceLocksRepository(dynamodb, "runs")


def take(locks: Locks, name: str, holder: str, now: float = NOW) -> Any:
    return locks.acquire(name, holder, now=now, lease_seconds=LEASE, wait_seconds=WAIT)


def test_an_undeclared_resource_has_limit_one_and_queues_in_arrival_order(locks: Locks) -> None:
    grants = [take(locks, "browser:s1", f"run-{n}/step") for n in "abc"]
    assert [(g.acquired, g.position) for g in grants] == [(True, 0), (False, 1), (False, 2)]
    state = locks.get("browser:s1")
    assert (state.limit, state.declared) == (1, False)
    assert [w.holder for w in state.queue] == ["run-b/step", "run-c/step"]


def test_a_released_lease_goes_to_the_first_in_line(locks: Locks) -> None:
    for n in "abc":
        take(locks, "r", f"run-{n}/step")
    assert locks.release("r", "run-a/step") is True
    assert take(locks, "r", "run-c/step").position == 2
    assert take(locks, "r", "run-b/step").acquired
    assert locks.release("r", "run-a/step") is False


def test_an_expired_lease_is_reclaimed(locks: Locks) -> None:
    take(locks, "r", "run-dead/step")
    grant = take(locks, "r", "run-b/step", now=NOW + LEASE + 1)
    assert grant.acquired and grant.reclaimed == ("run-dead/step",)
    assert list(locks.get("r").leases) == ["run-b/step"]


def test_a_declared_limit_is_kept_with_the_leases_and_listed(locks: Locks) -> None:
    take(locks, "web:pool-a", "run-a/step")
    locks.set_limit("web:pool-a", 2)
    locks.set_limit("desktop:vm-01", 1)
    assert take(locks, "web:pool-a", "run-b/step").acquired
    listed = {s.name: s for s in locks.list()}
    assert sorted(listed) == ["desktop:vm-01", "web:pool-a"]
    assert (listed["web:pool-a"].limit, listed["web:pool-a"].declared) == (2, True)
    assert sorted(listed["web:pool-a"].leases) == ["run-a/step", "run-b/step"]


def test_a_bad_limit_or_name_is_refused(locks: Locks) -> None:
    with pytest.raises(ValueError, match="1 to 1000"):
        locks.set_limit("r", 0)
    with pytest.raises(ValueError, match="not a resource name"):
        locks.set_limit("bad name", 1)


def test_release_run_gives_back_every_lease_and_place_of_the_run(locks: Locks) -> None:
    take(locks, "one", "run-a/x")
    take(locks, "one", "run-b/x")
    take(locks, "two", "run-b/y")
    take(locks, "two", "run-c/y")
    assert locks.release_run("run-b") == ["one", "two"]
    assert [w.holder for w in locks.get("one").queue] == []
    assert list(locks.get("two").leases) == []
    assert take(locks, "two", "run-c/y").acquired


def test_concurrent_acquires_never_grant_more_than_the_limit(locks: Locks) -> None:
    # Given a resource of limit 2 and 8 steps asking for it at the same moment
    locks.set_limit("web:pool-a", 2)
    start = threading.Barrier(8)
    grants: dict[str, Any] = {}

    def ask(holder: str) -> None:
        start.wait()
        grants[holder] = take(locks, "web:pool-a", holder)

    threads = [threading.Thread(target=ask, args=(f"run-{n}/step",)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    # Then exactly 2 hold it, and the 6 others have the distinct places 1..6 of the queue
    held = sorted(h for h, g in grants.items() if g.acquired)
    assert len(held) == 2 and sorted(locks.get("web:pool-a").leases) == held
    assert sorted(g.position for g in grants.values() if not g.acquired) == [1, 2, 3, 4, 5, 6]
    queue = [w.holder for w in locks.get("web:pool-a").queue]
    assert sorted(queue) == sorted(h for h, g in grants.items() if not g.acquired)
    assert [grants[h].position for h in queue] == [1, 2, 3, 4, 5, 6]


def test_a_parked_token_is_kept_with_the_place_and_its_turn_is_told(locks: Locks) -> None:
    take(locks, "r", "run-a/step")
    take(locks, "r", "run-b/step")
    assert locks.park("r", "run-b/step", "tok-b", now=NOW, wait_seconds=WAIT) is False
    assert [(w.holder, w.token) for w in locks.get("r").queue] == [("run-b/step", "tok-b")]
    locks.release("r", "run-a/step")
    assert locks.park("r", "run-b/step", "tok-b2", now=NOW, wait_seconds=WAIT) is True
