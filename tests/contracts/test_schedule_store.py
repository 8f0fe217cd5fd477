"""Contract of the schedules port (``ScheduleStore``): the Scheduler on moto and the fake."""

from __future__ import annotations

import pytest

from langorch.adapters.scheduler import Schedules
from langorch.domain.errors import NotFoundError
from tests.fakes import InMemorySchedules

ROLE = "arn:aws:iam::123456789012:role/langorch-scheduler"
TARGET = "arn:aws:lambda:us-east-1:123456789012:function:trigger"
DLQ = "arn:aws:sqs:us-east-1:123456789012:schedule-dlq"
Store = Schedules | InMemorySchedules


def _store(request: pytest.FixtureRequest, *, configured: bool) -> Store:
    role, target = (ROLE, TARGET) if configured else (None, None)
    if request.param == "fake":
        return InMemorySchedules(role_arn=role, target_arn=target, dead_letter_arn=DLQ)
    import boto3

    request.getfixturevalue("aws")
    client = boto3.client("scheduler", region_name="us-east-1")
    return Schedules(
        client, group="langorch", role_arn=role, target_arn=target, dead_letter_arn=DLQ
    )


@pytest.fixture(params=["fake", "scheduler"])
def store(request: pytest.FixtureRequest) -> Store:
    schedules = _store(request, configured=True)
    schedules.ensure_group()
    return schedules


@pytest.fixture(params=["fake", "scheduler"])
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


def test_ensuring_the_group_twice_is_fine(store: Store) -> None:
    store.ensure_group()
    assert store.list() == []


def test_without_a_target_and_role_nothing_is_written(unconfigured: Store) -> None:
    assert not unconfigured.configured
    with pytest.raises(NotFoundError, match="LANGORCH_TRIGGER_FUNCTION_ARN"):
        unconfigured.put("langorch-a", "cron(0 9 * * ? *)", "UTC", {})
