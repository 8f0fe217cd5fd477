"""Contract of the runs store (``RunsStore``): the DynamoDB adapter on moto, the local SQLite
store and the in-memory fake pass the same tests — idempotent starts, one writer per run (lease
fencing, across threads and across processes), refused status changes, timelines, listings, and
a listing that survives an unreadable record. Tests of the table's own layout run on DynamoDB
only."""

from __future__ import annotations

import json
import logging
import multiprocessing
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from langorch.adapters.dynamodb.runs import EVENT_PAGE_BYTES, RunsRepository
from langorch.adapters.request_counter import RequestCounter
from langorch.adapters.sqlite._db import Database
from langorch.adapters.sqlite.runs import SqliteRuns
from langorch.domain.errors import (
    ConflictError,
    LeaseHeldError,
    NotFoundError,
    UnreadableRecordError,
)
from langorch.domain.runs import (
    ForkLink,
    PauseRequest,
    Redrive,
    RunRecord,
    RunStatus,
    RunTrigger,
    TimelineEvent,
    TimelineEventType,
    current_execution,
    dedupe_run_id,
    reopened,
    transition,
)
from tests.fakes import InMemoryRuns
from tests.support.sqlite_processes import race_for_leases
from tests.support.stores import STORES, runs_on_dynamodb, under_contract

T0 = datetime(2025, 3, 4, 9, 0, tzinfo=UTC)
NOW = 1_741_078_800.0  # T0 in epoch seconds: the lease clock
TTL = 720.0


Runs = RunsRepository | InMemoryRuns | SqliteRuns


@pytest.fixture(params=STORES)
def repo(request: pytest.FixtureRequest) -> Runs:
    """The same tests run against the in-memory fake, the SQLite store and the DynamoDB
    adapter."""
    return under_contract(request, InMemoryRuns, SqliteRuns, runs_on_dynamodb)


@pytest.fixture
def dynamo_repo(dynamodb: Any) -> RunsRepository:
    return runs_on_dynamodb(dynamodb)  # type: ignore[no-any-return]


def a_run(
    run_id: str = "run-1",
    *,
    workflow_id: str = "lunch_order",
    created_at: datetime = T0,
    dedupe_key: str | None = None,
    **fields: Any,
) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        workflow_id=workflow_id,
        workflow_version=1,
        trigger=RunTrigger(type="webhook", detail={"delivery": dedupe_key}),
        dedupe_key=dedupe_key,
        created_at=created_at,
        updated_at=created_at,
        **fields,
    )


def event(seq: int, type_: TimelineEventType = TimelineEventType.step_finished) -> TimelineEvent:
    return TimelineEvent(seq=seq, at=T0 + timedelta(seconds=seq), type=type_, step_id=f"s{seq}")


# --- idempotent create ---------------------------------------------------------------------


def test_the_same_dedupe_key_twice_makes_one_run(repo: Runs) -> None:
    # Given a webhook delivery that started a run
    key = "webhook:lunch_order:delivery-42"
    first, created = repo.create_run(a_run(dedupe_run_id(key), dedupe_key=key, input={"n": 1}))
    assert created
    # When the same delivery arrives again (at-least-once), carrying a different body
    again, created_again = repo.create_run(
        a_run(dedupe_run_id(key), dedupe_key=key, input={"n": 2})
    )
    # Then nothing new is stored and the existing run comes back
    assert not created_again
    assert again == first
    assert [r.run_id for r in repo.list_runs()] == [first.run_id]


def test_a_dedupe_key_already_used_by_another_run_id_returns_that_run(
    repo: Runs,
) -> None:
    # Given a run started with a dedupe key
    repo.create_run(a_run("run-a", dedupe_key="k"))
    # When another start brings the same key under a different run id
    existing, created = repo.create_run(a_run("run-b", dedupe_key="k"))
    # Then the dedupe marker wins: the first run comes back and no second run exists
    assert (existing.run_id, created) == ("run-a", False)
    with pytest.raises(NotFoundError):
        repo.get_run("run-b")


@pytest.mark.parametrize("derived", [True, False], ids=["derived-id", "own-id"])
def test_concurrent_starts_of_one_dedupe_key_make_one_run(repo: Runs, derived: bool) -> None:
    # Given eight deliveries of one event arriving at once (the same run id when it is derived
    # from the key, as every start in the app makes it; else each its own)
    key = "webhook:lunch_order:delivery-7"
    outcomes: list[tuple[str, bool]] = []

    def start(n: int) -> None:
        run_id = dedupe_run_id(key) if derived else f"run-{n}"
        stored, created = repo.create_run(a_run(run_id, dedupe_key=key))
        outcomes.append((stored.run_id, created))

    threads = [threading.Thread(target=start, args=(n,)) for n in range(8)]
    # When they all store their run
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then exactly one created it, every one got that run back, and only it is stored
    assert sum(created for _, created in outcomes) == 1
    assert len({run_id for run_id, _ in outcomes}) == 1
    assert [r.run_id for r in repo.list_runs()] == [outcomes[0][0]]


def test_a_retried_manual_start_with_the_same_run_id_makes_one_run(repo: Runs) -> None:
    first, _ = repo.create_run(a_run("run-m"))
    existing, created = repo.create_run(a_run("run-m", input={"other": True}))
    assert (existing, created) == (first, False)


def test_a_run_reads_back_as_stored(repo: Runs) -> None:
    run = a_run(input={"budget": 12.5, "items": ["soup"]}, user_id="ana@example.com")
    repo.create_run(run)
    assert repo.get_run("run-1") == run


def test_an_unknown_run_is_not_found(repo: Runs) -> None:
    with pytest.raises(NotFoundError, match="run-nope"):
        repo.get_run("run-nope")


# --- leases --------------------------------------------------------------------------------


def test_a_second_segment_is_refused_while_the_first_holds_the_lease(
    repo: Runs,
) -> None:
    # Given a segment holding the run's lease
    repo.create_run(a_run())
    assert repo.acquire_lease("run-1", "segment-a", now=NOW, ttl_seconds=TTL) == 1
    # When a second segment tries a minute later, then it is told who holds it
    with pytest.raises(LeaseHeldError, match="segment-a"):
        repo.acquire_lease("run-1", "segment-b", now=NOW + 60, ttl_seconds=TTL)


def test_an_expired_lease_is_taken_over_with_a_higher_fence(repo: Runs) -> None:
    # Given a segment that took the lease and crashed
    repo.create_run(a_run())
    old_fence = repo.acquire_lease("run-1", "crashed", now=NOW, ttl_seconds=TTL)
    # When another segment comes after the lease expired
    new_fence = repo.acquire_lease("run-1", "next", now=NOW + TTL + 1, ttl_seconds=TTL)
    # Then it gets the lease with a fence above the old one
    assert new_fence > old_fence


def test_the_same_owner_takes_its_lease_again_with_a_higher_fence(repo: Runs) -> None:
    # Given a segment attempt that took the lease and died (its process crashed)
    repo.create_run(a_run())
    dead = repo.acquire_lease("run-1", "exec-1/entered-1", now=NOW, ttl_seconds=TTL)
    # When the state machine's retry of that same segment comes, well within the lease
    retry = repo.acquire_lease("run-1", "exec-1/entered-1", now=NOW + 5, ttl_seconds=TTL)
    # Then it takes the lease, fencing the dead attempt out; any other owner is still refused
    assert retry > dead
    with pytest.raises(LeaseHeldError, match="exec-1/entered-1"):
        repo.acquire_lease("run-1", "exec-1/entered-2", now=NOW + 6, ttl_seconds=TTL)


