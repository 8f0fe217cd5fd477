"""``while`` and ``do_while`` loops (seed 004's ``loop_condition`` + ``max_loops``): the body
repeats while a condition holds, checked before each round (while) or after it (do_while), at
most ``max_loops`` rounds (default 3)."""

from __future__ import annotations

from typing import Any

import pytest

from langorch.app.segment_record import SegmentResult
from langorch.domain.definitions import TaskPlan
from langorch.domain.runs import TimelineEventType
from langorch.domain.validation import InMemoryLookup, check_workflow
from tests.integration.conftest import register_text, run_to_end
from tests.unit.conftest import MakeFakes


def refine(loop: str, *, extra_steps: str = "") -> str:
    """A loop step ``refine`` over one body step ``analyze`` that appends to ``draft`` and says
    whether it needs another round (``more``, an expression over the round's ``index``)."""
    return f"""
workflows:
  - plan_id: refine
    memory: false
    inputs_schema: {{properties: {{draft: {{type: string}}, needs_refinement: {{type: boolean}},
                                  stop_after: {{type: integer}}}}}}
    steps:
      - {{step_id: refine, kind: loop, loop: {loop}}}
      - {{step_id: analyze, kind: transform, depends_on: [refine],
         transform: {{draft: "draft ~ '+'", needs_refinement: "index + 1 < stop_after"}}}}
{extra_steps}"""


def _refine_d(container: Any, *, needs_refinement: bool, stop_after: int) -> SegmentResult:
    """Run ``refine`` to its end on the draft "d" (its body asks for rounds to ``stop_after``)."""
    inputs = {"draft": "d", "needs_refinement": needs_refinement, "stop_after": stop_after}
    return run_to_end(container, "refine", inputs)


def _limit_events(container: Any, run_id: str) -> list[dict[str, Any]]:
    return [
        e.detail
        for e in container.runs.get_timeline(run_id)
        if e.type == TimelineEventType.loop_limit_reached
    ]


def test_a_while_loop_whose_condition_stays_true_stops_at_three_rounds_by_default(
    make_container: MakeFakes,
):
    # Given a while loop with no max_loops, whose body always asks for another round
    container = make_container()
    register_text(container, refine("{while: needs_refinement, body: [analyze]}"))

    # When it runs
    result = _refine_d(container, needs_refinement=True, stop_after=99)

    # Then the body ran 3 times, and the bound is said in outputs and on the timeline
    assert result.status == "succeeded"
    assert result.outputs["draft"] == "d+++"
    assert len(result.outputs["refine_results"]) == 3
    assert result.outputs["refine_limit_reached"] is True
    assert _limit_events(container, result.run_id) == [
        {"kind": "loop", "outcome": "LoopLimitReached", "max_loops": 3, "ran": 3}
    ]


def test_a_while_loop_ends_when_its_condition_turns_false(make_container: MakeFakes):
    # Given a while loop bounded to 5 rounds whose body stops asking after round 2
    container = make_container()
    register_text(container, refine("{while: needs_refinement, body: [analyze], max_loops: 5}"))

    # When it runs
    result = _refine_d(container, needs_refinement=True, stop_after=2)

    # Then it ran 2 rounds and reports no bound
    assert result.outputs["draft"] == "d++"
    assert "refine_limit_reached" not in result.outputs
    assert _limit_events(container, result.run_id) == []


def test_a_while_loop_whose_condition_is_false_at_first_never_runs_its_body(
    make_container: MakeFakes,
):
    # Given a while loop whose condition is false before the first round
    container = make_container()
    register_text(container, refine("{while: needs_refinement, body: [analyze]}"))

    # When it runs
    result = _refine_d(container, needs_refinement=False, stop_after=9)

    # Then the body never ran
    assert result.outputs["draft"] == "d"
    assert result.outputs["refine_results"] == []


def test_a_do_while_loop_runs_its_body_once_before_asking(make_container: MakeFakes):
    # Given a do-while loop whose condition is false from the start
    container = make_container()
    register_text(container, refine("{do_while: needs_refinement, body: [analyze]}"))

    # When it runs
    result = _refine_d(container, needs_refinement=False, stop_after=0)

    # Then the body ran once
    assert result.outputs["draft"] == "d+"
    assert len(result.outputs["refine_results"]) == 1


def test_a_while_loop_at_its_bound_follows_on_max_iterations(make_container: MakeFakes):
    # Given a while loop bounded to 2 rounds that routes its bound to `give_up`
    container = make_container()
    register_text(
        container,
        refine(
            "{while: needs_refinement, body: [analyze], max_loops: 2}, on_max_iterations: give_up",
            extra_steps="      - {step_id: after, kind: transform, depends_on: [refine], "
            'transform: {x: "1"}}\n'
            "      - {step_id: give_up, kind: terminate, terminate: {outputs: {draft: draft}}}\n",
        ),
    )

    # When the body keeps asking for more
    result = _refine_d(container, needs_refinement=True, stop_after=99)

    # Then after 2 rounds the run went to give_up, not to the step after the loop
    assert result.outputs == {"draft": "d++"}
    assert [e["routed_to"] for e in _limit_events(container, result.run_id)] == ["give_up"]


