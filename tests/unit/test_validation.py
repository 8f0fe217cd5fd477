"""Validation of workflows and blocks: every problem at once, each with its path and a hint."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from langorch.domain.definitions import BlockDefinition, BlockType, TaskPlan
from langorch.domain.errors import DefinitionError, Problem
from langorch.domain.validation import (
    InMemoryLookup,
    Validation,
    check_block,
    check_workflow,
    ensure_valid_block,
    ensure_valid_workflow,
    step_graph,
    validate_block,
    validate_workflow,
)

TOOLS = frozenset({"browser", "http_api"})
PROVIDERS = frozenset({"bedrock", "openai", "offline"})


def block(block_id: str, **fields: Any) -> BlockDefinition:
    """An action block with a prompt over its input keys, unless told otherwise."""
    data: dict[str, Any] = {"block_id": block_id, "name": block_id.replace("_", " ").title()}
    data.update(fields)
    if data.get("block_type", "action") in ("action", "extraction", "decision"):
        inputs = data.get("input_keys", [])
        data.setdefault("prompt_template", "Do it. " + " ".join(f"{{{k}}}" for k in inputs))
    return BlockDefinition.model_validate(data)


# Seed 000's blocks, as the lunch-order example uses them.
SEED_BLOCKS = [
    block(
        "query_memory",
        input_keys=["memory_query"],
        output_keys=["memory_results"],
        prompt_template="Search the user's memory for: {memory_query}.",
        block_type="query_memory",
    ),
    block(
        "open_uber_eats",
        input_keys=["uber_eats_credentials"],
        output_keys=["session_active", "logged_in"],
        tools_required=["browser"],
    ),
    block(
        "check_previous_order",
        input_keys=["memory_results"],
        block_type="decision",
        branches={"has_preference": "navigate_to_restaurant", "no_preference": "select_restaurant"},
    ),
    block("select_restaurant", input_keys=["user_preferences"], output_keys=["restaurant_name"]),
    block(
        "navigate_to_restaurant",
        input_keys=["restaurant_name"],
        output_keys=["platform_context"],
        tools_required=["browser"],
    ),
    block(
        "add_to_cart_generic",
        input_keys=["items_to_order", "platform_context"],
        output_keys=["cart_contents", "cart_total"],
        tools_required=["browser"],
    ),
    block("set_delivery_time", input_keys=["delivery_time"], output_keys=["delivery_slot"]),
    block(
        "place_order",
        input_keys=["cart_contents", "cart_total"],
        output_keys=["order_confirmation_id"],
        tools_required=["browser"],
    ),
    block("summarize", input_keys=["text"], output_keys=["summary"]),
    block("approve", block_type="approval"),
]


def lookup(*extra: BlockDefinition, workflows: tuple[TaskPlan, ...] = ()) -> InMemoryLookup:
    return InMemoryLookup([*SEED_BLOCKS, *extra], workflows)


def lunch_plan() -> dict[str, Any]:
    """Seed 000's end-to-end example: order lunch every Tuesday."""
    return {
        "plan_id": "lunch_order",
        "user_intent": "Order my lunch from Uber Eats every Tuesday arriving at 1pm",
        "inputs_schema": {
            "properties": {
                "memory_query": {"type": "string"},
                "uber_eats_credentials": {"type": "string"},
                "delivery_time": {"type": "string"},
            }
        },
        "schedule": {"cron_expression": "0 11 * * 2", "timezone": "America/New_York"},
        "steps": [
            {"step_id": "recall", "block_id": "query_memory"},
            {"step_id": "open_uber_eats", "block_id": "open_uber_eats", "depends_on": ["recall"]},
            {
                "step_id": "check_previous_order",
                "block_id": "check_previous_order",
                "depends_on": ["open_uber_eats"],
            },
            {
                "step_id": "select_restaurant",
                "block_id": "select_restaurant",
                "depends_on": ["check_previous_order"],
            },
            {
                "step_id": "navigate_to_restaurant",
                "block_id": "navigate_to_restaurant",
                "depends_on": ["select_restaurant"],
            },
            {
                "step_id": "add_to_cart",
                "block_id": "add_to_cart_generic",
                "depends_on": ["navigate_to_restaurant"],
                "input_mappings": {"items_to_order": "memory_results"},
            },
            {
                "step_id": "set_delivery_time",
                "block_id": "set_delivery_time",
                "depends_on": ["add_to_cart"],
            },
            {
                "step_id": "place_order",
                "block_id": "place_order",
                "depends_on": ["set_delivery_time"],
            },
        ],
    }


def plan(data: dict[str, Any]) -> TaskPlan:
    return TaskPlan.model_validate(data)


def problems_of(data: dict[str, Any], *extra: BlockDefinition, **kw: Any) -> list[Problem]:
    return validate_workflow(plan(data), lookup(*extra, **kw), tools=TOOLS, providers=PROVIDERS)


def checked(data: dict[str, Any], *extra: BlockDefinition, **kw: Any) -> Validation:
    return check_workflow(plan(data), lookup(*extra, **kw), tools=TOOLS, providers=PROVIDERS)


def warnings_of(data: dict[str, Any], *extra: BlockDefinition, **kw: Any) -> list[Problem]:
    """The warnings of a workflow that has no error (asserted)."""
    found = checked(data, *extra, **kw)
    assert found.errors == [], [str(p) for p in found.errors]
    return found.warnings


def paths(problems: list[Problem]) -> list[str]:
    return [p.path for p in problems]


