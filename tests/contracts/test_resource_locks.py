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
from langorch.domain.resources import QueueFullError
from tests.fakes import InMemoryResourceLocks
from tests.support.stores import STORES, under_contract

NOW, LEASE, WAIT = 1_741_078_800.0, 300.0, 60.0

Locks = ResourceLocksRepository | InMemoryResourceLocks | SqliteResourceLocks


CAP = 5
"""The queue cap every store is built with here (``LANGORCH_RESOURCE_QUEUE_CAP``)."""


@pytest.fixture(params=STORES)
def locks(request: pytest.FixtureRequest) -> Locks:
    """The same tests run against the in-memory fake, the SQLite store and the DynamoDB
    adapter."""
    return under_contract(
        request,
        lambda: InMemoryResourceLocks(max_waiters=CAP),
        lambda db: SqliteResourceLocks(db, max_waiters=CAP),
        _on_dynamodb,
    )


@pytest.fixture
def dynamo_locks(dynamodb: Any) -> ResourceLocksRepository:
    return _on_dynamodb(dynamodb)


def _on_dynamodb(client: Any) -> ResourceLocksRepository:
    RunsRepository(client, "runs").create_table()
    return ResourceLocksRepository(client, "runs", max_waiters=CAP)


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


def test_waiters_queue_by_priority_then_arrival_and_keep_it_when_stored(locks: Locks) -> None:
    # Given one lease held and waiters of priority 0, 3, 0 queued
    take(locks, "r", "run-a/step")
    for holder, priority in (("run-b/step", 0), ("run-c/step", 3), ("run-d/step", 0)):
        locks.acquire(
            "r", holder, now=NOW, lease_seconds=LEASE, wait_seconds=WAIT, priority=priority
        )
    # When another of priority 3 arrives, and the first lease is given back
    grant = locks.acquire(
        "r", "run-e/step", now=NOW, lease_seconds=LEASE, wait_seconds=WAIT, priority=3
    )
    locks.release("r", "run-a/step")
    # Then it waited second, and the queue read back is by priority, then arrival
    assert grant.position == 2
    state = locks.get("r")
    assert [(w.holder, w.priority) for w in state.queue] == [
        ("run-c/step", 3),
        ("run-e/step", 3),
        ("run-b/step", 0),
        ("run-d/step", 0),
    ]
    assert take(locks, "r", "run-c/step").acquired


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
    # Given a resource of limit 2 (and a queue cap of 6) and 8 steps asking for it at once
    locks = type(locks)(*_same_store(locks), max_waiters=6)  # type: ignore[call-arg]
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


def _same_store(locks: Locks) -> tuple[Any, ...]:
    """The arguments that build another ``locks`` on the same storage (with another cap)."""
    if isinstance(locks, InMemoryResourceLocks):
        return ()
    if isinstance(locks, SqliteResourceLocks):
        return (locks._db,)
    return (locks._client, locks._table)


def test_a_full_queue_refuses_a_newcomer_with_the_cap_and_the_way_out(locks: Locks) -> None:
    # Given a resource held, with CAP waiters queued behind it
    for n in range(CAP + 1):
        take(locks, "r", f"run-{n}/step")
    # When one more asks
    with pytest.raises(QueueFullError, match=r"5 runs or steps already wait") as refused:
        take(locks, "r", "run-late/step")
    # Then it is refused (not queued), the message names the setting, and the queue is unchanged
    assert "LANGORCH_RESOURCE_QUEUE_CAP" in str(refused.value)
    assert [w.holder for w in locks.get("r").queue] == [f"run-{n}/step" for n in range(1, CAP + 1)]
    # And a waiter already queued still asks again without being refused
    assert take(locks, "r", "run-3/step").position == 3


def test_a_full_queue_takes_a_newcomer_again_once_a_waiter_leaves(locks: Locks) -> None:
    for n in range(CAP + 1):
        take(locks, "r", f"run-{n}/step")
    locks.release("r", "run-2/step")
    assert take(locks, "r", "run-late/step").position == CAP


def test_waiters_keep_arrival_order_through_parks_releases_and_a_requeue(locks: Locks) -> None:
    # Given a holder and three waiters, the second parked with its token
    for n in "abcd":
        take(locks, "r", f"run-{n}/step")
    locks.park("r", "run-c/step", "tok-c", now=NOW, wait_seconds=WAIT)
    # When the first waiter's place expires and it asks again later, after the others refreshed
    later = NOW + WAIT + 1
    take(locks, "r", "run-a/step", now=later)  # the holder refreshes its lease
    locks.park("r", "run-c/step", "tok-c", now=later, wait_seconds=WAIT)
    take(locks, "r", "run-d/step", now=later)
    take(locks, "r", "run-b/step", now=later)
    # Then it stands at the back, behind those who kept asking, and tokens are kept
    queue = locks.get("r").live(later).queue
    assert [(w.holder, w.token) for w in queue] == [
        ("run-c/step", "tok-c"),
        ("run-d/step", None),
        ("run-b/step", None),
    ]


