"""Check a run's input against the workflow's inputs schema (JSON Schema, Draft 2020-12)."""

from __future__ import annotations

from typing import Any

from langorch.domain.definitions import TaskPlan
from langorch.domain.errors import InputValidationError, Problem


def _path(parts: Any) -> str:
    path = "input"
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def input_problems(plan: TaskPlan, data: Any) -> list[Problem]:
    """Every way ``data`` fails the plan's ``inputs_schema`` (empty when it fits)."""
    if not isinstance(data, dict):
        return [
            Problem(
                "input",
                f"must be a JSON object, got {type(data).__name__}",
                'send an object such as {"key": "value"}',
            )
        ]
    if plan.inputs_schema is None:
        return []
    # Imported here: only starting a run checks inputs, and the runner's cold start should not
    # pay for jsonschema.
    from jsonschema import Draft202012Validator

    schema = plan.inputs_schema.model_dump(mode="json")
    validator = Draft202012Validator(schema)
    problems = []
    for error in sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path)):
        parts = list(error.absolute_path)
        if error.validator == "required":
            missing = error.message.split("'")[1] if "'" in error.message else ""
            parts.append(missing)
            hint = "add it to the run's input"
        else:
            hint = f"see inputs_schema.properties of workflow {plan.plan_id}"
        problems.append(Problem(_path(parts), error.message, hint))
    return problems


def ensure_valid_input(plan: TaskPlan, data: Any) -> None:
    """Raise ``InputValidationError`` with every problem when ``data`` does not fit."""
    problems = input_problems(plan, data)
    if problems:
        raise InputValidationError(f"input for workflow {plan.plan_id}", problems)


def with_defaults(plan: TaskPlan, data: dict[str, Any]) -> dict[str, Any]:
    """The input with the schema's top-level ``default`` values filled in where absent."""
    if plan.inputs_schema is None:
        return dict(data)
    filled = dict(data)
    for key, prop in plan.inputs_schema.properties.items():
        if key not in filled and "default" in prop:
            filled[key] = prop["default"]
    return filled
