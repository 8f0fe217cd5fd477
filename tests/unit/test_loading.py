"""Loading definitions from JSON and YAML: every problem of a file at once, with paths."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from langorch.domain.definitions import BlockType
from langorch.domain.errors import DefinitionError
from langorch.domain.loading import load_file, load_text, parse_definitions

# Seed 000's example blocks, verbatim.
OPEN_UBER_EATS = """{
    "block_id": "open_uber_eats",
    "name": "Open Uber Eats",
    "description": "Navigate to Uber Eats and log in",
    "input_keys": ["uber_eats_credentials"],
    "output_keys": ["session_active", "logged_in"],
    "prompt_template": "Navigate to ubereats.com. Log in using credentials: {uber_eats_credentials}. Confirm you are logged in.",
    "tools_required": ["browser"],
    "block_type": "action"
}"""  # noqa: E501 - verbatim from the seed
QUERY_MEMORY = """{
    "block_id": "query_memory",
    "name": "Query Memory",
    "description": "Search long-term memory for relevant context",
    "input_keys": ["memory_query"],
    "output_keys": ["memory_results"],
    "prompt_template": "Search the user's memory for: {memory_query}. Return relevant preferences, history, and context.",
    "tools_required": [],
    "block_type": "query_memory"
}"""  # noqa: E501 - verbatim from the seed
ADD_TO_CART = """{
    "block_id": "add_to_cart_generic",
    "name": "Add Items to Cart",
    "description": "Add specified items to a shopping cart on any food delivery platform",
    "input_keys": ["items_to_order", "platform_context"],
    "output_keys": ["cart_contents", "cart_total"],
    "prompt_template": "Add these items to the cart: {items_to_order}. Current platform state: {platform_context}. Confirm each item was added.",
    "tools_required": ["browser"],
    "block_type": "action"
}"""  # noqa: E501 - verbatim from the seed

WORKFLOW_YAML = """\
plan_id: lunch
user_intent: Order my lunch every Tuesday
schedule: {cron_expression: "0 11 * * 2", timezone: America/New_York}
steps:
  - step_id: recall
    block_id: query_memory
  - step_id: open
    block_id: open_uber_eats
    depends_on: [recall]
