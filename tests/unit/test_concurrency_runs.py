"""A workflow's ``concurrency: {limit, key}``, on fakes (the resource locks also on SQLite and
DynamoDB on moto): runs beyond the limit for one rendered key wait ``queued`` with no execution
started, and start in arrival order as runs of that key end; none is lost or started twice.
Order is read from the executions' start order, not timing."""

from __future__ import annotations

import random

import pytest
import yaml

from langorch.app.runs import RunSegment, StartRun, cancel_run, launch_run, mark_failed, run_segment
from langorch.domain.errors import DefinitionError, InputValidationError
from langorch.domain.runs import RunError, RunStatus, TimelineEventType
from tests.fakes import Fakes
from tests.integration.conftest import register_text
from tests.support.definitions import workflow
from tests.support.stores import STORES, fakes_on_resource_locks


def sync_flow(concurrency: str = '{limit: 2, key: "{{ customer_id }}"}') -> str:
    """Workflow ``sync``: one step, its runs limited by ``concurrency`` (YAML)."""
    return workflow(
        "sync",
        concurrency=yaml.safe_load(concurrency),
        inputs={"customer_id": "string", "n": "integer"},
    ).steps('- {step_id: work, kind: transform, transform: {done: "1"}}')


FLOW = sync_flow()


@pytest.fixture(params=STORES)
def deps(request: pytest.FixtureRequest) -> Fakes:
    """The fakes, their resource locks the fake's, SQLite's or DynamoDB's."""
    return fakes_on_resource_locks(request, FLOW)  # type: ignore[no-any-return]


def launch(deps: Fakes, customer: str, n: int) -> str:
    run, _ = launch_run(StartRun("sync", input={"customer_id": customer, "n": n}), deps)
    return run.run_id


def running(deps: Fakes) -> list[str]:
    """Runs whose execution started and that have not ended."""
    return [r for r in deps.executions.names if not deps.runs.get_run(r).is_terminal]


def test_twenty_runs_for_two_keys_never_run_more_than_two_per_key_and_all_finish(deps: Fakes):
    # Given 20 runs launched for customers a and b, alternating
    launched = [launch(deps, "ab"[i % 2], i) for i in range(20)]
    key = {r: deps.runs.get_run(r).input["customer_id"] for r in launched}
    # Then only the first two of each customer started; the others wait queued, no execution
    assert sorted(deps.executions.names) == sorted(launched[:4])
    assert {deps.runs.get_run(r).status for r in launched[4:]} == {RunStatus.queued}

    # When started runs end one by one, in an arbitrary (seeded) order
    pick = random.Random(31)
    most = {"a": 0, "b": 0}
    while active := running(deps):
        for customer in most:
            most[customer] = max(most[customer], sum(key[r] == customer for r in active))
        assert run_segment(RunSegment(pick.choice(active)), deps).status == "succeeded"

    # Then never more than two ran per customer, every run succeeded with one execution, and
    # each customer's runs started in the order they arrived
    assert most == {"a": 2, "b": 2}
    assert {deps.runs.get_run(r).status for r in launched} == {RunStatus.succeeded}
    assert len(deps.executions.names) == 20 == len(set(deps.executions.names))
    for customer in most:
        arrived = [r for r in launched if key[r] == customer]
        assert [r for r in deps.executions.names if key[r] == customer] == arrived
    assert deps.resources.get("concurrency:sync:a").leases == {}
    assert deps.resources.get("concurrency:sync:a").queue == ()


def test_a_queued_run_says_why_on_its_timeline(deps: Fakes):
    # Given customer a's two slots taken
    launch(deps, "a", 1)
    launch(deps, "a", 2)

    # When a third run of customer a is launched
    third = launch(deps, "a", 3)

    # Then it waits queued, first in line for the concurrency resource
    [waiting] = [
        e for e in deps.runs.get_timeline(third) if e.type is TimelineEventType.resource_waiting
    ]
    assert waiting.detail == {
        "resource": "concurrency:sync:a",
        "position": 1,
        "reason": "concurrency",
        "priority": 0,
    }
    assert third not in deps.executions.names


