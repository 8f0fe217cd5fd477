"""Compiling a CKP procedure (seed 001 §4.1): deterministic, every problem reported at once with
the JSON path the author wrote, triggers and variables mapped onto langorch's, templates and
conditions rewritten for the sandboxed evaluator — and a document that is not CKP left alone."""

from __future__ import annotations

import json
from datetime import date
from typing import Any

import pytest

from langorch.domain.ckp.compiler import compile_procedure
from langorch.domain.ckp.expressions import translate_condition, translate_template
from langorch.domain.ckp.lifecycle import inactive_reason
from langorch.domain.errors import DefinitionError
from langorch.domain.loading import parse_definitions
from langorch.domain.templates import evaluate, render
from tests.ckp_support import compiled, procedure

END = {"type": "terminate", "status": "success"}


def problems(document: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(DefinitionError) as raised:
        compile_procedure(document)
    return [(p.path, p.message) for p in raised.value.problems]


# --- expressions ------------------------------------------------------------------------------


def test_the_seeds_length_condition_evaluates_in_the_sandbox() -> None:
    # Given seed 001's example condition
    expression = translate_condition("{{invoice_list.length}} > 10")
    # Then it is an ordinary expression of the sandboxed evaluator, true for 11 invoices only
    assert expression == "(invoice_list | length) > 10"
    assert evaluate(expression, {"invoice_list": list(range(11))}) is True
    assert evaluate(expression, {"invoice_list": list(range(10))}) is False


def test_javascript_style_operators_and_scope_prefixes_read_as_jinja() -> None:
    expression = translate_condition(
        "{{variables.band}} === 'high' && !{{input.done}} || {{x}} == null"
    )
    assert evaluate(expression, {"band": "high", "done": False, "x": 1}) is True
    assert evaluate(expression, {"band": "low", "done": False, "x": None}) is True
    assert evaluate(expression, {"band": "low", "done": False, "x": 1}) is False


def test_string_literals_are_left_as_written() -> None:
    expression = translate_condition("{{note}} == 'a && b.length'")
    assert evaluate(expression, {"note": "a && b.length"}) is True


def test_templates_keep_their_text_and_rewrite_their_placeholders() -> None:
    template = translate_template("Found {{invoice_list.length}} invoices for {{input.who}}")
    assert render(template, {"invoice_list": [1, 2], "who": "AP"}) == "Found 2 invoices for AP"


def test_a_condition_cannot_reach_python() -> None:
    # Given a condition that reaches for Python's internals
    expression = translate_condition("{{x.__class__.__mro__}}")
    # When it is evaluated, Then the sandbox gives nothing back (no eval anywhere)
    assert evaluate(expression, {"x": 1}) is None


# --- the plan ---------------------------------------------------------------------------------


LOG_HI = {"type": "sequence", "steps": [{"action": "log", "message": "hi"}], "next_node": "b"}
LOG_THEN_END = procedure("a", {"a": LOG_HI, "b": END})
"""Node ``a`` logs "hi", then ``b`` ends."""


def test_compiling_twice_gives_the_same_plan() -> None:
    document = LOG_THEN_END
    assert (
        compiled(document).content_hash()
        == compiled(json.loads(json.dumps(document))).content_hash()
    )


def test_node_ids_are_step_ids_and_transitions_are_dependencies() -> None:
    plan = compiled(LOG_THEN_END)
    assert [(s.step_id, str(s.kind), s.depends_on) for s in plan.steps] == [
        ("a", "sequence", []),
        ("b", "terminate", ["a"]),
    ]
    assert plan.entry_step_id == "a"
    assert plan.ckp is not None and json.loads(plan.ckp)["procedure_id"] == "p"


def test_variables_schema_becomes_the_inputs_schema() -> None:
    plan = compiled(
        procedure(
            "e",
            {"e": END},
            variables_schema={
                "required": {
                    "mailbox": {"type": "string", "validation": {"regex": "^[a-z]+@"}},
                    "limit": {"type": "number", "default": 10},
                },
                "optional": {"note": {"type": "string", "origin": "user_lazy"}},
            },
        )
    )
    assert plan.inputs_schema is not None
    assert plan.inputs_schema.required == ["mailbox"]
    assert plan.inputs_schema.properties == {
        "mailbox": {"type": "string", "pattern": "^[a-z]+@"},
        "limit": {"type": "number", "default": 10},
        "note": {"type": "string"},
    }


@pytest.mark.parametrize(
    ("trigger", "expected"),
    [
        ({"type": "manual"}, {"type": "manual"}),
        ({"type": "webhook"}, {"type": "webhook"}),
        (
            {"type": "scheduled", "schedule": "0 9 * * 1", "timezone": "Europe/Paris"},
            {
                "type": "schedule",
                "schedule": {"cron_expression": "0 9 * * 1", "timezone": "Europe/Paris"},
            },
        ),
        (
            {"type": "file_watch", "file_watch_config": {"path": "inbox", "pattern": "*.csv"}},
            {"type": "s3", "prefix": "inbox/", "suffix": ".csv"},
        ),
        (
            {"type": "event", "event_config": {"bus": "shop", "pattern": {"source": ["a"]}}},
            {"type": "event", "bus": "shop", "pattern": {"source": ["a"]}},
        ),
    ],
)
def test_each_trigger_maps_onto_langorchs(
    trigger: dict[str, Any], expected: dict[str, Any]
) -> None:
    plan = compiled(procedure("e", {"e": END}, trigger=trigger))
    [mapped] = plan.triggers
    assert mapped.model_dump(exclude_defaults=True) == expected


def test_an_event_trigger_without_a_pattern_is_refused_at_its_config() -> None:
    # Given an event trigger that names no pattern
    # When the procedure is compiled
    [(path, message)] = problems(procedure("e", {"e": END}, trigger={"type": "event"}))

    # Then the problem is at event_config.pattern and says what it needs
    assert path == "trigger.event_config.pattern"
    assert "needs event_config.pattern" in message


def test_a_secret_becomes_a_reference_to_the_secret_its_procedure_names() -> None:
    plan = compiled(
        procedure(
            "s",
            {
                "s": {
                    "type": "sequence",
                    "steps": [
                        {
                            "action": "http_request",
                            "url": "https://api.example.com",
                            "headers": {"Authorization": "Bearer {{secrets.API_TOKEN}}"},
                        }
                    ],
                }
            },
            global_config={"secrets_config": {"secret_references": {"API_TOKEN": "prod/api"}}},
        )
    )
    header = plan.steps[0].settings["steps"][0]["params"]["headers"]["Authorization"]
    assert header == 'Bearer {{ secrets["prod/api"] }}'


# --- static checks, each at its path ----------------------------------------------------------


def test_every_problem_is_reported_at_once_with_its_path() -> None:
    # Given a procedure with a missing start node, an unknown next node, an unknown node type,
    # a rule without a target and an unreachable node
    document = procedure(
        "start",
        {
            "fetch": {
                "type": "sequence",
                "steps": [{"action": "log", "message": "x"}],
                "next_node": "parsee",
            },
            "parse": {"type": "procesing"},
            "gate": {"type": "logic", "rules": [{"condition": "{{x}} > 1"}]},
            "orphan": END,
        },
    )
    # When it is compiled, Then each is reported where it is
    found = problems(document)
    paths = [path for path, _ in found]
    assert "workflow_graph.start_node" in paths
    assert (
        "workflow_graph.nodes.fetch.next_node",
        "'parsee' is not a node of this procedure",
    ) in found
    assert "workflow_graph.nodes.parse.type" in paths
    assert "workflow_graph.nodes.gate.rules[0].next_node" in paths


def test_an_unknown_node_names_the_closest_one() -> None:
    with pytest.raises(DefinitionError) as raised:
        compile_procedure(
            procedure(
                "a", {"a": {"type": "sequence", "steps": [], "next_node": "don"}, "done": END}
            )
        )
    problem = raised.value.problems[0]
    assert problem.path == "workflow_graph.nodes.a.next_node"
    assert problem.hint == "did you mean 'done'?"


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        pytest.param(
            procedure(
                "a", {"a": {"type": "sequence", "steps": [], "next_node": "b"}, "b": END, "c": END}
            ),
            ("workflow_graph.nodes.c", "node 'c' can never run: no path leads to it from 'a'"),
            id="an-unreachable-node",
        ),
        pytest.param(
            procedure("a", {"a": {"type": "sequence", "steps": [{"target": "x"}]}}),
            ("workflow_graph.nodes.a.steps[0].action", "required field 'action' is missing"),
            id="a-step-without-an-action-by-its-index",
        ),
        pytest.param(
            procedure(
                "ask",
                {"ask": {"type": "human_approval", "prompt": "ok?", "on_approve": "e"}, "e": END},
            ),
            ("workflow_graph.nodes.ask.approvers", "human_approval 'ask' names no approvers"),
            id="an-approval-without-approvers-says-who-may-decide",
        ),
    ],
)
def test_a_broken_node_is_named_at_its_path(
    document: dict[str, Any], problem: tuple[str, str]
) -> None:
    assert problems(document) == [problem]


