"""The runner's path stays light: compiling and running a workflow never loads definition
validation (croniter, zoneinfo checks, data flow) or YAML — those are for ``put``/``validate``."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.subprocess  # each test starts a fresh Python; make test runs them

_CHECK = """
import asyncio, sys
from langorch.domain.definitions import TaskPlan
from langorch.domain.lookup import InMemoryLookup
from langorch.engine.compiler import GraphCompiler
from langorch.engine.context import EngineContext

plan = TaskPlan.model_validate({"plan_id": "p", "memory": False, "steps": [
    {"step_id": "a", "kind": "transform", "transform": {"n": "1 + 1"}},
    {"step_id": "b", "kind": "decision", "depends_on": ["a"], "condition": "{{ n > 1 }}",
     "branches": {"true": "c", "false": "c"}},
    {"step_id": "c", "kind": "terminate"},
]})
graph = GraphCompiler(InMemoryLookup(workflows=[plan])).compile(plan, checkpointed=False)
ctx = EngineContext(run_id="r", workflow_id="p", workflow_version=1, user_id="u", llm=None)
state = asyncio.run(graph.ainvoke({"run_id": "r"}, context=ctx))
assert state["shared_context"]["b_branch"] == "true", state
heavy = ("langorch.domain.validation", "croniter", "yaml")
print(sorted(m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in heavy)))
"""


def test_compiling_and_running_a_workflow_loads_no_validation_or_yaml() -> None:
    # Given a fresh interpreter
    # When a workflow is compiled and run the way the runner does it
    out = subprocess.run(
        [sys.executable, "-c", _CHECK], capture_output=True, text=True, check=True
    ).stdout

    # Then neither definition validation, croniter nor yaml was imported
    assert out.strip() == "[]"


_VALIDATE = """
import sys
from langorch.domain.definitions import TaskPlan
from langorch.domain.validation import InMemoryLookup, validate_workflow
plan = TaskPlan.model_validate({"plan_id": "p", "approvers": ["a@example.com"],
    "triggers": [{"type": "s3", "prefix": "in/"}], "steps": [
    {"step_id": "r", "kind": "read_file"},
    {"step_id": "h", "kind": "http", "depends_on": ["r"], "http": {"url": "https://x"}},
    {"step_id": "w", "kind": "wait", "depends_on": ["h"], "wait": {"seconds": 1}},
    {"step_id": "a", "kind": "approval", "depends_on": ["w"],
     "branches": {"approved": "t", "rejected": "t"}},
    {"step_id": "t", "kind": "terminate"},
]})
problems = validate_workflow(plan, InMemoryLookup(), tools=frozenset(), providers=frozenset())
print([str(p) for p in problems])
print(sorted(m for m in sys.modules if m.split(".")[0] in ("langgraph", "langchain_core")
             or m.startswith("langorch.engine")))
"""


def test_validating_every_kind_needs_no_langgraph() -> None:
    # Given a fresh interpreter
    # When a workflow using several kinds is validated
    out = subprocess.run(
        [sys.executable, "-c", _VALIDATE], capture_output=True, text=True, check=True
    ).stdout.splitlines()

    # Then the kinds' checks ran without LangGraph or the engine being imported
    assert out == ["[]", "[]"]
