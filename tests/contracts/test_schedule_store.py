"""Contract of the schedules port (``ScheduleStore``): the Scheduler on moto, the local SQLite
store and the fake — create or update by name, list by prefix in name order, delete once; what
the local tick reads of them; approvals' one-time wake-ups on them. What the Scheduler refuses
(it validates on the server; moto does not) is the SQLite store's to refuse locally."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from langorch.adapters.scheduler import APPROVAL_TIMER_KIND, ApprovalTimerSchedules, Schedules
from langorch.adapters.sqlite._db import Database
from langorch.adapters.sqlite.schedules import SqliteSchedules
from langorch.domain.errors import NotFoundError, StorageError
from langorch.local.ticker import Ticker, to_schedule
from tests.fakes import InMemorySchedules

ROLE = "arn:aws:iam::123456789012:role/langorch-scheduler"
TARGET = "arn:aws:lambda:us-east-1:123456789012:function:trigger"
DLQ = "arn:aws:sqs:us-east-1:123456789012:schedule-dlq"
T0 = datetime(2026, 11, 22, 10, 0, 30, tzinfo=UTC)
Store = Schedules | InMemorySchedules | SqliteSchedules


def _store(request: pytest.FixtureRequest, *, configured: bool) -> Store:
    role, target = (ROLE, TARGET) if configured else (None, None)
    if request.param == "fake":
        return InMemorySchedules(role_arn=role, target_arn=target, dead_letter_arn=DLQ)
    if request.param == "sqlite":
        return SqliteSchedules(
            request.getfixturevalue("sqlite_db"),
            group="langorch",
            role_arn=role,
            target_arn=target,
            dead_letter_arn=DLQ,
        )
    import boto3

    request.getfixturevalue("aws")
    client = boto3.client("scheduler", region_name="us-east-1")
    return Schedules(
        client, group="langorch", role_arn=role, target_arn=target, dead_letter_arn=DLQ
    )


@pytest.fixture(params=["fake", "sqlite", "scheduler"])
def store(request: pytest.FixtureRequest) -> Store:
    schedules = _store(request, configured=True)
    schedules.ensure_group()
    return schedules


@pytest.fixture(params=["fake", "sqlite", "scheduler"])
def unconfigured(request: pytest.FixtureRequest) -> Store:
    return _store(request, configured=False)


def test_a_new_schedule_is_created_and_reads_back(store: Store) -> None:
    created = store.put(
        "langorch-digest", "cron(0 9 * * ? *)", "Europe/Paris", {"workflow_id": "digest"}
    )
    assert created is True
    [info] = store.list("langorch-digest")
    assert (info.name, info.expression, info.timezone) == (
        "langorch-digest",
        "cron(0 9 * * ? *)",
        "Europe/Paris",
    )
    assert info.input == {"workflow_id": "digest"}
    assert (info.state, info.target_arn, info.role_arn, info.dead_letter_arn) == (
        "ENABLED",
        TARGET,
        ROLE,
        DLQ,
    )


def test_putting_it_again_updates_it(store: Store) -> None:
    store.put("langorch-digest", "cron(0 9 * * ? *)", "UTC", {"workflow_id": "digest"})
    assert (
        store.put("langorch-digest", "cron(0 10 * * ? *)", "UTC", {"workflow_id": "digest"})
        is False
    )
    assert [s.expression for s in store.list()] == ["cron(0 10 * * ? *)"]


def test_listing_by_prefix_in_name_order(store: Store) -> None:
    for name in ("langorch-b", "langorch-a", "other"):
        store.put(name, "cron(0 9 * * ? *)", "UTC", {})
    assert [s.name for s in store.list("langorch-")] == ["langorch-a", "langorch-b"]
    assert [s.name for s in store.list()] == ["langorch-a", "langorch-b", "other"]


def test_deleting_says_whether_there_was_one(store: Store) -> None:
    store.put("langorch-a", "cron(0 9 * * ? *)", "UTC", {})
    assert store.delete("langorch-a") is True
    assert store.delete("langorch-a") is False
    assert store.list() == []


def test_pausing_disables_the_schedule_and_keeps_the_rest(store: Store) -> None:
    store.put(
        "langorch-digest",
        "cron(0 9 * * ? *)",
        "Europe/Paris",
        {"workflow_id": "digest"},
        description="digest",
    )
    assert store.set_state("langorch-digest", "DISABLED") is True
    [info] = store.list("langorch-digest")
    assert (info.state, info.expression, info.timezone) == (
        "DISABLED",
        "cron(0 9 * * ? *)",
        "Europe/Paris",
    )
    assert (info.input, info.target_arn, info.role_arn, info.dead_letter_arn) == (
        {"workflow_id": "digest"},
        TARGET,
        ROLE,
        DLQ,
    )


def test_resuming_enables_a_paused_schedule(store: Store) -> None:
    store.put("langorch-digest", "cron(0 9 * * ? *)", "UTC", {}, state="DISABLED")
    assert [s.state for s in store.list()] == ["DISABLED"]
    assert store.set_state("langorch-digest", "ENABLED") is True
    assert [s.state for s in store.list()] == ["ENABLED"]


def test_pausing_an_unknown_schedule_says_there_is_none(store: Store) -> None:
    assert store.set_state("langorch-nothing", "DISABLED") is False


def test_ensuring_the_group_twice_is_fine(store: Store) -> None:
    store.ensure_group()
    assert store.list() == []


def test_without_a_target_and_role_nothing_is_written(unconfigured: Store) -> None:
    assert not unconfigured.configured
    with pytest.raises(NotFoundError, match="LANGORCH_TRIGGER_FUNCTION_ARN"):
        unconfigured.put("langorch-a", "cron(0 9 * * ? *)", "UTC", {})


def test_an_unknown_schedule_reads_as_none(store: Store) -> None:
    # Given a group without schedules
    # When an unknown name is read, then it is None, not an error
    assert store.get("langorch-nothing") is None


def test_an_update_replaces_the_input_and_the_description(store: Store) -> None:
    # Given a stored schedule
    store.put("langorch-a", "cron(0 9 * * ? *)", "UTC", {"n": 1}, description="first")
    # When it is put again with another input and description
    store.put("langorch-a", "cron(0 9 * * ? *)", "UTC", {"n": 2}, description="second")
    # Then it reads back with the new ones only
    info = store.get("langorch-a")
    assert info is not None and (info.input, info.description) == ({"n": 2}, "second")


def test_a_listing_prefix_is_literal_text(store: Store) -> None:
    # Given names that a wildcard reading of "_" would confuse
    for name in ("langorch_a", "langorchXa"):
        store.put(name, "cron(0 9 * * ? *)", "UTC", {})
    # When listing by a prefix holding "_"
    # Then only names that start with that exact text match
    assert [s.name for s in store.list("langorch_")] == ["langorch_a"]


# --- what the local tick reads ------------------------------------------------------------


def _tick(store: Store, delivered: list[dict[str, Any]]) -> Ticker:
    """The local scheduler tick over the store, as ``langorch dev`` reads it."""

    def read() -> list[Any]:
        found = (to_schedule(s, region="us-east-1", group="langorch") for s in store.list())
        return [s for s in found if s is not None]

    ids = iter(f"exec-{n}" for n in range(100))
    return Ticker(read, delivered.append, since=T0, new_id=lambda: next(ids))


def test_the_tick_fires_a_stored_schedule_at_its_slot_with_its_input(store: Store) -> None:
    # Given a schedule due at 09:00 in Paris (08:00 UTC), its input naming the slot
    store.put(
        "langorch-digest",
        "cron(0 9 * * ? *)",
        "Europe/Paris",
        {"workflow_id": "digest", "scheduled_time": "<aws.scheduler.scheduled-time>"},
    )
    delivered: list[dict[str, Any]] = []
    tick = _tick(store, delivered)
    # When the tick runs past the next morning's slot
    fired = tick.fire_due(datetime(2026, 11, 23, 8, 0, 1, tzinfo=UTC))
    # Then it fires once, at 08:00 UTC, with the slot substituted into the input
    assert fired == [("langorch-digest", datetime(2026, 11, 23, 8, 0, tzinfo=UTC))]
    assert delivered == [{"workflow_id": "digest", "scheduled_time": "2026-11-23T08:00:00Z"}]


def test_an_approval_wake_up_is_a_one_time_schedule_the_tick_fires(store: Store) -> None:
    # Given an approval whose reminder is due in four hours
    timers = ApprovalTimerSchedules(store)
    timers.schedule("appr-1", T0 + timedelta(hours=4))
    delivered: list[dict[str, Any]] = []
    tick = _tick(store, delivered)
    # When the tick runs before and then after that moment
    early = tick.fire_due(T0 + timedelta(hours=3))
    due = tick.fire_due(T0 + timedelta(hours=4, seconds=1))
    # Then it fires once, when due, with the approval's wake-up as its input
    assert early == []
    assert [name for name, _ in due] == [ApprovalTimerSchedules.name("appr-1")]
    assert delivered == [{"kind": APPROVAL_TIMER_KIND, "approval_id": "appr-1"}]


def test_cancelling_an_approval_wake_up_deletes_its_schedule(store: Store) -> None:
    # Given an approval with a scheduled wake-up
    timers = ApprovalTimerSchedules(store)
    timers.schedule("appr-1", T0 + timedelta(hours=4))
    # When the decision cancels it
    timers.cancel("appr-1")
    # Then no schedule is left
    assert store.list() == []


# --- what the Scheduler refuses: the SQLite store refuses it too (moto accepts anything) ----


@pytest.fixture
def local(sqlite_db: Database) -> SqliteSchedules:
    schedules = SqliteSchedules(
        sqlite_db, group="langorch", role_arn=ROLE, target_arn=TARGET, dead_letter_arn=DLQ
    )
    schedules.ensure_group()
    return schedules


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("cron(0 9 * * *)", "six fields"),
        ("cron(0 9 * * * *)", "exactly one of day-of-month and day-of-week must be ?"),
        ("cron(0 9 ? * ? *)", "exactly one of day-of-month and day-of-week must be ?"),
        ("cron(61 9 * * ? *)", "not a valid cron expression"),
        ("cron(0 9 ? * 8 *)", "not an AWS day"),
        ("cron(0 9 * * ? 1969)", "the year field takes 1970-2199"),
        ("cron(0 9 LW * ? *)", "the local ticker cannot"),
        ("rate(0 minutes)", "a rate is at least 1"),
        ("rate(1 hours)", "singular for 1"),
        ("rate(5 minute)", "plural above"),
        ("at(2026-02-30T09:00:00)", "not a date and time"),
        ("every day at nine", "not a cron(…), rate(…) or at(…) expression"),
    ],
)
def test_an_expression_the_scheduler_refuses_is_refused_and_not_stored(
    local: SqliteSchedules, expression: str, reason: str
) -> None:
    # Given the local store
    # When a schedule with an expression the Scheduler refuses is put
    with pytest.raises(StorageError, match=r"langorch-a.*cron\(minutes hours") as refused:
        local.put("langorch-a", expression, "UTC", {})
    # Then the error says what is wrong and how to write it, and nothing is stored
    assert reason in str(refused.value)
    assert local.list() == []


@pytest.mark.parametrize(
    "expression",
    [
        "cron(0 9 ? * MON-FRI *)",
        "cron(0/15 * * * ? *)",
        "cron(0 9 ? * 6L *)",
        "cron(0 9 ? * 6#3 2026-2030)",
        "cron(0 9 15W * ? 2027/2)",
        "rate(1 minute)",
        "rate(5 minutes)",
        "at(2026-11-22T14:00:30)",
    ],
)
def test_an_expression_the_scheduler_accepts_is_stored(
    local: SqliteSchedules, expression: str
) -> None:
    # When a schedule with an expression the Scheduler accepts is put, then it is stored
    assert local.put("langorch-a", expression, "UTC", {}) is True
    assert [s.expression for s in local.list()] == [expression]


def test_an_unknown_timezone_is_refused(local: SqliteSchedules) -> None:
    # When a schedule names a timezone that does not exist, then it is refused with the fix
    with pytest.raises(StorageError, match=r"unknown timezone 'Mars/Olympus'.*IANA name"):
        local.put("langorch-a", "cron(0 9 * * ? *)", "Mars/Olympus", {})
    assert local.list() == []


@pytest.mark.parametrize("name", ["", "has space", "x" * 65, "slash/in/it"])
def test_a_name_the_scheduler_refuses_is_refused(local: SqliteSchedules, name: str) -> None:
    # When a schedule's name is empty, too long or holds other characters, then it is refused
    with pytest.raises(StorageError, match="1 to 64 letters, digits"):
        local.put(name, "cron(0 9 * * ? *)", "UTC", {})
    assert local.list() == []


def test_a_schedule_outside_an_existing_group_is_refused(sqlite_db: Database) -> None:
    # Given a store whose group was never created
    schedules = SqliteSchedules(sqlite_db, group="langorch", role_arn=ROLE, target_arn=TARGET)
    # When a schedule is put, then it is refused, saying how to create the group
    with pytest.raises(StorageError, match=r"group 'langorch' does not exist.*ensure_group"):
        schedules.put("langorch-a", "cron(0 9 * * ? *)", "UTC", {})


def test_another_database_on_the_same_file_reads_the_schedules(tmp_path: Path) -> None:
    # Given a schedule written through one Database (a CLI process registering a workflow)
    path = tmp_path / "langorch.db"
    writer = SqliteSchedules(Database(path), group="langorch", role_arn=ROLE, target_arn=TARGET)
    writer.ensure_group()
    writer.put("langorch-a", "cron(0 9 * * ? *)", "UTC", {"workflow_id": "a"})
    # When another Database on the same file reads them (the dev stack's tick)
    reader = SqliteSchedules(Database(path), group="langorch", role_arn=None, target_arn=None)
    # Then it sees the schedule as written
    assert [(s.name, s.input, s.target_arn) for s in reader.list()] == [
        ("langorch-a", {"workflow_id": "a"}, TARGET)
    ]