def test_a_loop_body_leaving_its_loop_is_refused() -> None:
    found = problems(
        procedure(
            "each",
            {
                "each": {"type": "loop", "iterator": "xs", "body_node": "b", "next_node": "e"},
                "b": {"type": "sequence", "steps": [], "next_node": "e"},
                "e": END,
            },
        )
    )
    assert found[0][0] == "workflow_graph.nodes.b.next_node"
    assert "outside loop 'each'" in found[0][1]


def test_status_and_effective_date_are_checked() -> None:
    found = problems(procedure("e", {"e": END}, status="live", effective_date="next week"))
    assert [path for path, _ in found] == ["status", "effective_date"]


def test_the_plans_own_checks_are_reported_at_the_nodes_path() -> None:
    # Given a timeout longer than a segment may run
    found = problems(
        procedure("a", {"a": {"type": "sequence", "steps": [], "timeout_ms": 3_600_000}})
    )
    assert found[0][0] == "workflow_graph.nodes.a.timeout_ms"


def test_fields_a_node_type_does_not_use_are_warnings_with_their_path() -> None:
    loaded = parse_definitions(
        procedure("e", {"e": {**END, "colour": "blue"}}, owner="ops"), source="f.json"
    )
    assert [(w.path, w.message) for w in loaded.warnings] == [
        ("owner", "unknown field 'owner' is kept but not used"),
        (
            "workflow_graph.nodes.e.colour",
            "a terminate node does not use 'colour'; it is kept but ignored",
        ),
    ]


def test_a_document_that_is_neither_says_what_each_kind_has() -> None:
    with pytest.raises(DefinitionError) as raised:
        parse_definitions({"name": "x"}, source="f.json")
    assert "a CKP procedure has procedure_id and workflow_graph" in raised.value.problems[0].hint


# --- status and effective date ----------------------------------------------------------------


def test_a_draft_or_a_future_procedure_may_not_run_from_a_trigger() -> None:
    today = date(2026, 6, 1)
    assert inactive_reason(compiled(procedure("e", {"e": END}, status="draft")), today) == (
        "status draft"
    )
    future = compiled(procedure("e", {"e": END}, effective_date="2026-07-01"))
    assert inactive_reason(future, today) == "effective from 2026-07-01"
    assert (
        inactive_reason(compiled(procedure("e", {"e": END}, effective_date="2026-06-01")), today)
        is None
    )
