"""Input mappings (seed 000 ``input_mappings``, seed 004 ``input_map``): a step input read from a
key or from a dotted path into one, resolved as templates resolve ``{request.user.name}``; a
mapping that resolves to nothing is a validation warning at its path."""

from __future__ import annotations

from typing import Any

import pytest

from langorch.domain.definitions import BlockDefinition, TaskPlan
from langorch.domain.errors import Problem
from langorch.domain.validation import InMemoryLookup, check_workflow
from tests.integration.conftest import register_text, run_to_end
from tests.support.definitions import workflow
from tests.support.recording import record_llm
from tests.unit.conftest import MakeFakes

NESTED = """
blocks:
  - {block_id: greet, input_keys: [user_name], output_keys: [greeting],
     prompt_template: "Hello {user_name}"}
""" + workflow("nested", inputs={"request": "object"}).steps("""
      - {step_id: hello, block_id: greet, input_mappings: {user_name: request.user.name}}
      - {step_id: shout, kind: transform, depends_on: [hello],
         input_mappings: {who: request.user.name}, transform: {loud: "who | upper"}}
""")


def test_a_nested_mapping_reads_the_value_a_template_would(make_container: MakeFakes):
    # Given a block input and a transform input mapped from request.user.name
    container = make_container()
    llm = record_llm(container)
    register_text(container, NESTED)

    # When the run gets a nested request
    result = run_to_end(container, "nested", {"request": {"user": {"name": "Ada"}}})

    # Then both steps read "Ada" through their mappings
    assert result.status == "succeeded"
    assert llm.requests[0].prompt == "Hello Ada"
    assert result.outputs["loud"] == "ADA"


# --- validation ------------------------------------------------------------------------------


def _warnings(data: dict[str, Any], *blocks: BlockDefinition) -> list[Problem]:
    found = check_workflow(
        TaskPlan.model_validate({"plan_id": "p", "memory": False, **data}),
        InMemoryLookup(list(blocks)),
        tools=None,
        providers=None,
    )
    assert found.errors == [], [str(p) for p in found.errors]
    return found.warnings


def _transform(mappings: dict[str, Any]) -> dict[str, Any]:
    return {
        "step_id": "shout",
        "kind": "transform",
        "input_mappings": mappings,
        "transform": {"loud": "who | upper"},
    }


def test_a_transform_reading_its_own_mapped_input_has_no_warning() -> None:
    # Given a transform whose expression reads `who`, mapped from a declared input
    data = {
        "inputs_schema": {"properties": {"request": {"type": "object"}}},
        "steps": [_transform({"who": "request.user.name"})],
    }
    # When validated / Then nothing is reported (the mapping provides `who`)
    assert _warnings(data) == []


def test_a_mapping_whose_key_nothing_provides_is_a_warning_at_the_mapping_with_a_true_hint() -> (
    None
):
    # Given a transform whose mapping reads a key no input or step provides
    data = {
        "inputs_schema": {"properties": {"other": {}}},
        "steps": [_transform({"who": "request.user.name"})],
    }
    # When validated
    warnings = _warnings(data)
    # Then the mapping carries the warning, and the hint does not suggest adding the mapping
    assert [p.path for p in warnings] == ["steps[0].input_mappings.who"]
    assert "'request'" in warnings[0].message
    assert "with input_mappings" not in warnings[0].hint
    assert "fix the mapping's path" in warnings[0].hint


USER_WITH_EMAIL = {"type": "object", "properties": {"email": {"type": "string"}}}


@pytest.mark.parametrize(
    ("properties", "mapping", "in_message", "in_hint"),
    [
        # request.user is declared with an email but no name: the hint says what it has
        pytest.param(
            {"request": {"type": "object", "properties": {"user": USER_WITH_EMAIL}}},
            "request.user.name",
            "'name'",
            "email",
            id="past-what-the-inputs-schema-declares",
        ),
        # written as a template, which mappings do not render: the hint gives the form a
        # mapping takes
        pytest.param(
            {"request": {}},
            "{{ request.user.name }}",
            "resolves to nothing",
            "request.user.name",
            id="a-template-not-a-key-path",
        ),
    ],
)
def test_a_mapping_that_resolves_to_nothing_is_a_warning_at_its_path(
    properties: dict[str, Any], mapping: str, in_message: str, in_hint: str
) -> None:
    # Given a transform whose mapping for `who` resolves to nothing under the inputs schema
    data = {
        "inputs_schema": {"properties": properties},
        "steps": [_transform({"who": mapping})],
    }
    # When validated
    warnings = _warnings(data)
    # Then it is reported as resolving to nothing, said at its path, with the hint that fixes it
    assert [p.path for p in warnings] == ["steps[0].input_mappings.who"]
    assert "resolves to nothing" in warnings[0].message
    assert in_message in warnings[0].message
    assert in_hint in warnings[0].hint


# --- per-step results: `<step_id>.output` (seed 004) ----------------------------------------

