"""Contract of the log store: CloudWatch Logs on moto and the local SQLite store keep the
functions' lines and give a run's back, oldest first, whatever else was written beside them."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from langorch.adapters.logs import CloudWatchLogs
from langorch.adapters.sqlite.logs import SqliteLogs

Logs = CloudWatchLogs | SqliteLogs
GROUP = "/aws/lambda/langorch-run-segment"
T0 = int(time.time() * 1000) - 60_000
"""A minute ago: CloudWatch refuses events older than its retention window, not the store."""


@pytest.fixture(params=["sqlite", "cloudwatch"])
def logs(request: pytest.FixtureRequest) -> Logs:
    if request.param == "sqlite":
        return SqliteLogs(request.getfixturevalue("sqlite_db"))
    import boto3

    request.getfixturevalue("aws")
    return CloudWatchLogs(boto3.client("logs", region_name="us-east-1"))


def line(run_id: str | None, message: str, **fields: Any) -> str:
    document = {"level": "INFO", "message": message, **fields}
    if run_id is not None:
        document["run_id"] = run_id
    return json.dumps(document)


def test_a_runs_lines_come_back_oldest_first_and_only_its_own(logs: Logs) -> None:
    # Given lines of two runs and a line of none, written out of order in two streams
    logs.ensure_group(GROUP)
    logs.put(
        GROUP, "s1", [(T0 + 2_000, line("run-a", "second")), (T0 + 1_000, line("run-b", "other"))]
    )
    logs.put(
        GROUP, "s2", [(T0 + 1_500, line("run-a", "first")), (T0 + 1_700, "START RequestId: x")]
    )
    # When the run's lines are read
    found = logs.lines_for_run("run-a", [GROUP])
    # Then they are its own, oldest first, with their stream
    assert [(entry.stream, entry.fields() or {}) for entry in found] == [
        ("s2", {"level": "INFO", "message": "first", "run_id": "run-a"}),
        ("s1", {"level": "INFO", "message": "second", "run_id": "run-a"}),
    ]


def test_a_line_that_only_mentions_the_run_is_not_the_runs(logs: Logs) -> None:
    logs.ensure_group(GROUP)
    logs.put(GROUP, "s1", [(T0 + 1_000, line("run-b", "waiting for run-a"))])
    assert logs.lines_for_run("run-a", [GROUP]) == []


def test_lines_before_the_start_are_left_out(logs: Logs) -> None:
    logs.ensure_group(GROUP)
    logs.put(GROUP, "s1", [(T0 + 1_000, line("run-a", "old")), (T0 + 5_000, line("run-a", "new"))])
    found = logs.lines_for_run("run-a", [GROUP], start_ms=T0 + 2_000)
    assert [(entry.fields() or {}).get("message") for entry in found] == ["new"]


def test_groups_are_listed_by_prefix(logs: Logs) -> None:
    logs.ensure_group("/aws/lambda/langorch-trigger")
    logs.ensure_group(GROUP)
    logs.ensure_group("/other/group")
    assert logs.groups("/aws/lambda/langorch-") == [
        "/aws/lambda/langorch-run-segment",
        "/aws/lambda/langorch-trigger",
    ]


def test_a_group_never_written_reads_as_no_lines(logs: Logs) -> None:
    assert logs.lines_for_run("run-a", ["/aws/lambda/none"]) == []
