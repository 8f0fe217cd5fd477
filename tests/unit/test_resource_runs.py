"""Runs that share a resource (seed 001 §7b), on fakes: a full resource parks the run like a
wait (no Lambda), the lease goes to the queue in FIFO order, and a run that ends gives back
what it held or queued for. Order is proven by the timeline's lease numbers, not by timing."""

from __future__ import annotations

import time

import pytest

from langorch.app.resources import ParkForResource, WakingLocks, park_for_resource
from langorch.app.runs import RunSegment, StartRun, cancel_run, drive, run_segment, start_run
from langorch.app.segment_record import SegmentResult
from langorch.domain.runs import RunStatus, TimelineEvent, TimelineEventType
from tests.fakes import Fakes
from tests.fakes.approvals import InMemoryApprovals
from tests.integration.conftest import register_text
from tests.support.definitions import workflow
from tests.workflows import SHOP_ON_A_RESOURCE as FLOW
from tests.workflows import SHOP_RESOURCE as RESOURCE

OTHER = "run-other/step"
"""A holder outside the test's runs, so all three runs find the resource full."""


@pytest.fixture
def deps() -> Fakes:
    fakes = Fakes()
    register_text(fakes, FLOW)  # type: ignore[arg-type]
    fakes.approvals = InMemoryApprovals()  # type: ignore[attr-defined]
    return fakes


def resource_events(deps: Fakes, run_id: str) -> list[TimelineEvent]:
    kinds = {
        TimelineEventType.resource_waiting,
        TimelineEventType.resource_acquired,
        TimelineEventType.resource_released,
        TimelineEventType.step_finished,
    }
    return [e for e in deps.runs.get_timeline(run_id) if e.type in kinds]


def wake(deps: Fakes, run_id: str) -> str:
    return run_segment(RunSegment(run_id, resume={"woke": True}), deps).status


def test_three_runs_on_a_resource_of_limit_one_run_the_step_one_after_another(
    deps: Fakes,
) -> None:
    # Given the resource is held, and three runs reach the step in the order a, b, c
    deps.resources.acquire(RESOURCE, OTHER, now=time.time(), lease_seconds=600, wait_seconds=600)
    runs = [start_run(StartRun("shop"), deps)[0].run_id for _ in range(3)]
    a, b, c = runs
    first = [run_segment(RunSegment(r), deps) for r in runs]
    # Then each parks (sleeping, no Lambda), queued at its place
    assert [r.status for r in first] == ["waiting_resource"] * 3
    assert deps.runs.get_run(a).pending.kind == "resource"  # type: ignore[union-attr]
    # When the holder lets go and the runs wake in the wrong order (c, a, c, b, c)
    deps.resources.release(RESOURCE, OTHER)
    assert wake(deps, c) == "waiting_resource"  # b and a are ahead of it
    assert wake(deps, a) == "succeeded"
    assert wake(deps, c) == "waiting_resource"  # b is still ahead of it
    assert wake(deps, b) == "succeeded"
    assert wake(deps, c) == "succeeded"
    # Then each run held the resource in turn: queued, acquired, ran, released — and the
    # leases were granted in queue order (a before b before c)
    leases = {}
    for run_id in runs:
        events = resource_events(deps, run_id)
        assert [e.type for e in events[-3:]] == [
            TimelineEventType.resource_acquired,
            TimelineEventType.step_finished,
            TimelineEventType.resource_released,
        ]
        leases[run_id] = events[-3].detail["lease"]
    assert leases[a] < leases[b] < leases[c]
    positions = [
        e.detail["position"]
        for e in resource_events(deps, c)
        if e.type is TimelineEventType.resource_waiting
    ]
    assert positions == [3, 3, 2]
    assert deps.resources.get(RESOURCE).leases == {}


