"""A model's concurrency as data (issue 33): with ``model_limits`` the runs over a model's quota
wait for a slot of it — parked, no Lambda held — and never fail.

Bedrock here is a loopback server speaking Converse through the real Bedrock provider, with a
quota of calls *in flight at once*: a call past it gets ``ThrottlingException``. It counts the
most calls it ever had in flight. Each run is driven on its own thread by the state machine's
loop in-process; a parked run waits on its task token, which the release of a slot answers
(``SendTaskSuccess``). To make calls overlap whenever the runs let them, the server holds each
call until no run could still join it (every run is in flight, queued for the model, or done),
or until one call too many arrives: so the count does not depend on the machine's speed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from langorch.app.resources import ParkForResource, park_for_resource
from langorch.app.runs import RunSegment, StartRun, run_segment, start_run
from langorch.app.segment_record import SegmentResult
from langorch.domain.definitions import PlanStep, TaskPlan
from langorch.domain.runs import TimelineEventType
from tests.fakes import Fakes
from tests.fakes.executions import InMemoryExecutions
from tests.llm_servers import FakeBedrock, Reply, converse
from tests.support.bedrock_blocks import a_title_block
from tests.support.llm import bedrock_at
from tests.support.polling import wait_for
from tests.support.threads import at_once

MODEL = "anthropic.claude-test"
QUOTA = 2
RUNS = 5
SLOT = f"model:bedrock:{MODEL}"


class InFlightQuotaBedrock(FakeBedrock):
    """Throttles every call past ``quota`` in flight at once; remembers the most in flight.

    Args:
        quota: calls it answers at once.
        runs: how many runs call it (once each).
        queued: how many runs wait for a slot of the model right now.
    """

    def __init__(self, quota: int, runs: int, queued: Any) -> None:
        super().__init__()
        self.quota = quota
        self.runs = runs
        self.queued = queued
        self.in_flight = 0
        self.peak = 0
        self.answered = 0
        self.throttled = 0
        self._changed = threading.Condition(self._lock)

    def _record(self, path: str, raw: bytes, headers: dict[str, str]) -> Reply:
        super()._record(path, raw, headers)
        with self._changed:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            self._changed.notify_all()
            if self.in_flight > self.quota:
                self.in_flight -= 1
                self.throttled += 1
                return Reply(
                    429,
                    {"message": "Too many concurrent requests, please wait."},
                    {"x-amzn-ErrorType": "ThrottlingException"},
                )
        wait_for(self._nobody_else_can_join, what="the calls that can overlap to arrive")
        with self._changed:
            self.in_flight -= 1
            self.answered += 1
        content = [{"toolUse": {"toolUseId": "tu-1", "name": "answer", "input": {"title": "t"}}}]
        return Reply(200, converse(content, "tool_use", 20, 8))

    def _nobody_else_can_join(self) -> bool:
        with self._changed:
            over = self.throttled > 0  # one call too many came: the overlap is proven
            settled = self.in_flight + self.answered + self.queued() >= self.runs
            return over or settled


class TokenExecutions(InMemoryExecutions):
    """Executions whose parked task tokens a test can wait on, as a parked execution does."""

    def __init__(self, state_machine_arn: str) -> None:
        super().__init__(state_machine_arn)
        self.woken: dict[str, threading.Event] = {}

    def park(self, run_id: str, payload: dict[str, Any] | None = None) -> str:
        token = super().park(run_id, payload)
        self.woken[token] = threading.Event()
        return token

    def send_success(self, task_token: str, output: dict[str, Any]) -> None:
        super().send_success(task_token, output)
        self.woken[task_token].set()


def a_stack(limits: dict[str, Any] | None) -> tuple[Fakes, InFlightQuotaBedrock]:
    """Fakes whose LLM is the quota'd Bedrock, and a workflow of one LLM step that tries once."""
    fakes = Fakes({}, model_limits=limits or {})
    fakes.executions = TokenExecutions(fakes.settings.state_machine_arn or "")

    def queued() -> int:
        return len(fakes.resources.get(SLOT).live(time.time()).queue)

    server = InFlightQuotaBedrock(QUOTA, RUNS, queued)
    fakes.llm = bedrock_at(server.url)
    fakes.definitions.put_block(a_title_block(MODEL))
    steps = [PlanStep(step_id="title", block_id="b_title")]
    fakes.definitions.put_workflow(TaskPlan(plan_id="titles", memory=False, steps=steps))
    return fakes, server


def drive(run_id: str, fakes: Fakes) -> SegmentResult:
    """The state machine's loop for one run: a run queued for a slot parks on a task token
    (``AwaitResource``) until a release answers it; a sleeping run's ``Wait`` passes at once."""
    executions = fakes.executions
    assert isinstance(executions, TokenExecutions)
    result = run_segment(RunSegment(run_id), fakes)
    for _ in range(100):
        if result.status == "waiting_resource":
            assert result.resource is not None
            token = executions.park(run_id)
            park = ParkForResource(
                run_id, result.resource["name"], result.resource["holder"], token
            )
            park_for_resource(park, fakes)
            wait_for(executions.woken[token].is_set, what=f"run {run_id} to be woken")
        elif result.status not in ("sleeping", "continue"):
            return result
        result = run_segment(RunSegment(run_id, resume={"woke": True}), fakes)
    raise AssertionError(f"run {run_id} did not end in 100 segments")


@pytest.fixture
def limited() -> Iterator[tuple[Fakes, InFlightQuotaBedrock]]:
    fakes, server = a_stack({f"bedrock:{MODEL[:10]}*": {"concurrency": QUOTA}})
    with server.running():
        yield fakes, server


def test_runs_over_a_models_concurrency_wait_for_a_slot_and_never_overrun_it(
    limited: tuple[Fakes, InFlightQuotaBedrock],
) -> None:
    # Given a model that answers 2 calls at once (ThrottlingException past them), model_limits
    # giving it a concurrency of 2, and 5 runs of one call each started together
    fakes, bedrock = limited
    runs = [start_run(StartRun("titles"), fakes)[0].run_id for _ in range(RUNS)]

    # When each run is driven on its own thread, all at once
    results = at_once([lambda run_id=run_id: drive(run_id, fakes) for run_id in runs])

    # Then every run succeeded, and the model never had more than 2 calls in flight
    assert sorted(r.status for r in results) == ["succeeded"] * RUNS
    assert bedrock.peak == QUOTA
    assert bedrock.throttled == 0
    assert bedrock.answered == RUNS
    # And the runs that found the model full waited in its queue, and say why
    waits = [
        e
        for run_id in runs
        for e in fakes.runs.get_timeline(run_id)
        if e.type is TimelineEventType.resource_waiting
    ]
    assert waits and all(e.detail["resource"] == SLOT for e in waits)
    # And every slot was given back
    assert fakes.resources.get(SLOT).live(time.time()).leases == {}
