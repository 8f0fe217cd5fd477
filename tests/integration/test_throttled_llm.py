"""Back-pressure without loss (issue 33): a model over its quota makes runs wait, not fail.

Bedrock here is a loopback server speaking Converse through the real Bedrock provider, with a
quota: so many calls per window, ``ThrottlingException`` (HTTP 429) past it. A window passes
when the runs sleep (``drive``'s sleep is the state machine's ``Wait``), so the test depends on
no clock.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from langorch.app.runs import StartRun, drive, start_run
from langorch.domain.definitions import PlanStep, TaskPlan
from tests.fakes import Fakes
from tests.llm_servers import FakeBedrock, Reply, converse
from tests.support.bedrock_blocks import a_title_block
from tests.support.llm import bedrock_at


class QuotaBedrock(FakeBedrock):
    """Answers ``quota`` calls per window and throttles the rest until the window passes."""

    def __init__(self, quota: int) -> None:
        super().__init__()
        self.quota = quota
        self.in_window = 0
        self.throttled = 0

    def next_window(self) -> None:
        with self._lock:
            self.in_window = 0

    def _record(self, path: str, raw: bytes, headers: dict[str, str]) -> Reply:
        super()._record(path, raw, headers)
        with self._lock:
            if self.in_window >= self.quota:
                self.throttled += 1
                return Reply(
                    429,
                    {"message": "Too many requests, please wait before trying again."},
                    {"x-amzn-ErrorType": "ThrottlingException"},
                )
            self.in_window += 1
        content = [{"toolUse": {"toolUseId": "tu-1", "name": "answer", "input": {"title": "t"}}}]
        return Reply(200, converse(content, "tool_use", 20, 8))


@pytest.fixture
def bedrock() -> Iterator[QuotaBedrock]:
    server = QuotaBedrock(quota=2)
    with server.running():
        yield server


def a_stack(server: QuotaBedrock) -> Fakes:
    """Fakes whose LLM is the quota'd Bedrock, and a workflow of two LLM steps that try once."""
    fakes = Fakes({})
    fakes.llm = bedrock_at(server.url)
    fakes.definitions.put_block(a_title_block("anthropic.claude-test"))
    steps = [
        PlanStep(step_id="first", block_id="b_title"),
        PlanStep(step_id="second", block_id="b_title", depends_on=["first"]),
    ]
    fakes.definitions.put_workflow(TaskPlan(plan_id="titles", memory=False, steps=steps))
    return fakes


def test_runs_over_a_models_quota_wait_for_it_instead_of_failing(bedrock: QuotaBedrock) -> None:
    # Given a model that answers 2 calls per window, and 3 runs of 2 calls each started at once
    fakes = a_stack(bedrock)
    runs = [start_run(StartRun("titles"), fakes)[0] for _ in range(3)]
    slept: list[float] = []

    def sleep(seconds: float) -> None:  # the state machine's Wait: the window passes
        slept.append(seconds)
        bedrock.next_window()

    # When each is driven to its end (the state machine's loop)
    results = [drive(run.run_id, fakes, on_approval=lambda _: {}, sleep=sleep) for run in runs]

    # Then every run succeeded, each call made once it fit the quota
    assert [r.status for r in results] == ["succeeded"] * 3
    assert all(r.outputs["title"] == "t" for r in results)
    # And the throttled calls parked their runs (a Wait of whole seconds, with jitter) instead
    # of failing a step; the timeline says so
    assert bedrock.throttled > 0
    assert slept and all(s >= 1 for s in slept)
    events = [e for r in runs for e in fakes.runs.get_timeline(r.run_id)]
    parked = [e for e in events if e.detail.get("parked_seconds")]
    assert len(parked) == len(slept)
    assert all(e.error is not None and "ThrottlingException" in e.error.message for e in parked)
    assert not [e for e in events if e.type.value == "step_failed"]
