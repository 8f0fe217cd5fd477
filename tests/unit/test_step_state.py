"""What the run's state says about its steps: ``error`` is the last failure still standing (a
later success of the same step clears it), and ``retry_count`` counts the retries taken."""

from __future__ import annotations

import asyncio

from langorch.engine.compiler import build_graph, resolve_blocks
from langorch.engine.context import EngineContext
from tests.integration.conftest import register_text, run_to_end
from tests.support.definitions import workflow
from tests.unit.conftest import MakeFakes

ERROR_IN_A_LOOP = workflow("per_item", inputs={"xs": "array"}).steps("""
      - {step_id: each, kind: loop, loop: {over: xs, body: [risky, check], collect: [failed]}}
      - {step_id: risky, kind: transform, depends_on: [each], transform: {q: "10 // item"},
         on_error: check}
      - {step_id: check, kind: transform, depends_on: [risky],
         transform: {failed: "error.step_id == 'risky'"}}
""")


def test_a_later_success_of_the_failed_step_clears_the_error(make_container: MakeFakes):
    # Given a loop body whose first step fails on 0 and routes its error to a check
    container = make_container()
    register_text(container, ERROR_IN_A_LOOP)

    # When the items are 0 (a failure) and then 5 (a success)
    result = run_to_end(container, "per_item", {"xs": [0, 5]})

    # Then the check saw the error for the first item only
    assert result.status == "succeeded"
    assert result.outputs["each_results"] == [{"failed": True}, {"failed": False}]


FLAKY = """
blocks:
  - {block_id: flaky, input_keys: [], output_keys: [answer], prompt_template: "answer",
     max_retries: 3}
workflows:
  - plan_id: flaky_twice
    memory: false
    steps:
      - {step_id: first, block_id: flaky, retry_backoff_seconds: 0}
      - {step_id: second, block_id: flaky, depends_on: [first], retry_backoff_seconds: 0}
"""


def test_retry_count_adds_up_the_retries_the_steps_took(make_container: MakeFakes):
    # Given two steps: the first fails twice before answering, the second once
    container = make_container(
        {
            "first": {"raise": "provider unavailable", "times": 2},
            "second": {"raise": "provider unavailable", "times": 1},
        }
    )
    register_text(container, FLAKY)
    plan = container.definitions.get_workflow("flaky_twice")
    assert plan is not None
    graph = build_graph(plan, resolve_blocks(plan, container.definitions)).compile()
    context = EngineContext(
        run_id="run-1",
        workflow_id="flaky_twice",
        workflow_version=1,
        user_id="u1",
        llm=container.llm,
    )

    # When the graph runs
    final = asyncio.run(graph.ainvoke({"run_id": "run-1", "shared_context": {}}, context=context))

    # Then the state's retry_count is the three retries taken
    assert final["retry_count"] == 3
