"""Resource lock rules (seed 001 §7b), pure: FIFO grants, expiry, release, step validation."""

from __future__ import annotations

from langorch.domain.resources import (
    ResourceState,
    acquire,
    check_step_resource,
    holders_of_run,
    park,
    release,
    tokens_to_wake,
)

LEASE, WAIT = 100.0, 60.0


def take(state: ResourceState, holder: str, now: float = 0.0) -> tuple[ResourceState, bool, int]:
    state, grant = acquire(state, holder, now=now, lease_seconds=LEASE, wait_seconds=WAIT)
    return state, grant.acquired, grant.position


def test_an_undeclared_resource_grants_one_lease_and_queues_the_rest_in_order() -> None:
    state = ResourceState(name="browser:session-1")
    state, a, _ = take(state, "run-a/s")
    state, b, b_pos = take(state, "run-b/s")
    state, c, c_pos = take(state, "run-c/s")
    assert (a, b, c) == (True, False, False)
    assert (b_pos, c_pos) == (1, 2)
    assert [w.holder for w in state.queue] == ["run-b/s", "run-c/s"]


def test_a_freed_slot_goes_to_the_first_waiter_not_to_whoever_asks_first() -> None:
    # Given a holds the lease, b then c queue
    state = ResourceState(name="r")
    for holder in ("run-a/s", "run-b/s", "run-c/s"):
        state, _, _ = take(state, holder)
    # When a releases and c asks before b
    state, _ = release(state, "run-a/s")
    state, c, c_pos = take(state, "run-c/s")
    state, b, _ = take(state, "run-b/s")
    # Then c stays queued behind b, and b gets the lease
    assert (c, c_pos, b) == (False, 2, True)
    assert list(state.leases) == ["run-b/s"]
    assert state.grants == 2


def test_a_newcomer_queues_behind_waiters_even_when_a_slot_is_free() -> None:
    state = ResourceState(name="r", limit=1)
    state, _, _ = take(state, "run-a/s")
    state, _, _ = take(state, "run-b/s")
    state, _ = release(state, "run-a/s")
    state, newcomer, position = take(state, "run-z/s")
    assert (newcomer, position) == (False, 2)


def test_a_limit_of_two_grants_two_leases() -> None:
    state = ResourceState(name="web:pool-a", limit=2, declared=True)
    state, a, _ = take(state, "run-a/s")
    state, b, _ = take(state, "run-b/s")
    state, c, position = take(state, "run-c/s")
    assert (a, b, c, position) == (True, True, False, 1)


def test_an_expired_lease_is_reclaimed_by_the_next_acquirer() -> None:
    # Given a holder that took the lease and died
    state, _, _ = take(ResourceState(name="r"), "run-dead/s", now=0.0)
    # When another asks after the lease expired
    state, grant = acquire(state, "run-b/s", now=LEASE + 1, lease_seconds=LEASE, wait_seconds=WAIT)
    # Then it gets the lease and the dead holder's is gone
    assert grant.acquired and grant.reclaimed == ("run-dead/s",)
    assert list(state.leases) == ["run-b/s"]


def test_a_waiter_that_stopped_asking_leaves_the_queue() -> None:
    state, _, _ = take(ResourceState(name="r"), "run-a/s", now=0.0)
    state, _, _ = take(state, "run-gone/s", now=0.0)
    state, _, position = take(state, "run-c/s", now=WAIT + 1)
    assert position == 1
    assert [w.holder for w in state.queue] == ["run-c/s"]


def test_a_holder_asking_again_keeps_and_refreshes_its_lease() -> None:
    state, _, _ = take(ResourceState(name="r"), "run-a/s", now=0.0)
    state, again, _ = take(state, "run-a/s", now=50.0)
    assert again and state.leases["run-a/s"] == 150.0 and state.grants == 1


def test_release_of_nothing_changes_nothing_and_says_so() -> None:
    state = ResourceState(name="r")
    assert release(state, "run-a/s") == (state, False)


