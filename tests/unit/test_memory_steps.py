"""Memory as seed 000 means it: ``query_memory`` searches the user's memory for the rendered
query and returns only the matches; the run's last node keeps the declared parts of
``shared_context`` (``remember``) in the user's history of the workflow."""

from __future__ import annotations

from langorch.domain.loading import load_text
from langorch.domain.lookup import InMemoryLookup
from langorch.domain.validation import check_workflow
from tests.integration.conftest import register_text, run_to_end
from tests.support.definitions import workflow
from tests.unit.conftest import MakeFakes

RECALL = workflow(
    "recall", inputs={"memory_query": "string", "topic": "string"}, memory=True
).steps("""
      - {step_id: recall, block_id: query_memory}
""")

RECALL_BY_TEMPLATE = workflow("recall_topic", inputs={"topic": "string"}, memory=True).steps("""
      - step_id: recall
        kind: query_memory
        memory: {query: "my {{ topic }}?"}
""")

REMEMBER = workflow(
    "remembers",
    remember=["restaurant", "missing"],
    inputs={"restaurant": "string", "note": "string"},
    memory=True,
).steps("""
      - step_id: pick
        kind: transform
        transform: {restaurant: "restaurant", total: "12.5"}
""")


def test_a_memory_query_with_no_match_gives_empty_results(make_container: MakeFakes) -> None:
    # Given a user whose only preference has nothing to do with orders
    container = make_container()
    register_text(container, RECALL)
    container.memory.update_preferences("u1", {"uber_eats_credentials": "alice:pw"})
    # When a run asks its memory what was ordered
    result = run_to_end(container, "recall", {"memory_query": "what did I order?"})
    # Then memory_results is empty (seed 000), not every preference
    assert result.status == "succeeded"
    assert result.outputs["memory_results"] == {}


def test_a_memory_query_returns_only_the_preferences_that_match(
    make_container: MakeFakes,
) -> None:
    # Given a user with a lunch preference and a travel preference
    container = make_container()
    register_text(container, RECALL)
    container.memory.update_preferences("u1", {"restaurant": "Chipotle", "seat": "aisle"})
    # When a run searches for Chipotle
    result = run_to_end(container, "recall", {"memory_query": "anything from Chipotle?"})
    # Then only the lunch preference comes back
    assert result.outputs["memory_results"] == {"restaurant": "Chipotle"}


def test_a_steps_memory_query_is_a_template_over_its_inputs(make_container: MakeFakes) -> None:
    # Given a step whose query is rendered from the run's topic
    container = make_container()
    register_text(container, RECALL_BY_TEMPLATE)
    container.memory.update_preferences("u1", {"seat": "aisle", "restaurant": "Chipotle"})
    # When the run's topic is the seat
    result = run_to_end(container, "recall_topic", {"topic": "seat"})
    # Then the rendered query found the seat preference only
    assert result.outputs["memory_results"] == {"seat": "aisle"}


def test_the_runs_last_node_remembers_the_declared_keys_as_they_are(
    make_container: MakeFakes,
) -> None:
    # Given a workflow that declares which shared_context keys to remember
    container = make_container()
    register_text(container, REMEMBER)
    # When it runs
    result = run_to_end(container, "remembers", {"restaurant": "Chipotle", "note": "x"})
    # Then the user's history of the workflow keeps those keys' values, and only those
    assert result.status == "succeeded"
    entry = container.memory.get_history("u1", "remembers")[0]
    assert entry["summary"]["context"] == {"restaurant": "Chipotle"}


def test_a_remembered_key_nothing_provides_is_a_warning_with_its_path() -> None:
    # Given a workflow remembering a key no input or step provides
    plan = load_text(REMEMBER, source="w.yaml", fmt="yaml").workflows[0]
    # When it is validated
    found = check_workflow(plan, InMemoryLookup(), tools=None, providers=None)
    # Then the typo is a warning at its path, and nothing else is wrong
    assert found.errors == []
    assert [(p.path, p.message.split(" is ")[0]) for p in found.warnings] == [
        ("remember[1]", "'missing'")
    ]
