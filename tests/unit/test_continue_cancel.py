"""An operator's cancel racing a hand-over to the next execution (continue-as-new): whatever
the order, the run ends cancelled, the record names the execution it ended in, and no
execution is left running. Driven on fakes, each cancel made at the exact point of the
hand-over it races (by the executions' start, or by the runs store's write), no timing.

The three orders: a cancel between the hand-over's record write and its start (it finds no
execution to stop, so the hand-over stops what it starts); a cancel that read the record before
the hand-over wrote it and writes after (it must not write the execution it read back); a
cancel that lands between the hand-over's read and its write (the hand-over must not revive
the run)."""

from __future__ import annotations

import argparse
import io
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any, cast

import pytest

from langorch.app.continuation import CountedSegment, continue_as_new
from langorch.app.runs import RunSegment, StartRun, cancel_run, launch_run
from langorch.cli.commands.runs import _cancel
from langorch.cli.context import Context
from langorch.cli.output import Output
from langorch.domain.runs import (
    RunRecord,
    RunStatus,
    TimelineEvent,
    TimelineEventType,
    current_execution,
)
from tests.fakes import Fakes, InMemoryRuns
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


# --- a cancel that read the run before the hand-over wrote it -------------------------------


class HandedOverWhileTheCancelWrites(InMemoryRuns):
    """Runs where the whole hand-over to the next execution happens after an operator's cancel
    read the run and before its write of ``cancelled`` lands (the state machine then ends the
    old execution on the ``continued`` answer)."""

    def __init__(self) -> None:
        super().__init__()
        self.deps: Fakes | None = None
        self.handed_over = False

    def before_save(
        self, run: RunRecord, *, release: bool, events: Sequence[TimelineEvent]
    ) -> None:
        if run.status is RunStatus.cancelled and not self.handed_over and self.deps is not None:
            self.handed_over = True
            continue_as_new(CountedSegment(RunSegment(run.run_id)), self.deps)
            self.deps.executions.end(run.run_id, "SUCCEEDED")  # ContinuedAsNew


class CancelledWhileTheHandOverWrites(InMemoryRuns):
    """Runs where an operator's whole cancel lands after the hand-over read the run (under its
    lease, which a cancel does not take) and before its write naming the next execution."""

    def __init__(self) -> None:
        super().__init__()
        self.deps: Fakes | None = None
        self.printed: tuple[int, str] | None = None

    def before_save(
        self, run: RunRecord, *, release: bool, events: Sequence[TimelineEvent]
    ) -> None:
        if run.continued and self.printed is None and self.deps is not None:
            self.printed = cancel_from_the_cli(self.deps, run.run_id)


def cancel_from_the_cli(deps: Fakes, run_id: str) -> tuple[int, str]:
    """``langorch runs cancel RUN_ID --reason 'not wanted'`` on ``deps``: its exit code and
    what it printed."""
    printed = io.StringIO()
    ctx = SimpleNamespace(container=deps, out=Output(json_mode=False, stdout=printed))
    code = _cancel(cast(Context, ctx), argparse.Namespace(run_id=run_id, reason="not wanted"))
    return code, printed.getvalue().strip()


def racing(runs: HandedOverWhileTheCancelWrites | CancelledWhileTheHandOverWrites) -> Fakes:
    """Fakes whose runs store makes the race, wired to them (the hooks drive the use-cases)."""
    fakes = with_approvals(Fakes(), FLOW)
    fakes.runs = runs
    runs.deps = fakes
    return fakes


def kinds(deps: Fakes, run_id: str) -> list[TimelineEventType]:
    """The run's hand-over and cancel events, in timeline order."""
    return [
        e.type
        for e in deps.runs.get_timeline(run_id)
        if e.type in (TimelineEventType.run_continued, TimelineEventType.run_cancelled)
    ]


def running(deps: Fakes) -> list[str]:
    """The executions still running."""
    return [n for n in deps.executions.names if deps.executions.describe(n)["status"] == "RUNNING"]


def test_a_cancel_read_before_the_hand_over_wrote_stops_the_next_execution() -> None:
    # Given a run in its first execution, whose history is full: it hands over to run-…-c1
    deps = racing(HandedOverWhileTheCancelWrites())
    run, _ = launch_run(StartRun("flow", input={"n": 2}), deps)

    # When an operator cancels it, and the hand-over runs whole between the cancel's read
    # (naming run-…) and its write
    code, printed = cancel_from_the_cli(deps, run.run_id)

    # Then the run is cancelled in run-…-c1, which is stopped: nothing runs for it
    stored = deps.runs.get_run(run.run_id)
    assert stored.status is RunStatus.cancelled
    assert current_execution(stored) == f"{run.run_id}-c1"
    assert deps.executions.describe(f"{run.run_id}-c1")["status"] == "ABORTED"
    assert running(deps) == []
    # And the command and the timeline say so: it continued, then was cancelled (once)
    assert code == 0
    assert printed == f"cancelled {run.run_id} (stopped its execution {run.run_id}-c1)"
    assert kinds(deps, run.run_id) == [
        TimelineEventType.run_continued,
        TimelineEventType.run_cancelled,
    ]


def test_a_cancel_between_the_hand_overs_read_and_write_keeps_the_run_where_it_was() -> None:
    # Given a run in its first execution, whose history is full
    runs = CancelledWhileTheHandOverWrites()
    deps = racing(runs)
    run, _ = launch_run(StartRun("flow", input={"n": 2}), deps)

    # When it hands over, and an operator's cancel lands between the hand-over's read of the
    # run and its write naming run-…-c1
    continue_as_new(CountedSegment(RunSegment(run.run_id)), deps)

    # Then the run stays cancelled in its first execution, which the cancel stopped, and no
    # next execution was started for it
    stored = deps.runs.get_run(run.run_id)
    assert stored.status is RunStatus.cancelled
    assert current_execution(stored) == run.run_id
    assert deps.executions.names == [run.run_id]
    assert running(deps) == []
    # And the command and the timeline say so: cancelled, never continued
    assert runs.printed == (0, f"cancelled {run.run_id} (stopped its execution {run.run_id})")
    assert kinds(deps, run.run_id) == [TimelineEventType.run_cancelled]