def test_a_stale_segment_cannot_overwrite_the_run(repo: Runs) -> None:
    # Given a slow segment whose lease expired and was taken over
    run = repo.create_run(a_run())[0]
    stale = repo.acquire_lease("run-1", "slow", now=NOW, ttl_seconds=TTL)
    current = repo.acquire_lease("run-1", "fresh", now=NOW + TTL + 1, ttl_seconds=TTL)
    repo.save_run(transition(run, RunStatus.running, now=T0), fence=current)
    # When the slow segment writes its result
    late = transition(transition(run, RunStatus.running, now=T0), RunStatus.succeeded, now=T0)
    with pytest.raises(LeaseHeldError, match="stale"):
        repo.save_run(late, fence=stale)
    # Then the run keeps what the current segment wrote
    assert repo.get_run("run-1").status is RunStatus.running


def test_the_lease_holder_saves_the_run(repo: Runs) -> None:
    run = repo.create_run(a_run())[0]
    fence = repo.acquire_lease("run-1", "seg", now=NOW, ttl_seconds=TTL)
    done = transition(transition(run, RunStatus.running, now=T0), RunStatus.succeeded, now=T0)
    repo.save_run(done.model_copy(update={"outputs": {"order": "UE-1"}}), fence=fence)
    assert repo.get_run("run-1").outputs == {"order": "UE-1"}


def test_taking_the_lease_can_store_the_running_run_in_the_same_write(repo: Runs) -> None:
    # Given a queued run, and one whose lease another segment holds
    run = repo.create_run(a_run())[0]
    repo.create_run(a_run("run-2"))
    repo.acquire_lease("run-2", "other", now=NOW, ttl_seconds=TTL)
    # When a segment takes the lease and saves the run as running in one call
    running = transition(run, RunStatus.running, now=T0)
    fence = repo.acquire_lease("run-1", "seg", now=NOW, ttl_seconds=TTL, saving=running)
    # Then it holds the lease and the run reads running
    assert repo.get_run("run-1").status is RunStatus.running
    with pytest.raises(LeaseHeldError, match="seg"):
        repo.acquire_lease("run-1", "other", now=NOW + 1, ttl_seconds=TTL)
    # And the last save gives the lease back in the same write
    done = transition(running, RunStatus.succeeded, now=T0)
    repo.save_run(done, fence=fence, release=True)
    assert repo.get_run("run-1").status is RunStatus.succeeded
    assert repo.acquire_lease("run-1", "next", now=NOW + 2, ttl_seconds=TTL) == fence + 1
    # And a held lease refuses the combined write without storing anything
    held = transition(repo.get_run("run-2"), RunStatus.running, now=T0)
    with pytest.raises(LeaseHeldError, match="other"):
        repo.acquire_lease("run-2", "seg", now=NOW + 1, ttl_seconds=TTL, saving=held)
    assert repo.get_run("run-2").status is RunStatus.queued


def test_taking_the_lease_never_revives_an_ended_run(repo: Runs) -> None:
    # Given a run cancelled by an operator (no lease held)
    run = repo.create_run(a_run())[0]
    repo.save_run(transition(run, RunStatus.cancelled, now=T0, reason="operator"))
    # When a late segment takes the lease saving it as running
    running = transition(run, RunStatus.running, now=T0)
    with pytest.raises(ConflictError, match="cancelled"):
        repo.acquire_lease("run-1", "late", now=NOW, ttl_seconds=TTL, saving=running)
    # Then the run stays cancelled and no lease was taken
    assert repo.get_run("run-1").status is RunStatus.cancelled
    assert repo.acquire_lease("run-1", "next", now=NOW, ttl_seconds=TTL) == 1


def test_a_stale_fence_neither_saves_nor_releases(repo: Runs) -> None:
    # Given a lease taken over from an expired holder
    run = repo.create_run(a_run())[0]
    stale = repo.acquire_lease("run-1", "old", now=NOW, ttl_seconds=TTL)
    repo.acquire_lease("run-1", "new", now=NOW + TTL + 1, ttl_seconds=TTL)
    # When the old holder saves and releases, then it is refused and the new holder keeps it
    with pytest.raises(LeaseHeldError, match=f"fence {stale}"):
        repo.save_run(transition(run, RunStatus.running, now=T0), fence=stale, release=True)
    assert repo.get_run("run-1").status is RunStatus.queued
    with pytest.raises(LeaseHeldError, match="new"):
        repo.acquire_lease("run-1", "third", now=NOW + TTL + 2, ttl_seconds=TTL)


def test_a_released_lease_can_be_taken_at_once(repo: Runs) -> None:
    repo.create_run(a_run())
    fence = repo.acquire_lease("run-1", "a", now=NOW, ttl_seconds=TTL)
    assert repo.release_lease("run-1", fence)
    assert repo.acquire_lease("run-1", "b", now=NOW + 1, ttl_seconds=TTL) == fence + 1


def test_a_stale_fence_does_not_release_the_new_holders_lease(repo: Runs) -> None:
    # Given a lease taken over from an expired holder
    repo.create_run(a_run())
    stale = repo.acquire_lease("run-1", "old", now=NOW, ttl_seconds=TTL)
    repo.acquire_lease("run-1", "new", now=NOW + TTL + 1, ttl_seconds=TTL)
    # When the old holder releases, then nothing is released and the new holder keeps it
    assert not repo.release_lease("run-1", stale)
    with pytest.raises(LeaseHeldError, match="new"):
        repo.acquire_lease("run-1", "third", now=NOW + TTL + 2, ttl_seconds=TTL)


def test_a_renewed_lease_outlives_its_first_expiry(repo: Runs) -> None:
    repo.create_run(a_run())
    fence = repo.acquire_lease("run-1", "long", now=NOW, ttl_seconds=TTL)
    repo.renew_lease("run-1", fence, now=NOW + TTL - 1, ttl_seconds=TTL)
    with pytest.raises(LeaseHeldError):
        repo.acquire_lease("run-1", "other", now=NOW + TTL + 1, ttl_seconds=TTL)


def test_a_lease_on_an_unknown_run_is_not_found(repo: Runs) -> None:
    with pytest.raises(NotFoundError):
        repo.acquire_lease("run-ghost", "seg", now=NOW, ttl_seconds=TTL)