# --- validation ------------------------------------------------------------------------------


def _errors(loop: dict[str, Any]) -> list[tuple[str, str]]:
    data = {
        "plan_id": "p",
        "memory": False,
        "inputs_schema": {"properties": {"xs": {}, "more": {}}},
        "steps": [
            {"step_id": "each", "kind": "loop", "loop": loop},
            {
                "step_id": "body",
                "kind": "transform",
                "depends_on": ["each"],
                "transform": {"more": "false"},
            },
        ],
    }
    found = check_workflow(
        TaskPlan.model_validate(data), InMemoryLookup([]), tools=None, providers=None
    )
    return [(p.path, p.message) for p in found.errors]


@pytest.mark.parametrize(
    ("loop", "path", "says"),
    [
        ({"body": ["body"]}, "steps[0].loop", "exactly one of over (for-each), while or do_while"),
        ({"over": "xs", "while": "more", "body": ["body"]}, "steps[0].loop", "it has over, while"),
        ({"over": "xs", "max_loops": 2, "body": ["body"]}, "steps[0].loop.max_loops", "max_loops"),
        (
            {"while": "more", "max_iterations": 2, "body": ["body"]},
            "steps[0].loop.max_iterations",
            "max_iterations is for a for-each",
        ),
        ({"do_while": "more ==", "body": ["body"]}, "steps[0].loop.do_while", "malformed"),
    ],
)
def test_a_loop_that_does_not_say_one_way_to_repeat_and_its_bound_is_reported(
    loop: dict[str, Any], path: str, says: str
) -> None:
    # Given a loop with a contradiction / When validated
    errors = _errors(loop)
    # Then it is reported at its path
    assert len(errors) == 1, errors
    assert errors[0][0] == path and says in errors[0][1]


def test_a_while_loop_is_stored_with_its_own_words() -> None:
    # Given a while loop as written
    plan = TaskPlan.model_validate(
        {
            "plan_id": "p",
            "steps": [
                {"step_id": "l", "kind": "loop", "loop": {"while": "more", "body": ["b"]}},
                {
                    "step_id": "b",
                    "kind": "transform",
                    "depends_on": ["l"],
                    "transform": {"more": "false"},
                },
            ],
        }
    )
    # When dumped (as it is stored and shown)
    loop = plan.model_dump(mode="json")["steps"][0]["loop"]
    # Then it reads as written: `while`, no unset ways or bounds
    assert loop["while"] == "more" and "while_" not in loop
    assert "over" not in loop and "do_while" not in loop and "max_loops" not in loop


def _warnings(steps: list[dict[str, Any]], properties: dict[str, Any]) -> list[tuple[str, str]]:
    data = {
        "plan_id": "p",
        "memory": False,
        "inputs_schema": {"properties": properties},
        "steps": steps,
    }
    found = check_workflow(
        TaskPlan.model_validate(data), InMemoryLookup([]), tools=None, providers=None
    )
    assert found.errors == [], found.errors
    return [(p.path, p.hint) for p in found.warnings]


LOOP_OVER_BODY = [
    {"step_id": "again", "kind": "loop", "loop": {"while": "more", "body": ["work"]}},
    {
        "step_id": "work",
        "kind": "transform",
        "depends_on": ["again"],
        "transform": {"more": "false"},
    },
]


def test_a_while_condition_only_its_body_provides_is_a_warning_with_the_fix() -> None:
    # Given a while loop whose condition reads a key only its body writes
    # When validated
    warnings = _warnings(LOOP_OVER_BODY, {"x": {}})
    # Then the condition is warned about: at the first check it is empty, the body never runs
    assert [path for path, _ in warnings] == ["steps[0].loop.while"]
    assert "do_while" in warnings[0][1]


def test_a_while_condition_with_a_value_before_the_loop_is_not_warned_about() -> None:
    # Given the same loop, with `more` an input (it has a value at the first check)
    assert _warnings(LOOP_OVER_BODY, {"more": {"default": True}}) == []


def test_max_iterations_on_a_loop_step_is_reported() -> None:
    # Given a loop step with a step-level bound (it would count the loop's own visits)
    steps = [dict(LOOP_OVER_BODY[0], max_iterations=3), LOOP_OVER_BODY[1]]
    data = {
        "plan_id": "p",
        "memory": False,
        "inputs_schema": {"properties": {"more": {}}},
        "steps": steps,
    }
    found = check_workflow(
        TaskPlan.model_validate(data), InMemoryLookup([]), tools=None, providers=None
    )
    # When validated / Then it is an error saying where the loop's bound goes
    assert [(p.path, p.hint) for p in found.errors] == [
        (
            "steps[0].max_iterations",
            "bound the loop with loop.max_iterations (for-each) or loop.max_loops (while), "
            "or remove it",
        )
    ]
