"""Tool-calling steps against a real MCP server (the order_status example's, over streamable
HTTP on 127.0.0.1; no mocked client): the loop and its bound, tool errors told to the model, an
unbound tool failing the step, header secrets kept out of the timeline and logs, and a crash
between a tool call and the step's checkpoint replayed without calling the tool again. Slow and
broken servers (``tests/mcp_servers.py``): a call past its timeout, a server hanging up
mid-answer, the step's own timeout, which still stops the step, and an answer of 50 MB, refused
while it is read."""

from __future__ import annotations

import functools
import json
import logging
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from langorch.adapters.mcp import McpConnection
from langorch.app.runs import RunSegment, StartRun, drive, run_segment, start_run
from langorch.domain.runs import RunStatus, TimelineEventType
from langorch.domain.tool_servers import ToolServer
from tests.fakes import Fakes, InMemoryTasks, InMemoryToolServers
from tests.mcp_servers import SlowDesk, serving
from tests.order_desk import load_order_desk
from tests.support.crashes import Crash, DyingTasks
from tests.support.definitions import put_order_step

TOKEN = "tok-5f1c9d-never-shown"
SECRET_ID = "langorch/tools/orders"


@pytest.fixture(scope="module")
def desk() -> Iterator[Any]:
    module = load_order_desk()
    running = module.serve(TOKEN)
    running.calls = module.CALLS
    yield running
    running.stop()


def _put_track(fakes: Fakes, *tools: str, **limits: Any) -> None:
    """Workflow ``track``: step ``look`` asks where order ``order_id`` is, calling ``tools``,
    and writes ``status_text`` and ``minutes``."""
    prompt = "Where is order {{ order_id }}?"
    outputs = ["status_text", "minutes"]
    put_order_step(fakes, "track", "look", prompt=prompt, outputs=outputs, tools=[*tools], **limits)


def _fakes(desk: Any, script: dict[str, Any], **settings: Any) -> Fakes:
    desk.calls.clear()
    fakes = Fakes(script, **settings)
    fakes.secrets.put_json(SECRET_ID, {"value": f"Bearer {TOKEN}"})
    fakes.tool_servers.put(
        ToolServer(name="orders", url=desk.url, headers={"Authorization": SECRET_ID})
    )
    # Stored as-is: registration-time validation of tool names is the seed helper's (issue 9
    # item 1); these tests are about what happens when the step runs.
    _put_track(fakes, "orders", "calculator", "browser")
    return fakes


def _script(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"look": {"tool_calls": list(calls)}}


def _run(fakes: Fakes) -> tuple[Any, list[Any]]:
    run, _ = start_run(StartRun("track", input={"order_id": "A100"}), fakes)
    result = drive(run.run_id, fakes, on_approval=lambda r: {}, sleep=lambda s: None)
    return result, fakes.runs.get_timeline(run.run_id)


def _tool_events(timeline: list[Any]) -> list[dict[str, Any]]:
    return [e.detail for e in timeline if e.type == TimelineEventType.tool_called]


LOOKUP = {"tool": "lookup_order", "args": {"order_id": "A100"}, "result_key": "status_text"}
ESTIMATE = {"tool": "estimate_delivery", "args": {"order_id": "A100"}, "result_key": "minutes"}


def test_the_step_calls_its_mcp_tools_and_answers_with_their_results(desk: Any) -> None:
    fakes = _fakes(desk, _script(LOOKUP, ESTIMATE))
    result, timeline = _run(fakes)
    assert result.status == "succeeded"
    assert result.outputs["status_text"].startswith("order A100: out for delivery")
    assert result.outputs["minutes"] == "12"
    assert dict(desk.calls) == {"lookup_order": 1, "estimate_delivery": 1}
    events = _tool_events(timeline)
    assert [(e["tool"], e["outcome"]) for e in events] == [
        ("lookup_order", "ok"),
        ("estimate_delivery", "ok"),
    ]
    assert events[0]["args"] == '{"order_id": "A100"}'


