"""Resource locks through the local pipeline (`langorch dev`): runs that find their resource
full park in the real state machine (a ``Wait``, no Lambda), are woken, and take the step one
after another; a dead holder's lease expires and is reclaimed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from langorch.cli.main import main
from langorch.composition.bootstrap import build_container
from langorch.composition.container import Container
from langorch.domain.runs import RunStatus, TimelineEventType
from langorch.local.stack import LocalStack
from tests.support.polling import wait_for
from tests.support.stacks import running_stack
from tests.workflows import SHOP_ON_A_RESOURCE as FLOW
from tests.workflows import SHOP_RESOURCE as RESOURCE

DEAD = "run-dead/step"
"""A holder that died holding the resource."""
DEADLINE_SECONDS = 240.0
"""The longest the test waits for the three runs to end (a deadline, not a pace)."""


@pytest.fixture
def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalStack]:
    monkeypatch.chdir(tmp_path)
    with running_stack(tmp_path / ".langorch") as running:
        yield running


def waited_for_the_resource(container: Container, run_id: str) -> bool:
    timeline = container.runs.get_timeline(run_id)
    return any(e.type is TimelineEventType.resource_waiting for e in timeline)


def test_three_runs_park_in_the_state_machine_and_take_the_resource_in_turn(
    stack: LocalStack, tmp_path: Path
) -> None:
    container = build_container(stack.settings)
    # Given the workflow, the resource declared with limit 1, and a holder that died with it
    (tmp_path / "shop.yaml").write_text(FLOW)
    assert main(["workflows", "put", str(tmp_path / "shop.yaml")]) == 0
    assert main(["resources", "set", RESOURCE, "--limit", "1"]) == 0
    container.resources.acquire(
        RESOURCE, DEAD, now=time.time(), lease_seconds=3600, wait_seconds=600
    )

    # When three runs start, and park behind the dead holder
    for _ in range(3):
        assert main(["runs", "start", "shop"]) == 0
    runs = [r.run_id for r in container.runs.list_runs(workflow_id="shop")]
    assert len(runs) == 3
    wait_for(
        lambda: all(waited_for_the_resource(container, r) for r in runs),
        what="the three runs to park",
        timeout=DEADLINE_SECONDS,
        interval=0.2,
    )
    # And the dead holder's lease lapses (its last refresh stamped an hour back: the test, not
    # the wall clock, decides when it expires)
    container.resources.acquire(
        RESOURCE, DEAD, now=time.time() - 3600, lease_seconds=5, wait_seconds=600
    )

    # Then all three end succeeded (polled against a deadline)
    def all_ended() -> bool:
        statuses = {container.runs.get_run(r).status for r in runs}
        assert not statuses & {RunStatus.failed, RunStatus.cancelled}, statuses
        return statuses == {RunStatus.succeeded}

    wait_for(all_ended, what="the three runs to succeed", timeout=DEADLINE_SECONDS, interval=0.5)
    assert {container.runs.get_run(r).status for r in runs} == {RunStatus.succeeded}

    # And each held the resource in turn: the dead holder's lease #1 was reclaimed, the runs
    # got #2, #3, #4, each gave its lease back after its step, and they waited while it was held
    leases = []
    waited = 0
    for run_id in runs:
        events = [
            e
            for e in container.runs.get_timeline(run_id)
            if e.type.value.startswith("resource_") or e.type is TimelineEventType.step_finished
        ]
        waited += sum(e.type is TimelineEventType.resource_waiting for e in events)
        assert [e.type for e in events[-3:]] == [
            TimelineEventType.resource_acquired,
            TimelineEventType.step_finished,
            TimelineEventType.resource_released,
        ]
        leases.append(events[-3].detail["lease"])
    assert sorted(leases) == [2, 3, 4]
    assert waited >= 2  # at least the two that were behind another run parked
    state = container.resources.get(RESOURCE)
    assert (state.leases, state.queue) == ({}, ())
