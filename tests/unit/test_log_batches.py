"""PutLogEvents batches: CloudWatch's limits on one call, and time order within it."""

from __future__ import annotations

from langorch.adapters.logs import (
    EVENT_OVERHEAD_BYTES,
    PUT_MAX_BYTES,
    PUT_MAX_EVENTS,
    PUT_MAX_SPAN_MS,
    put_batches,
)


def test_more_events_than_one_call_takes_are_split_at_the_limit():
    events = [(1_000 + i, f"line {i}") for i in range(PUT_MAX_EVENTS * 2 + 5)]

    batches = list(put_batches(events))

    assert [len(b) for b in batches] == [PUT_MAX_EVENTS, PUT_MAX_EVENTS, 5]
    assert [e for b in batches for e in b] == events


def test_a_batch_counts_each_event_with_its_overhead_against_the_byte_limit():
    # Given events whose messages alone fit four to a call, but not with 26 bytes each
    size = PUT_MAX_BYTES // 4 - EVENT_OVERHEAD_BYTES + 1
    events = [(1_000, "x" * size) for _ in range(8)]

    batches = list(put_batches(events))

    assert [len(b) for b in batches] == [3, 3, 2]
    for batch in batches:
        assert sum(len(m) + EVENT_OVERHEAD_BYTES for _, m in batch) <= PUT_MAX_BYTES


def test_the_byte_limit_counts_utf8_bytes_not_characters():
    size = (PUT_MAX_BYTES // 2 - EVENT_OVERHEAD_BYTES) // 2 + 1  # two bytes per "é"
    events = [(1_000, "é" * size), (1_001, "é" * size)]

    assert [len(b) for b in put_batches(events)] == [1, 1]


def test_events_are_in_time_order_and_one_millisecond_keeps_its_order():
    events = [(3, "c"), (1, "a1"), (2, "b"), (1, "a2")]

    assert list(put_batches(events)) == [[(1, "a1"), (1, "a2"), (2, "b"), (3, "c")]]


def test_a_batch_spans_at_most_24_hours():
    start = 1_700_000_000_000
    events = [(start, "a"), (start + PUT_MAX_SPAN_MS, "b"), (start + PUT_MAX_SPAN_MS + 1, "c")]

    assert list(put_batches(events)) == [
        [(start, "a"), (start + PUT_MAX_SPAN_MS, "b")],
        [(start + PUT_MAX_SPAN_MS + 1, "c")],
    ]


def test_no_events_are_no_batch():
    assert list(put_batches([])) == []