def test_a_free_resource_is_taken_and_given_back_within_the_step(deps: Fakes) -> None:
    run, _ = start_run(StartRun("shop"), deps)
    result = drive(run.run_id, deps, on_approval=lambda _: {}, sleep=lambda _: None)
    assert result.status == "succeeded"
    types = [e.type for e in resource_events(deps, run.run_id)]
    assert types == [
        TimelineEventType.resource_acquired,
        TimelineEventType.step_finished,
        TimelineEventType.resource_released,
    ]
    assert deps.resources.get(RESOURCE).leases == {}


def test_a_run_cancelled_while_queued_leaves_the_queue(deps: Fakes) -> None:
    # Given a run queued behind another holder
    deps.resources.acquire(RESOURCE, OTHER, now=time.time(), lease_seconds=600, wait_seconds=600)
    run, _ = start_run(StartRun("shop"), deps)
    assert run_segment(RunSegment(run.run_id), deps).status == "waiting_resource"
    assert [w.holder for w in deps.resources.get(RESOURCE).queue] == [f"{run.run_id}/browse"]
    # When it is cancelled
    cancelled, _ = cancel_run(run.run_id, deps)
    # Then its place is given back
    assert cancelled.status is RunStatus.cancelled
    assert deps.resources.get(RESOURCE).queue == ()


def test_runs_show_tells_the_queue_place_and_the_lease(deps: Fakes) -> None:
    from langorch.cli.timeline import render_run

    # Given a run queued behind another holder, then woken after the holder let go
    deps.resources.acquire(RESOURCE, OTHER, now=time.time(), lease_seconds=600, wait_seconds=600)
    run, _ = start_run(StartRun("shop"), deps)
    run_segment(RunSegment(run.run_id), deps)
    queued = render_run(deps.runs.get_run(run.run_id), deps.runs.get_timeline(run.run_id))
    deps.resources.release(RESOURCE, OTHER)
    wake(deps, run.run_id)
    done = render_run(deps.runs.get_run(run.run_id), deps.runs.get_timeline(run.run_id))
    # Then runs show says where it waited, and when it got and gave back the resource
    assert f"waiting for resource {RESOURCE} (position 1) at browse" in queued
    assert f"queued     browse                 waiting for resource {RESOURCE} (position 1)" in done
    assert f"acquired   browse                 {RESOURCE}  lease #2" in done
    assert f"released   browse                 {RESOURCE}" in done


def test_a_run_failed_by_the_state_machine_gives_back_the_lease_its_dead_segment_held(
    deps: Fakes,
) -> None:
    from langorch.app.runs import mark_failed
    from langorch.domain.runs import RunError

    # Given a run whose segment took the lease and crashed (nothing gave it back)
    run, _ = start_run(StartRun("shop"), deps)
    holder = f"{run.run_id}/browse"
    deps.resources.acquire(RESOURCE, holder, now=time.time(), lease_seconds=600, wait_seconds=60)
    # When the state machine fails the run
    assert mark_failed(run.run_id, RunError(type="Lambda.Unknown", message="crashed"), deps)
    # Then the lease is free at once, not only when it expires
    assert deps.resources.get(RESOURCE).leases == {}


def test_a_resource_field_is_validated_with_its_path(deps: Fakes) -> None:
    from langorch.domain.errors import DefinitionError

    bad = workflow("bad").steps("""
      - {step_id: pause, kind: wait, wait: {seconds: 1}, resource: "browser:s1"}
      - {step_id: go, kind: transform, depends_on: [pause], transform: {x: "1"},
         resource: "browser:{{ session }}"}
""")
    with pytest.raises(DefinitionError) as raised:
        register_text(deps, bad)  # type: ignore[arg-type]
    paths = sorted(p.path for p in raised.value.problems)
    assert paths == ["steps[0].resource", "steps[1].resource"]


def park(deps: Fakes, result: SegmentResult) -> tuple[str, bool]:
    """What the state machine's AwaitResource does: a task token, kept by ``park``."""
    token = deps.executions.park(result.run_id)
    assert result.resource is not None
    command = ParkForResource(
        result.run_id, result.resource["name"], result.resource["holder"], token
    )
    return token, park_for_resource(command, deps)