def test_dynamodb_keeps_each_waiter_in_its_own_item_and_the_holders_in_the_resource(
    dynamo_locks: ResourceLocksRepository, dynamodb: Any
) -> None:
    # Given a held resource with CAP parked waiters, each with a 1 KB task token
    take(dynamo_locks, "r", "run-holder/step")
    for n in range(CAP):
        take(dynamo_locks, "r", f"run-{n}/step")
        dynamo_locks.park("r", f"run-{n}/step", f"{n}" * 1024, now=NOW, wait_seconds=WAIT)
    # When the holder releases
    dynamo_locks.release("r", "run-holder/step")
    # Then the resource item holds the holder set and counters, no queue and no token
    resource = dynamodb.get_item(TableName="runs", Key={"pk": {"S": "resource"}, "sk": {"S": "r"}})
    assert "queue" not in resource["Item"] and "token" not in str(resource["Item"])
    assert resource["Item"]["waiters"] == {"N": str(CAP)}
    # And each waiter is one item, keyed by its arrival, in order, with its token
    items = dynamodb.query(
        TableName="runs",
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": "resource-queue#r"}},
    )["Items"]
    assert [i["holder"]["S"] for i in items] == [f"run-{n}/step" for n in range(CAP)]
    assert [i["sk"]["S"] for i in items] == sorted(i["sk"]["S"] for i in items)
    assert items[0]["token"]["S"] == "0" * 1024


def test_dynamodb_moves_a_queue_stored_by_an_older_langorch_into_items(
    dynamo_locks: ResourceLocksRepository, dynamodb: Any
) -> None:
    # Given a resource item written by an older langorch: the queue as one JSON attribute
    dynamodb.put_item(
        TableName="runs",
        Item={
            "pk": {"S": "resource"},
            "sk": {"S": "r"},
            "version": {"N": "3"},
            "grants": {"N": "1"},
            "leases": {"S": '{"run-a/step": %r}' % (NOW + LEASE)},
            "queue": {"S": '[["run-b/step", %r, "tok-b"]]' % (NOW + WAIT)},
        },
    )
    # When a newcomer queues
    assert take(dynamo_locks, "r", "run-c/step").position == 2
    # Then the old waiter keeps its place, now in an item of its own, and the attribute is gone
    assert [(w.holder, w.token) for w in dynamo_locks.get("r").queue] == [
        ("run-b/step", "tok-b"),
        ("run-c/step", None),
    ]
    resource = dynamodb.get_item(TableName="runs", Key={"pk": {"S": "resource"}, "sk": {"S": "r"}})
    assert "queue" not in resource["Item"]


def test_reservations_space_starts_to_the_limit_per_period_in_arrival_order(locks: Locks) -> None:
    # Given a throttle of 3 starts per 60 s
    # When 10 starts reserve at once
    due = [
        locks.reserve("throttle:w", f"run-{n}:throttle", now=NOW, limit=3, period=60)
        for n in range(10)
    ]
    # Then 3 may start now and the others are spaced a period apart, 3 at a time, in order
    assert [d - NOW for d in due] == [0, 0, 0, 60, 60, 60, 120, 120, 120, 180]
    # And the resource keeps only the newest 3 reservations (the ones a later start depends on)
    assert len(locks.get("throttle:w").leases) == 3


def test_a_repeated_reservation_keeps_its_slot(locks: Locks) -> None:
    for n in range(4):
        locks.reserve("throttle:w", f"run-{n}:throttle", now=NOW, limit=3, period=60)
    again = locks.reserve("throttle:w", "run-3:throttle", now=NOW + 5, limit=3, period=60)
    assert again == NOW + 60


def test_concurrent_reservations_never_put_more_than_the_limit_in_a_period(locks: Locks) -> None:
    # Given 8 starts reserving at once under 2 per 60 s
    start = threading.Barrier(8)
    due: dict[str, float] = {}

    def ask(holder: str) -> None:
        start.wait()
        due[holder] = locks.reserve("throttle:w", holder, now=NOW, limit=2, period=60)

    threads = [threading.Thread(target=ask, args=(f"run-{n}:throttle",)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    # Then they got 4 windows of 2 starts each
    assert sorted(d - NOW for d in due.values()) == [0, 0, 60, 60, 120, 120, 180, 180]