def test_a_runs_holders_are_found_among_leases_and_waiters() -> None:
    state = ResourceState(name="r", limit=1)
    for holder in ("run-a/one", "run-b/s", "run-a/two"):
        state, _, _ = take(state, holder)
    assert holders_of_run(state, "run-a") == ["run-a/one", "run-a/two"]


def test_a_step_resource_must_be_a_literal_name_with_a_path_and_hint() -> None:
    [problem] = check_step_resource("browser:{{ session }}", "action", False, "steps[1]")
    assert problem.path == "steps[1].resource"
    assert "not a resource name" in problem.message and "literal" in problem.hint


def test_a_parking_step_cannot_hold_a_resource() -> None:
    [problem] = check_step_resource("browser:session-1", "wait", True, "steps[0]")
    assert problem.path == "steps[0].resource" and "cannot hold a resource" in problem.message


def test_a_good_resource_name_has_no_problem() -> None:
    assert check_step_resource("desktop:vm-01:session-1", "action", False, "steps[0]") == []


def test_a_parked_waiter_keeps_its_token_and_is_woken_when_its_turn_comes() -> None:
    # Given a holds the lease, b and c queued and parked on their task tokens
    state = ResourceState(name="r")
    for holder in ("run-a/s", "run-b/s", "run-c/s"):
        state, _, _ = take(state, holder)
    state, b_turn = park(state, "run-b/s", "tok-b", now=0.0, wait_seconds=WAIT)
    state, c_turn = park(state, "run-c/s", "tok-c", now=0.0, wait_seconds=WAIT)
    assert (b_turn, c_turn) == (False, False)
    assert tokens_to_wake(state, 0.0) == []
    # When a releases, b (first in line) is the one to wake
    state, _ = release(state, "run-a/s")
    assert tokens_to_wake(state, 0.0) == ["tok-b"]


def test_a_waiter_that_parks_after_its_turn_came_is_told_so() -> None:
    state = ResourceState(name="r")
    state, _, _ = take(state, "run-a/s")
    state, _, _ = take(state, "run-b/s")
    state, _ = release(state, "run-a/s")
    state, turn = park(state, "run-b/s", "tok-b", now=0.0, wait_seconds=WAIT)
    assert turn is True


def test_a_higher_priority_waiter_queues_ahead_of_lower_ones_and_behind_its_equals() -> None:
    # Given one lease held and waiters of priority 0, 5, 0
    state = take(ResourceState(name="r"), "run-a/s")[0]
    for holder, priority in (("b/s", 0), ("c/s", 5), ("d/s", 0)):
        state = acquire(
            state, holder, now=0, lease_seconds=LEASE, wait_seconds=WAIT, priority=priority
        )[0]
    # When another of priority 5 arrives
    state, grant = acquire(state, "e/s", now=0, lease_seconds=LEASE, wait_seconds=WAIT, priority=5)
    # Then it waits second: behind the earlier 5, ahead of both 0s
    assert grant.position == 2
    assert [w.holder for w in state.queue] == ["c/s", "e/s", "b/s", "d/s"]


def test_a_waiter_queued_ahead_of_stored_ones_is_one_write_under_a_key_that_sorts_there() -> None:
    from langorch.domain.resources import Waiter, queue_changes, waiter_key

    # Given two waiters of priority 0 stored under their keys
    low = [Waiter("b/s", 60.0), Waiter("c/s", 60.0)]
    stored = [(waiter_key(0, 1), low[0]), (waiter_key(0, 2), low[1])]
    # When one of priority 3 queues ahead of them
    high = Waiter("d/s", 60.0, priority=3)
    changes = queue_changes(stored, [high, *low], arrivals=2)
    # Then only it is written, under a key sorting before theirs; nothing moves
    assert changes.delete == () and [w for _, w in changes.put] == [high]
    assert changes.put[0][0] < stored[0][0] and changes.arrivals == 3