def minimal(*steps: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A plan over the seed blocks whose inputs are all declared."""
    return {
        "plan_id": "p",
        "inputs_schema": {"properties": {"text": {}, "items": {}, "amount": {}, "url": {}}},
        "approvers": ["ops@example.com"],
        **fields,
        "steps": list(steps),
    }


def s(step_id: str, **fields: Any) -> dict[str, Any]:
    """A summarize step unless told otherwise."""
    if "kind" not in fields:
        fields.setdefault("block_id", "summarize")
    return {"step_id": step_id, **fields}


# --------------------------------------------------------------------------------------------
# Valid plans
# --------------------------------------------------------------------------------------------


def test_seed_000_lunch_plan_has_no_problems() -> None:
    # Given seed 000's end-to-end example over its blocks
    # When it is validated
    problems = problems_of(lunch_plan())
    # Then nothing is wrong with it
    assert problems == []


def test_every_kind_of_step_together_has_no_problems() -> None:
    # Given a plan using a loop, a condition decision, a transform, an http call, a wait,
    # an approval review loop, a subflow and a terminate step
    child = plan(minimal(s("child_summary")) | {"plan_id": "child"})
    data = minimal(
        s("draft"),
        s(
            "review",
            kind="approval",
            depends_on=["draft"],
            branches={"approved": "each", "rejected": "draft"},
            approval={"max_iterations": 3, "title": "Review {{ summary }}"},
        ),
        {
            "step_id": "each",
            "kind": "loop",
            "loop": {"over": "items", "body": ["shout"]},
        },
        {"step_id": "shout", "kind": "transform", "transform": {"loud": "item | upper"}},
        {
            "step_id": "route",
            "kind": "decision",
            "depends_on": ["each"],
            "condition": "{{ 'big' if amount > 100 else 'small' }}",
            "branches": {"big": "notify", "small": "pause"},
        },
        {
            "step_id": "notify",
            "kind": "http",
            "depends_on": ["route"],
            "http": {"url": "{{ url }}", "body": {"count": "{{ each_results | length }}"}},
        },
        {"step_id": "pause", "kind": "wait", "depends_on": ["route"], "wait": {"seconds": 60}},
        {
            "step_id": "child",
            "kind": "subflow",
            "depends_on": ["notify", "pause"],
            "subflow": {"workflow_id": "child", "inputs": {"text": "summary"}},
        },
        {
            "step_id": "finish",
            "kind": "terminate",
            "depends_on": ["child"],
            "terminate": {"outputs": {"summary": "summary", "feedback": "feedback"}},
        },
    )
    # When it is validated
    problems = problems_of(data, workflows=(child,))
    # Then nothing is wrong with it
    assert problems == []


# --------------------------------------------------------------------------------------------
# Problems, one kind per test, each with its exact path
# --------------------------------------------------------------------------------------------


def only(problems: list[Problem]) -> Problem:
    """The single problem found (a minimal plan with one mistake reports exactly one)."""
    assert len(problems) == 1, [str(p) for p in problems]
    assert problems[0].hint, "every problem carries a hint"
    return problems[0]


def test_duplicate_step_id_is_reported_on_the_second_step() -> None:
    problem = only(problems_of(minimal(s("a"), s("a"))))
    assert problem.path == "steps[1].step_id"
    assert "already used by steps[0]" in problem.message


def test_reserved_step_id_is_reported() -> None:
    problem = only(problems_of(minimal(s("load_memory"))))
    assert problem.path == "steps[0].step_id"
    assert "reserved" in problem.message


def test_step_with_neither_block_nor_kind_is_reported() -> None:
    problem = only(problems_of(minimal({"step_id": "a"})))
    assert problem.path == "steps[0]"
    assert "neither block_id nor kind" in problem.message


def test_kind_contradicting_the_block_is_reported() -> None:
    problem = only(problems_of(minimal(s("a", block_id="summarize", kind="transform"))))
    assert problem.path == "steps[0].kind"
    assert "contradicts block 'summarize'" in problem.message


def test_inline_llm_step_without_block_is_reported() -> None:
    problem = only(problems_of(minimal({"step_id": "a", "kind": "action"})))
    assert problem.path == "steps[0].kind"


def test_unknown_block_is_reported() -> None:
    problem = only(problems_of(minimal(s("a", block_id="summarise"))))
    assert problem.path == "steps[0].block_id"
    assert "unknown block 'summarise'" in problem.message


def test_unknown_block_version_is_reported_on_block_version() -> None:
    problem = only(problems_of(minimal(s("a", block_version=7))))
    assert problem.path == "steps[0].block_version"
    assert "no version 7" in problem.message
    assert "latest version is 1" in problem.hint


def test_pinned_existing_block_version_is_used() -> None:
    # Given version 2 of a block that reads a key version 1 does not
    v2 = block("summarize", version=2, input_keys=["undeclared"], output_keys=["summary"])
    # When a step pins version 1
    problems = problems_of(minimal(s("a", block_version=1)), v2)
    # Then version 1's inputs are checked, not the latest's
    assert problems == []


def test_unknown_subflow_workflow_is_reported() -> None:
    data = minimal({"step_id": "a", "kind": "subflow", "subflow": {"workflow_id": "nope"}})
    problem = only(problems_of(data))
    assert problem.path == "steps[0].subflow.workflow_id"


def test_unknown_subflow_version_is_reported() -> None:
    child = plan(minimal(s("x")) | {"plan_id": "child"})
    data = minimal(
        {"step_id": "a", "kind": "subflow", "subflow": {"workflow_id": "child", "version": 3}}
    )
    problem = only(problems_of(data, workflows=(child,)))
    assert problem.path == "steps[0].subflow.version"


def test_depends_on_unknown_step_is_reported() -> None:
    problem = only(problems_of(minimal(s("a"), s("b", depends_on=["aa"]))))
    assert problem.path == "steps[1].depends_on[0]"
    assert problem.message == "'aa' is not a step of this workflow"
    assert problem.hint == "did you mean 'a'?"


REVIEW_TYPO = {
    "plan_id": "wf",
    "approvers": ["ed@example.com"],
    "inputs_schema": {"properties": {"topic": {}}},
    "steps": [
        {"step_id": "draft", "kind": "transform", "transform": {"title": "topic"}},
        {
            "step_id": "review",
            "kind": "approval",
            "depends_on": ["draft"],
            "approval": {"show_keys": ["title"], "max_iterations": 2},
            "branches": {"approved": "publsh", "rejected": "draft"},
        },
        {"step_id": "publish", "kind": "terminate", "terminate": {"outputs": {"title": "title"}}},
    ],
}


def test_a_misspelt_branch_target_is_named_with_the_step_it_meant_and_reported_once() -> None:
    # Given a review whose approved branch misspells 'publish' (publish reads 'title')
    # When it is validated
    problem = only(problems_of(REVIEW_TYPO))

    # Then the one problem names the bad target and the step it meant; before, 'publish'
    # (left without its incoming edge) was also reported as reading keys nothing provides
    assert str(problem) == (
        "steps[1].branches.approved: 'publsh' is not a step of this workflow "
        "(hint: did you mean 'publish'?)"
    )


@pytest.mark.parametrize(
    ("field", "value", "path"),
    [
        ("on_error", "publsh", "steps[1].on_error"),
        ("approval", {"max_iterations": 2, "on_max_iterations": "publsh"}, None),
        ("depends_on", ["drafft"], "steps[1].depends_on[0]"),
    ],
)
def test_every_reference_to_a_step_names_the_bad_target(
    field: str, value: Any, path: str | None
) -> None:
    data: dict[str, Any] = {**REVIEW_TYPO, "steps": [dict(x) for x in REVIEW_TYPO["steps"]]}
    data["steps"][1]["branches"] = {"approved": "publish", "rejected": "draft"}
    data["steps"][1][field] = (
        {**data["steps"][1]["approval"], **value} if field == "approval" else value
    )
    problem = only(problems_of(data))
    assert problem.path == (path or "steps[1].approval.on_max_iterations")
    bad = value[0] if isinstance(value, list) else value
    bad = bad["on_max_iterations"] if isinstance(bad, dict) else bad
    assert problem.message == f"{bad!r} is not a step of this workflow"
    assert problem.hint.startswith("did you mean ")


def test_a_reference_with_no_close_step_lists_the_steps() -> None:
    data = minimal(s("a"), s("b", depends_on=["zzz_unrelated"]))
    problem = only(problems_of(data))
    assert problem.message == "'zzz_unrelated' is not a step of this workflow"
    assert problem.hint == "use the step_id of a step of this workflow: 'a', 'b'"


def test_branch_to_unknown_step_is_reported() -> None:
    data = minimal(
        s("a"),
        s("d", kind="decision", depends_on=["a"], condition="yes", branches={"yes": "b"}),
    )
    problem = only(problems_of(data))
    assert problem.path == "steps[1].branches.yes"


def test_on_error_to_unknown_step_is_reported() -> None:
    problem = only(problems_of(minimal(s("a", on_error="fallback"))))
    assert problem.path == "steps[0].on_error"


def test_on_failure_to_unknown_step_is_reported() -> None:
    problem = only(problems_of(minimal(s("a"), on_failure="cleanup")))
    assert problem.path == "on_failure"


def test_entry_step_id_to_unknown_step_is_reported() -> None:
    problem = only(problems_of(minimal(s("a"), entry_step_id="start")))
    assert problem.path == "entry_step_id"


def test_loop_body_with_unknown_step_is_reported() -> None:
    data = minimal({"step_id": "each", "kind": "loop", "loop": {"over": "items", "body": ["x"]}})
    problem = only(problems_of(data))
    assert problem.path == "steps[0].loop.body[0]"


def test_on_max_iterations_to_unknown_step_is_reported() -> None:
    data = minimal(
        s("draft"),
        s(
            "review",
            kind="approval",
            depends_on=["draft"],
            branches={"approved": "publish", "rejected": "draft"},
            approval={"max_iterations": 2, "on_max_iterations": "escalate"},
        ),
        s("publish", depends_on=["review"]),
    )
    problem = only(problems_of(data))
    assert problem.path == "steps[1].approval.on_max_iterations"


def test_block_input_no_step_or_schema_provides_is_a_warning_on_the_step() -> None:
    # Given a summarize step whose `text` input is declared nowhere
    data = minimal(s("a")) | {"inputs_schema": {"properties": {"other": {}}}}
    # When validated
    problem = only(warnings_of(data))
    # Then the step's block reference carries a warning (not an error: seed 000 reads such an
    # input from the user's preferences), saying how it resolves and how to provide it
    assert problem.path == "steps[0].block_id"
    assert "'text'" in problem.message
    assert "else the user's preference 'text', else empty" in problem.hint
    assert "inputs_schema.properties" in problem.hint


def test_a_workflow_whose_only_findings_are_warnings_is_valid_unless_strict() -> None:
    # Given a workflow whose one finding is an input nothing provides
    found = checked(minimal(s("a")) | {"inputs_schema": {"properties": {"other": {}}}})
    # Then it is valid, and --strict's view of it is not
    assert found.ok and len(found.warnings) == 1
    strict = found.strict()
    assert not strict.ok
    assert strict.errors == found.warnings and strict.warnings == []


def test_mapped_input_is_checked_under_its_mapping() -> None:
    data = minimal(s("a", input_mappings={"text": "article"}))
    problem = only(warnings_of(data))
    assert problem.path == "steps[0].input_mappings.text"
    assert "'article'" in problem.message


def test_missing_input_is_reported_even_without_an_inputs_schema() -> None:
    data = minimal(s("a"))
    del data["inputs_schema"]
    problem = only(warnings_of(data))
    assert problem.path == "steps[0].block_id"
    assert "declare it in inputs_schema" in problem.hint


def test_template_reading_an_unprovided_key_is_reported_on_the_template() -> None:
    data = minimal(
        s("a"),
        s(
            "d",
            kind="decision",
            depends_on=["a"],
            condition="{{ 'yes' if score > 3 else 'no' }}",
            branches={"yes": "b", "no": "b"},
        ),
        s("b", depends_on=["d"]),
    )
    problem = only(warnings_of(data))
    assert problem.path == "steps[1].condition"
    assert "'score'" in problem.message


def test_output_of_a_parallel_step_is_not_an_available_input() -> None:
    # Given two steps with no order between them, the second reading the first's output
    producer = block("producer", output_keys=["fact"])
    consumer = block("consumer", input_keys=["fact"], output_keys=["done"])
    data = minimal(s("a", block_id="producer"), s("b", block_id="consumer"))
    # When validated
    problem = only(warnings_of(data, producer, consumer))
    # Then the read is reported: `a` may not have run yet
    assert problem.path == "steps[1].block_id"


@pytest.mark.parametrize(
    ("provider", "reader"),
    [
        pytest.param(
            {"step_id": "p", "block_id": "producer"},
            {"step_id": "r", "block_id": "consumer", "depends_on": ["p"]},
            id="ancestor-output",
        ),
        pytest.param(
            {"step_id": "p", "kind": "wait", "wait": {"seconds": 1}},
            {"step_id": "r", "block_id": "consumer", "depends_on": ["p"]},
            id="trigger-input",
        ),
        pytest.param(
            {
                "step_id": "p",
                "kind": "approval",
                "approval": {"editable_keys": ["fact"], "editable_types": {"fact": "text"}},
                "branches": {"approved": "r", "rejected": "r"},
            },
            {"step_id": "r", "block_id": "consumer", "depends_on": ["p"]},
            id="approval-editable-key",
        ),
        pytest.param(
            {
                "step_id": "p",
                "kind": "approval",
                "approval": {"feedback_key": "fact"},
                "branches": {"approved": "r", "rejected": "r"},
            },
            {"step_id": "r", "block_id": "consumer", "depends_on": ["p"]},
            id="approval-feedback-key",
        ),
        pytest.param(
            {"step_id": "p", "kind": "loop", "loop": {"over": "items", "body": ["r"]}},
            {"step_id": "r", "block_id": "consumer", "input_mappings": {"fact": "item"}},
            id="loop-item",
        ),
        pytest.param(
            {"step_id": "p", "kind": "wait", "wait": {"seconds": 1}},
            {
                "step_id": "r",
                "block_id": "consumer",
                "depends_on": ["p"],
                "input_mappings": {"fact": "user_preferences"},
            },
            id="memory",
        ),
        pytest.param(
            {"step_id": "p", "kind": "wait", "wait": {"seconds": 1}},
            {
                "step_id": "r",
                "block_id": "consumer",
                "depends_on": ["p"],
                "input_mappings": {"fact": "run_id"},
            },
            id="built-in",
        ),
        pytest.param(
            {
                "step_id": "p",
                "kind": "approval",
                "branches": {"approved": "r", "rejected": "r"},
            },
            {
                "step_id": "r",
                "block_id": "consumer",
                "depends_on": ["p"],
                "input_mappings": {"fact": "p_decision"},
            },
            id="approval-decision-record",
        ),
        pytest.param(
            {"step_id": "p", "kind": "decision", "condition": "go", "branches": {"go": "r"}},
            {
                "step_id": "r",
                "block_id": "consumer",
                "depends_on": ["p"],
                "input_mappings": {"fact": "p_branch"},
            },
            id="decision-label",
        ),
    ],
)
def test_inputs_provided_by_any_source_are_accepted(
    provider: dict[str, Any], reader: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    # Given a step reading `fact`, provided in one of the accepted ways
    producer = block("producer", output_keys=["fact"])
    consumer = block("consumer", input_keys=["fact"], output_keys=["done"])
    data = minimal(provider, reader)
    if request.node.callspec.id == "trigger-input":
        data["triggers"] = [{"type": "manual", "input": {"fact": "x"}}]
    # When validated
    problems = problems_of(data, producer, consumer)
    # Then nothing is missing
    assert problems == []


def test_unreachable_step_is_reported() -> None:
    # Given a step that only an entry_step_id-less plan could reach, behind a fixed entry
    data = minimal(s("a"), s("b"), entry_step_id="a")
    problem = only(problems_of(data))
    assert problem.path == "steps[1]"
    assert "can never run" in problem.message


def test_cycle_outside_a_loop_is_reported_with_its_steps() -> None:
    data = minimal(
        s("start"),
        s("a", depends_on=["start", "c"]),
        s("b", depends_on=["a"]),
        s("c", depends_on=["b"]),
        entry_step_id="start",
    )
    problem = only(problems_of(data))
    assert problem.path == "steps[1]"
    assert "a → b → c → a" in problem.message


def test_cycle_through_a_step_with_max_iterations_is_legal() -> None:
    data = minimal(
        s("start"),
        s("a", depends_on=["start", "c"], max_iterations=3),
        s("b", depends_on=["a"]),
        s("c", depends_on=["b"]),
        entry_step_id="start",
    )
    assert problems_of(data) == []


def test_review_loop_bounded_by_the_approval_is_legal() -> None:
    data = minimal(
        s("draft"),
        s(
            "review",
            kind="approval",
            depends_on=["draft"],
            branches={"approved": "publish", "rejected": "draft"},
            approval={"max_iterations": 3},
        ),
        s("publish", depends_on=["review"]),
    )
    assert problems_of(data) == []


def test_unbounded_review_loop_is_a_cycle() -> None:
    data = minimal(
        s("draft"),
        s(
            "review",
            kind="approval",
            depends_on=["draft"],
            branches={"approved": "publish", "rejected": "draft"},
        ),
        s("publish", depends_on=["review"]),
    )
    problem = only(problems_of(data))
    assert problem.path == "steps[0]"
    assert "draft → review → draft" in problem.message


def test_decision_without_branches_is_reported() -> None:
    data = minimal(s("a"), s("d", kind="decision", depends_on=["a"], condition="yes"))
    problem = only(problems_of(data))
    assert problem.path == "steps[1].branches"


def test_decision_with_no_way_to_choose_is_reported() -> None:
    data = minimal(s("a"), s("d", kind="decision", depends_on=["a"], branches={"yes": "b"}))
    data["steps"].append(s("b", depends_on=["d"]))
    problem = only(problems_of(data))
    assert problem.path == "steps[1]"
    assert "no way to choose" in problem.message


def test_case_branch_that_is_not_a_label_is_reported() -> None:
    data = minimal(
        s("a"),
        s(
            "d",
            kind="decision",
            depends_on=["a"],
            cases=[{"when": "amount > 3", "branch": "big"}],
            branches={"small": "b"},
        ),
        s("b", depends_on=["d"]),
    )
    problem = only(problems_of(data))
    assert problem.path == "steps[1].cases[0].branch"


def test_default_branch_that_is_not_a_label_is_reported() -> None:
    data = minimal(
        s("a"),
        s(
            "d",
            kind="decision",
            depends_on=["a"],
            cases=[{"when": "amount > 3", "branch": "small"}],
            default_branch="other",
            branches={"small": "b"},
        ),
        s("b", depends_on=["d"]),
    )
    problem = only(problems_of(data))
    assert problem.path == "steps[1].default_branch"


def test_depending_on_a_decision_without_being_its_branch_target_is_reported() -> None:
    data = minimal(
        s("a"),
        s("d", kind="decision", depends_on=["a"], condition="yes", branches={"yes": "b"}),
        s("b", depends_on=["d"]),
        s("c", depends_on=["d"]),
    )
    problem = only(problems_of(data))
    assert problem.path == "steps[3].depends_on[0]"
    assert "not one of its branch targets" in problem.message


def test_unbound_tool_of_a_referenced_block_is_a_warning_on_the_step() -> None:
    scraper = block("scraper", input_keys=["text"], output_keys=["page"], tools_required=["ftp"])
    problem = only(warnings_of(minimal(s("a", block_id="scraper")), scraper))
    assert problem.path == "steps[0].block_id"
    assert "block 'scraper' needs tool 'ftp'" in problem.message
    assert "fails only if its model calls 'ftp'" in problem.hint


def test_tools_are_checked_against_the_names_the_caller_binds() -> None:
    # Given a block needing `ftp`, and a deployment whose registry binds it
    scraper = block("scraper", input_keys=["text"], output_keys=["page"], tools_required=["ftp"])
    data = minimal(s("a", block_id="scraper"))
    # When validated with the bound names passed in
    found = check_workflow(plan(data), lookup(scraper), tools=TOOLS | {"ftp"}, providers=PROVIDERS)
    # Then nothing is found
    assert found == Validation()


def test_unknown_provider_of_a_step_is_reported() -> None:
    problem = only(problems_of(minimal(s("a", llm_provider="cohere"))))
    assert problem.path == "steps[0].llm_provider"


def test_unknown_provider_of_the_plan_is_reported() -> None:
    problem = only(problems_of(minimal(s("a"), llm_provider="cohere")))
    assert problem.path == "llm_provider"


def test_unknown_provider_of_a_referenced_block_is_reported_on_the_step() -> None:
    writer = block("writer", input_keys=["text"], output_keys=["t"], llm_provider="cohere")
    problem = only(problems_of(minimal(s("a", block_id="writer")), writer))
    assert problem.path == "steps[0].block_id"


def test_bad_cron_is_reported() -> None:
    data = minimal(
        s("a"), triggers=[{"type": "schedule", "schedule": {"cron_expression": "61 * * * *"}}]
    )
    problem = only(problems_of(data))
    assert problem.path == "triggers[0].schedule.cron_expression"


def test_cron_with_six_fields_is_reported() -> None:
    data = minimal(
        s("a"), triggers=[{"type": "schedule", "schedule": {"cron_expression": "0 0 12 * * 2"}}]
    )
    problem = only(problems_of(data))
    assert problem.path == "triggers[0].schedule.cron_expression"
    assert "6 fields" in problem.message


def test_bad_timezone_is_reported() -> None:
    schedule = {"cron_expression": "0 12 * * 2", "timezone": "Mars/Olympus"}
    data = minimal(s("a"), triggers=[{"type": "schedule", "schedule": schedule}])
    problem = only(problems_of(data))
    assert problem.path == "triggers[0].schedule.timezone"


def test_bad_seed_000_schedule_is_reported() -> None:
    data = minimal(s("a"), schedule={"cron_expression": "every tuesday"})
    problem = only(problems_of(data))
    assert problem.path == "schedule.cron_expression"


def test_schedule_trigger_without_schedule_is_reported() -> None:
    problem = only(problems_of(minimal(s("a"), triggers=[{"type": "schedule"}])))
    assert problem.path == "triggers[0].schedule"


def test_s3_trigger_without_bucket_prefix_or_suffix_is_reported() -> None:
    problem = only(problems_of(minimal(s("a"), triggers=[{"type": "s3"}])))
    assert problem.path == "triggers[0]"


def test_approval_without_approvers_is_reported() -> None:
    data = minimal(
        s("a"),
        s("ok", kind="approval", depends_on=["a"], branches={"approved": "b", "rejected": "b"}),
        approvers=[],
    )
    data["steps"].append(s("b", depends_on=["ok"]))
    problem = only(problems_of(data))
    assert problem.path == "steps[1].approval.approvers"


def test_approval_channel_that_langorch_does_not_know_is_reported_at_its_path() -> None:
    # Given an approval step that names a channel there is no such thing as
    data = minimal(
        s("a"),
        s(
            "ok",
            kind="approval",
            depends_on=["a"],
            branches={"approved": "b", "rejected": "b", "timed_out": "b"},
            approval={"channels": ["email", "pager"]},
        ),
        s("b", depends_on=["ok"]),
    )
    # When it is read, Then it is refused at the channel's path, naming the choices
    with pytest.raises(ValidationError, match=r"steps\.1\.approval\.channels\.1[\s\S]*'slack'"):
        plan(data)


def test_approval_naming_email_and_slack_is_legal() -> None:
    # Given an approval step that goes to email and Slack
    data = minimal(
        s("a"),
        s(
            "ok",
            kind="approval",
            depends_on=["a"],
            branches={"approved": "b", "rejected": "b", "timed_out": "b"},
            approval={"channels": ["email", "slack"]},
        ),
        s("b", depends_on=["ok"]),
    )
    # Then it has no problems
    assert problems_of(data) == []


def test_approval_whose_timeout_leads_nowhere_is_reported() -> None:
    data = minimal(
        s("a"),
        s("ok", kind="approval", depends_on=["a"], branches={"approved": "b"}),
        s("b", depends_on=["ok"]),
    )
    problem = only(problems_of(data))
    assert problem.path == "steps[1].approval.on_timeout"


def test_approval_branch_that_is_not_an_outcome_is_reported() -> None:
    data = minimal(
        s("a"),
        s("ok", kind="approval", depends_on=["a"], branches={"yes": "b", "rejected": "b"}),
        s("b", depends_on=["ok"]),
    )
    problem = only(problems_of(data))
    assert problem.path == "steps[1].branches.yes"


@pytest.mark.parametrize("wait", [{}, {"seconds": 5, "until": "2030-01-01T00:00:00+00:00"}])
def test_wait_without_exactly_one_of_seconds_or_until_is_reported(wait: dict[str, Any]) -> None:
    data = minimal(s("a"), {"step_id": "w", "kind": "wait", "depends_on": ["a"], "wait": wait})
    problem = only(problems_of(data))
    assert problem.path == "steps[1].wait"


def test_loop_body_step_depending_on_a_step_outside_the_body_is_reported() -> None:
    data = minimal(
        s("a"),
        {
            "step_id": "each",
            "kind": "loop",
            "depends_on": ["a"],
            "loop": {"over": "items", "body": ["b"]},
        },
        s("b", depends_on=["a"]),
    )
    problem = only(problems_of(data))
    assert problem.path == "steps[2].depends_on[0]"
    assert "outside the loop" in problem.message


def test_step_outside_a_loop_depending_on_its_body_is_reported() -> None:
    data = minimal(
        {"step_id": "each", "kind": "loop", "loop": {"over": "items", "body": ["b"]}},
        s("b"),
        s("after", depends_on=["b"]),
    )
    problem = only(problems_of(data))
    assert problem.path == "steps[2].depends_on[0]"
    assert "depend on the loop step 'each'" in problem.hint


def test_join_all_over_exclusive_branches_is_reported() -> None:
    data = minimal(
        s("a"),
        s("d", kind="decision", depends_on=["a"], condition="x", branches={"x": "b", "y": "c"}),
        s("b", depends_on=["d"]),
        s("c", depends_on=["d"]),
        s("merge", depends_on=["b", "c"], join="all"),
    )
    problem = only(problems_of(data))
    assert problem.path == "steps[4].join"
    assert "different branches of 'd'" in problem.message


def test_setting_for_another_kind_is_reported() -> None:
    problem = only(problems_of(minimal(s("a", wait={"seconds": 3}))))
    assert problem.path == "steps[0].wait"


@pytest.mark.parametrize(
    ("step", "path"),
    [
        (
            {"kind": "decision", "condition": "{{ 'x' if }}", "branches": {"x": "z"}},
            "steps[1].condition",
        ),
        (
            {
                "kind": "decision",
                "cases": [{"when": "amount >", "branch": "x"}],
                "branches": {"x": "z"},
            },
            "steps[1].cases[0].when",
        ),
        (
            {
                "kind": "approval",
                "approval": {"title": "{{ text "},
                "branches": {"approved": "z", "rejected": "z"},
            },
            "steps[1].approval.title",
        ),
        (
            {
                "kind": "approval",
                "approval": {"message": "{% if %}"},
                "branches": {"approved": "z", "rejected": "z"},
            },
            "steps[1].approval.message",
        ),
        ({"kind": "transform", "transform": {"total": "amount +* 2"}}, "steps[1].transform.total"),
        ({"kind": "http", "http": {"url": "https://x/{{ url }"}}, "steps[1].http.url"),
        (
            {"kind": "http", "http": {"url": "https://x", "body": {"note": "{{ text | }}"}}},
            "steps[1].http.body.note",
        ),
    ],
)
def test_malformed_template_or_expression_is_reported_at_its_path(
    step: dict[str, Any], path: str
) -> None:
    data = minimal(s("a"), {"step_id": "t", "depends_on": ["a"], **step}, s("z", depends_on=["t"]))
    problem = only(problems_of(data))
    assert problem.path == path
    assert "malformed" in problem.message


def test_every_problem_is_reported_at_once() -> None:
    # Given a plan with an unknown block, a branch to nowhere and a bad cron
    data = minimal(
        s("a", block_id="nope"),
        s("d", kind="decision", depends_on=["a"], condition="x", branches={"x": "ghost"}),
        schedule={"cron_expression": "0 0 0"},
    )
    # When validated
    problems = problems_of(data)
    # Then all three are there
    assert sorted(paths(problems)) == [
        "schedule.cron_expression",
        "steps[0].block_id",
        "steps[1].branches.x",
    ]


def test_ensure_valid_workflow_raises_with_every_problem() -> None:
    data = minimal(s("a", block_id="nope"), s("b", depends_on=["ghost"]))
    with pytest.raises(DefinitionError) as raised:
        ensure_valid_workflow(plan(data), lookup(), tools=TOOLS, providers=PROVIDERS)
    assert raised.value.subject == "workflow p"
    assert paths(raised.value.problems) == ["steps[0].block_id", "steps[1].depends_on[0]"]


# --------------------------------------------------------------------------------------------
# Blocks on their own
# --------------------------------------------------------------------------------------------


def test_block_with_unbound_tool_is_a_warning_on_tools_required() -> None:
    # Given a block needing a bound tool and one nothing binds
    unbound = block("b", tools_required=["browser", "fax"])
    # When checked
    found = check_block(unbound, tools=TOOLS, providers=PROVIDERS)
    # Then the unbound one is a warning with its path, and the block is valid
    assert found.errors == []
    assert only(found.warnings).path == "tools_required[1]"
    assert "tool 'fax'" in found.warnings[0].message
    assert validate_block(unbound, tools=TOOLS, providers=PROVIDERS) == []


def test_block_with_unknown_provider_is_reported() -> None:
    problems = validate_block(block("b", llm_provider="x"), tools=TOOLS, providers=PROVIDERS)
    assert only(problems).path == "llm_provider"


def test_block_with_malformed_prompt_template_is_reported() -> None:
    bad = block("b", input_keys=["x"], prompt_template="Hello {{ x ")
    problem = only(validate_block(bad, tools=TOOLS, providers=PROVIDERS))
    assert problem.path == "prompt_template"
    assert "malformed template" in problem.message


def test_block_prompt_reading_a_key_that_is_not_an_input_is_reported() -> None:
    bad = block("b", input_keys=["restaurant_name"], prompt_template="Order from {restaurant}")
    problem = only(validate_block(bad, tools=TOOLS, providers=PROVIDERS))
    assert problem.path == "prompt_template"
    assert "'restaurant'" in problem.message


def test_http_block_without_http_settings_is_reported() -> None:
    problem = only(validate_block(block("b", block_type="http"), tools=TOOLS, providers=PROVIDERS))
    assert problem.path == "http"


def test_ensure_valid_block_raises_naming_the_block() -> None:
    with pytest.raises(DefinitionError) as raised:
        ensure_valid_block(block("b", llm_provider="fax"), tools=TOOLS, providers=PROVIDERS)
    assert raised.value.subject == "block b"


def test_seed_000_blocks_are_valid() -> None:
    for seed_block in SEED_BLOCKS:
        assert validate_block(seed_block, tools=TOOLS, providers=PROVIDERS) == []


# --------------------------------------------------------------------------------------------
# The lookup
# --------------------------------------------------------------------------------------------


def test_in_memory_lookup_returns_the_latest_version_by_default() -> None:
    store = InMemoryLookup([block("b", version=1), block("b", version=3), block("b", version=2)])
    latest = store.get_block("b")
    assert latest is not None and latest.version == 3


def test_in_memory_lookup_returns_a_pinned_version_or_none() -> None:
    store = InMemoryLookup([block("b", version=1)])
    assert store.get_block("b", 1) is not None
    assert store.get_block("b", 2) is None
    assert store.get_workflow("w") is None


# --------------------------------------------------------------------------------------------
# The step graph (shared with the compiler)
# --------------------------------------------------------------------------------------------


def test_graph_of_the_seed_plan_routes_the_decision_by_label() -> None:
    graph = step_graph(plan(lunch_plan()), lookup())
    branches = graph.successors("check_previous_order", "branch")
    assert {(e.label, e.target) for e in branches} == {
        ("has_preference", "navigate_to_restaurant"),
        ("no_preference", "select_restaurant"),
    }
    assert graph.entry == ("recall",)
    assert graph.terminals == ("place_order",)
    assert graph.steps["check_previous_order"].kind is BlockType.decision


def test_converging_branches_join_on_any_by_default() -> None:
    graph = step_graph(plan(lunch_plan()), lookup())
    assert graph.steps["navigate_to_restaurant"].join == "any"


def test_parallel_steps_join_on_all_by_default() -> None:
    data = minimal(s("a"), s("b"), s("merge", depends_on=["a", "b"]))
    graph = step_graph(plan(data), lookup())
    assert graph.entry == ("a", "b")
    assert graph.steps["merge"].join == "all"


def test_loop_body_entries_exits_and_done_steps_are_resolved() -> None:
    data = minimal(
        {"step_id": "each", "kind": "loop", "loop": {"over": "items", "body": ["b1", "b2"]}},
        s("b1", depends_on=["each"]),
        s("b2", depends_on=["b1"]),
        s("after", depends_on=["each"], input_mappings={"text": "each_results"}),
    )
    graph = step_graph(plan(data), lookup())
    loop = graph.loops["each"]
    assert (loop.body, loop.entries, loop.exits, loop.done) == (
        ("b1", "b2"),
        ("b1",),
        ("b2",),
        ("after",),
    )
    assert loop.collect_key == "each_results"
    assert loop.collect == ("summary",)
    assert [e.target for e in graph.successors("b2", "loop_back")] == ["each"]
    assert graph.steps["b1"].loop == "each"
    assert graph.terminals == ("after",)


def test_review_loop_draft_is_an_entry_and_joins_on_any() -> None:
    data = minimal(
        s("draft"),
        s(
            "review",
            kind="approval",
            depends_on=["draft"],
            branches={"approved": "publish", "rejected": "draft"},
            approval={"max_iterations": 3},
        ),
        s("publish", depends_on=["review"]),
    )
    graph = step_graph(plan(data), lookup())
    assert graph.entry == ("draft",)
    assert [e.source for e in graph.predecessors("draft", "branch")] == ["review"]


def test_review_loop_back_edge_into_a_joined_step_makes_it_join_on_any() -> None:
    data = minimal(
        s("research"),
        s("draft", depends_on=["research"]),
        s(
            "review",
            kind="approval",
            depends_on=["draft"],
            branches={"approved": "publish", "rejected": "draft"},
            approval={"max_iterations": 3},
        ),
        s("publish", depends_on=["review"]),
    )
    graph = step_graph(plan(data), lookup())
    assert graph.steps["draft"].join == "any"


def test_error_routes_are_edges_and_each_step_knows_its_route() -> None:
    data = minimal(
        s("a", on_error="recover"),
        s("b", depends_on=["a"]),
        s("recover"),
        s("cleanup"),
        on_failure="cleanup",
    )
    graph = step_graph(plan(data), lookup())
    assert graph.entry == ("a",)
    assert graph.steps["a"].error_route == "recover"
    assert graph.steps["b"].error_route == "cleanup"
    assert graph.steps["cleanup"].error_route is None
    assert [e.kind for e in graph.successors("a") if e.target == "recover"] == ["on_error"]


def test_step_graph_of_an_invalid_plan_raises() -> None:
    with pytest.raises(DefinitionError):
        step_graph(plan(minimal(s("a", depends_on=["ghost"]))), lookup())


def test_loop_item_is_not_available_outside_the_loop() -> None:
    data = minimal(
        {"step_id": "each", "kind": "loop", "loop": {"over": "items", "body": ["b"]}},
        s("b"),
        s("after", depends_on=["each"], input_mappings={"text": "item"}),
    )
    problem = only(warnings_of(data))
    assert problem.path == "steps[2].input_mappings.text"


def test_branch_leaving_a_loop_body_is_reported() -> None:
    data = minimal(
        {"step_id": "each", "kind": "loop", "loop": {"over": "items", "body": ["d"]}},
        {"step_id": "d", "kind": "decision", "condition": "x", "branches": {"x": "out"}},
        s("out"),
        entry_step_id="each",
    )
    problem = only(problems_of(data))
    assert problem.path == "steps[1].branches.x"


def test_depending_on_a_terminate_step_is_reported() -> None:
    data = minimal(s("a"), {"step_id": "end", "kind": "terminate", "depends_on": ["a"]})
    data["steps"].append(s("b", depends_on=["end"]))
    problem = only(problems_of(data))
    assert problem.path == "steps[2].depends_on[0]"


def test_input_mapping_for_a_key_the_block_does_not_read_is_reported() -> None:
    problem = only(problems_of(minimal(s("a", input_mappings={"txt": "text"}))))
    assert problem.path == "steps[0].input_mappings.txt"


def test_required_input_missing_from_properties_is_reported() -> None:
    data = minimal(s("a"))
    data["inputs_schema"]["required"] = ["text", "colour"]
    problem = only(problems_of(data))
    assert problem.path == "inputs_schema.required[1]"


def test_approver_that_is_not_an_email_is_reported() -> None:
    problem = only(problems_of(minimal(s("a"), approvers=["ops"])))
    assert problem.path == "approvers[0]"


def test_workflow_running_itself_as_a_subflow_is_reported() -> None:
    data = minimal({"step_id": "a", "kind": "subflow", "subflow": {"workflow_id": "p"}})
    problem = only(problems_of(data))
    assert problem.path == "steps[0].subflow.workflow_id"


def test_join_all_on_a_review_loop_back_edge_is_reported() -> None:
    data = minimal(
        s("research"),
        s("draft", depends_on=["research"], join="all"),
        s(
            "review",
            kind="approval",
            depends_on=["draft"],
            branches={"approved": "publish", "rejected": "draft"},
            approval={"max_iterations": 3},
        ),
        s("publish", depends_on=["review"]),
    )
    problem = only(problems_of(data))
    assert problem.path == "steps[1].join"
    assert "never runs the first time" in problem.message


# --- editable keys and decision labels (issue 26 item 12) -----------------------------------


def review(**approval: Any) -> dict[str, Any]:
    return {
        "step_id": "review",
        "kind": "approval",
        "depends_on": ["a"],
        "approval": {"title": "ok?", **approval},
        "branches": {"approved": "z", "rejected": "z", "timed_out": "z"},
    }


def test_a_typo_in_editable_keys_is_an_error_with_its_path_and_the_likely_name() -> None:
    data = minimal(s("a"), review(editable_keys=["amount", "amuont"]), s("z"))

    problem = only(problems_of(data))

    assert problem.path == "steps[1].approval.editable_keys[1]"
    assert "'amuont' is provided by no input or earlier step" in problem.message
    assert "did you mean 'amount'?" in problem.hint and "editable_types" in problem.hint


def test_an_editable_key_the_approver_fills_in_declares_its_type() -> None:
    data = minimal(
        s("a"),
        review(editable_keys=["items_to_order"], editable_types={"items_to_order": "list"}),
        s("z"),
    )

    assert problems_of(data) == []


def test_a_declared_type_of_a_key_that_is_not_editable_is_an_error() -> None:
    data = minimal(s("a"), review(editable_keys=["amount"], editable_types={"amonut": "list"}))
    data["steps"].append(s("z"))

    problem = only(problems_of(data))

    assert problem.path == "steps[1].approval.editable_types.amonut"
    assert "did you mean 'amount'?" in problem.hint


def decision(condition: str, **branches: str) -> dict[str, Any]:
    return {
        "step_id": "route",
        "kind": "decision",
        "depends_on": ["a"],
        "condition": condition,
        "branches": branches,
    }


@pytest.mark.parametrize(
    ("condition", "label"),
    [
        ("{{ 'urgent' if amount > 100 else 'normla' }}", "normla"),
        ("'urgent' if amount > 100", "None"),
        ("{{ 'urgent' if amount > 100 else ('normal' if amount else 'zero') }}", "zero"),
    ],
)
def test_a_condition_that_can_choose_a_label_without_a_branch_is_an_error(
    condition: str, label: str
) -> None:
    data = minimal(s("a"), decision(condition, urgent="z", normal="z"), s("z"))

    problem = only(problems_of(data))

    assert problem.path == "steps[1].condition"
    assert f"can choose {label!r}" in problem.message


@pytest.mark.parametrize(
    "condition",
    [
        "{{ 'urgent' if amount > 100 else 'normal' }}",
        "{{ text }}",  # known only at run time: checked then
        "{{ 'urgent' if amount > 100 else text }}",
    ],
)
def test_a_condition_whose_labels_all_have_branches_or_are_known_only_at_run_time_is_valid(
    condition: str,
) -> None:
    data = minimal(s("a"), decision(condition, urgent="z", normal="z"), s("z"))

    assert problems_of(data) == []


def test_a_comparison_condition_needs_both_of_its_labels() -> None:
    data = minimal(s("a"), decision("amount > 100", yes="z"), s("z"))

    problem = only(problems_of(data))

    assert "can choose 'no'" not in problem.message and "'False'" in problem.message


# --------------------------------------------------------------------------------------------
# Asking a person to fix a failed step (on_error: ask, on_failure: ask)
# --------------------------------------------------------------------------------------------


def test_a_step_that_asks_for_a_fix_with_the_workflows_approvers_is_valid() -> None:
    # Given a step with on_error: ask, in a workflow that names approvers
    data = minimal(s("a", on_error="ask"), s("b", depends_on=["a"]))

    # Then it is valid: ask is not an unknown step
    assert checked(data).errors == []


def test_asking_for_a_fix_with_nobody_to_ask_is_reported_at_on_error() -> None:
    # Given a step with on_error: ask in a workflow with no approvers, and no ask settings
    data = minimal(s("a", on_error="ask"), approvers=[])

    # Then the one problem is at the step's on_error, and says where to name someone
    problem = only(problems_of(data))
    assert problem.path == "steps[0].on_error"
    assert "nobody to ask" in problem.message
    assert "steps[0].ask.approvers" in problem.hint


def test_a_workflow_that_asks_for_fixes_with_nobody_to_ask_is_reported_at_on_failure() -> None:
    # Given a workflow-wide on_failure: ask and no approvers
    data = minimal(s("a"), s("b", depends_on=["a"]), on_failure="ask", approvers=[])

    # Then it is reported once, at on_failure
    problem = only(problems_of(data))
    assert problem.path == "on_failure"
    assert "ask.approvers" in problem.hint


def test_ask_settings_without_approvers_are_reported_at_their_approvers() -> None:
    data = minimal(s("a", on_error="ask", ask={"timeout_seconds": 600}), approvers=[])
    problem = only(problems_of(data))
    assert problem.path == "steps[0].ask.approvers"


def test_ask_settings_name_approvers_by_email() -> None:
    data = minimal(s("a", on_error="ask", ask={"approvers": ["ops"]}))
    problem = only(problems_of(data))
    assert problem.path == "steps[0].ask.approvers[0]"


def test_a_step_that_parks_cannot_ask_for_a_fix() -> None:
    # Given a wait step with on_error: ask
    data = minimal(s("a"), s("w", kind="wait", depends_on=["a"], wait={"seconds": 5}))
    data["steps"][1]["on_error"] = "ask"

    # Then it is refused at its on_error: there is no failed attempt of its own to fix
    problem = only(problems_of(data))
    assert problem.path == "steps[1].on_error"
    assert "cannot ask for a fix" in problem.message


def test_ask_settings_on_a_step_that_never_asks_are_reported() -> None:
    data = minimal(s("a", ask={"approvers": ["ops@example.com"]}))
    problem = only(problems_of(data))
    assert problem.path == "steps[0].ask"
    assert "no effect" in problem.message


def test_on_error_ask_in_a_plan_with_a_step_named_ask_routes_there_with_a_warning() -> None:
    # Given a plan whose failure route is its step named "ask" (as before on_error: ask existed)
    data = minimal(s("a", on_error="ask"), s("ask"))

    # Then it stays valid and routes there, with a warning that it asks nobody
    [warning] = warnings_of(data)
    assert warning.path == "steps[0].on_error"
    assert step_graph(plan(data), lookup()).steps["a"].error_route == "ask"
