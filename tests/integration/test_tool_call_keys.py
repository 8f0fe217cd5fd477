"""Tool calls at most once where the server allows it, against a real MCP server that remembers
keys (``tests.mcp_servers.KeyedDesk``, over streamable HTTP on 127.0.0.1): every call carries a
stable idempotency key in its ``_meta`` and in its ``Idempotency-Key`` header, and a call whose
process died between sending it and recording its answer is, on replay, ``unknown`` on the
timeline and then sent again with the same key (``--on-unknown retry``) or fails the step with
:class:`ToolCallOutcomeUnknownError` (``--on-unknown fail``); never sent again as if new."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from langorch.app.runs import RunSegment, StartRun, drive, run_segment, start_run
from langorch.domain.runs import RunRecord, TimelineEventType
from langorch.domain.tool_servers import OnUnknown, ToolServer
from tests.fakes import Fakes
from tests.mcp_servers import KeyedDesk, serving
from tests.support.crashes import Crash, DyingTasks
from tests.support.definitions import put_ordering

KEY = re.compile(r"^[0-9a-f]{32}$")


@pytest.fixture(scope="module")
def desk() -> Iterator[Any]:
    with serving(KeyedDesk()) as running:
        yield running


def _place(*order_ids: str) -> dict[str, Any]:
    calls = [
        {"tool": "place_order", "args": {"order_id": order_id}, "result_key": "confirmation"}
        for order_id in order_ids
    ]
    return {"order": {"tool_calls": calls}}


def _fakes(desk: Any, script: dict[str, Any], on_unknown: OnUnknown = "retry") -> Fakes:
    desk.desk.clear()
    fakes = Fakes(script)
    fakes.tool_servers.put(
        ToolServer(name="desk", url=desk.url, allow=("place_order",), on_unknown=on_unknown)
    )
    put_ordering(fakes)
    return fakes


def _drive(run_id: str, fakes: Fakes) -> RunRecord:
    return drive(run_id, fakes, on_approval=lambda r: {}, sleep=lambda s: None)


def _tool_events(fakes: Fakes, run_id: str) -> list[dict[str, Any]]:
    timeline = fakes.runs.get_timeline(run_id)
    return [e.detail for e in timeline if e.type == TimelineEventType.tool_called]


def _crash_mid_call(fakes: Fakes) -> tuple[str, Fakes]:
    """Start a run whose process dies mid-call; returns the run and the next process."""
    run, _ = start_run(StartRun("ordering", input={"order_id": "A100"}), fakes)
    # (the call is recorded as started and reaches the server; the process dies before its
    # answer is recorded)
    dying = DyingTasks("tool", kept=False, done_only=True)
    fakes.tasks = dying
    with pytest.raises(Crash):
        run_segment(RunSegment(run.run_id), fakes)
    again = fakes.another_process()
    again.tasks = dying.left_behind()
    return run.run_id, again


def test_each_call_carries_its_own_key_in_meta_and_in_the_header(desk: Any) -> None:
    # Given a step that places two orders
    fakes = _fakes(desk, _place("A100", "A101"))
    run, _ = start_run(StartRun("ordering", input={"order_id": "A100"}), fakes)

    # When it runs
    result = _drive(run.run_id, fakes)

    # Then the server saw each call's key, the same in _meta and in the header, one per call
    assert result.status == "succeeded"
    [(first, meta_1, header_1), (second, meta_2, header_2)] = desk.desk.seen
    assert (first, second) == ("A100", "A101")
    assert meta_1 is not None and KEY.match(meta_1) and header_1 == meta_1
    assert meta_2 is not None and KEY.match(meta_2) and header_2 == meta_2
    assert meta_1 != meta_2


def test_a_call_cut_off_by_a_crash_is_sent_again_with_the_same_key(desk: Any) -> None:
    # Given a step whose process died after its call reached the server, before its answer
    # was recorded
    fakes = _fakes(desk, _place("A100"))
    run_id, again = _crash_mid_call(fakes)
    assert len(desk.desk.seen) == 1

    # When a new process runs the segment again
    result = _drive(run_id, again)

    # Then the call was sent again with the same key, and the server, which remembers it,
    # placed the order once and answered the repeat as the first call
    assert result.status == "succeeded", result.error
    [(_, first, first_header), (_, second, second_header)] = desk.desk.seen
    assert first is not None and first == second == first_header == second_header
    assert desk.desk.placed == ["A100"]
    assert result.outputs["confirmation"] == "order A100 placed as #1"
    # and the timeline says the call's outcome was unknown, then what it was
    events = _tool_events(again, run_id)
    assert [(e["tool"], e["outcome"]) for e in events] == [
        ("place_order", "unknown"),
        ("place_order", "ok"),
    ]
    assert events[0]["idempotency_key"] == first
    assert "sent again with the same idempotency key" in events[0]["tool_error"]


def test_with_on_unknown_fail_the_step_fails_by_name_and_the_call_is_not_sent_again(
    desk: Any,
) -> None:
    # Given a tool registered with --on-unknown fail, and a step whose process died mid-call
    fakes = _fakes(desk, _place("A100"), on_unknown="fail")
    run_id, again = _crash_mid_call(fakes)

    # When a new process runs the segment again
    result = _drive(run_id, again)

    # Then the step failed with the named error, saying which call and what to do
    assert result.status == "failed"
    assert result.error is not None
    assert result.error["type"] == "ToolCallOutcomeUnknownError"
    [(_, key, _)] = desk.desk.seen
    assert key is not None and key in result.error["message"]
    assert "--on-unknown retry" in result.error["message"]
    assert "langorch runs redrive" in result.error["message"]
    # and the server saw the call once; the timeline says its outcome is unknown
    assert len(desk.desk.seen) == 1
    events = _tool_events(again, run_id)
    assert [(e["outcome"], e["idempotency_key"]) for e in events] == [("unknown", key)]
    assert "not sent again" in events[0]["tool_error"]
