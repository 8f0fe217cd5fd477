"""Pre and post hooks on steps (seed 004's hooks on action nodes): a transform or a tool call
before the step's own work (its outputs are the step's inputs too) and after it (seeing the
step's outputs); a hook that fails fails the step."""

from __future__ import annotations

from typing import Any

from langorch.domain.definitions import TaskPlan
from langorch.domain.runs import TimelineEventType
from langorch.domain.validation import InMemoryLookup, check_workflow
from tests.integration.conftest import register_text, run_to_end
from tests.support.definitions import workflow
from tests.support.recording import record_llm
from tests.unit.conftest import MakeFakes

HOOKED = """
blocks:
  - {block_id: describe, input_keys: [topic], output_keys: [text],
     prompt_template: "Describe {topic}"}
""" + workflow("hooked", inputs={"raw": "string", "n": "integer"}).steps("""
      - step_id: write
        block_id: describe
        hooks:
          pre:
            - transform: {topic: "raw | trim | title"}
          post:
            - {tool: calculator, args: {expression: "{{ n }} * 2"}, output_key: doubled}
            - transform: {summary: "text ~ ' x' ~ doubled"}
""")


def test_pre_hooks_feed_the_step_and_post_hooks_see_its_outputs(make_container: MakeFakes):
    # Given an LLM step with a pre transform and post hooks (a tool call, then a transform)
    container = make_container()
    llm = record_llm(container, {"write": {"text": "T"}})
    register_text(container, HOOKED)

    # When it runs
    result = run_to_end(container, "hooked", {"raw": "  durable agents ", "n": 21})

    # Then the prompt read the pre hook's topic, and the post hooks saw the step's text
    assert result.status == "succeeded"
    assert llm.requests[0].prompt == "Describe Durable Agents"
    assert result.outputs["doubled"] == "42"
    assert result.outputs["summary"] == "T x42"
    tools = [
        (e.step_id, e.detail["tool"], e.detail["outcome"])
        for e in container.runs.get_timeline(result.run_id)
        if e.type == TimelineEventType.tool_called
    ]
    assert tools == [("write.post", "calculator", "ok")]


def test_a_hook_whose_tool_fails_fails_the_step_naming_the_hook(make_container: MakeFakes):
    # Given the same step, with an expression the calculator refuses
    container = make_container()
    register_text(container, HOOKED.replace('"{{ n }} * 2"', '"{{ n }} *"'))

    # When it runs
    result = run_to_end(container, "hooked", {"raw": "x", "n": 1})

    # Then the step failed at its first post hook
    assert result.status == "failed"
    assert result.error is not None
    assert result.error["type"] == "HookFailedError"
    assert "hooks.post[0]" in result.error["message"]


# --- validation ------------------------------------------------------------------------------


def _checked(hooks: dict[str, Any]) -> Any:
    data = {
        "plan_id": "p",
        "memory": False,
        "inputs_schema": {"properties": {"raw": {}}},
        "steps": [
            {
                "step_id": "s",
                "kind": "transform",
                "transform": {"out": "topic ~ '!'"},
                "hooks": hooks,
            },
            {
                "step_id": "t",
                "kind": "transform",
                "depends_on": ["s"],
                "transform": {"last": "topic ~ out"},
            },
        ],
    }
    return check_workflow(
        TaskPlan.model_validate(data),
        InMemoryLookup([]),
        tools=frozenset({"calculator"}),
        providers=None,
    )


def test_what_a_pre_hook_writes_the_step_and_later_steps_may_read() -> None:
    # Given a step reading `topic`, which only its pre hook writes
    found = _checked({"pre": [{"transform": {"topic": "raw | upper"}}]})
    # When validated / Then nothing is reported
    assert (found.errors, found.warnings) == ([], [])


def test_a_hook_that_is_both_a_transform_and_a_tool_call_is_reported() -> None:
    found = _checked({"pre": [{"transform": {"topic": "raw"}, "tool": "calculator"}]})
    assert [p.path for p in found.errors] == ["steps[0].hooks.pre[0]"]


def test_a_hook_calling_a_tool_nothing_binds_is_a_warning_at_the_hook() -> None:
    found = _checked(
        {"pre": [{"transform": {"topic": "raw"}}], "post": [{"tool": "browser", "args": {}}]}
    )
    assert found.errors == []
    assert [p.path for p in found.warnings] == ["steps[0].hooks.post[0].tool"]


def test_a_malformed_hook_expression_is_reported_at_its_path() -> None:
    found = _checked({"pre": [{"transform": {"topic": "raw |"}}]})
    assert [p.path for p in found.errors] == ["steps[0].hooks.pre[0].transform.topic"]
