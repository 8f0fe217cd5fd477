"""The tool registry and the tools' own behaviour (no model, no network)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from langorch.domain.errors import LLMError
from langorch.llm.builtin_tools import KNOWN_TOOLS, build_tools, calculate, current_time, http_get


def test_calculator_evaluates_arithmetic() -> None:
    assert calculate("(12.5 + 7.5) * 3 - 2 ** 3 // 3 % 5") == 58.0


@pytest.mark.parametrize(
    "expression",
    ["__import__('os').system('id')", "abs(-1)", "x + 1", "[1, 2]", "1 if 1 else 2", "'a' * 3"],
)
def test_calculator_refuses_anything_but_arithmetic(expression: str) -> None:
    with pytest.raises(ValueError, match="not allowed"):
        calculate(expression)


def test_calculator_bounds_exponents() -> None:
    # An exponent tower would otherwise hang the function computing a huge integer
    with pytest.raises(ValueError, match="exponent"):
        calculate("9 ** 9 ** 9")


def test_calculator_reports_division_by_zero() -> None:
    with pytest.raises(ValueError, match="division by zero"):
        calculate("1 / 0")


def test_current_time_is_rendered_in_the_requested_zone() -> None:
    # Given a fixed clock
    def clock() -> datetime:
        return datetime(2025, 1, 31, 8, 30, tzinfo=UTC)

    # When the time is asked for in Paris
    # Then it is the local time with its offset
    assert current_time("Europe/Paris", now=clock) == "2025-01-31T09:30:00+01:00"


def test_current_time_refuses_an_unknown_zone() -> None:
    with pytest.raises(ValueError, match="unknown time zone"):
        current_time("Mars/Olympus")


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:9001/2018-06-01/runtime", "http://169.254.169.254/", "http://10.0.0.1/"],
)
def test_http_get_refuses_private_addresses(url: str) -> None:
    # The model picks the URL: it must not reach the Lambda runtime API, metadata or the VPC
    with pytest.raises(ValueError, match="not a public address"):
        http_get(url)


def test_http_get_refuses_other_schemes() -> None:
    with pytest.raises(ValueError, match="only http"):
        http_get("file:///etc/passwd")


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
