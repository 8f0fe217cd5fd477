"""A step kind is one place: a kind defined and registered here, in the test itself, validates
(with field paths on its errors), compiles and runs on LangGraph, in memory, without AWS and
without any change to another module."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field, ValidationError

from langorch.domain.definitions import BlockDefinition, PlanStep, TaskPlan
from langorch.domain.kinds import registry as specs
from langorch.domain.kinds.base import Read, StepKind
from langorch.domain.kinds.registry import KindRegistrationError
from langorch.domain.lookup import DefinitionLookup, InMemoryLookup
from langorch.domain.step_settings import Settings
from langorch.domain.validation import check_workflow, validate_block, validate_workflow
from langorch.engine.compiler import GraphCompiler
from langorch.engine.context import EngineContext
from langorch.engine.kinds import registry
from langorch.engine.kinds.base import Outcome, StepSpec
from langorch.engine.kinds.registry import NoExecutorError
from langorch.engine.state import OrchestrationState

TOOLS = frozenset({"browser"})
PROVIDERS = frozenset({"offline"})


# --- The new kind: its settings, what it reads and writes, its executor ------------------------


class ShoutSettings(Settings):
    """Repeat a key's text in capitals."""

    source: str
    times: int = Field(default=1, ge=1, le=5)
    target: str | None = None


class ShoutKind(StepKind):
    """``shout``: reads ``settings.source``, writes ``settings.target`` (else ``<id>_shout``)."""

    name = "shout"
    settings_model = ShoutSettings
    settings_required = True

    def reads(self, step: PlanStep, block: BlockDefinition | None, path: str) -> Iterator[Read]:
        settings = self.valid_settings(step, block)
        if settings is not None:
            yield f"{path}.settings.source", settings.source, "shouts"

    def outputs(
        self, step_id: str, step: PlanStep, block: BlockDefinition | None, lookup: DefinitionLookup
    ) -> set[str]:
        settings = self.valid_settings(step, block)
        target = settings.target if settings is not None and settings.target else None
        return super().outputs(step_id, step, block, lookup) | {target or f"{step_id}_shout"}


SHOUT = ShoutKind()


