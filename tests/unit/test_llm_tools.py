"""The tool registry and the tools' own behaviour (no model, no network)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from langorch.domain.errors import LLMError
from langorch.llm.builtin_tools import KNOWN_TOOLS, build_tools, calculate, current_time, http_get


def test_calculator_evaluates_arithmetic() -> None:
    assert calculate("(12.5 + 7.5) * 3 - 2 ** 3 // 3 % 5") == 58.0


def test_current_time_is_rendered_in_the_requested_zone() -> None:
    # Given a fixed clock
    def clock() -> datetime:
        return datetime(2025, 1, 31, 8, 30, tzinfo=UTC)

    # When the time is asked for in Paris
    # Then it is the local time with its offset
    assert current_time("Europe/Paris", now=clock) == "2025-01-31T09:30:00+01:00"


NOT_ARITHMETIC = [
    "__import__('os').system('id')",
    "abs(-1)",
    "x + 1",
    "[1, 2]",
    "1 if 1 else 2",
    "'a' * 3",
]
# The model picks the URL: it must not reach the Lambda runtime API, metadata or the VPC
PRIVATE = {
    "runtime-api": "http://127.0.0.1:9001/2018-06-01/runtime",
    "metadata": "http://169.254.169.254/",
    "vpc": "http://10.0.0.1/",
}


@pytest.mark.parametrize(
    ("tool", "argument", "refusal"),
    [
        *[pytest.param(calculate, e, "not allowed", id=f"calculator-{e}") for e in NOT_ARITHMETIC],
        # An exponent tower would otherwise hang the function computing a huge integer
        pytest.param(calculate, "9 ** 9 ** 9", "exponent", id="calculator-exponent-tower"),
        pytest.param(calculate, "1 / 0", "division by zero", id="calculator-division-by-zero"),
        pytest.param(current_time, "Mars/Olympus", "unknown time zone", id="time-unknown-zone"),
        *[
            pytest.param(http_get, url, "not a public address", id=f"http-get-{name}")
            for name, url in PRIVATE.items()
        ],
        pytest.param(http_get, "file:///etc/passwd", "only http", id="http-get-file-scheme"),
    ],
)
def test_a_tool_refuses_what_it_must_not_do_saying_why(
    tool: Callable[[str], object], argument: str, refusal: str
) -> None:
    with pytest.raises(ValueError, match=refusal):
        tool(argument)


def test_build_tools_gives_langchain_tools_by_name() -> None:
    # When the known tools are built
    tools = build_tools(sorted(KNOWN_TOOLS))

    # Then each is a LangChain tool with its registry name that can be invoked
    assert [t.name for t in tools] == sorted(KNOWN_TOOLS)
    calculator = next(t for t in tools if t.name == "calculator")
    assert calculator.invoke({"expression": "6*7"}) == "42"


def test_build_tools_refuses_unknown_names() -> None:
    with pytest.raises(LLMError, match="known tools: calculator, current_time, http_get"):
        build_tools(["calculator", "teleport"])
