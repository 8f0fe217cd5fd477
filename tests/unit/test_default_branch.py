"""A decision whose label has no branch takes ``default_branch`` when it declares one (seed 002:
``route_action_node`` validates the action or defaults to ``question``)."""

from __future__ import annotations

from langorch.domain.runs import TimelineEventType
from tests.integration.conftest import register_text, run_to_end
from tests.support.definitions import workflow
from tests.unit.conftest import MakeFakes

ROUTE = workflow("route", inputs={"action": "string"}).steps("""
      - step_id: decide
        kind: decision
        condition: "{{ action }}"
        branches: {greeting: greet, question: ask}
        default_branch: question
      - {step_id: greet, kind: transform, transform: {said: "'hello'"}}
      - {step_id: ask, kind: transform, transform: {said: "'a question'"}}
""")


def test_a_label_with_no_branch_takes_the_default_branch(make_container: MakeFakes):
    # Given a decision whose condition renders the requested action
    container = make_container()
    register_text(container, ROUTE)

    # When the action is one the decision has no branch for
    result = run_to_end(container, "route", {"action": "dance"})

    # Then the run went to the default branch, and the timeline says why
    assert result.status == "succeeded"
    assert result.outputs["said"] == "a question"
    assert result.outputs["decide_branch"] == "question"
    finished = [
        e
        for e in container.runs.get_timeline(result.run_id)
        if e.type == TimelineEventType.step_finished and e.step_id == "decide"
    ]
    assert finished[0].detail["branch"] == "question"
    assert finished[0].outputs_summary == {
        "decide_branch": "question (default_branch: 'dance' has no branch)"
    }


def test_a_label_with_no_branch_and_no_default_fails_the_step(make_container: MakeFakes):
    # Given the same decision without a default
    container = make_container()
    register_text(container, ROUTE.replace("        default_branch: question\n", ""))

    # When the action has no branch
    result = run_to_end(container, "route", {"action": "dance"})

    # Then the step failed naming the label and the known ones
    assert result.status == "failed"
    assert result.error is not None and "'dance'" in result.error["message"]