def test_built_in_and_mcp_tools_bind_together(desk: Any) -> None:
    calc = {"tool": "calculator", "args": {"expression": "6*7"}, "result_key": "minutes"}
    result, _ = _run(_fakes(desk, _script(LOOKUP, calc)))
    assert (result.status, result.outputs["minutes"]) == ("succeeded", "42")


def test_calls_past_the_bound_are_refused_and_never_reach_the_server(desk: Any) -> None:
    fakes = _fakes(desk, _script(LOOKUP, LOOKUP, LOOKUP, LOOKUP), tool_max_calls_per_step=2)
    result, timeline = _run(fakes)
    assert result.status == "succeeded"
    assert desk.calls["lookup_order"] == 2
    assert [e["outcome"] for e in _tool_events(timeline)] == ["ok", "ok"]


def test_a_failing_tool_is_told_to_the_model_and_the_step_goes_on(desk: Any) -> None:
    missing = {**LOOKUP, "args": {"order_id": "Z999"}}
    result, timeline = _run(_fakes(desk, _script(missing)))
    assert result.status == "succeeded"
    assert "no order 'Z999'" in result.outputs["status_text"]
    assert [e["outcome"] for e in _tool_events(timeline)] == ["error"]


def test_a_tool_the_step_does_not_bind_fails_the_step_by_name(desk: Any) -> None:
    browse = {"tool": "browser", "args": {"url": "https://example.com"}}
    result, timeline = _run(_fakes(desk, _script(browse, LOOKUP)))
    assert result.status == "failed"
    assert result.error is not None
    assert "UnboundToolError" in result.error["type"] + result.error["message"]
    assert "'browser'" in result.error["message"]
    assert "not registered: browser" in result.error["message"]
    assert "langorch tools add" in result.error["message"]
    assert [e["outcome"] for e in _tool_events(timeline)] == ["unbound"]
    assert dict(desk.calls) == {}


