"""``chain`` in a plan (seed 004's ``chain([node1, node2, ...])``): each listed step runs after
the one listed before it, as if it named it in ``depends_on``."""

from __future__ import annotations

from typing import Any

from langorch.domain.definitions import TaskPlan
from langorch.domain.validation import InMemoryLookup, check_workflow
from tests.integration.conftest import register_text, run_to_end
from tests.support.definitions import workflow
from tests.unit.conftest import MakeFakes

CHAINED = workflow("chained", inputs={"n": "integer"}, chain=["double", "add", "show"]).steps("""
      - {step_id: show, kind: transform, transform: {text: "'n=' ~ n"}}
      - {step_id: add, kind: transform, transform: {n: "n + 1"}}
      - {step_id: double, kind: transform, transform: {n: "n * 2"}}
""")


def test_a_chain_runs_its_steps_in_the_order_it_lists_them(make_container: MakeFakes):
    # Given three steps with no depends_on, chained double -> add -> show (listed backwards)
    container = make_container()
    register_text(container, CHAINED)

    # When it runs from n = 5
    result = run_to_end(container, "chained", {"n": 5})

    # Then they ran in the chain's order: (5 * 2) + 1
    assert result.outputs["text"] == "n=11"


def _errors(data: dict[str, Any]) -> list[tuple[str, str]]:
    found = check_workflow(
        TaskPlan.model_validate({"plan_id": "p", "memory": False, **data}),
        InMemoryLookup([]),
        tools=None,
        providers=None,
    )
    return [(p.path, p.message) for p in found.errors]


def _t(step_id: str, **fields: Any) -> dict[str, Any]:
    return {"step_id": step_id, "kind": "transform", "transform": {step_id: "1"}, **fields}


def test_a_chain_naming_an_unknown_step_is_reported_at_its_place_in_the_chain() -> None:
    # Given a chain with a misspelt step
    data = {"chain": ["a", "bb", "c"], "steps": [_t("a"), _t("b"), _t("c")]}
    # When validated / Then the chain's entry carries the problem, once
    errors = _errors(data)
    assert [path for path, _ in errors] == ["chain[1]"]
    assert "'bb' is not a step" in errors[0][1]


def test_a_step_chained_after_a_terminate_is_reported_at_its_place_in_the_chain() -> None:
    # Given a chain that goes on after a terminate step
    data = {
        "chain": ["a", "end", "c"],
        "steps": [_t("a"), {"step_id": "end", "kind": "terminate"}, _t("c")],
    }
    # When validated / Then the link after the terminate is reported where it is written
    errors = _errors(data)
    assert [path for path, _ in errors] == ["chain[2]"]
    assert "nothing runs" in errors[0][1]


def test_a_step_listed_twice_in_a_chain_is_reported() -> None:
    data = {"chain": ["a", "b", "a"], "steps": [_t("a"), _t("b")]}
    assert [path for path, _ in _errors(data)] == ["chain[2]"]
