"""The ``slow`` marker names the long tests, so ``pytest -m "not slow"`` is a quick loop."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _marks(function: ast.FunctionDef) -> set[str]:
    # `@pytest.mark.slow` is an Attribute chain pytest.mark.<name>
    return {
        decorator.attr
        for decorator in function.decorator_list
        if isinstance(decorator, ast.Attribute)
        and isinstance(decorator.value, ast.Attribute)
        and decorator.value.attr == "mark"
    }


def test_the_four_hundred_step_tests_are_marked_slow():
    long_tests = {
        f"{path.relative_to(TESTS)}::{node.name}": _marks(node)
        for path in TESTS.rglob("test_*.py")
        if "400_step" in (source := path.read_text(encoding="utf-8"))  # parse only those
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef) and "400_step" in node.name
    }

    assert len(long_tests) == 2, long_tests
    assert {name for name, marks in long_tests.items() if "slow" not in marks} == set()
