"""Loop bounds hold at run time: a cycle stops at its step's ``max_iterations`` with the named
outcome ``LoopLimitReached`` (routed by ``on_max_iterations``, else the run fails saying which
step and bound), and a for-each that leaves items out says so on the timeline and in outputs."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from langorch.cli.timeline import event_line
from langorch.domain.definitions import TaskPlan
from langorch.domain.errors import Problem
from langorch.domain.runs import TimelineEvent, TimelineEventType
from langorch.domain.validation import InMemoryLookup, check_workflow, workflow_advice
from tests.integration.conftest import register_text, run_to_end
from tests.support.definitions import workflow
from tests.unit.conftest import MakeFakes

COUNTER = workflow("counter", inputs={"n": "integer"}).steps("""
      - {step_id: count, kind: transform, transform: {n: "(n or 0) + 1"}, max_iterations: 3}
      - step_id: again
        kind: decision
        depends_on: [count]
        condition: "{{ n < 100 }}"
        branches: {"true": count, "false": done}
      - {step_id: done, kind: terminate, terminate: {outputs: {n: n}}}
""")

ROUTED = COUNTER.replace("max_iterations: 3}", "max_iterations: 3, on_max_iterations: enough}") + (
    """      - {step_id: enough, kind: terminate, terminate: {outputs: {stopped_at: n}}}
"""
)


def _steps_finished(container: object, run_id: str, step_id: str) -> int:
    timeline = container.runs.get_timeline(run_id)  # type: ignore[attr-defined]
    return sum(
        1 for e in timeline if e.type == TimelineEventType.step_finished and e.step_id == step_id
    )


def test_a_cycle_stops_at_its_steps_max_iterations_and_the_run_fails_naming_step_and_bound(
    make_container: MakeFakes,
):
    # Given a cycle whose decision would go round 100 times, bounded by max_iterations 3 on count
    container = make_container()
    register_text(container, COUNTER)

    # When it runs
    result = run_to_end(container, "counter")

    # Then count ran exactly 3 times, and the run failed with LoopLimitReached at count
    assert _steps_finished(container, result.run_id, "count") == 3
    assert result.status == "failed"
    assert result.error is not None
    assert result.error["type"] == "LoopLimitReachedError"
    assert result.error["step_id"] == "count"
    assert "max_iterations 3" in result.error["message"]


def test_a_cycle_at_its_bound_follows_on_max_iterations(make_container: MakeFakes):
    # Given the same cycle, declaring where the run goes when the bound is reached
    container = make_container()
    register_text(container, ROUTED)

    # When it runs
    result = run_to_end(container, "counter")

    # Then the run went on at `enough` after the third round, and the timeline names the outcome
    assert result.status == "succeeded"
    assert result.outputs == {"stopped_at": 3}
    reached = [
        e
        for e in container.runs.get_timeline(result.run_id)
        if e.type == TimelineEventType.loop_limit_reached
    ]
    assert [(e.step_id, e.detail["outcome"], e.detail["routed_to"]) for e in reached] == [
        ("count", "LoopLimitReached", "enough")
    ]


def _problems(steps: list[dict[str, Any]]) -> list[Problem]:
    data = {"plan_id": "p", "memory": False, "steps": steps}
    return check_workflow(
        TaskPlan.model_validate(data), InMemoryLookup([]), tools=None, providers=None
    ).errors


def test_on_max_iterations_on_a_step_with_no_bound_is_reported() -> None:
    # Given a step that routes its bound but has none
    steps = [
        {"step_id": "a", "kind": "transform", "transform": {"x": "1"}, "on_max_iterations": "b"},
        {"step_id": "b", "kind": "terminate"},
    ]
    # When validated
    problems = _problems(steps)
    # Then the route is reported where it is written, with the fix
    assert [(p.path, p.hint) for p in problems] == [
        (
            "steps[0].on_max_iterations",
            "set max_iterations on the step, or remove on_max_iterations",
        )
    ]


def test_on_max_iterations_to_an_unknown_step_is_reported() -> None:
    # Given a bounded step whose route names no step
    steps = [
        {
            "step_id": "a",
            "kind": "transform",
            "transform": {"x": "1"},
            "max_iterations": 2,
            "on_max_iterations": "nowhere",
        },
    ]
    # When validated / Then the route's path carries the problem
    assert [p.path for p in _problems(steps)] == ["steps[0].on_max_iterations"]


def test_the_timeline_tells_where_a_reached_bound_sent_the_run() -> None:
    # Given the event of a bound reached and routed
    event = TimelineEvent(
        seq=1,
        at=datetime(2026, 1, 1, tzinfo=UTC),
        type=TimelineEventType.loop_limit_reached,
        step_id="count",
        detail={"outcome": "LoopLimitReached", "max_iterations": 3, "routed_to": "enough"},
    )
    # When it is printed
    line = event_line(event)
    # Then it names the outcome, the bound and the route
    assert line is not None
    assert "limit" in line and "count" in line
    assert line.endswith("LoopLimitReached  max_iterations 3  -> enough")


def test_a_bound_with_no_route_is_advice_saying_what_happens_at_it() -> None:
    # Given a bounded step that declares no route for its bound
    data = {
        "plan_id": "p",
        "steps": [
            {"step_id": "a", "kind": "transform", "transform": {"x": "1"}, "max_iterations": 2}
        ],
    }
    # When the workflow is advised on
    advice = workflow_advice(TaskPlan.model_validate(data))
    # Then the advice says what happens at the bound and how to route it
    assert [(p.path, p.hint) for p in advice] == [
        (
            "steps[0].max_iterations",
            "declare on_max_iterations (the step to go to then) to route it",
        )
    ]
    assert "LoopLimitReachedError" in advice[0].message


FOR_EACH = workflow("doubles", inputs={"xs": "array"}).steps("""
      - {step_id: each, kind: loop, loop: {over: xs, body: [double], max_iterations: 2}}
      - {step_id: double, kind: transform, depends_on: [each], transform: {y: "item * 2"}}