"""


def problems_of(text: str, fmt: Any = None) -> DefinitionError:
    with pytest.raises(DefinitionError) as raised:
        load_text(text, source="defs", fmt=fmt)
    return raised.value


@pytest.mark.parametrize("text", [OPEN_UBER_EATS, QUERY_MEMORY, ADD_TO_CART])
def test_seed_000_example_blocks_load_unchanged(text: str) -> None:
    # Given a block JSON exactly as seed 000 prints it
    # When it is loaded
    loaded = load_text(text, source="seed.json")
    # Then it is one block with every field as written
    assert loaded.workflows == []
    [block] = loaded.blocks
    assert block.model_dump(exclude_defaults=True) | {"block_type": block.block_type} == {
        **{k: v for k, v in json.loads(text).items() if v != []},
        "block_type": BlockType(json.loads(text)["block_type"]),
    }


def test_yaml_workflow_loads_as_a_task_plan() -> None:
    loaded = load_text(WORKFLOW_YAML, source="lunch.yaml", fmt="yaml")
    [plan] = loaded.workflows
    assert [s.step_id for s in plan.steps] == ["recall", "open"]
    assert plan.schedule is not None and plan.schedule.timezone == "America/New_York"


def test_a_list_holds_blocks_and_workflows_by_their_fields() -> None:
    data = [json.loads(QUERY_MEMORY), {"plan_id": "w", "steps": [{"step_id": "a", "kind": "wait"}]}]
    loaded = parse_definitions(data, source="mixed")
    assert [b.block_id for b in loaded.blocks] == ["query_memory"]
    assert [w.plan_id for w in loaded.workflows] == ["w"]


def test_a_container_document_holds_blocks_and_workflows() -> None:
    text = json.dumps(
        {
            "blocks": [json.loads(OPEN_UBER_EATS)],
            "workflows": [
                {"plan_id": "w", "steps": [{"step_id": "a", "block_id": "open_uber_eats"}]}
            ],
        }
    )
    loaded = load_text(text, source="all.json")
    assert len(loaded.blocks) == 1 and len(loaded.workflows) == 1


def test_a_mapping_that_is_neither_block_nor_workflow_is_a_problem() -> None:
    error = problems_of('{"name": "orphan"}')
    [problem] = error.problems
    assert problem.path == ""
    assert "neither a block, a workflow nor a CKP procedure" in problem.message


def test_malformed_json_reports_line_and_column() -> None:
    error = problems_of('{\n  "block_id": "x",\n  "name": "y"\n  "description": "z"\n}')
    [problem] = error.problems
    assert "malformed JSON at line 4, column 3" in problem.message


def test_malformed_yaml_reports_the_line() -> None:
    text = "plan_id: w\nsteps:\n  - step_id: a\n    depends_on: [b\n  - step_id: b\n"
    error = problems_of(text, fmt="yaml")
    [problem] = error.problems
    assert "malformed YAML at line 5" in problem.message


def test_yaml_is_loaded_safely() -> None:
    # Given a YAML document asking to construct a Python object
    text = "block_id: x\nname: !!python/object/apply:os.system ['true']\n"
    # When loaded, Then it is rejected as malformed instead of being constructed
    error = problems_of(text, fmt="yaml")
    assert "malformed YAML" in error.problems[0].message


def test_unknown_field_names_the_allowed_fields() -> None:
    error = problems_of('{"plan_id": "w", "steps": [{"step_id": "a", "dependson": ["b"]}]}')
    [problem] = error.problems
    assert problem.path == "steps[0].dependson"
    assert "did you mean 'depends_on'?" in problem.hint
    assert "allowed fields are" in problem.hint
    assert "block_id" in problem.hint


def test_missing_field_asks_to_add_it() -> None:
    error = problems_of('{"plan_id": "w", "steps": [{"block_id": "b"}]}')
    [problem] = error.problems
    assert problem.path == "steps[0].step_id"
    assert problem.hint == "add it"


def test_wrong_type_inside_branches_has_the_label_in_its_path() -> None:
    text = '{"plan_id": "w", "steps": [{"step_id": "a"}, {"step_id": "b"}, {"step_id": "c"},'
    text += ' {"step_id": "d", "branches": {"yes": 3}}]}'
    error = problems_of(text)
    [problem] = error.problems
    assert problem.path == "steps[3].branches.yes"


def test_union_field_errors_become_one_problem_without_type_tags() -> None:
    error = problems_of('{"plan_id": "w", "steps": [{"step_id": "a", "wait": {"seconds": [1]}}]}')
    [problem] = error.problems
    assert problem.path == "steps[0].wait.seconds"


def test_problems_in_a_container_are_prefixed_with_their_list() -> None:
    text = json.dumps({"blocks": [{"block_id": "ok"}, {"block_id": "x", "output_keys": "a"}]})
    error = problems_of(text)
    assert [p.path for p in error.problems] == ["blocks[1].output_keys"]


def test_a_file_with_three_problems_reports_all_three(tmp_path: Path) -> None:
    # Given a file with a bad step id, an unknown field and a missing plan id
    path = tmp_path / "broken.yaml"
    path.write_text(
        "blocks:\n"
        "  - block_id: b\n"
        "    colour: red\n"
        "workflows:\n"
        "  - steps:\n"
        "      - step_id: 'not valid'\n"
        "        block_id: b\n"
    )
    # When the file is loaded
    with pytest.raises(DefinitionError) as raised:
        load_file(path)
    # Then every problem is reported, and the error names the file
    assert raised.value.subject == str(path)
    assert sorted(p.path for p in raised.value.problems) == [
        "blocks[0].colour",
        "workflows[0].plan_id",
        "workflows[0].steps[0].step_id",
    ]


def test_load_file_reads_json_by_its_suffix(tmp_path: Path) -> None:
    path = tmp_path / "block.json"
    path.write_text(QUERY_MEMORY)
    assert load_file(path).blocks[0].block_id == "query_memory"


def test_load_file_rejects_an_unknown_suffix(tmp_path: Path) -> None:
    path = tmp_path / "block.txt"
    path.write_text(QUERY_MEMORY)
    with pytest.raises(DefinitionError) as raised:
        load_file(path)
    assert "unsupported file type" in raised.value.problems[0].message


def test_missing_file_is_a_definition_error(tmp_path: Path) -> None:
    with pytest.raises(DefinitionError) as raised:
        load_file(tmp_path / "nope.yaml")
    assert "cannot read the file" in raised.value.problems[0].message


def test_the_same_block_twice_in_one_file_is_a_problem() -> None:
    error = problems_of(json.dumps([json.loads(QUERY_MEMORY), json.loads(QUERY_MEMORY)]))
    assert "defined more than once" in error.problems[0].message


def test_an_empty_document_is_a_problem() -> None:
    error = problems_of("", fmt="yaml")
    assert "empty" in error.problems[0].message


EXAMPLE_FILES = sorted(
    (Path(__file__).resolve().parents[2] / "examples").glob("*/definitions.yaml")
)


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_yaml_file_reads_as_the_pure_parser_reads_it(path: Path) -> None:
    # Given a definitions file (LibYAML parses YAML when PyYAML has it: issue 26)
    text = path.read_text(encoding="utf-8")
    # When it is loaded
    loaded = load_text(text, source=str(path), fmt="yaml")
    # Then its definitions are those of the document PyYAML's pure safe parser reads
    expected = parse_definitions(yaml.safe_load(text), source=str(path))
    assert (loaded.blocks, loaded.workflows) == (expected.blocks, expected.workflows)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("a: [b\n", "at line 2, column 1: expected ',' or ']'", id="unclosed"),
        pytest.param("a:\n\t- b\n", "found character '\\t' that cannot start", id="tab"),
        pytest.param("a: \x01\n", "unacceptable character #x0001", id="control-character"),
        pytest.param("a: b\n c: d\n", "at line 2, column 3: mapping values", id="indentation"),
        pytest.param("[" * 500 + "]" * 500, "nested so deep the parser stopped", id="depth-500"),
        pytest.param("[" * 5000 + "]" * 5000, "nested so deep the parser stopped", id="depth-5k"),
        pytest.param("&a [*a]\n", "is nested at least 1000 levels deep", id="self-alias"),
    ],
)
def test_bad_yaml_is_refused_in_the_pure_parsers_words(text: str, message: str) -> None:
    # Given a malformed YAML document, or one nested deeper than any door takes (LibYAML words
    # such errors its own way, and stops at another depth than the pure parser)
    # When it is loaded
    error = problems_of(text, fmt="yaml")
    # Then the problem is worded as PyYAML's pure parser and langorch's depth check word it
    [problem] = error.problems
    assert message in problem.message
