"""The operators' managed policy allows exactly the AWS calls ``langorch runs redrive | fork`` and
``langorch queues redrive`` can make against a deployed stack: derived from the use-cases the
CLI module imports (``tests/infra/aws_calls.py``), so a new call without a grant — or a grant no
code uses — fails here, not in an operator's terminal during an incident."""

from __future__ import annotations

import ast
from typing import Any

import pytest

from tests.infra.aws_calls import REPO, Call, function_calls
from tests.infra.conftest import Synth
from tests.infra.helpers import actions_on

COMMANDS = [
    REPO / "shared" / "langorch" / "cli" / "commands" / f"{group}.py"
    for group in ("recovery", "queues")
]
NOT_FROM_USE_CASES = {"cloudformation:DescribeStacks"}
"""``--stack NAME`` reads the stack's outputs before any use-case runs."""
RUN_HERE_ONLY = {"run_segment", "RunSegment"}
"""Imported to run a redriven run in the operator's process on a stack *without* a state
machine (``langorch dev``'s tests); a deployed stack's state machine runs it (the runner's role
holds those grants)."""
TABLES = {
    "definitions_table": "definitions",
    "runs_table": "runs",
    "checkpoints_table": "checkpoints",
}


@pytest.fixture(scope="module")
def needed(tmp_path_factory: pytest.TempPathFactory) -> set[Call]:
    """The calls of every use-case the recovery commands import (inside their functions)."""
    imports = [
        node
        for commands in COMMANDS
        for node in ast.walk(ast.parse(commands.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("langorch.app")
    ]
    for node in imports:
        node.names = [alias for alias in node.names if alias.name not in RUN_HERE_ONLY]
    entry = tmp_path_factory.mktemp("operators") / "commands.py"
    entry.write_text("\n".join(ast.unparse(n) for n in imports if n.names) + "\n")
    return function_calls(entry)


def _policy(synth: Synth) -> dict[str, Any]:
    logical_id = synth.logical_id(synth.stack.operators.policy)
    return synth.resources[logical_id]


def test_the_derivation_sees_what_a_redrive_and_a_fork_call(needed: set[Call]) -> None:
    actions = {(a, c.table) for c in needed for a in c.actions}
    assert ("dynamodb:UpdateItem", "runs_table") in actions  # the conditional reopen
    assert ("dynamodb:Query", "checkpoints_table") in actions  # the checkpoint history
    assert ("states:StartExecution", None) in actions
    assert {("sqs:ReceiveMessage", None), ("lambda:InvokeFunction", None)} <= actions  # queues


def test_the_policy_allows_exactly_the_calls_the_commands_make(
    synth: Synth, needed: set[Call]
) -> None:
    statements = _policy(synth)["Properties"]["PolicyDocument"]["Statement"]
    granted = set(actions_on(statements)) - NOT_FROM_USE_CASES
    wanted = {a for c in needed for a in c.actions}
    assert sorted(wanted - granted) == [], "calls without a grant"
    assert sorted(granted - wanted) == [], "grants no code uses"


def test_each_table_allows_exactly_the_calls_made_on_it(synth: Synth, needed: set[Call]) -> None:
    wanted: dict[str, set[str]] = {}
    for call in needed:
        if call.service == "dynamodb":
            assert call.table is not None, call
            wanted.setdefault(TABLES[call.table], set()).update(call.actions)
    statements = _policy(synth)["Properties"]["PolicyDocument"]["Statement"]
    granted: dict[str, set[str]] = {}
    for action, resources in actions_on(statements).items():
        for table in TABLES.values():
            arn = f"<{synth.logical_id(getattr(synth.stack.tables, table))}.Arn>"
            if arn in resources:
                granted.setdefault(table, set()).add(action)
    assert granted == wanted


def test_the_stack_outputs_the_policy_for_operators(synth: Synth) -> None:
    output = synth.template["Outputs"]["OperatorRecoveryPolicyArn"]
    assert output["Value"] == {"Ref": synth.logical_id(synth.stack.operators.policy)}