def test_a_duplicate_delivery_of_a_queued_run_keeps_its_place_and_starts_nothing(deps: Fakes):
    # Given customer a's slots taken and a queued run
    launch(deps, "a", 1)
    launch(deps, "a", 2)
    command = StartRun("sync", input={"customer_id": "a", "n": 3}, dedupe_key="webhook:sync:d-3")
    queued, _ = launch_run(command, deps)

    # When the same delivery arrives again
    again, created = launch_run(command, deps)

    # Then it is the same run, still queued once, with no execution
    assert (again.run_id, created) == (queued.run_id, False)
    assert len(deps.resources.get("concurrency:sync:a").queue) == 1
    assert queued.run_id not in deps.executions.names


def test_a_failed_run_starts_the_next_queued_run_of_its_key(deps: Fakes):
    # Given customer a's two slots taken and a third run queued
    first = launch(deps, "a", 1)
    launch(deps, "a", 2)
    third = launch(deps, "a", 3)

    # When the first run fails outside a segment (the state machine's failure path)
    mark_failed(first, RunError(type="States.Timeout", message="timed out"), deps)

    # Then the third starts
    assert third in deps.executions.names


def test_a_cancelled_queued_run_leaves_the_queue_and_never_starts(deps: Fakes):
    # Given customer a's two slots taken, and runs c and d queued behind them
    first = launch(deps, "a", 1)
    launch(deps, "a", 2)
    c, d = launch(deps, "a", 3), launch(deps, "a", 4)

    # When c is cancelled, then the first run ends
    cancel_run(c, deps, actor="ops", reason="not needed")
    run_segment(RunSegment(first), deps)

    # Then d started in its place, and c never did
    assert d in deps.executions.names
    assert c not in deps.executions.names


def test_runs_of_different_keys_do_not_wait_for_each_other(deps: Fakes):
    # Given customer a's two slots taken
    launch(deps, "a", 1)
    launch(deps, "a", 2)

    # When a run of customer b is launched
    other = launch(deps, "b", 3)

    # Then it starts at once
    assert other in deps.executions.names


@pytest.mark.parametrize(
    ("concurrency", "path"),
    [
        ('{limit: 0, key: "{{ customer_id }}"}', "concurrency.limit"),
        ('{limit: 2, key: "{{ customer_id "}', "concurrency.key"),
        ("{limit: 2, keys: x}", "concurrency.keys"),
    ],
)
def test_a_bad_concurrency_is_refused_at_its_path(concurrency: str, path: str):
    # Given a workflow whose concurrency is wrong
    text = sync_flow(concurrency)

    # When it is registered, then the error names the field
    with pytest.raises(DefinitionError) as raised:
        register_text(Fakes(), text)  # type: ignore[arg-type]
    assert path in str(raised.value)


def test_a_key_that_cannot_render_refuses_the_start(deps: Fakes):
    # Given a workflow whose key calls a missing filter on the input
    register_text(deps, FLOW.replace("{{ customer_id }}", "{{ customer_id | nosuch }}"))  # type: ignore[arg-type]

    # When a run is launched, then nothing starts and the error names concurrency.key
    with pytest.raises(InputValidationError, match=r"concurrency\.key"):
        launch(deps, "a", 1)
    assert deps.executions.names == []


def test_a_restart_of_the_local_stack_leaves_runs_waiting_for_their_key_queued(deps: Fakes):
    # Given customer a's two runs going and a third waiting for its turn, then a restart that
    # forgot every execution
    from langorch.app.recovery.restart import recover_in_flight
    from tests.fakes.executions import InMemoryExecutions

    going = [launch(deps, "a", 1), launch(deps, "a", 2)]
    waiting = launch(deps, "a", 3)
    deps.executions = InMemoryExecutions(deps.settings.state_machine_arn)

    # When the stack recovers its runs in flight
    recovered = recover_in_flight(deps)  # type: ignore[arg-type]

    # Then the two going runs have an execution again, and the waiting one still has none
    assert sorted(r.run_id for r in recovered) == sorted(going)
    assert waiting not in deps.executions.names


def test_a_run_stopped_from_outside_lets_the_next_of_its_key_start_when_reconciled(deps: Fakes):
    # Given customer a's two runs going, a third waiting, and the first's execution stopped
    # from the Step Functions console
    from langorch.app.recovery.reconcile import reconcile_runs

    first = launch(deps, "a", 1)
    launch(deps, "a", 2)
    third = launch(deps, "a", 3)
    deps.executions.end(first, "ABORTED")

    # When runs are reconciled with their executions
    reconcile_runs(deps)  # type: ignore[arg-type]

    # Then the first is cancelled and the third started in its place
    assert deps.runs.get_run(first).status is RunStatus.cancelled
    assert third in deps.executions.names