RESULTS = """
blocks:
  - {block_id: judge, input_keys: [previous], output_keys: [verdict],
     prompt_template: "Judge {previous}"}
workflows:
  - plan_id: results
    memory: false
    steps:
      - {step_id: analyze, kind: transform, transform: {summary: "'S'", score: "3"}}
      - {step_id: report, kind: transform, depends_on: [analyze],
         input_mappings: {previous: analyze.output},
         transform: {text: "previous.summary ~ '/' ~ analyze.score"}}
      - {step_id: judge, block_id: judge, depends_on: [report],
         input_mappings: {previous: analyze.output}}
"""


def test_a_steps_result_is_readable_under_its_id_in_mappings_and_templates(
    make_container: MakeFakes,
):
    # Given a step whose result later steps read as analyze.output and analyze.score
    container = make_container()
    llm = record_llm(container)
    register_text(container, RESULTS)

    # When the run goes through
    result = run_to_end(container, "results")

    # Then the transform read both, and the block's prompt got the result as JSON
    assert result.outputs["text"] == "S/3"
    assert llm.requests[0].prompt == 'Judge {"summary": "S", "score": 3}'


def test_a_key_of_the_same_name_wins_over_a_step_id(make_container: MakeFakes):
    # Given a step `title` that writes the key `title` (the key is what `title` names)
    container = make_container()
    register_text(
        container,
        workflow("same_name").steps("""
      - {step_id: title, kind: transform, transform: {title: "'Hello'"}}
      - {step_id: shout, kind: transform, depends_on: [title], transform: {loud: "title | upper"}}
"""),
    )

    # When it runs / Then `title` is the key's value, as before steps had results
    assert run_to_end(container, "same_name").outputs["loud"] == "HELLO"


def _after_analyze(**use: Any) -> dict[str, Any]:
    """Two steps: ``analyze``, which writes ``score``, then the transform ``use`` with ``use``'s
    fields."""
    analyze = {"step_id": "analyze", "kind": "transform", "transform": {"score": "3"}}
    return {
        "steps": [
            analyze,
            {"step_id": "use", "kind": "transform", "depends_on": ["analyze"], **use},
        ]
    }


def test_a_template_reading_an_earlier_steps_result_is_not_warned_about() -> None:
    # Given a transform reading analyze.score, analyze being an earlier step
    data = _after_analyze(transform={"x": "analyze.score + 1"})
    # When validated / Then nothing is reported
    assert _warnings(data) == []


def test_a_mapping_to_a_key_the_step_does_not_write_is_a_warning() -> None:
    # Given a mapping to analyze.verdict, where analyze writes only score
    data = _after_analyze(input_mappings={"v": "analyze.verdict"}, transform={"x": "v"})
    # When validated
    warnings = _warnings(data)
    # Then the mapping resolves to nothing, said with what the step writes
    assert [p.path for p in warnings] == ["steps[1].input_mappings.v"]
    assert "resolves to nothing" in warnings[0].message
    assert "output, score" in warnings[0].hint


# --- required and optional mappings ----------------------------------------------------------

OPTIONAL = workflow("greet", inputs={"request": "object"}).steps("""
      - step_id: hello
        kind: transform
        input_mappings:
          name: {path: request.user.name, required: true}
          title: {path: request.user.title, default: friend}
          nick: request.user.nick
        transform: {text: "'Hello ' ~ title ~ ' ' ~ name ~ '[' ~ nick ~ ']'"}
""")


def test_an_optional_mapping_gives_its_default_and_a_plain_one_empty(make_container: MakeFakes):
    # Given a step with a required, an optional (with a default) and a plain mapping
    container = make_container()
    register_text(container, OPTIONAL)

    # When only the required one resolves
    result = run_to_end(container, "greet", {"request": {"user": {"name": "Ada"}}})

    # Then the optional one is its default and the plain one is empty
    assert result.outputs["text"] == "Hello friend Ada[]"


def test_a_missing_required_mapping_fails_the_step_with_its_path(make_container: MakeFakes):
    # Given the same step
    container = make_container()
    register_text(container, OPTIONAL)

    # When the request has no user
    result = run_to_end(container, "greet", {"request": {}})

    # Then the step failed, saying which input, which path, and where the path stopped
    assert result.status == "failed"
    assert result.error is not None
    assert result.error["type"] == "MissingInputError"
    assert result.error["step_id"] == "hello"
    message = result.error["message"]
    assert "input_mappings.name" in message
    assert "'request.user.name'" in message
    assert "request has no 'user'" in message


def test_a_required_mapping_with_a_default_is_reported() -> None:
    # Given a mapping both required and defaulted
    data = {
        "inputs_schema": {"properties": {"request": {}}},
        "steps": [_transform({"who": {"path": "request.name", "required": True, "default": "x"}})],
    }
    found = check_workflow(
        TaskPlan.model_validate({"plan_id": "p", "memory": False, **data}),
        InMemoryLookup([]),
        tools=None,
        providers=None,
    )
    # When validated / Then the contradiction is an error at the mapping's default
    assert [(p.path, p.hint) for p in found.errors] == [
        ("steps[0].input_mappings.who.default", "remove default, or required")
    ]
