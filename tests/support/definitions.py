"""Definitions documents (the YAML ``register_text`` and ``langorch workflows put`` take), with
the scaffolding every test workflow repeats written once: the ``workflows:`` list, ``memory:
false`` and the inputs schema. A test spells out only the header fields and steps it is about::

    FLOW = workflow("flow", inputs={"n": "integer"}).steps('''
      - {step_id: double, kind: transform, transform: {twice: "n * 2"}}
    ''')
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Workflow:
    """A workflow's header, waiting for its steps (``workflow(...)`` builds it)."""

    header: dict[str, Any]

    def steps(self, steps: str) -> str:
        """The definitions document of this one workflow.

        Args:
            steps: Its steps, YAML list items (``- {step_id: …}``) at any indentation.
        """
        first, *rest = (f"{key}: {json.dumps(value)}" for key, value in self.header.items())
        lines = [f"  - {first}", *(f"    {line}" for line in rest), "    steps:"]
        body = textwrap.indent(textwrap.dedent(steps).strip("\n"), "      ")
        return "\n".join(["workflows:", *lines, body]) + "\n"


def workflow(
    plan_id: str,
    *,
    inputs: dict[str, str] | None = None,
    required: list[str] | None = None,
    memory: bool = False,
    **fields: Any,
) -> Workflow:
    """A workflow ``plan_id``; ``.steps(yaml)`` gives its definitions document.

    Args:
        plan_id: The workflow's id.
        inputs: Its inputs schema's properties, by name: their JSON types (``{"n": "integer"}``).
        required: The inputs that must be given.
        memory: Whether its runs keep memory (off unless the test is about memory).
        **fields: Any other field of the workflow (``approvers``, ``triggers``, ``throttle``, …),
            as a Python value (written in YAML's JSON form).
    """
    header: dict[str, Any] = {"plan_id": plan_id, "memory": memory, **fields}
    if inputs is not None:
        schema: dict[str, Any] = {"properties": {k: {"type": t} for k, t in inputs.items()}}
        if required:
            schema["required"] = required
        header["inputs_schema"] = schema
    return Workflow(header)


def together(*documents: str) -> str:
    """One document holding the workflows of several ``workflow(...).steps(...)`` documents."""
    first, *rest = documents
    return first + "".join(document.removeprefix("workflows:\n") for document in rest)
