"""A transform whose expression breaches the sandbox's bounds fails its step, clearly, once."""

from __future__ import annotations

from .conftest import MakeContainer, register_text, run_to_end

BOMB = """
workflows:
  - plan_id: bomb
    memory: false
    steps:
      - step_id: build
        kind: transform
        max_retries: 2
        transform: {n: "('a' * 50000000) | length"}
"""


def test_a_transform_that_builds_50_mb_fails_the_run_with_the_limit(make_embedded: MakeContainer):
    # Given the reported expression, which used to allocate 50 MB and succeed
    container = make_embedded()
    register_text(container, BOMB)

    # When the workflow runs
    result = run_to_end(container, "bomb")

    # Then the run failed at that step, saying what the limit is, without retrying
    run = container.runs.get_run(result.run_id)
    assert run.status.value == "failed"
    assert run.error is not None and run.error.step_id == "build"
    assert "limit 4,000,000" in run.error.message
    events = [e for e in container.runs.get_timeline(result.run_id) if e.step_id == "build"]
    assert [e.type.value for e in events if e.type.value.startswith("step_")] == [
        "step_started",
        "step_failed",
    ]
