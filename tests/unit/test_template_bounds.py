"""Expressions and templates are bounded in what they build and how long they run."""

from __future__ import annotations

import pytest

from langorch.domain._jinja_sandbox import MAX_BUILT, ExpressionLimitError
from langorch.domain.templates import TemplateError, evaluate, render


@pytest.mark.parametrize(
    "bomb",
    [
        "('a' * 50000000) | length",  # the reported one: allocated 50 MB and succeeded
        "50000000 * 'a'",
        "[0] * 100000000",
        "'x' | center(1000000000)",
        "'x' | indent(1000000000, true)",
        "'x'.ljust(1000000000)",
        "'x'.zfill(1000000000)",
        "2 ** 1000000000",
        "('x' * 1000000) | replace('x', 'y' * 1000)",
        "('x' * 1000000).replace('x', 'y' * 1000)",
        "('x' * 3000000) + ('y' * 3000000)",
    ],
)
def test_an_expression_that_would_build_past_the_bound_fails_before_building_it(bomb: str):
    # When the expression is evaluated
    with pytest.raises(ExpressionLimitError) as raised:
        evaluate(bomb, {})

    # Then the error names the limit and how to fix it, and it is never retried
    assert f"limit {MAX_BUILT:,}" in str(raised.value)
    assert "bound the repetition" in str(raised.value)
    assert raised.value.retryable is False


def test_nested_loops_stop_at_the_time_bound():
    # Given 10^10 empty iterations (each range() alone is within Jinja's cap)
    template = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"

    # When rendered, then it stops with the time bound's message
    with pytest.raises(ExpressionLimitError, match="ran longer than"):
        render(template, {})


def test_a_loop_that_writes_too_much_stops_at_the_rendered_size_bound():
    template = "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}"

    with pytest.raises(TemplateError, match="rendered more than"):
        render(template, {})


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("'ab' * 3", "ababab"),
        ("[1, 2] * 2", [1, 2, 1, 2]),
        ("2 ** 10", 1024),
        ("'x' | center(5)", "  x  "),
        ("items | join(', ')", "a, b"),
        ("'a-b'.replace('-', '+')", "a+b"),
        ("(items + ['c']) | length", 3),
    ],
)
def test_ordinary_expressions_are_untouched_by_the_bounds(expression: str, expected: object):
    assert evaluate(expression, {"items": ["a", "b"]}) == expected
