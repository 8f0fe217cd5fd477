"""Definitions documents (the YAML ``register_text`` and ``langorch workflows put`` take), with
the scaffolding every test workflow repeats written once: the ``workflows:`` list, ``memory:
false`` and the inputs schema. A test spells out only the steps it is about."""

from __future__ import annotations

import json
import textwrap
from typing import Any


def workflow(
    plan_id: str,
    steps: str,
    *,
    inputs: dict[str, str] | None = None,
    required: list[str] | None = None,
    **fields: Any,
) -> str:
    """A definitions document of one workflow, memory off.

    Args:
        plan_id: The workflow's id.
        steps: Its steps, YAML list items (``- {step_id: …}``) at any indentation.
        inputs: Its inputs schema's properties, by name: their JSON types (``{"n": "integer"}``).
        required: The inputs that must be given.
        **fields: Any other field of the workflow (``approvers``, ``triggers``, ``throttle``, …),
            as a Python value (written in YAML's JSON form).

    Example:
        ``workflow("flow", '- {step_id: one, kind: transform, transform: {a: "1"}}')``
    """
    header = {"plan_id": plan_id, "memory": False, **fields}
    if inputs is not None:
        schema: dict[str, Any] = {"properties": {k: {"type": t} for k, t in inputs.items()}}
        if required:
            schema["required"] = required
        header["inputs_schema"] = schema
    first, *rest = (f"{key}: {json.dumps(value)}" for key, value in header.items())
    lines = [f"  - {first}", *(f"    {line}" for line in rest), "    steps:"]
    body = textwrap.indent(textwrap.dedent(steps).strip("\n"), "      ")
    return "\n".join(["workflows:", *lines, body]) + "\n"


def together(*documents: str) -> str:
    """One document holding the workflows (and blocks) of several ``workflow`` documents."""
    first, *rest = documents
    return first + "".join(document.removeprefix("workflows:\n") for document in rest)
