"""Registered tools: a registration holds secret ids, never values; the recorder replays."""

from __future__ import annotations

import asyncio
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
