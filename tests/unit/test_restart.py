"""After a restart of the local stack, every open run gets an execution again — once — on fakes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from langorch.app.recovery.restart import recover_in_flight
from langorch.app.runs import RunSegment, StartRun, launch_run, run_segment
from langorch.domain.errors import LeaseHeldError
from langorch.domain.runs import RunRecord, TimelineEvent, TimelineEventType
from tests.fakes import Fakes
from tests.fakes.executions import InMemoryExecutions
from tests.fakes.runs import InMemoryRuns
from tests.integration.conftest import register_text
from tests.support.definitions import workflow
from tests.workflows import ASK_THEN_DONE

FLOW = workflow("flow").steps("""
      - {step_id: one, kind: transform, transform: {a: "1"}}
""")


@pytest.fixture
def deps() -> Fakes:
    fakes = Fakes()
    register_text(fakes, FLOW)  # type: ignore[arg-type]
    register_text(fakes, ASK_THEN_DONE)  # type: ignore[arg-type]
    return fakes


def restarted(deps: Fakes) -> Fakes:
    """The same tables, with every execution forgotten (the emulator's were in its process)."""
    deps.executions = InMemoryExecutions(deps.settings.state_machine_arn)
    return deps


def test_every_open_run_gets_one_new_execution_and_ended_runs_none(deps: Fakes) -> None:
    # Given a queued run, a parked run and a run that ended, then a restart
    queued, _ = launch_run(StartRun("flow"), deps)
    parked, _ = launch_run(StartRun("gated"), deps)
    assert run_segment(RunSegment(parked.run_id), deps).status == "waiting_approval"
    ended, _ = launch_run(StartRun("flow"), deps)
    assert run_segment(RunSegment(ended.run_id), deps).status == "succeeded"
    restarted(deps)

    # When the stack recovers its runs in flight
    recovered = recover_in_flight(deps)  # type: ignore[arg-type]

    # Then the two open runs have an execution again, starting with no answer, and the ended
    # run has none
    assert {(r.run_id, r.status) for r in recovered} == {
        (queued.run_id, "queued"),
        (parked.run_id, "waiting_approval"),
    }
    for run in (queued, parked):
        assert deps.executions.describe(run.run_id)["input"] == (
            f'{{"run_id": "{run.run_id}", "resume": null}}'
        )
    assert ended.run_id not in deps.executions.names


def test_recovering_again_starts_nothing_twice(deps: Fakes) -> None:
    # Given a run recovered once
    run, _ = launch_run(StartRun("flow"), deps)
    restarted(deps)
    assert len(recover_in_flight(deps)) == 1  # type: ignore[arg-type]
    # When recovery runs again, then it starts nothing: the run has its execution
    assert recover_in_flight(deps) == []  # type: ignore[arg-type]
    assert deps.executions.names == [run.run_id]


def test_the_lease_of_a_segment_that_died_with_the_stack_no_longer_blocks_the_run(
    deps: Fakes,
) -> None:
    # Given a run whose segment held the lease when the process died
    run, _ = launch_run(StartRun("flow"), deps)
    deps.runs.acquire_lease(run.run_id, "dead", now=deps.clock().timestamp(), ttl_seconds=720)
    with pytest.raises(LeaseHeldError):
        run_segment(RunSegment(run.run_id), deps)
    restarted(deps)

    # When the stack recovers it, then its new execution's segment runs it to the end
    recover_in_flight(deps)  # type: ignore[arg-type]
    assert run_segment(RunSegment(run.run_id), deps).status == "succeeded"


class _KilledAtTheLastWrite(InMemoryRuns):
    """A view of a runs fake's table from a stack killed (SIGKILL) between a segment's timeline
    and its record, as versions before the two became one write stored them: it shares the
    fake's rows."""

    def __init__(self, table: InMemoryRuns) -> None:
        self.__dict__ = table.__dict__

    def before_save(
        self, run: RunRecord, *, release: bool, events: Sequence[TimelineEvent]
    ) -> None:
        if run.is_terminal and release:
            self.append_events(run.run_id, events)  # the older version's first write
            raise SystemExit("killed")  # the process dies: nothing after this runs


def test_a_run_whose_finishing_segment_died_before_its_last_write_finishes_once(
    deps: Fakes,
) -> None:
    # Given a run whose segment (of an older version) appended its run_finished, then died
    # before its record said so
    table = deps.runs
    run, _ = launch_run(StartRun("flow"), deps)
    deps.runs = _KilledAtTheLastWrite(table)
    with pytest.raises(SystemExit):
        run_segment(RunSegment(run.run_id), deps)
    # When the stack starts again and the run's new execution runs its segment
    deps.runs = table
    restarted(deps)
    recover_in_flight(deps)  # type: ignore[arg-type]
    answer: Any = run_segment(RunSegment(run.run_id), deps)
    # Then the run succeeded, and its timeline says it finished once
    assert answer.status == "succeeded"
    timeline = deps.runs.get_timeline(run.run_id)
    assert [e.type for e in timeline].count(TimelineEventType.run_finished) == 1
    assert deps.runs.get_run(run.run_id).status.value == "succeeded"