def test_the_header_secret_never_reaches_the_timeline_or_the_logs(
    desk: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fakes = _fakes(desk, _script(LOOKUP))
    result, timeline = _run(fakes)
    assert result.status == "succeeded"
    assert desk.calls["lookup_order"] == 1  # the server refuses requests without the token
    shown = json.dumps([e.model_dump(mode="json") for e in timeline])
    logged = "\n".join(
        f"{r.getMessage()} {json.dumps(r.__dict__, default=str)}" for r in caplog.records
    )
    assert "tool called" in logged
    assert TOKEN not in shown
    assert TOKEN not in logged


def test_a_wrong_token_fails_the_step_naming_the_tool_not_the_secret(desk: Any) -> None:
    fakes = _fakes(desk, _script(LOOKUP))
    fakes.secrets.put_json(SECRET_ID, {"value": "Bearer wrong-token-xyz"})
    result, _ = _run(fakes)
    assert result.status == "failed"
    assert result.error is not None
    assert "tool orders" in result.error["message"]
    assert "wrong-token-xyz" not in json.dumps(result.error)
    assert dict(desk.calls) == {}


@pytest.mark.parametrize("allow", [(), ("lookup_order",)], ids=["listed", "called"])
def test_a_token_renewed_since_it_was_cached_is_read_afresh_and_the_call_goes_through(
    desk: Any, allow: tuple[str, ...]
) -> None:
    # Given a process that cached the server's old token, and the server restarted with a new
    # one, stored in the secret (the first contact lists the tools, or, with an allow list,
    # is the call itself)
    fakes = _fakes(desk, _script(LOOKUP))
    fakes.tool_servers.put(
        ToolServer(name="orders", url=desk.url, allow=allow, headers={"Authorization": SECRET_ID})
    )
    fakes.secrets.put_json(SECRET_ID, {"value": "Bearer the-old-token"})
    fakes.secrets.get_json(SECRET_ID)
    fakes.secrets.put_json(SECRET_ID, {"value": f"Bearer {TOKEN}"})

    # When the step calls the tool
    result, timeline = _run(fakes)

    # Then the refusal made the process read the secret afresh, and the call went through once
    assert result.status == "succeeded", result.error
    assert result.outputs["status_text"].startswith("order A100: out for delivery")
    assert desk.calls["lookup_order"] == 1
    assert [e["outcome"] for e in _tool_events(timeline)] == ["ok"]


def test_a_server_gone_from_its_address_is_looked_up_again_and_reached_where_it_is_now(
    desk: Any,
) -> None:
    # Given a registration read while its server was at an address where nothing answers now,
    # and the server registered anew at its new address
    fakes = _fakes(desk, _script(LOOKUP))
    gone = load_order_desk().serve(TOKEN)
    gone.stop()
    registration = ToolServer(
        name="orders", url=gone.url, allow=("lookup_order",), headers={"Authorization": SECRET_ID}
    )
    fakes.tool_servers = MovesAfterTheFirstRead(registration, desk.url)

    # When the step calls the tool
    result, timeline = _run(fakes)

    # Then the failed connection made the step read the registration again and reach the server
    assert result.status == "succeeded", result.error
    assert desk.calls["lookup_order"] == 1
    assert [e["outcome"] for e in _tool_events(timeline)] == ["ok"]


class MovesAfterTheFirstRead(InMemoryToolServers):
    """A registration whose server is registered anew, at ``moved_to``, right after it is
    first read (as `langorch dev` does for its example servers when it restarts)."""

    def __init__(self, registration: ToolServer, moved_to: str) -> None:
        super().__init__()
        self.put(registration)
        self._moved_to = moved_to

    def get(self, name: str) -> ToolServer | None:
        found = super().get(name)
        if found is not None and found.url != self._moved_to:
            self.put(found.model_copy(update={"url": self._moved_to}))
        return found


def test_a_server_that_cannot_be_reached_is_a_failed_call_even_when_the_step_succeeds(
    desk: Any,
) -> None:
    # Given a registered server that is not running
    fakes = _fakes(desk, _script(LOOKUP, ESTIMATE))
    gone = load_order_desk().serve(TOKEN)
    gone.stop()
    fakes.tool_servers.put(
        ToolServer(
            name="orders",
            url=gone.url,
            allow=("lookup_order", "estimate_delivery"),
            headers={"Authorization": SECRET_ID},
        )
    )

    # When the step calls its tools and the model answers with what they said
    result, timeline = _run(fakes)

    # Then the run succeeds with the tools' errors as its output, but the timeline marks each
    # call failed, saying why
    assert result.status == "succeeded"
    assert result.outputs["status_text"].startswith("error:")
    events = _tool_events(timeline)
    assert [e["outcome"] for e in events] == ["error", "error"]
    assert all("cannot connect to its MCP server" in e["tool_error"] for e in events)


def test_a_crash_after_a_tool_call_replays_it_without_calling_the_server_again(
    desk: Any,
) -> None:
    # Given a step whose process dies right after its tool call was made and recorded
    fakes = _fakes(desk, _script(LOOKUP))
    # (the tool call is recorded; the process dies before the step's answer is)
    crashing = DyingTasks("llm", kept=False)
    fakes.tasks = crashing
    run, _ = start_run(StartRun("track", input={"order_id": "A100"}), fakes)
    with pytest.raises(Crash):
        run_segment(RunSegment(run.run_id), fakes)
    assert desk.calls["lookup_order"] == 1
    # When a new process runs the segment again
    again = fakes.another_process()
    again.tasks = InMemoryTasks()
    again.tasks._records = crashing._records
    result = drive(run.run_id, again, on_approval=lambda r: {}, sleep=lambda s: None)
    # Then the run finishes with the recorded result and the server saw the call once
    assert result.status == "succeeded"
    assert result.outputs["status_text"].startswith("order A100: out for delivery")
    assert desk.calls["lookup_order"] == 1
    events = _tool_events(again.runs.get_timeline(run.run_id))
    assert [(e["tool"], e.get("replayed")) for e in events] == [("lookup_order", True)]
    assert again.runs.get_run(run.run_id).status == RunStatus.succeeded


def test_a_tool_whose_server_this_deployment_may_not_call_fails_the_step(desk: Any) -> None:
    fakes = _fakes(desk, _script(LOOKUP), tool_server_urls=["https://tools.example.org/mcp"])
    result, _ = _run(fakes)
    assert result.status == "failed"
    assert result.error is not None
    assert "not one this deployment may call" in result.error["message"]
    assert dict(desk.calls) == {}


def test_a_tool_outside_the_allow_list_is_unbound_and_never_reaches_the_server(desk: Any) -> None:
    fakes = _fakes(desk, _script(ESTIMATE, LOOKUP))
    server = fakes.tool_servers.get("orders")
    assert server is not None
    fakes.tool_servers.put(server.model_copy(update={"allow": ("lookup_order",)}))
    result, _ = _run(fakes)
    assert result.status == "failed"
    assert result.error is not None
    assert "'estimate_delivery'" in result.error["message"]
    assert "--allow" in result.error["message"]
    assert dict(desk.calls) == {}


def test_a_real_provider_binds_the_mcp_tools_and_its_rounds_are_recorded(desk: Any) -> None:
    # Given an OpenAI-compatible model that calls lookup_order, then answers
    from langorch.llm import LLMRegistry
    from tests.llm_servers import FakeOpenAI, Reply, completion

    fakes = _fakes(desk, {}, default_llm_provider="openai")
    model = FakeOpenAI()
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "lookup_order", "arguments": json.dumps({"order_id": "A101"})},
    }
    model.replies = [
        Reply(
            200,
            completion(
                {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls", 10, 5
            ),
        ),
        Reply(200, completion({"role": "assistant", "content": "Found it."}, "stop", 10, 5)),
        Reply(
            200,
            completion(
                {
                    "role": "assistant",
                    "content": json.dumps({"status_text": "being prepared", "minutes": "35"}),
                },
                "stop",
                10,
                5,
            ),
        ),
    ]
    with model.running():
        fakes.llm = LLMRegistry(
            default_provider="openai", openai_api_key="sk-test", openai_base_url=model.base_url
        )
        result, timeline = _run(fakes)
    # Then the model was offered the server's tools beside the built-in ones, the server was
    # called once, and the step answered
    offered = {t["function"]["name"] for t in model.received[0].body["tools"]}
    assert {"lookup_order", "estimate_delivery", "calculator"} <= offered
    assert model.received[1].body["messages"][-1]["content"].startswith("order A101")
    assert (result.status, result.outputs["status_text"]) == ("succeeded", "being prepared")
    assert desk.calls["lookup_order"] == 1
    assert [e["tool"] for e in _tool_events(timeline)] == ["lookup_order"]
    # and the model's rounds, the tool call and the answer were recorded in order
    kinds = [r.kind for r in fakes.tasks.all(result.run_id)]
    assert kinds == ["llm", "turn", "tool", "turn"]


# --- Slow and broken servers -------------------------------------------------------------------


@pytest.fixture(scope="module")
def slow_desk() -> Iterator[Any]:
    desk = SlowDesk()
    with serving(desk) as running:
        yield running
        desk.release()  # a call still waiting answers, so the server's thread can stop


def _slow_fakes(
    url: str, script: dict[str, Any], *, timeout_seconds: int = 60, **settings: Any
) -> Fakes:
    fakes = Fakes(script, **settings)
    fakes.tool_servers.put(ToolServer(name="slow", url=url))
    _put_track(fakes, "slow", "calculator", timeout_seconds=timeout_seconds)
    return fakes


WAIT = {"tool": "wait_for_release", "args": {"order_id": "A100"}, "result_key": "status_text"}
CALC = {"tool": "calculator", "args": {"expression": "6*7"}, "result_key": "minutes"}


def test_a_tool_slower_than_its_timeout_is_told_to_the_model_and_the_run_goes_on(
    slow_desk: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a tool that never answers in time, calls bounded by tool_call_timeout_seconds=4,
    # and MCP connections whose connect timeout (3 s) is the shorter one
    caplog.set_level(logging.INFO)
    fakes = _slow_fakes(slow_desk.url, _script(WAIT, CALC), tool_call_timeout_seconds=4)
    fakes.tool_connector = functools.partial(McpConnection, connect_timeout=3.0)

    # When the step calls it
    result, timeline = _run(fakes)

    # Then the model was told the call timed out, its next call ran, and the run finished
    assert slow_desk.desk.started.is_set()
    assert result.status == "succeeded"
    assert "did not answer within 4 s" in result.outputs["status_text"]
    assert result.outputs["minutes"] == "42"
    # and the timeline and the logs say which tool timed out, and why
    event = next(e for e in timeline if e.type == TimelineEventType.tool_called)
    assert (event.detail["tool"], event.detail["outcome"]) == ("wait_for_release", "timeout")
    assert "did not answer within 4 s" in event.detail["tool_error"]
    [logged] = [r for r in caplog.records if getattr(r, "tool", None) == "wait_for_release"]
    assert (logged.levelno, getattr(logged, "outcome", None)) == (logging.WARNING, "timeout")
    assert "did not answer within 4 s" in str(getattr(logged, "tool_error", ""))


def test_a_server_hanging_up_mid_answer_is_a_tool_error_and_the_run_goes_on(
    slow_desk: Any,
) -> None:
    # Given a server that drops the connection halfway through its answer
    hang_up = {"tool": "hang_up", "args": {}, "result_key": "status_text"}
    fakes = _slow_fakes(slow_desk.url, _script(hang_up, CALC))

    # When the step calls it
    result, timeline = _run(fakes)

    # Then the failure is the tool's (told to the model, on the timeline), not the run's
    assert result.status == "succeeded"
    assert result.outputs["status_text"].startswith("error:")
    assert result.outputs["minutes"] == "42"
    assert [e["outcome"] for e in _tool_events(timeline)] == ["error", "ok"]


def test_the_steps_own_timeout_still_stops_a_step_waiting_on_a_tool(slow_desk: Any) -> None:
    # Given a step of 2 s whose tool may take 30 s
    fakes = _slow_fakes(
        slow_desk.url, _script(WAIT), timeout_seconds=2, tool_call_timeout_seconds=30
    )

    # When the step calls the tool that never answers in time
    result, _ = _run(fakes)

    # Then the step's timeout is not taken for the tool's: the step stops, and the run fails
    # with the step's timeout — its LLM call's share of it, or, when the machine is slow to
    # get there, the step's own deadline (both are the step's 2 s, neither the tool's 30 s)
    assert result.status == "failed"
    assert result.error is not None
    step_timeout = {
        "LLMTimeoutError": "timeout_seconds",
        "StepTimeoutError": "ran past 2s",
    }
    assert result.error["type"] in step_timeout
    assert step_timeout[result.error["type"]] in result.error["message"]


@pytest.fixture(scope="module")
def desk_apart() -> Iterator[str]:
    """The slow desk in a process of its own (its URL): what it builds to answer is not in the
    memory this process measures."""
    root = Path(__file__).resolve().parents[2]
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.mcp_servers"],
        cwd=root,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None and server.stdin is not None
    yield server.stdout.readline().strip()
    server.stdin.close()  # it stops when its stdin ends
    server.wait(timeout=60)


@pytest.mark.subprocess
def test_a_tool_answering_50_mb_is_refused_while_read_not_held_whole(desk_apart: str) -> None:
    # Given a tool that answers 50 MiB, and a first run that loaded everything a run loads
    flood = {"tool": "flood", "args": {"megabytes": 50}, "result_key": "status_text"}
    nothing = {**flood, "args": {"megabytes": 0}}
    warm, _ = _run(_slow_fakes(desk_apart, _script(nothing, CALC)))
    assert warm.status == "succeeded"
    fakes = _slow_fakes(desk_apart, _script(flood, CALC))

    # When a step calls it, with this process's allocations traced
    tracemalloc.start()
    try:
        result, timeline = _run(fakes)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    # Then the model was told the answer was too large, its next call ran, the run finished,
    # and of the 50 MiB the server sent this process never held more than a few MiB at once
    assert result.status == "succeeded", (result.error, timeline)
    assert "answered more than 1,048,576 bytes" in result.outputs["status_text"]
    assert result.outputs["minutes"] == "42"
    assert [e["outcome"] for e in _tool_events(timeline)] == ["error", "ok"]
    assert peak < 8 * 1024 * 1024, f"peak {peak:,} bytes"