def woken(deps: Fakes, run_id: str) -> bool:
    return deps.executions.describe(run_id).get("output") == '{"woke": true}'


def test_a_release_wakes_the_run_first_in_line_and_its_step_wakes_the_next(deps: Fakes) -> None:
    # Given two runs parked on their task tokens behind another holder
    deps.resources.acquire(RESOURCE, OTHER, now=time.time(), lease_seconds=600, wait_seconds=600)
    a, b = (start_run(StartRun("shop"), deps)[0].run_id for _ in range(2))
    for run_id in (a, b):
        result = run_segment(RunSegment(run_id), deps)
        assert result.status == "waiting_resource"
        assert result.to_dict()["resource"] == {"name": RESOURCE, "holder": f"{run_id}/browse"}
        assert park(deps, result)[1] is False  # not its turn: it waits to be woken
    # When the holder gives the lease back
    WakingLocks(deps.resources, deps.executions).release(RESOURCE, OTHER)
    # Then only the first in line is woken; its step, giving the lease back, wakes the next
    assert (woken(deps, a), woken(deps, b)) == (True, False)
    assert wake(deps, a) == "succeeded"
    assert woken(deps, b)
    assert wake(deps, b) == "succeeded"


def test_a_run_whose_turn_came_before_it_parked_wakes_itself(deps: Fakes) -> None:
    # Given a run queued behind a holder that let go before the run's token was kept
    deps.resources.acquire(RESOURCE, OTHER, now=time.time(), lease_seconds=600, wait_seconds=600)
    run, _ = start_run(StartRun("shop"), deps)
    result = run_segment(RunSegment(run.run_id), deps)
    deps.resources.release(RESOURCE, OTHER)  # nobody to wake yet: no token kept
    # When it parks
    _, turn = park(deps, result)
    # Then it is woken at once, not left waiting for a release that already happened
    assert turn and woken(deps, run.run_id)


def test_a_woken_holder_whose_sandbox_died_mid_step_is_retried_and_gives_the_lease_back(
    deps: Fakes,
) -> None:
    from langorch.app.runs import LEASE_GRACE_SECONDS
    from langorch.domain.runs import transition

    # Given a run queued behind another holder, then woken: its segment (the state machine's
    # entry "exec-1/t1") took the run and the resource, and its sandbox died mid-step — nothing
    # gave either back, and the record says running, parked on nothing
    deps.resources.acquire(RESOURCE, OTHER, now=time.time(), lease_seconds=600, wait_seconds=600)
    run, _ = start_run(StartRun("shop"), deps)
    assert run_segment(RunSegment(run.run_id), deps).status == "waiting_resource"
    deps.resources.release(RESOURCE, OTHER)
    owner = "exec-1/t1"
    ttl = deps.settings.segment_budget_seconds + LEASE_GRACE_SECONDS
    running = transition(deps.runs.get_run(run.run_id), RunStatus.running, now=deps.clock())
    deps.runs.acquire_lease(run.run_id, owner, now=time.time(), ttl_seconds=ttl, saving=running)
    holder = f"{run.run_id}/browse"
    deps.resources.acquire(RESOURCE, holder, now=time.time(), lease_seconds=ttl, wait_seconds=60)

    # When the state machine retries that segment (Runtime.ExitError) with the same owner
    # (before: refused as "not waiting on any interrupt", and the dead lease held it anyway)
    result = run_segment(RunSegment(run.run_id, resume={"woke": True}, owner=owner), deps)

    # Then the step runs again holding the resource, the run succeeds, and nothing stays held
    assert result.status == "succeeded"
    assert [e.type for e in resource_events(deps, run.run_id)][-2:] == [
        TimelineEventType.step_finished,
        TimelineEventType.resource_released,
    ]
    assert deps.resources.get(RESOURCE).leases == {}
