"""The local stack's log shipper: invocations' lines reach CloudWatch Logs (moto) in the
background, one CreateLogStream per stream and as few PutLogEvents as the limits allow."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest

from langorch.adapters.logs import PUT_MAX_EVENTS, CloudWatchLogs
from langorch.local.logs import CloudWatchSink, environment_stream
from tests.support.polling import wait_for

PREFIX = "/aws/lambda/"
FUNCTION = "langorch-trigger"
GROUP = f"{PREFIX}{FUNCTION}"


@pytest.fixture
def logs(aws: None) -> Any:
    return boto3.client("logs", region_name="us-east-1")


@pytest.fixture
def calls(logs: Any) -> Counter[str]:
    """How many times each CloudWatch Logs operation was called through ``logs``."""
    counted: Counter[str] = Counter()

    def count(model: Any, **_: Any) -> None:
        counted[model.name] += 1

    logs.meta.events.register("before-call.logs.*", count)
    return counted


@pytest.fixture
def make_sink(logs: Any) -> Iterator[Callable[..., CloudWatchSink]]:
    made: list[CloudWatchSink] = []

    def make(**options: Any) -> CloudWatchSink:
        sink = CloudWatchSink(CloudWatchLogs(logs), PREFIX, **options)
        sink.ensure_groups([FUNCTION])
        made.append(sink)
        return sink

    yield make
    for sink in made:
        sink.close()


def messages(logs: Any, stream: str, group: str = GROUP) -> list[str]:
    events: list[str] = []
    token: str | None = None
    while True:
        request: dict[str, Any] = {
            "logGroupName": group,
            "logStreamName": stream,
            "startFromHead": True,
        }
        if token:
            request["nextToken"] = token
        page = logs.get_log_events(**request)
        events.extend(e["message"] for e in page["events"])
        if page["nextForwardToken"] == token or not page["events"]:
            return events
        token = page["nextForwardToken"]


def test_a_burst_past_the_event_limit_is_split_into_the_fewest_calls(make_sink, logs, calls):
    # Given more lines for one stream than one PutLogEvents call takes
    sink = make_sink()
    stream = environment_stream("a" * 32)
    now = int(time.time() * 1000)
    total = PUT_MAX_EVENTS * 2 + 500
    sink(FUNCTION, stream, [(now + i // 100, f"line {i}") for i in range(total)])

    # When the queue is flushed
    assert sink.flush(timeout=60)

    # Then every line is in the stream, in order, the stream was created once, and each
    # PutLogEvents call took as many events as CloudWatch allows
    assert messages(logs, stream) == [f"line {i}" for i in range(total)]
    assert calls["CreateLogStream"] == 1
    assert calls["PutLogEvents"] == 3


def test_a_burst_past_the_byte_limit_is_split(make_sink, logs, calls):
    # Given one invocation's lines of 400 KB each: two fit in a call, three do not
    sink = make_sink()
    stream = environment_stream("b" * 32)
    now = int(time.time() * 1000)
    sink(FUNCTION, stream, [(now + i, f"{i}" + "x" * 400_000) for i in range(5)])

    assert sink.flush(timeout=60)

    assert [m[0] for m in messages(logs, stream)] == ["0", "1", "2", "3", "4"]
    assert calls["PutLogEvents"] == 3


def test_each_stream_is_created_once_and_keeps_its_lines_in_time_order(make_sink, logs, calls):
    # Given two sandboxes' streams, each written to several times, out of time order
    sink = make_sink()
    first, second = environment_stream("c" * 32), environment_stream("d" * 32)
    now = int(time.time() * 1000)
    sink(FUNCTION, first, [(now + 2, "first 2"), (now + 2, "first 3")])
    sink(FUNCTION, second, [(now, "second 0")])
    sink(FUNCTION, first, [(now, "first 0"), (now + 1, "first 1")])
    assert sink.flush(timeout=30)
    sink(FUNCTION, first, [(now + 3, "first 4")])
    assert sink.flush(timeout=30)

    assert messages(logs, first) == ["first 0", "first 1", "first 2", "first 3", "first 4"]
    assert messages(logs, second) == ["second 0"]
    assert calls["CreateLogStream"] == 2


def test_stopping_writes_what_is_queued(make_sink, logs):
    sink = make_sink()
    stream = environment_stream("e" * 32)
    now = int(time.time() * 1000)
    for i in range(50):
        sink(FUNCTION, stream, [(now, f"line {i}")])

    sink.close()

    assert messages(logs, stream) == [f"line {i}" for i in range(50)]
    # And a line that comes after the stop is still written, on the caller's thread
    sink(FUNCTION, stream, [(now + 1, "late")])
    assert messages(logs, stream)[-1] == "late"


def test_a_failing_write_is_warned_about_and_does_not_hold_up_other_lines(
    make_sink, logs, calls, caplog
):
    # Given a function whose log group does not exist, and one whose group does
    sink = make_sink(attempts=2, retry_after=0.01)
    stream = environment_stream("f" * 32)
    now = int(time.time() * 1000)
    caplog.set_level(logging.WARNING, logger="langorch.local.logs")

    # When both log lines
    sink("langorch-missing", stream, [(now, "lost")])
    sink(FUNCTION, stream, [(now, "kept")])
    assert sink.flush(timeout=30)
    sink(FUNCTION, stream, [(now + 1, "kept later")])
    assert sink.flush(timeout=30)

    # Then the good lines are written, the failing ones tried twice and dropped with warnings
    assert messages(logs, stream) == ["kept", "kept later"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert "could not ship 1 log lines (will try again)" in warnings[0]
    assert "dropped 1 log lines" in warnings[1]
    assert "/aws/lambda/langorch-missing" in warnings[1]


def test_a_write_tried_again_succeeds_once_the_group_exists(make_sink, logs, caplog):
    # Given lines for a group that is missing at first, with a long pause before a retry
    sink = make_sink(attempts=3, retry_after=60)
    stream = environment_stream("0" * 32)
    caplog.set_level(logging.WARNING, logger="langorch.local.logs")
    sink("langorch-late", stream, [(int(time.time() * 1000), "late group")])
    wait_for(lambda: caplog.records, what="the sink's warning")
    assert "will try again" in caplog.records[0].getMessage()

    # When the group is created and the stack stops (which ends the pause)
    CloudWatchLogs(logs).ensure_group(f"{PREFIX}langorch-late")
    sink.close()

    # Then the lines are written, once
    assert messages(logs, stream, group=f"{PREFIX}langorch-late") == ["late group"]


def test_a_synchronous_sink_has_written_the_lines_when_the_call_returns(make_sink, logs, calls):
    sink = make_sink(background=False)
    stream = environment_stream("1" * 32)

    sink(FUNCTION, stream, [(int(time.time() * 1000), "at once")])

    assert messages(logs, stream) == ["at once"]
    assert calls["PutLogEvents"] == 1
