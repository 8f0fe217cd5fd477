"""Parallel branches run at most ``max_parallel`` steps at once (default
:data:`~langorch.domain.definitions.DEFAULT_MAX_PARALLEL`), through LangGraph's
``max_concurrency``; the cap is counted with a kind that notes how many of its steps are running,
with no clock: each yields once, so uncapped branches would all be running together."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from langorch.domain.definitions import DEFAULT_MAX_PARALLEL
from langorch.domain.kinds.base import StepKind
from langorch.engine.context import EngineContext
from langorch.engine.kinds import registry
from langorch.engine.kinds.base import Outcome, StepSpec
from langorch.engine.state import OrchestrationState
from tests.integration.conftest import register_text, run_to_end
from tests.unit.conftest import MakeFakes


class Busy(StepKind):
    """``busy``: counts the steps of its kind running at once."""

    name = "busy"


class Peak:
    """How many ``busy`` steps ran at the same time, at most."""

    def __init__(self) -> None:
        self.running = 0
        self.most = 0

    async def run(
        self, spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
    ) -> Outcome:
        self.running += 1
        self.most = max(self.most, self.running)
        await asyncio.sleep(0)  # let every other started branch reach this point too
        self.running -= 1
        return Outcome()


@pytest.fixture
def peak() -> Iterator[Peak]:
    counter = Peak()
    registry.register(Busy(), counter.run)
    try:
        yield counter
    finally:
        registry.unregister(Busy.name)


def fan_out(branches: int, max_parallel: int | None = None) -> str:
    """``start`` and ``branches`` busy steps that all depend on it."""
    cap = f"\n    max_parallel: {max_parallel}" if max_parallel else ""
    steps = "\n".join(
        f"      - {{step_id: b{i}, kind: busy, depends_on: [start]}}" for i in range(branches)
    )
    return f"""
workflows:
  - plan_id: fan
    memory: false{cap}
    steps:
      - {{step_id: start, kind: transform, transform: {{x: "1"}}}}
{steps}
"""


def test_parallel_branches_run_at_most_max_parallel_at_once(make_container: MakeFakes, peak: Peak):
    # Given four branches and max_parallel 2
    container = make_container()
    register_text(container, fan_out(4, max_parallel=2))

    # When it runs
    result = run_to_end(container, "fan")

    # Then all ran, never more than two at once
    assert result.status == "succeeded"
    assert peak.most == 2


def test_without_max_parallel_the_default_caps_the_branches(make_container: MakeFakes, peak: Peak):
    # Given more branches than the default cap, and no max_parallel
    container = make_container()
    register_text(container, fan_out(DEFAULT_MAX_PARALLEL + 2))

    # When it runs
    result = run_to_end(container, "fan")

    # Then the default held
    assert result.status == "succeeded"
    assert peak.most == DEFAULT_MAX_PARALLEL