""")


def test_a_for_each_that_leaves_items_out_says_so_in_outputs_and_on_the_timeline(
    make_container: MakeFakes,
):
    # Given a for-each bounded to 2 iterations
    container = make_container()
    register_text(container, FOR_EACH)

    # When it gets 4 items
    result = run_to_end(container, "doubles", {"xs": [1, 2, 3, 4]})

    # Then 2 were run, and the outputs and the timeline say that 2 of 4 were left out
    assert result.status == "succeeded"
    assert result.outputs["each_results"] == [{"y": 2}, {"y": 4}]
    assert result.outputs["each_dropped"] == 2
    reached = [
        e.detail
        for e in container.runs.get_timeline(result.run_id)
        if e.type == TimelineEventType.loop_limit_reached
    ]
    assert reached == [
        {
            "kind": "loop",
            "outcome": "LoopLimitReached",
            "max_iterations": 2,
            "dropped": 2,
            "total": 4,
        }
    ]


def test_a_for_each_within_its_bound_reports_nothing_left_out(make_container: MakeFakes):
    # Given the same for-each
    container = make_container()
    register_text(container, FOR_EACH)

    # When it gets 2 items
    result = run_to_end(container, "doubles", {"xs": [1, 2]})

    # Then nothing is reported left out
    assert "each_dropped" not in result.outputs
    assert not [
        e
        for e in container.runs.get_timeline(result.run_id)
        if e.type == TimelineEventType.loop_limit_reached
    ]


def test_a_for_each_that_leaves_items_out_follows_its_on_max_iterations(
    make_container: MakeFakes,
):
    # Given the for-each routing its bound to `too_many`, and a step that runs after it
    container = make_container()
    routed = FOR_EACH.replace(
        "max_iterations: 2}}", "max_iterations: 2}, on_max_iterations: too_many}"
    )
    register_text(
        container,
        routed
        + """      - {step_id: after, kind: transform, depends_on: [each], transform: {z: "1"}}
      - {step_id: too_many, kind: terminate, terminate: {status: failed, message: "too many"}}
""",
    )

    # When it gets more items than its bound
    result = run_to_end(container, "doubles", {"xs": [1, 2, 3]})

    # Then the run went to too_many, not to the step after the loop
    assert result.status == "failed"
    assert result.error is not None and result.error["message"] == "too many"
    assert _steps_finished(container, result.run_id, "after") == 0
