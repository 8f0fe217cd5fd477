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


def put_order_step(
    fakes: Any,
    plan_id: str,
    step_id: str,
    *,
    prompt: str,
    outputs: list[str],
    tools: list[str],
    timeout_seconds: int | None = None,
    **plan: Any,
) -> None:
    """Store workflow ``plan_id`` (memory off): one model step ``step_id`` that reads
    ``order_id``, may call ``tools`` and writes ``outputs``; its block ``b_<step_id>`` is never
    retried, so a test counts each call it makes.

    Args:
        fakes: The fakes (``tests.fakes.Fakes``) whose definitions store takes them.
        plan_id: The workflow's id.
        step_id: The step's id.
        prompt: The block's prompt template.
        outputs: The block's output keys.
        tools: The tool servers (and built-in tools) it may call.
        timeout_seconds: The block's timeout, if not the default.
        **plan: Any other field of the workflow (``approvers``, ``tool_policies``, …).
    """
    from langorch.domain.definitions import BlockDefinition, PlanStep, TaskPlan

    block_id = f"b_{step_id}"
    limits = {} if timeout_seconds is None else {"timeout_seconds": timeout_seconds}
    fakes.definitions.put_block(
        BlockDefinition(
            block_id=block_id,
            input_keys=["order_id"],
            output_keys=outputs,
            prompt_template=prompt,
            tools_required=tools,
            max_retries=0,
            **limits,
        )
    )
    step = PlanStep(step_id=step_id, block_id=block_id)
    fakes.definitions.put_workflow(TaskPlan(plan_id=plan_id, memory=False, steps=[step], **plan))


def put_ordering(fakes: Any, **plan: Any) -> None:
    """Store workflow ``ordering``: step ``order`` places order ``order_id`` through the tool
    server ``desk`` (``tests.mcp_servers.KeyedDesk``) and writes ``confirmation``.

    Args:
        fakes: The fakes whose definitions store takes it.
        **plan: Any other field of the workflow (``approvers``, ``tool_policies``, …).
    """
    prompt = "Place order {{ order_id }}"
    put_order_step(
        fakes, "ordering", "order", prompt=prompt, outputs=["confirmation"], tools=["desk"], **plan
    )
