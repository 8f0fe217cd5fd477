"""Registered tools: a registration holds secret ids, never values; the recorder replays, and
records a keyed call as started before it is made, so a replay knows its outcome is unknown."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest
from pydantic import ValidationError

from langorch.app.tasks import TaskRecorder
from langorch.domain.tasks import fingerprint
from langorch.domain.tool_servers import ToolServer, ToolServerError, parse_header
from tests.fakes import InMemoryTasks


def test_a_header_names_a_secret_id() -> None:
    assert parse_header("Authorization=secret:langorch/tools/orders") == (
        "Authorization",
        "langorch/tools/orders",
    )


@pytest.mark.parametrize("option", ["Authorization=Bearer abc", "Authorization", "=secret:x"])
def test_a_literal_header_value_is_refused(option: str) -> None:
    with pytest.raises(ToolServerError, match=r"secret:"):
        parse_header(option)


def test_a_url_with_a_password_is_refused() -> None:
    with pytest.raises(ValidationError, match="--header"):
        ToolServer(name="orders", url="http://user:pw@example.com/mcp")


def test_allow_limits_the_tools_a_model_may_call() -> None:
    server = ToolServer(name="orders", url="http://127.0.0.1/mcp", allow=("lookup_order",))
    assert server.allows("lookup_order")
    assert not server.allows("cancel_order")
    assert ToolServer(name="all", url="http://127.0.0.1/mcp").allows("anything")


def _recorder(store: InMemoryTasks, attempt: int = 1) -> TaskRecorder:
    return TaskRecorder(store, "r1", "lookup", 0, attempt)


def _counting(calls: list[int]) -> Any:
    async def call() -> dict[str, Any]:
        calls.append(1)
        return {"output": f"call {len(calls)}"}

    return call


def test_a_recorded_call_is_not_made_again() -> None:
    # Given a call recorded by an attempt that then died
    store, calls = InMemoryTasks(), []
    asyncio.run(_recorder(store).once("tool", fingerprint("add", {"a": 1}), _counting(calls)))
    # When the step runs again and asks the same
    result, replayed = asyncio.run(
        _recorder(store).once("tool", fingerprint("add", {"a": 1}), _counting(calls))
    )
    # Then the recorded result comes back and the call is not made again
    assert (result, replayed, len(calls)) == ({"output": "call 1"}, True, 1)


def test_a_retry_reuses_an_earlier_attempts_record_only_for_the_same_question() -> None:
    store, calls = InMemoryTasks(), []
    asyncio.run(_recorder(store).once("tool", fingerprint("add", 1), _counting(calls)))
    same = asyncio.run(_recorder(store, 2).once("tool", fingerprint("add", 1), _counting(calls)))
    other = asyncio.run(_recorder(store, 3).once("tool", fingerprint("add", 2), _counting(calls)))
    assert same == ({"output": "call 1"}, True)
    assert other == ({"output": "call 2"}, False)


def test_a_failed_call_records_nothing() -> None:
    store = InMemoryTasks()

    async def failing() -> dict[str, Any]:
        raise RuntimeError("down")

    with pytest.raises(RuntimeError):
        asyncio.run(_recorder(store).once("tool", "fp", failing))
    assert store.all("r1") == []


def test_a_result_too_large_to_record_is_made_again_on_replay() -> None:
    store, calls = InMemoryTasks(), []

    async def huge() -> dict[str, Any]:
        calls.append(1)
        return {"output": "x" * 50_000}

    asyncio.run(_recorder(store).once("llm", "fp", huge))
    asyncio.run(_recorder(store).once("llm", "fp", huge))
    assert (len(calls), store.all("r1")) == (2, [])


class Dies(BaseException):
    """The process stops (nothing handles it)."""


def _keyed(
    store: InMemoryTasks, digest: str, made: list[str], unknown: list[str], attempt: int = 1
) -> tuple[dict[str, Any], bool]:
    async def call(key: str) -> dict[str, Any]:
        made.append(key)
        return {"output": f"call {len(made)}"}

    return asyncio.run(
        _recorder(store, attempt).once_keyed("tool", digest, call, unknown=unknown.append)
    )


def test_a_keyed_call_is_recorded_started_with_its_key_before_it_is_made() -> None:
    # Given a call whose process dies while the call is out
    store = InMemoryTasks()
    seen_by_then: list[list[Any]] = []

    async def dies(key: str) -> dict[str, Any]:
        seen_by_then.append([(r.state, r.key) for r in store.all("r1")])
        raise Dies

    # When it is made
    with pytest.raises(Dies):
        asyncio.run(_recorder(store).once_keyed("tool", "fp", dies, unknown=lambda key: None))

    # Then the store held it as started, with the key it was sent with, before it went out
    [[(state, key)]] = seen_by_then
    assert state == "started" and len(key) == 32


def test_a_call_found_started_is_told_unknown_and_made_again_with_the_same_key() -> None:
    # Given a call recorded as started by a process that died before its answer was recorded
    store, made, unknown = InMemoryTasks(), [], []
    _keyed(store, "fp", made, unknown)
    store.put("r1", replace(store.all("r1")[0], state="started", result={}))

    # When the step runs again and asks the same
    result, replayed = _keyed(store, "fp", made, unknown)

    # Then the caller was told the key of the unknown call, and it was made again with it
    assert unknown == [made[0]]
    assert made == [made[0], made[0]]
    assert (result, replayed) == ({"output": "call 2"}, False)
    assert [(r.state, r.key) for r in store.all("r1")] == [("done", made[0])]


def test_an_unknown_call_the_caller_refuses_is_not_made_again() -> None:
    store, made = InMemoryTasks(), []
    _keyed(store, "fp", made, [])
    store.put("r1", replace(store.all("r1")[0], state="started", result={}))

    def refuse(key: str) -> None:
        raise RuntimeError(f"unknown: {key}")

    async def call(key: str) -> dict[str, Any]:
        made.append(key)
        return {}

    with pytest.raises(RuntimeError, match=made[0]):
        asyncio.run(_recorder(store).once_keyed("tool", "fp", call, unknown=refuse))
    assert len(made) == 1


def test_a_retry_asking_something_else_at_the_same_index_is_another_call_with_another_key() -> None:
    # Given an attempt whose call at index 0 was started and never recorded back
    store, made, unknown = InMemoryTasks(), [], []
    _keyed(store, "fp-a", made, unknown)
    store.put("r1", replace(store.all("r1")[0], state="started", result={}))

    # When the next attempt asks something else first
    _keyed(store, "fp-b", made, unknown, attempt=2)

    # Then that is a new call, with a key of its own: a server that remembers keys does not
    # answer it with the first call's result
    assert unknown == []
    assert made[1] != made[0]


def test_a_call_done_in_a_later_attempt_is_replayed_not_told_unknown() -> None:
    # Given a call started in attempt 1 (never recorded back) and done in attempt 2
    store, made, unknown = InMemoryTasks(), [], []
    _keyed(store, "fp", made, unknown)
    store.put("r1", replace(store.all("r1")[0], state="started", result={}))
    _keyed(store, "fp", made, unknown, attempt=2)
    unknown.clear()

    # When attempt 3 asks the same
    result, replayed = _keyed(store, "fp", made, unknown, attempt=3)

    # Then attempt 2's answer comes back; nothing is unknown and nothing is sent
    assert (result, replayed, unknown, len(made)) == ({"output": "call 2"}, True, [], 2)
