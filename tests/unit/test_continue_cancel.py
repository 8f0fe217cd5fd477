"""An operator's cancel in the continue-as-new window: the run record names its next execution
(``<run>-cN``) and the hand-over then starts it; a cancel between the two finds no execution
to stop, so the hand-over must stop what it starts for a cancelled run. Driven on fakes, the
cancel made exactly inside the window by the executions' start."""

from __future__ import annotations

from typing import Any

import pytest

from langorch.app.continuation import CountedSegment, continue_as_new
from langorch.app.runs import RunSegment, StartRun, cancel_run, launch_run
from langorch.domain.runs import RunStatus, current_execution
from tests.fakes import Fakes
from tests.fakes.executions import InMemoryExecutions
from tests.support.parking import with_approvals
from tests.unit.test_runs_use_cases import FLOW


class CancelledInTheWindow(InMemoryExecutions):
    """Executions where an operator cancels the run just before the next execution starts:
    after the hand-over named it on the record, before it exists."""

    def __init__(self, deps: Fakes) -> None:
        super().__init__()
        self._deps = deps
        self.cancelled: tuple[Any, ...] | None = None

    def start(self, run_id: str, payload: dict[str, Any]) -> tuple[str, bool]:
        if "-c" in run_id and self.cancelled is None:
            self.cancelled = cancel_run(payload["run_id"], self._deps, reason="not wanted")
        return super().start(run_id, payload)


@pytest.fixture
def deps() -> Fakes:
    fakes = with_approvals(Fakes(), FLOW)
    fakes.executions = CancelledInTheWindow(fakes)
    return fakes


def test_a_cancel_between_naming_the_next_execution_and_its_start_stops_it(deps: Fakes) -> None:
    # Given a run in its first execution, whose history is full: it hands over to run-…-c1
    run, _ = launch_run(StartRun("flow", input={"n": 2}), deps)

    # When an operator cancels it after the record names run-…-c1 and before that starts
    continue_as_new(CountedSegment(RunSegment(run.run_id)), deps)

    # Then the cancel found the record naming the next execution, and nothing to stop there
    cancelled, changed = deps.executions.cancelled  # type: ignore[attr-defined,misc]
    assert changed and current_execution(cancelled) == f"{run.run_id}-c1"
    # And yet the execution the hand-over started is stopped: nothing runs for a cancelled run
    stored = deps.runs.get_run(run.run_id)
    assert stored.status is RunStatus.cancelled
    assert deps.executions.describe(f"{run.run_id}-c1")["status"] == "ABORTED"