def race_for_lease(repo: Runs, run_id: str) -> tuple[list[int], list[Exception]]:
    """Two segments ask for the run's lease at the same instant."""
    barrier = threading.Barrier(2)
    won: list[int] = []
    refused: list[Exception] = []

    def take(owner: str) -> None:
        barrier.wait()
        try:
            won.append(repo.acquire_lease(run_id, owner, now=NOW, ttl_seconds=TTL))
        except LeaseHeldError as exc:
            refused.append(exc)

    threads = [threading.Thread(target=take, args=(f"seg-{i}",)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return won, refused


@pytest.mark.slow
@pytest.mark.parametrize("attempt", range(20))
def test_two_concurrent_segments_exactly_one_gets_the_lease(repo: Runs, attempt: int) -> None:
    # Given a queued run
    repo.create_run(a_run(f"run-{attempt}"))
    # When two segments race for its lease
    won, refused = race_for_lease(repo, f"run-{attempt}")
    # Then exactly one wins, with the first fence, and the other is refused
    assert (won, len(refused)) == ([1], 1)


@pytest.mark.slow
def test_processes_racing_on_one_sqlite_file_exactly_one_gets_each_lease(
    sqlite_db: Database,
) -> None:
    # Given ten queued runs in the local store's file
    runs = SqliteRuns(sqlite_db)
    run_ids = [f"run-{n}" for n in range(10)]
    for run_id in run_ids:
        runs.create_run(a_run(run_id))

    # When three processes (as the local stack's sandboxes are), each with its own connection
    # to the file, race for every run's lease at the same moment
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(3)
    results = context.Queue()
    racers = [
        context.Process(
            target=race_for_leases,
            args=(str(sqlite_db.path), run_ids, f"sandbox-{n}", start, results),
            kwargs={"now": NOW, "ttl_seconds": TTL},
        )
        for n in range(3)
    ]
    for racer in racers:
        racer.start()
    try:
        outcomes = [results.get(timeout=120) for _ in range(3 * len(run_ids))]
    finally:
        for racer in racers:
            racer.join(timeout=60)
            if racer.is_alive():  # only when the race broke: leave no process behind
                racer.kill()

    # Then each run's lease went to exactly one process, with the first fence, and it holds it
    winners = {run_id: [(o, f) for r, o, f in outcomes if r == run_id and f] for run_id in run_ids}
    assert {run_id: [f for _, f in won] for run_id, won in winners.items()} == {
        run_id: [1] for run_id in run_ids
    }
    for run_id, [(owner, _)] in winners.items():
        with pytest.raises(LeaseHeldError, match=owner):
            runs.acquire_lease(run_id, "late", now=NOW + 1, ttl_seconds=TTL)
    assert [racer.exitcode for racer in racers] == [0, 0, 0]


def test_the_fence_the_sqlite_checkpointer_reads_is_the_leases(sqlite_db: Database) -> None:
    # Given a run whose lease was taken twice (the first holder expired)
    runs = SqliteRuns(sqlite_db)
    runs.create_run(a_run())
    runs.acquire_lease("run-1", "old", now=NOW, ttl_seconds=TTL)
    fence = runs.acquire_lease("run-1", "new", now=NOW + TTL + 1, ttl_seconds=TTL)

    # When the local checkpointer reads the run's fence in its own transaction
    with sqlite_db.write() as connection:
        (stored,) = connection.execute(
            "SELECT fence FROM runs WHERE run_id = ?", ("run-1",)
        ).fetchone()

    # Then it is the current holder's
    assert stored == fence == 2


# --- writes without a lease ----------------------------------------------------------------


def test_a_late_segment_cannot_revive_a_cancelled_run(repo: Runs) -> None:
    # Given a running segment, and an operator who cancels the run meanwhile
    run = repo.create_run(a_run())[0]
    fence = repo.acquire_lease("run-1", "seg", now=NOW, ttl_seconds=TTL)
    running = transition(run, RunStatus.running, now=T0)
    repo.save_run(running, fence=fence)
    repo.save_run(transition(running, RunStatus.cancelled, now=T0, reason="operator"))
    # When the segment saves its next status, then the write is refused and the run stays cancelled
    with pytest.raises(ConflictError, match="already ended as cancelled"):
        repo.save_run(transition(running, RunStatus.succeeded, now=T0), fence=fence)
    assert repo.get_run("run-1").status is RunStatus.cancelled


def _handed_over(repo: Runs, run: RunRecord) -> RunRecord:
    """``run`` handed to its next execution (``run-1-c1``), written under the lease as the
    hand-over writes it."""
    fence = repo.acquire_lease(run.run_id, "run-1/continue", now=NOW, ttl_seconds=TTL)
    handed = run.model_copy(update={"continued": run.continued + 1})
    repo.save_run(handed, fence=fence)
    repo.release_lease(run.run_id, fence)
    return handed


def test_a_cancel_read_before_a_hand_over_cannot_write_back_the_execution_it_read(
    repo: Runs,
) -> None:
    # Given a run an operator's cancel read in its first execution (run-1)
    read = transition(repo.create_run(a_run())[0], RunStatus.running, now=T0)
    repo.save_run(read)
    # And a hand-over that named its next execution (run-1-c1) after that read
    _handed_over(repo, read)
    # When the cancel writes in the execution it read, then the write is refused, whole
    cancelled = transition(read, RunStatus.cancelled, now=T0, reason="operator")
    ended = event(5, TimelineEventType.run_cancelled)
    with pytest.raises(ConflictError, match="moved to execution run-1-c1"):
        repo.save_run(cancelled, events=[ended], in_execution=current_execution(read))
    # And the run still runs in the execution the hand-over named
    stored = repo.get_run("run-1")
    assert (stored.status, current_execution(stored)) == (RunStatus.running, "run-1-c1")
    assert repo.get_timeline("run-1") == []


def test_a_run_stored_before_the_execution_attribute_takes_a_cancel_in_its_execution(
    dynamo_repo: RunsRepository,
) -> None:
    # Given a run item written before items carried the execution they name
    read = transition(dynamo_repo.create_run(a_run())[0], RunStatus.running, now=T0)
    dynamo_repo.save_run(read)
    dynamo_repo._client.update_item(
        TableName="runs",
        Key={"pk": {"S": "run#run-1"}, "sk": {"S": "run"}},
        UpdateExpression="REMOVE execution_name",
    )
    # When an operator's cancel writes in the execution it read
    cancelled = transition(read, RunStatus.cancelled, now=T0, reason="operator")
    dynamo_repo.save_run(cancelled, in_execution="run-1")
    # Then it is written (nothing moved the run since)
    assert dynamo_repo.get_run("run-1").status is RunStatus.cancelled


def test_a_cancel_in_the_execution_the_run_is_in_is_written(repo: Runs) -> None:
    # Given a run handed to its next execution, read there
    run = repo.create_run(a_run())[0]
    read = _handed_over(repo, transition(run, RunStatus.running, now=T0))
    # When an operator's cancel writes in that execution, with its timeline event
    cancelled = transition(read, RunStatus.cancelled, now=T0, reason="operator")
    ended = event(5, TimelineEventType.run_cancelled)
    repo.save_run(cancelled, events=[ended], in_execution="run-1-c1")
    # Then the run is cancelled there, and the timeline says so
    stored = repo.get_run("run-1")
    assert (stored.status, current_execution(stored)) == (RunStatus.cancelled, "run-1-c1")
    assert [e.type for e in repo.get_timeline("run-1")] == [TimelineEventType.run_cancelled]


def test_saving_the_same_ending_twice_is_allowed(repo: Runs) -> None:
    run = repo.create_run(a_run())[0]
    done = transition(transition(run, RunStatus.running, now=T0), RunStatus.succeeded, now=T0)
    repo.save_run(done)
    repo.save_run(done)
    assert repo.get_run("run-1").status is RunStatus.succeeded


def test_saving_an_unknown_run_is_not_found(repo: Runs) -> None:
    with pytest.raises(NotFoundError):
        repo.save_run(a_run("run-ghost"))


def test_outputs_too_large_for_an_item_are_kept_as_a_summary(repo: Runs) -> None:
    # Given a run that finished with outputs larger than a DynamoDB item
    run = repo.create_run(a_run())[0]
    huge = {"report": "x" * 500_000, "total": 3}
    done = transition(transition(run, RunStatus.running, now=T0), RunStatus.succeeded, now=T0)
    # When it is saved
    repo.save_run(done.model_copy(update={"outputs": huge}))
    # Then the record is stored with a short summary and says so
    stored = repo.get_run("run-1")
    assert stored.outputs_truncated
    assert stored.outputs["total"] == "3"
    assert len(stored.outputs["report"]) < 200


# --- timeline ------------------------------------------------------------------------------


def test_the_timeline_reads_back_in_seq_order_across_batches(repo: Runs) -> None:
    # Given a run whose segments wrote 60 events in two appends (more than one batch each)
    repo.create_run(a_run())
    repo.append_events("run-1", [event(n) for n in range(31, 61)])
    repo.append_events("run-1", [event(n) for n in range(1, 31)])
    # When the timeline is read, then it is in seq order, whatever order it was written in
    assert [e.seq for e in repo.get_timeline("run-1")] == list(range(1, 61))


def _event_items(repo: RunsRepository, run_id: str) -> list[dict[str, Any]]:
    items = repo._client.query(
        TableName="runs",
        KeyConditionExpression="pk = :pk AND begins_with(sk, :ev)",
        ExpressionAttributeValues={":pk": {"S": f"run#{run_id}"}, ":ev": {"S": "ev#"}},
    )["Items"]
    return list(items)


def test_a_segments_events_are_stored_in_one_item(dynamo_repo: RunsRepository) -> None:
    # Given a segment that ended with 60 events
    dynamo_repo.create_run(a_run())

    # When they are appended
    dynamo_repo.append_events("run-1", [event(n) for n in range(1, 61)])

    # Then they take one item (one write, a few write units) and all read back
    assert len(_event_items(dynamo_repo, "run-1")) == 1
    assert [e.seq for e in dynamo_repo.get_timeline("run-1")] == list(range(1, 61))
    assert dynamo_repo.next_event_seq("run-1") == 61


def test_events_past_a_pages_size_go_to_further_pages_and_read_back_in_order(
    dynamo_repo: RunsRepository,
) -> None:
    # Given 300 events of about 1 KB each (more than one page holds), under a fence
    dynamo_repo.create_run(a_run())
    fence = dynamo_repo.acquire_lease("run-1", "seg", now=NOW, ttl_seconds=TTL)
    big = [
        TimelineEvent(
            seq=n, at=T0, type=TimelineEventType.step_finished, detail={"note": "x" * 900}
        )
        for n in range(1, 301)
    ]

    # When they are appended
    dynamo_repo.append_events("run-1", big, fence=fence)

    # Then they span several items, each under the page size, and read back whole and in order
    items = _event_items(dynamo_repo, "run-1")
    assert len(items) > 1
    assert all(len(item["events"]["S"]) <= EVENT_PAGE_BYTES for item in items)
    assert dynamo_repo.get_timeline("run-1") == big
    assert dynamo_repo.next_event_seq("run-1") == 301


def test_events_stored_one_per_item_by_an_earlier_version_still_read_back(
    dynamo_repo: RunsRepository,
) -> None:
    # Given a run whose first events were stored one per item (the earlier layout)
    dynamo_repo.create_run(a_run())
    for n in (1, 2):
        dynamo_repo._client.put_item(
            TableName="runs",
            Item={
                "pk": {"S": "run#run-1"},
                "sk": {"S": f"ev#{n:015d}"},
                "seq": {"N": str(n)},
                "body": {"S": event(n).model_dump_json(exclude_none=True)},
            },
        )
    assert dynamo_repo.next_event_seq("run-1") == 3

    # When a later segment appends in pages
    dynamo_repo.append_events("run-1", [event(3), event(4)])

    # Then the timeline has both, in order
    assert [e.seq for e in dynamo_repo.get_timeline("run-1")] == [1, 2, 3, 4]
    assert dynamo_repo.next_event_seq("run-1") == 5


def test_the_timeline_orders_large_seq_numbers_numerically(repo: Runs) -> None:
    repo.create_run(a_run())
    repo.append_events("run-1", [event(9), event(1_000_001), event(12_000_001)])
    assert [e.seq for e in repo.get_timeline("run-1")] == [9, 1_000_001, 12_000_001]


def test_replaying_events_does_not_duplicate_them(repo: Runs) -> None:
    repo.create_run(a_run())
    repo.append_events("run-1", [event(1), event(2)])
    repo.append_events("run-1", [event(1), event(2)])
    assert len(repo.get_timeline("run-1")) == 2


def test_events_out_of_order_are_refused(repo: Runs) -> None:
    with pytest.raises(ValueError, match="increasing"):
        repo.append_events("run-1", [event(2), event(1)])


def test_the_next_seq_follows_the_last_event(repo: Runs) -> None:
    repo.create_run(a_run())
    assert repo.next_event_seq("run-1") == 1
    repo.append_events("run-1", [event(1), event(7)])
    assert repo.next_event_seq("run-1") == 8


def test_the_next_seq_follows_events_saved_with_the_record(repo: Runs) -> None:
    # Given a run whose segment saved its events with its record, after an earlier append
    run = transition(repo.create_run(a_run())[0], RunStatus.running, now=T0)
    repo.append_events("run-1", [event(1)])
    fence = repo.acquire_lease("run-1", "seg", now=NOW, ttl_seconds=TTL)
    repo.save_run(run, fence=fence, release=True, events=[event(1_000_001), event(1_000_002)])
    # When the next event is numbered, then it follows the saved ones
    assert repo.next_event_seq("run-1") == 1_000_003


def test_a_stale_segment_cannot_add_to_the_timeline(repo: Runs) -> None:
    # Given a segment whose lease was taken over
    repo.create_run(a_run())
    stale = repo.acquire_lease("run-1", "old", now=NOW, ttl_seconds=TTL)
    current = repo.acquire_lease("run-1", "new", now=NOW + TTL + 1, ttl_seconds=TTL)
    repo.append_events("run-1", [event(1)], fence=current)
    # When it appends with its old fence, then it is refused and the timeline is unchanged
    with pytest.raises(LeaseHeldError, match="stale"):
        repo.append_events("run-1", [event(2)], fence=stale)
    assert [e.seq for e in repo.get_timeline("run-1")] == [1]


def test_a_segments_last_write_stores_the_record_and_its_timeline_together(repo: Runs) -> None:
    # Given a segment holding the lease of a running run
    run = repo.create_run(a_run())[0]
    running = transition(run, RunStatus.running, now=T0)
    fence = repo.acquire_lease("run-1", "seg", now=NOW, ttl_seconds=TTL, saving=running)
    # When its last write ends the run, gives the lease back and adds its events
    done = transition(running, RunStatus.succeeded, now=T0)
    repo.save_run(done, fence=fence, release=True, events=[event(1), event(2)])
    # Then the record, the lease and the timeline all say so
    assert repo.get_run("run-1").status is RunStatus.succeeded
    assert [e.seq for e in repo.get_timeline("run-1")] == [1, 2]
    assert repo.acquire_lease("run-1", "next", now=NOW + 1, ttl_seconds=TTL) == fence + 1


def test_a_refused_last_write_stores_neither_record_nor_timeline(repo: Runs) -> None:
    # Given a segment whose lease was taken over
    run = repo.create_run(a_run())[0]
    stale = repo.acquire_lease("run-1", "old", now=NOW, ttl_seconds=TTL)
    repo.acquire_lease("run-1", "new", now=NOW + TTL + 1, ttl_seconds=TTL)
    # When it writes its record and its events with its old fence
    done = transition(transition(run, RunStatus.running, now=T0), RunStatus.succeeded, now=T0)
    with pytest.raises(LeaseHeldError, match="stale"):
        repo.save_run(done, fence=stale, release=True, events=[event(1)])
    # Then neither landed
    assert repo.get_run("run-1").status is RunStatus.queued
    assert repo.get_timeline("run-1") == []


def test_a_start_is_one_conditional_put_and_never_a_transaction(
    dynamo_repo: RunsRepository,
) -> None:
    # Given the runs table, counted request by request
    counter = RequestCounter(dynamo_repo._client)
    key = "webhook:lunch_order:delivery-9"
    try:
        # When a delivery starts its run (the id derived from the key), and comes again
        dynamo_repo.create_run(a_run(dedupe_run_id(key), dedupe_key=key))
        first = counter.counts
        counter.reset()
        _, created = dynamo_repo.create_run(a_run(dedupe_run_id(key), dedupe_key=key))
        again = counter.counts
    finally:
        counter.detach()
    # Then the start was one PutItem (the run item's own condition is the dedupe), and the
    # duplicate a refused PutItem and the read of the run it duplicates
    assert first == {"PutItem": 1}
    assert (again, created) == ({"PutItem": 1, "GetItem": 1}, False)


def test_a_start_under_its_own_run_id_writes_its_dedupe_marker_then_its_run(
    dynamo_repo: RunsRepository,
) -> None:
    # Given the runs table, counted request by request
    counter = RequestCounter(dynamo_repo._client)
    try:
        # When a run with a dedupe key but an id of its caller's choosing is started
        dynamo_repo.create_run(a_run("run-a", dedupe_key="slot-9"))
        sent = counter.counts
    finally:
        counter.detach()
    # Then two conditional puts stored it, no transaction
    assert sent == {"PutItem": 2}
    assert dynamo_repo.get_run("run-a").dedupe_key == "slot-9"


def test_a_start_that_stopped_between_its_marker_and_its_run_is_finished_by_the_retry(
    dynamo_repo: RunsRepository,
) -> None:
    # Given a start whose process died after writing its dedupe marker, before its run item
    def die_at_the_run_item(params: dict[str, Any], **_: Any) -> None:
        if params["Item"]["sk"]["S"] == "run":
            raise SystemExit("the process died here")

    events = dynamo_repo._client.meta.events
    events.register("provide-client-params.dynamodb.PutItem", die_at_the_run_item)
    try:
        with pytest.raises(SystemExit):
            dynamo_repo.create_run(a_run("run-a", dedupe_key="slot-1"))
    finally:
        events.unregister("provide-client-params.dynamodb.PutItem", die_at_the_run_item)
    with pytest.raises(NotFoundError):
        dynamo_repo.get_run("run-a")
    # When the event is delivered again (under another run id)
    finished, created = dynamo_repo.create_run(a_run("run-b", dedupe_key="slot-1"))
    # Then the retry stored the run the marker names, and reports it created (so it launches it)
    assert (finished.run_id, created) == ("run-a", True)
    # And any later delivery finds that one run, the only one stored
    again, created_again = dynamo_repo.create_run(a_run("run-c", dedupe_key="slot-1"))
    assert (again.run_id, created_again) == ("run-a", False)
    assert [r.run_id for r in dynamo_repo.list_runs()] == ["run-a"]


def test_a_lease_and_a_pause_write_nothing_beside_the_run(dynamo_repo: RunsRepository) -> None:
    # Given a run whose segment took the lease, then an operator asked it to pause
    dynamo_repo.create_run(a_run())
    dynamo_repo.acquire_lease("run-1", "seg", now=NOW, ttl_seconds=TTL)
    dynamo_repo.request_pause("run-1", PauseRequest(by="ops@example.com", at=T0))
    # Then the run's partition holds the run and nothing else: no fence item (a segment's
    # checkpoint writes learn of a newer lease or a pause from their own slots)
    items = dynamo_repo._client.query(
        TableName="runs",
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": "run#run-1"}},
        ConsistentRead=True,
    )["Items"]
    assert [item["sk"]["S"] for item in items] == ["run"]


def test_a_lease_taken_from_a_fence_read_before_another_segment_took_one_is_the_next_one(
    dynamo_repo: RunsRepository,
) -> None:
    # Given a process that read the run, and another that took and gave back its lease since
    dynamo_repo.create_run(a_run())
    dynamo_repo.get_run("run-1")
    other = RunsRepository(dynamo_repo._client, "runs")
    taken = other.acquire_lease("run-1", "elsewhere", now=NOW, ttl_seconds=TTL)
    other.release_lease("run-1", taken)
    # When the first process takes the lease, then it gets the fence after that one
    fence = dynamo_repo.acquire_lease("run-1", "seg", now=NOW + 1, ttl_seconds=TTL)
    assert fence == taken + 1
    # And the other process's lease, had it kept it, would be refused
    with pytest.raises(LeaseHeldError, match="seg"):
        other.acquire_lease("run-1", "elsewhere", now=NOW + 2, ttl_seconds=TTL)


def requests_sent(repo: RunsRepository, request: pytest.FixtureRequest) -> list[str]:
    """The DynamoDB operations ``repo`` sends from now to the end of the test. Its client is
    the worker's one (``tests/contracts/conftest.py``): the counter comes off with the test."""
    sent: list[str] = []

    def count(model: Any, **_: Any) -> None:
        sent.append(model.name)

    events = repo._client.meta.events
    events.register("before-call.dynamodb", count)
    request.addfinalizer(lambda: events.unregister("before-call.dynamodb", count))
    return sent


def test_a_segments_last_write_is_one_update_and_no_transaction(
    dynamo_repo: RunsRepository, request: pytest.FixtureRequest
) -> None:
    # Given a segment holding the lease, counted request by request
    run = dynamo_repo.create_run(a_run())[0]
    fence = dynamo_repo.acquire_lease("run-1", "seg", now=NOW, ttl_seconds=TTL)
    sent = requests_sent(dynamo_repo, request)
    # When it stores its record with 40 events
    done = transition(transition(run, RunStatus.running, now=T0), RunStatus.succeeded, now=T0)
    dynamo_repo.save_run(done, fence=fence, release=True, events=[event(n) for n in range(1, 41)])
    # Then that took one UpdateItem (the events ride with the record), and everything reads back
    assert sent == ["UpdateItem"]
    assert [e.seq for e in dynamo_repo.get_timeline("run-1")] == list(range(1, 41))


def _big(first: int, count: int) -> list[TimelineEvent]:
    """``count`` events of about 1 KB each, from ``seq`` ``first``."""
    return [
        TimelineEvent(seq=n, at=T0, type=TimelineEventType.step_finished, detail={"n": "x" * 900})
        for n in range(first, first + count)
    ]


def test_a_last_write_with_more_events_than_the_run_item_carries_still_lands(
    dynamo_repo: RunsRepository, request: pytest.FixtureRequest
) -> None:
    # Given a segment holding the lease, with 3,500 events of about 1 KB (55 pages)
    run = dynamo_repo.create_run(a_run())[0]
    fence = dynamo_repo.acquire_lease("run-1", "seg", now=NOW, ttl_seconds=TTL)
    many = _big(1, 3500)
    sent = requests_sent(dynamo_repo, request)
    # When its last write stores them with the record
    done = transition(transition(run, RunStatus.running, now=T0), RunStatus.succeeded, now=T0)
    dynamo_repo.save_run(done, fence=fence, release=True, events=many)
    # Then the leading pages went first in batches, the rest with the record, no transaction
    assert sent == ["BatchWriteItem"] * 3 + ["UpdateItem"]
    assert dynamo_repo.get_timeline("run-1") == many
    assert dynamo_repo.get_run("run-1").status is RunStatus.succeeded


def test_a_segment_the_run_goes_on_after_writes_its_events_as_pages_its_record_confirms(
    dynamo_repo: RunsRepository, request: pytest.FixtureRequest
) -> None:
    # Given a segment holding the lease, counted request by request
    run = transition(dynamo_repo.create_run(a_run())[0], RunStatus.running, now=T0)
    fence = dynamo_repo.acquire_lease("run-1", "seg", now=NOW, ttl_seconds=TTL)
    sent = requests_sent(dynamo_repo, request)
    # When it stores its record (the run goes on) with its events
    dynamo_repo.save_run(run, fence=fence, release=True, events=[event(1), event(2)])
    # Then the events went as a page, then the record's update: no transaction, and the run
    # item carries no events the next segment's lease would bill again
    assert sent == ["BatchWriteItem", "UpdateItem"]
    assert [e.seq for e in dynamo_repo.get_timeline("run-1")] == [1, 2]
    key = {"pk": {"S": "run#run-1"}, "sk": {"S": "run"}}
    item = dynamo_repo._client.get_item(TableName="runs", Key=key)["Item"]
    assert [entry["M"]["events"]["S"] for entry in item["tail"]["L"]] == ["[]"]


def test_carried_events_that_are_full_are_written_out_before_the_next_save(
    dynamo_repo: RunsRepository, request: pytest.FixtureRequest
) -> None:
    # Given a run whose last segment stored 4 KB of events with its ending
    run = transition(dynamo_repo.create_run(a_run())[0], RunStatus.running, now=T0)
    done = transition(run, RunStatus.succeeded, now=T0)
    dynamo_repo.save_run(done, events=_big(1, 4))
    sent = requests_sent(dynamo_repo, request)
    # When a retried last write stores the same ending with 4 KB more, past what the run item
    # carries
    dynamo_repo.save_run(done, events=_big(5, 4))
    # Then its update was refused for room, the carried events went out as a page, and the
    # update carried the new ones: no transaction, and the whole timeline reads back
    assert sent == ["UpdateItem", "BatchWriteItem", "UpdateItem"]
    assert dynamo_repo.get_timeline("run-1") == _big(1, 8)
    assert dynamo_repo.next_event_seq("run-1") == 9


def test_the_confirmations_of_many_segments_stay_small_on_the_run_item_and_keep_pages_shown(
    dynamo_repo: RunsRepository,
) -> None:
    # Given a run whose 30 segments each stored two events and went on
    run = transition(dynamo_repo.create_run(a_run())[0], RunStatus.running, now=T0)
    for n in range(1, 31):
        fence = dynamo_repo.acquire_lease("run-1", f"seg-{n}", now=NOW + n, ttl_seconds=TTL)
        saved = [event(n * 1_000_000 + 1), event(n * 1_000_000 + 2)]
        dynamo_repo.save_run(run, fence=fence, release=True, events=saved)
    # When the timeline is read, then every segment's events are shown, in order
    expected = [n * 1_000_000 + i for n in range(1, 31) for i in (1, 2)]
    assert [e.seq for e in dynamo_repo.get_timeline("run-1")] == expected
    assert dynamo_repo.next_event_seq("run-1") == 30_000_003
    # And the run item carries about a kilobyte of confirmations, not thirty segments' worth
    key = {"pk": {"S": "run#run-1"}, "sk": {"S": "run"}}
    item = dynamo_repo._client.get_item(TableName="runs", Key=key)["Item"]
    assert int(item["tail_bytes"]["N"]) <= 1_000
    assert len(item["tail"]["L"]) < 30


def test_a_stale_segments_overflow_pages_are_never_shown(dynamo_repo: RunsRepository) -> None:
    # Given a segment whose lease was taken over, and the segment that took it saved its events
    run = transition(dynamo_repo.create_run(a_run())[0], RunStatus.running, now=T0)
    stale = dynamo_repo.acquire_lease("run-1", "old", now=NOW, ttl_seconds=TTL)
    current = dynamo_repo.acquire_lease("run-1", "new", now=NOW + TTL + 1, ttl_seconds=TTL)
    dynamo_repo.save_run(run, fence=current, events=[event(2_000_001)])
    # When the stale one saves more events than the run item carries (its overflow pages are
    # written before its refused update)
    with pytest.raises(LeaseHeldError, match="stale"):
        dynamo_repo.save_run(run, fence=stale, events=_big(1_000_001, 20))
    # Then none of its events is shown, before or after the next segment's save
    assert [e.seq for e in dynamo_repo.get_timeline("run-1")] == [2_000_001]
    dynamo_repo.save_run(run, fence=current, release=True, events=[event(2_000_002)])
    assert [e.seq for e in dynamo_repo.get_timeline("run-1")] == [2_000_001, 2_000_002]


def test_a_save_that_stopped_after_its_overflow_pages_shows_none_of_them(
    dynamo_repo: RunsRepository,
) -> None:
    # Given a segment whose process died after its overflow pages, before its record's update
    run = transition(dynamo_repo.create_run(a_run())[0], RunStatus.running, now=T0)
    fence = dynamo_repo.acquire_lease("run-1", "seg", now=NOW, ttl_seconds=TTL)

    def die_at_the_update(**_: Any) -> None:
        raise SystemExit("the process died here")

    events = dynamo_repo._client.meta.events
    events.register("provide-client-params.dynamodb.UpdateItem", die_at_the_update)
    try:
        with pytest.raises(SystemExit):
            dynamo_repo.save_run(run, fence=fence, events=_big(1_000_001, 20))
    finally:
        events.unregister("provide-client-params.dynamodb.UpdateItem", die_at_the_update)
    # When its retry takes the run over and saves its own events
    retry = dynamo_repo.acquire_lease("run-1", "retry", now=NOW + TTL + 1, ttl_seconds=TTL)
    dynamo_repo.save_run(run, fence=retry, release=True, events=[event(2_000_001)])
    # Then only the retry's events are shown
    assert [e.seq for e in dynamo_repo.get_timeline("run-1")] == [2_000_001]


def test_a_run_stored_before_events_rode_with_the_record_reads_and_finishes(
    dynamo_repo: RunsRepository,
) -> None:
    # Given a run item without carried events, and a page its first segment wrote
    run = transition(dynamo_repo.create_run(a_run())[0], RunStatus.running, now=T0)
    dynamo_repo.append_events("run-1", [event(1), event(2)])
    fence = dynamo_repo.acquire_lease("run-1", "seg", now=NOW, ttl_seconds=TTL)
    # When its next segment ends it
    done = transition(run, RunStatus.succeeded, now=T0)
    dynamo_repo.save_run(done, fence=fence, release=True, events=[event(3)])
    # Then both segments' events read back, and the run ended
    assert [e.seq for e in dynamo_repo.get_timeline("run-1")] == [1, 2, 3]
    assert dynamo_repo.get_run("run-1").status is RunStatus.succeeded


def test_a_timeline_event_keeps_its_details(repo: Runs) -> None:
    repo.create_run(a_run())
    decided = TimelineEvent(
        seq=3,
        at=T0,
        type=TimelineEventType.approval_decided,
        step_id="review",
        segment=2,
        actor="boss@example.com",
        detail={"decision": "approved"},
    )
    repo.append_events("run-1", [decided])
    assert repo.get_timeline("run-1") == [decided]


# --- listing -------------------------------------------------------------------------------


@pytest.fixture
def listed(repo: Runs) -> Runs:
    """Five runs of two workflows, an hour apart; two of lunch_order succeeded."""
    for n, workflow in enumerate(
        ["lunch_order", "invoice", "lunch_order", "invoice", "lunch_order"]
    ):
        run = a_run(f"run-{n}", workflow_id=workflow, created_at=T0 + timedelta(hours=n))
        repo.create_run(run)
        if n in (0, 2):
            done = transition(
                transition(run, RunStatus.running, now=T0), RunStatus.succeeded, now=T0
            )
            repo.save_run(done)
    return repo


def test_runs_of_a_workflow_are_listed_newest_first(listed: Runs) -> None:
    assert [r.run_id for r in listed.list_runs("lunch_order")] == ["run-4", "run-2", "run-0"]


def test_runs_of_a_workflow_in_a_status(listed: Runs) -> None:
    runs = listed.list_runs("lunch_order", RunStatus.succeeded, limit=1)
    assert [r.run_id for r in runs] == ["run-2"]


def test_runs_in_a_status_across_workflows(listed: Runs) -> None:
    assert [r.run_id for r in listed.list_runs(status=RunStatus.queued)] == [
        "run-4",
        "run-3",
        "run-1",
    ]


def test_all_runs_newest_first_up_to_the_limit(listed: Runs) -> None:
    assert [r.run_id for r in listed.list_runs(limit=4)] == ["run-4", "run-3", "run-2", "run-1"]


def test_a_listing_pages_on_from_the_last_run_of_the_previous_page(listed: Runs) -> None:
    first = listed.list_runs(limit=2)
    last = first[-1]
    second = listed.list_runs(limit=2, before=(last.created_at, last.run_id))
    assert [r.run_id for r in second] == ["run-2", "run-1"]
    assert [
        r.run_id for r in listed.list_runs("lunch_order", before=(T0 + timedelta(hours=4), "run-4"))
    ] == [
        "run-2",
        "run-0",
    ]


def test_a_run_leaves_its_old_status_listing(listed: Runs) -> None:
    assert "run-0" not in [r.run_id for r in listed.list_runs(status=RunStatus.queued)]


# --- refusals the use-cases rely on ---------------------------------------------------------


def test_an_ended_run_refuses_another_ending_without_a_fence(repo: Runs) -> None:
    # Given a run that failed
    run = repo.create_run(a_run())[0]
    running = transition(run, RunStatus.running, now=T0)
    repo.save_run(transition(running, RunStatus.failed, now=T0, reason="boom"))
    # When an operator's cancel (no fence) tries to end it again, then it is refused
    with pytest.raises(ConflictError, match="already ended as failed"):
        repo.save_run(transition(running, RunStatus.cancelled, now=T0, reason="operator"))
    assert repo.get_run("run-1").status is RunStatus.failed


def test_a_fence_that_never_held_the_lease_is_refused(repo: Runs) -> None:
    run = repo.create_run(a_run())[0]
    with pytest.raises(LeaseHeldError, match="stale"):
        repo.save_run(transition(run, RunStatus.running, now=T0), fence=7)
    assert repo.get_run("run-1").status is RunStatus.queued


def test_renewing_with_a_stale_fence_is_refused(repo: Runs) -> None:
    repo.create_run(a_run())
    stale = repo.acquire_lease("run-1", "old", now=NOW, ttl_seconds=TTL)
    repo.acquire_lease("run-1", "new", now=NOW + TTL + 1, ttl_seconds=TTL)
    with pytest.raises(LeaseHeldError):
        repo.renew_lease("run-1", stale, now=NOW + TTL + 2, ttl_seconds=TTL)


def test_a_released_lease_cannot_be_released_or_renewed_again(repo: Runs) -> None:
    repo.create_run(a_run())
    fence = repo.acquire_lease("run-1", "seg", now=NOW, ttl_seconds=TTL)
    assert repo.release_lease("run-1", fence)
    assert not repo.release_lease("run-1", fence)
    with pytest.raises(LeaseHeldError):
        repo.renew_lease("run-1", fence, now=NOW + 1, ttl_seconds=TTL)


def test_a_lease_needs_a_positive_ttl(repo: Runs) -> None:
    repo.create_run(a_run())
    with pytest.raises(ValueError, match="positive"):
        repo.acquire_lease("run-1", "seg", now=NOW, ttl_seconds=0)


def test_a_fenced_append_to_an_unknown_run_is_refused(repo: Runs) -> None:
    with pytest.raises(LeaseHeldError):
        repo.append_events("run-ghost", [event(1)], fence=1)
    assert repo.get_timeline("run-ghost") == []


def test_a_dedupe_key_wins_over_a_new_run_id_even_after_the_run_changed(repo: Runs) -> None:
    # Given a deduplicated run that has since started running
    run = repo.create_run(a_run("run-a", dedupe_key="slot-1"))[0]
    repo.save_run(transition(run, RunStatus.running, now=T0))
    # When the same event starts again, then the run as it is now comes back
    existing, created = repo.create_run(a_run("run-b", dedupe_key="slot-1"))
    assert (existing.run_id, existing.status, created) == ("run-a", RunStatus.running, False)


def test_a_record_read_back_is_a_copy(repo: Runs) -> None:
    repo.create_run(a_run(input={"items": ["soup"]}))
    read = repo.get_run("run-1")
    read.input["items"].append("cake")
    assert repo.get_run("run-1").input == {"items": ["soup"]}


def test_a_listing_limit_out_of_range_is_refused(repo: Runs) -> None:
    with pytest.raises(ValueError, match="limit"):
        repo.list_runs(limit=0)


# --- reopening by a redrive ----------------------------------------------------------------


def _failed(repo: Runs, run_id: str = "run-1") -> RunRecord:
    run, _ = repo.create_run(a_run(run_id))
    running = transition(run, RunStatus.running, now=T0)
    repo.save_run(running)
    failed = transition(running, RunStatus.failed, now=T0, reason="boom")
    repo.save_run(failed)
    return failed


def _redrive_note(run: RunRecord) -> Redrive:
    return Redrive(attempt=run.attempt + 1, at=T0, from_version=1, to_version=1)


def test_a_reopened_failed_run_is_queued_on_its_next_attempt(repo: Runs) -> None:
    # Given a failed run
    failed = _failed(repo)
    # When a redrive reopens it
    assert repo.reopen_run(reopened(failed, _redrive_note(failed), now=T0), expected_attempt=0)
    # Then it is queued again on attempt 1, and a segment may save it again
    stored = repo.get_run("run-1")
    assert (stored.status, stored.attempt, stored.error) == (RunStatus.queued, 1, None)
    repo.save_run(transition(stored, RunStatus.running, now=T0))
    assert repo.list_runs(status=RunStatus.queued) == []


def test_a_reopen_expecting_a_past_attempt_writes_nothing(repo: Runs) -> None:
    failed = _failed(repo)
    assert repo.reopen_run(reopened(failed, _redrive_note(failed), now=T0), expected_attempt=0)
    # A second redrive that read the run before the first reopened it loses
    assert not repo.reopen_run(reopened(failed, _redrive_note(failed), now=T0), expected_attempt=0)
    assert repo.get_run("run-1").attempt == 1


def test_concurrent_reopens_of_one_run_have_one_winner(repo: Runs) -> None:
    failed = _failed(repo)
    barrier = threading.Barrier(8)
    wins: list[bool] = []

    def reopen() -> None:
        barrier.wait()
        wins.append(
            repo.reopen_run(reopened(failed, _redrive_note(failed), now=T0), expected_attempt=0)
        )

    threads = [threading.Thread(target=reopen) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(wins) == [False] * 7 + [True]


def test_reopening_an_unknown_run_is_not_found(repo: Runs) -> None:
    with pytest.raises(NotFoundError):
        repo.reopen_run(
            reopened(
                a_run("run-x"), Redrive(attempt=1, at=T0, from_version=1, to_version=1), now=T0
            ),
            expected_attempt=0,
        )


def test_a_noted_fork_is_on_the_record_and_survives_its_saves(repo: Runs) -> None:
    # Given a run, and a fork of it noted while a segment saves it
    run, _ = repo.create_run(a_run())
    repo.add_fork("run-1", ForkLink(run_id="run-2", at_step="draft", at=T0, actor="ops"))
    repo.save_run(transition(run, RunStatus.running, now=T0))
    # Then the record carries the fork, and listings show it too
    [link] = repo.get_run("run-1").forks
    assert (link.run_id, link.at_step, link.actor) == ("run-2", "draft", "ops")
    assert repo.list_runs(status=RunStatus.running)[0].forks == [link]


def test_noting_a_fork_of_an_unknown_run_is_not_found(repo: Runs) -> None:
    with pytest.raises(NotFoundError):
        repo.add_fork("run-ghost", ForkLink(run_id="run-2", at_step="draft"))


# --- pausing (issue 28 item 3): the request beside the record ------------------------------

ALICE_ASKS = PauseRequest(by="cli:alice", reason="month-end freeze", at=T0)


def test_a_pause_request_is_on_the_record_and_survives_a_segments_save(repo: Runs) -> None:
    # Given a run a segment is running
    run, _ = repo.create_run(a_run())
    running = transition(run, RunStatus.running, now=T0)
    fence = repo.acquire_lease("run-1", "seg-1", now=NOW, ttl_seconds=TTL, saving=running)
    # When an operator asks it to pause, and then the segment saves the copy it read before
    asked, created = repo.request_pause("run-1", ALICE_ASKS)
    repo.save_run(transition(running, RunStatus.running, now=T0), fence=fence, release=True)
    # Then the request stands on the record, in listings, and in the one-attribute read
    assert created and asked.pause == ALICE_ASKS
    assert repo.get_run("run-1").pause == ALICE_ASKS
    assert repo.list_runs(status=RunStatus.running)[0].pause == ALICE_ASKS
    assert repo.pause_of("run-1") == ALICE_ASKS


def test_a_second_pause_request_keeps_the_first(repo: Runs) -> None:
    # Given a run Alice asked to pause
    repo.create_run(a_run())
    repo.request_pause("run-1", ALICE_ASKS)
    # When Bob asks too
    run, created = repo.request_pause(
        "run-1", PauseRequest(by="console:bob", reason="me too", at=T0 + timedelta(minutes=1))
    )
    # Then Alice's request stands and Bob's call made none
    assert not created
    assert run.pause == ALICE_ASKS


def test_a_pause_of_an_ended_run_is_refused_and_of_an_unknown_one_not_found(repo: Runs) -> None:
    # Given a run that succeeded
    run, _ = repo.create_run(a_run())
    ended = transition(transition(run, RunStatus.running, now=T0), RunStatus.succeeded, now=T0)
    repo.save_run(ended)
    # Then asking it to pause is refused (its ending stands), and nothing is asked of it
    with pytest.raises(ConflictError, match="already ended as succeeded"):
        repo.request_pause("run-1", ALICE_ASKS)
    assert repo.get_run("run-1").pause is None
    with pytest.raises(NotFoundError):
        repo.request_pause("run-ghost", ALICE_ASKS)


def test_lifting_a_pause_returns_it_and_the_parked_token(repo: Runs) -> None:
    # Given a paused run whose execution parked on the pause
    repo.create_run(a_run())
    repo.request_pause("run-1", ALICE_ASKS)
    assert repo.park_paused("run-1", "token-1")
    # When the pause is lifted, twice
    first = repo.lift_pause("run-1")
    second = repo.lift_pause("run-1")
    # Then the first lift returns the request and the token; the second only the token (a
    # resume said twice can wake the execution again, never lift anything twice)
    assert first == (ALICE_ASKS, "token-1")
    assert second == (None, "token-1")
    assert repo.get_run("run-1").pause is None
    assert repo.pause_of("run-1") is None


def test_an_execution_parks_on_a_pause_only_while_it_stands(repo: Runs) -> None:
    # Given a run whose pause was lifted before its execution parked on it
    repo.create_run(a_run())
    repo.request_pause("run-1", ALICE_ASKS)
    repo.lift_pause("run-1")
    # When the execution parks
    kept = repo.park_paused("run-1", "token-late")
    # Then its token is not kept (nobody would wake it: it must wake itself)
    assert not kept
    assert repo.lift_pause("run-1") == (None, None)


def test_pause_calls_on_an_unknown_run_are_not_found(repo: Runs) -> None:
    for call in (
        lambda: repo.lift_pause("run-ghost"),
        lambda: repo.park_paused("run-ghost", "t"),
        lambda: repo.pause_of("run-ghost"),
    ):
        with pytest.raises(NotFoundError):
            call()


# --- an unreadable stored record (issue 35) -------------------------------------------------

Overwrite = Callable[[str, str], None]
"""Replace a stored run's body by hand, as a bug or an older version could have written it."""


@pytest.fixture(params=["sqlite", "dynamodb"])
def stored(request: pytest.FixtureRequest) -> tuple[Runs, Overwrite]:
    """An adapter, and a way to plant a body it did not write (the fake stores no raw JSON)."""
    if request.param == "sqlite":
        db: Database = request.getfixturevalue("sqlite_db")

        def overwrite_row(run_id: str, body: str) -> None:
            with db.write() as connection:
                connection.execute("UPDATE runs SET body = ? WHERE run_id = ?", (body, run_id))

        return SqliteRuns(db), overwrite_row
    repository: RunsRepository = request.getfixturevalue("dynamo_repo")

    def overwrite_item(run_id: str, body: str) -> None:
        repository._client.update_item(
            TableName="runs",
            Key={"pk": {"S": f"run#{run_id}"}, "sk": {"S": "run"}},
            UpdateExpression="SET body = :body",
            ExpressionAttributeValues={":body": {"S": body}},
        )

    return repository, overwrite_item


SECRET_INPUT = "card-4111-1111"


def nested_too_deep(run: RunRecord, depth: int = 300) -> str:
    """The run's JSON with an input nested ``depth`` levels: valid JSON, which pydantic's parser
    refuses past about 200 levels."""
    deep: Any = SECRET_INPUT
    for _ in range(depth):
        deep = [deep]
    return json.dumps({**json.loads(run.model_dump_json()), "input": {"deep": deep}})


def truncated(run: RunRecord) -> str:
    """The run's JSON cut short, as a torn write would leave it."""
    body = json.loads(run.model_dump_json())
    return json.dumps({**body, "input": {"note": SECRET_INPUT}})[:-40]


UNREADABLE = [nested_too_deep, truncated]


@pytest.mark.parametrize("spoil", UNREADABLE)
def test_a_listing_skips_an_unreadable_record_and_returns_the_others(
    stored: tuple[Runs, Overwrite], spoil: Callable[[RunRecord], str]
) -> None:
    # Given three runs, the middle one's stored record unreadable
    repo, overwrite = stored
    for n in range(3):
        repo.create_run(a_run(f"run-{n}", created_at=T0 + timedelta(hours=n)))
    overwrite("run-1", spoil(a_run("run-1")))

    # When runs are listed, whole and one page of two
    everything = repo.list_runs()
    page = repo.list_runs(limit=2)

    # Then the listing leaves it out, and the page still holds two readable runs
    assert [r.run_id for r in everything] == ["run-2", "run-0"]
    assert [r.run_id for r in page] == ["run-2", "run-0"]


@pytest.mark.parametrize("spoil", UNREADABLE)
def test_reading_an_unreadable_record_names_the_run_and_the_way_out(
    stored: tuple[Runs, Overwrite], spoil: Callable[[RunRecord], str]
) -> None:
    # Given a run whose stored record is unreadable
    repo, overwrite = stored
    repo.create_run(a_run())
    overwrite("run-1", spoil(a_run()))

    # When it is read by id, then a named error says which run, why, and how to clear it
    with pytest.raises(UnreadableRecordError, match=r"run run-1.*remove") as refused:
        repo.get_run("run-1")

    # And never what the record holds (it is the run's input), not even in its cause
    assert SECRET_INPUT not in str(refused.value)
    assert refused.value.__cause__ is None


def test_a_skipped_record_is_logged_by_its_run_id_never_its_content(
    stored: tuple[Runs, Overwrite], caplog: pytest.LogCaptureFixture
) -> None:
    # Given a run whose stored record is nested too deep to parse
    repo, overwrite = stored
    repo.create_run(a_run())
    overwrite("run-1", nested_too_deep(a_run()))

    # When runs are listed
    with caplog.at_level(logging.WARNING):
        assert repo.list_runs() == []

    # Then one warning names the run, and nothing of its input is logged
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "run-1" in warning.getMessage()
    assert SECRET_INPUT not in caplog.text