async def run_shout(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    settings = SHOUT.settings(spec.step, spec.block)
    text = str((state.get("shared_context") or {}).get(settings.source, "")).upper()
    return Outcome(
        context={settings.target or f"{spec.step_id}_shout": "!".join([text] * settings.times)}
    )


@pytest.fixture
def shout() -> Iterator[ShoutKind]:
    registry.register(SHOUT, run_shout)
    yield SHOUT
    registry.unregister(SHOUT.name)


# --- Helpers -----------------------------------------------------------------------------------


def workflow(*steps: dict[str, Any]) -> TaskPlan:
    return TaskPlan.model_validate(
        {
            "plan_id": "loud",
            "memory": False,
            "inputs_schema": {"properties": {"text": {"type": "string"}}},
            "steps": list(steps),
        }
    )


def problems_of(plan: TaskPlan, *blocks: BlockDefinition) -> list[tuple[str, str]]:
    found = validate_workflow(plan, InMemoryLookup(blocks), tools=TOOLS, providers=PROVIDERS)
    return [(p.path, p.message) for p in found]


SHOUT_THEN_TRANSFORM = (
    {"step_id": "yell", "kind": "shout", "settings": {"source": "text", "times": 2}},
    {
        "step_id": "frame",
        "kind": "transform",
        "depends_on": ["yell"],
        "transform": {"framed": "'<' ~ yell_shout ~ '>'"},
    },
)


class _NoLLM:
    def invoke(self, request: Any) -> Any:
        raise AssertionError("no step of this workflow calls an LLM")


# --- Tests -------------------------------------------------------------------------------------


def test_an_unregistered_kind_is_reported_with_its_path_and_the_closest_name() -> None:
    # Given a step and a block of a kind nothing is registered under
    plan = workflow({"step_id": "yell", "kind": "shout", "settings": {"source": "text"}})
    block = BlockDefinition.model_validate({"block_id": "yeller", "block_type": "shoutt"})
    # When validated, Then each is reported where it is, with what is registered
    [(path, message)] = problems_of(plan)
    assert (path, message) == ("steps[0].kind", "unknown kind 'shout'")
    [problem] = validate_block(block, tools=TOOLS, providers=PROVIDERS)
    assert (problem.path, problem.message) == ("block_type", "unknown kind 'shoutt'")
    assert "registered kinds are action, extraction, decision" in problem.hint


def test_a_kind_name_that_is_not_a_name_is_refused_when_loaded() -> None:
    with pytest.raises(ValidationError, match="'Shout!' is not a kind name"):
        PlanStep.model_validate({"step_id": "yell", "kind": "Shout!"})


def test_a_registered_kind_validates_and_its_output_feeds_later_steps(shout: ShoutKind) -> None:
    assert problems_of(workflow(*SHOUT_THEN_TRANSFORM)) == []


def test_its_settings_errors_carry_their_field_path(shout: ShoutKind) -> None:
    plan = workflow(
        {"step_id": "yell", "kind": "shout", "settings": {"source": "text", "times": 9}}
    )
    [(path, message)] = problems_of(plan)
    assert path == "steps[0].settings.times"
    assert "less than or equal to 5" in message


def test_missing_settings_are_reported_on_settings(shout: ShoutKind) -> None:
    [(path, message)] = problems_of(workflow({"step_id": "yell", "kind": "shout"}))
    assert path == "steps[0].settings"
    assert "a shout step needs settings" in message


def test_what_it_reads_is_checked_by_the_data_flow(shout: ShoutKind) -> None:
    plan = workflow({"step_id": "yell", "kind": "shout", "settings": {"source": "nope"}})
    found = check_workflow(plan, InMemoryLookup(), tools=TOOLS, providers=PROVIDERS)
    assert found.errors == []
    [(path, message)] = [(p.path, p.message) for p in found.warnings]
    assert path == "steps[0].settings.source"
    assert message.startswith("shouts 'nope', which no input or earlier step provides")


def test_settings_of_other_kinds_are_reported_on_it_and_its_settings_on_others(
    shout: ShoutKind,
) -> None:
    plan = workflow(
        {
            "step_id": "yell",
            "kind": "shout",
            "settings": {"source": "text"},
            "wait": {"seconds": 1},
        },
        {
            "step_id": "calc",
            "kind": "transform",
            "depends_on": ["yell"],
            "transform": {"n": "1"},
            "settings": {"x": 1},
        },
    )
    assert [path for path, _ in problems_of(plan)] == ["steps[0].wait", "steps[1].settings"]


def test_a_block_of_the_new_kind_is_checked_against_its_settings_model(shout: ShoutKind) -> None:
    block = BlockDefinition.model_validate(
        {"block_id": "yeller", "block_type": "shout", "settings": {"times": 2}}
    )
    found = validate_block(block, tools=TOOLS, providers=PROVIDERS)
    assert [(p.path, p.message) for p in found] == [("settings.source", "Field required")]


def test_a_step_may_take_its_settings_from_a_block_of_the_new_kind(shout: ShoutKind) -> None:
    block = BlockDefinition.model_validate(
        {"block_id": "yeller", "block_type": "shout", "settings": {"source": "text"}}
    )
    plan = workflow(
        {"step_id": "yell", "block_id": "yeller"},
        {
            "step_id": "use",
            "kind": "transform",
            "depends_on": ["yell"],
            "transform": {"n": "yell_shout"},
        },
    )
    assert validate_block(block, tools=TOOLS, providers=PROVIDERS) == []
    assert problems_of(plan, block) == []


def test_it_compiles_and_runs_on_langgraph_in_memory(shout: ShoutKind) -> None:
    # Given the workflow compiled with an in-memory checkpointer (no AWS anywhere)
    plan = workflow(*SHOUT_THEN_TRANSFORM)
    graph = GraphCompiler(InMemoryLookup(workflows=[plan]), InMemorySaver()).compile(plan)
    context = EngineContext(
        run_id="r1", workflow_id="loud", workflow_version=1, user_id="u", llm=_NoLLM()
    )

    # When it runs
    state = asyncio.run(
        graph.ainvoke(
            {"run_id": "r1", "shared_context": {"text": "hi"}},
            {"configurable": {"thread_id": "r1"}},
            context=context,
        )
    )

    # Then the new kind's executor ran, and the next step read its output
    assert state["shared_context"]["yell_shout"] == "HI!HI"
    assert state["shared_context"]["framed"] == "<HI!HI>"
    assert [r["kind"] for r in state["block_results"]] == ["shout", "transform"]
    assert {"yell", "frame"} <= set(graph.get_graph().nodes)


def test_what_a_kind_prepares_is_done_before_its_steps_time_starts() -> None:
    # Given a kind that needs longer to prepare (an SDK's cold import) than its step may run
    prepared: list[str] = []

    async def prepare_shout(spec: StepSpec, ctx: EngineContext) -> None:
        await asyncio.sleep(1.5)  # the slow preparation itself, not a wait for something
        prepared.append(spec.step_id)

    registry.register(SHOUT, run_shout, prepare=prepare_shout)
    try:
        plan = workflow(
            {
                "step_id": "yell",
                "kind": "shout",
                "settings": {"source": "text"},
                "timeout_seconds": 1,
            }
        )
        graph = GraphCompiler(InMemoryLookup(workflows=[plan])).compile(plan, checkpointed=False)
        context = EngineContext(
            run_id="r1", workflow_id="loud", workflow_version=1, user_id="u", llm=_NoLLM()
        )

        # When the step runs
        state = asyncio.run(
            graph.ainvoke({"run_id": "r1", "shared_context": {"text": "hi"}}, context=context)
        )
    finally:
        registry.unregister(SHOUT.name)

    # Then it was prepared first, and its 1 s started after: it ran, it did not time out
    assert prepared == ["yell"]
    assert state["shared_context"]["yell_shout"] == "HI"


def test_a_definition_without_settings_keeps_its_content_hash_and_stored_form() -> None:
    # The hash is computed as before `settings` existed: stored definitions keep their version,
    # and what is stored (the JSON dump) has no `settings` key while it is unset.
    plan = workflow({"step_id": "calc", "kind": "transform", "transform": {"n": "1"}})
    block = BlockDefinition(block_id="b", prompt_template="Say hi")
    assert "settings" not in plan.model_dump(mode="json")["steps"][0]
    assert "settings" not in block.model_dump(mode="json")
    assert plan.content_hash() == (
        "91f57c2ee6a4fe3bfc1b469e5adfdd18459d73b26f337d9241c0689acb150d4b"  # as before `settings`
    )
    assert block.content_hash() == (
        "60a60c5dd3c6dc819f7fa1c02e92a5e0adbf8943c04d223b6620e22b24befb26"  # as before `settings`
    )


def test_a_name_is_registered_once(shout: ShoutKind) -> None:
    class Other(ShoutKind):
        pass

    with pytest.raises(KindRegistrationError, match="'shout' is already registered"):
        registry.register(Other(), run_shout)


def test_a_kind_without_an_executor_fails_the_compile_not_the_run() -> None:
    # Given a kind registered for validation only (no executor)
    specs.register(SHOUT)
    try:
        plan = workflow({"step_id": "yell", "kind": "shout", "settings": {"source": "text"}})
        assert problems_of(plan) == []
        # When it is compiled, Then the missing executor is named
        with pytest.raises(NoExecutorError, match="no executor for step kind 'shout'"):
            GraphCompiler(InMemoryLookup(workflows=[plan])).compile(plan, checkpointed=False)
    finally:
        specs.unregister(SHOUT.name)
