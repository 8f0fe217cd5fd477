"""A run's input against the workflow's inputs schema."""

from __future__ import annotations

import pytest

from langorch.domain.definitions import TaskPlan
from langorch.domain.errors import InputValidationError
from langorch.domain.inputs import ensure_valid_input, input_problems, with_defaults

PLAN = TaskPlan.model_validate(
    {
        "plan_id": "p",
        "steps": [{"step_id": "s", "kind": "transform", "transform": {"y": "x"}}],
        "inputs_schema": {
            "properties": {
                "x": {"type": "integer"},
                "items": {"type": "array", "items": {"type": "object", "required": ["id"]}},
                "threshold": {"type": "number", "default": 1000},
            },
            "required": ["x"],
        },
    }
)


def test_defaults_fill_only_missing_keys():
    assert with_defaults(PLAN, {"x": 1}) == {"x": 1, "threshold": 1000}
    assert with_defaults(PLAN, {"x": 1, "threshold": 5})["threshold"] == 5


def test_every_problem_is_reported_with_its_path():
    problems = input_problems(PLAN, {"items": [{"id": "a"}, {}], "x": "one"})

    assert [p.path for p in problems] == ["input.items[1].id", "input.x"]


def test_a_missing_required_key_names_the_key():
    with pytest.raises(InputValidationError) as caught:
        ensure_valid_input(PLAN, {})

    assert [p.path for p in caught.value.problems] == ["input.x"]
    assert caught.value.problems[0].hint == "add it to the run's input"


def test_an_input_that_is_not_an_object_is_refused():
    assert [p.path for p in input_problems(PLAN, ["x"])] == ["input"]
