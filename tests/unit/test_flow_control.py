"""Flow control as data on a workflow (issue 31): ``rate_limit`` drops starts past its window
with the reason recorded, ``singleton`` skips a start while its key runs; each key validated
with its field path. Resource locks on the fake, SQLite and DynamoDB (moto)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from langorch.app.definitions import validate_files
from langorch.app.runs import RunSegment, StartRun, launch_run, run_segment
from langorch.domain.definitions import TaskPlan
from langorch.domain.errors import DefinitionError
from langorch.domain.lookup import InMemoryLookup
from langorch.domain.runs import RunStatus, TimelineEventType
from langorch.domain.validation import check_workflow
from tests.fakes import Fakes
from tests.support.stores import STORES, fakes_on_resource_locks

FLOW = """
workflows:
  - plan_id: hook
    memory: false
    rate_limit: {limit: 2, period: 1m, key: "{{ customer_id }}"}
    inputs_schema: {properties: {customer_id: {type: string}}}
    steps:
      - {step_id: work, kind: transform, transform: {done: "1"}}
  - plan_id: nightly
    memory: false
    singleton: {key: "{{ input.account }}"}
    inputs_schema: {properties: {account: {type: string}}}
    steps:
      - {step_id: work, kind: transform, transform: {done: "1"}}
  - plan_id: latest
    memory: false
    singleton: {key: "{{ account }}", mode: cancel_running}
    inputs_schema: {properties: {account: {type: string}}}
    steps:
      - {step_id: work, kind: transform, transform: {done: "1"}}
  - plan_id: digest
    memory: false
    debounce: {period: 30s, key: "{{ topic }}"}
    inputs_schema: {properties: {topic: {type: string}, n: {type: string}}}
    steps:
      - {step_id: work, kind: transform, transform: {done: "1"}}
  - plan_id: collect
    memory: false
    batch: {max_size: 4, timeout: 60s, key: "{{ topic }}"}
    inputs_schema: {properties: {topic: {type: string}, n: {type: string}}}
    steps:
      - {step_id: work, kind: transform, transform: {done: "1"}}
  - plan_id: paced
    memory: false
    throttle: {limit: 3, period: 1m, key: "{{ customer_id }}"}
    inputs_schema: {properties: {customer_id: {type: string}, n: {type: string}}}
    steps:
      - {step_id: work, kind: transform, transform: {done: "1"}}
  - plan_id: feeds
    memory: false
    concurrency: {limit: 2}
    triggers:
      - type: schedule
        schedule: {cron_expression: "* * * * *"}
        concurrency: {limit: 1}
    steps:
      - {step_id: work, kind: transform, transform: {done: "1"}}
  - plan_id: jobs
    memory: false
    concurrency: {limit: 1, key: "{{ team }}"}
    priority: "{{ urgency }}"
    inputs_schema: {properties: {team: {type: string}, urgency: {type: string}}}
    steps:
      - {step_id: work, kind: transform, transform: {done: "1"}}
"""


@pytest.fixture(params=STORES)
def deps(request: pytest.FixtureRequest) -> Fakes:
    """The fakes, their resource locks the fake's, SQLite's or DynamoDB's."""
    return fakes_on_resource_locks(request, FLOW)  # type: ignore[no-any-return]


def start(deps: Fakes, workflow: str, dedupe: str | None = None, **data: str) -> Any:
    run, _ = launch_run(StartRun(workflow, input=data, dedupe_key=dedupe), deps)
    return run


def test_a_rate_limited_burst_starts_the_limit_and_records_each_drop(deps: Fakes) -> None:
    # Given a workflow limited to 2 starts per minute per customer
    # When 5 starts for customer a and 1 for customer b arrive in the same second
    runs = [start(deps, "hook", customer_id="a") for _ in range(5)]
    other = start(deps, "hook", customer_id="b")
    # Then 2 of a's and b's one started; a's 3 others are cancelled, not started
    assert sorted(deps.executions.names) == sorted([runs[0].run_id, runs[1].run_id, other.run_id])
    dropped = [deps.runs.get_run(r.run_id) for r in runs[2:]]
    assert {r.status for r in dropped} == {RunStatus.cancelled}
    assert {r.status_reason for r in dropped} == {"rate limit: 2 per 1m"}
    # And each drop is on its run's timeline, by flow control, with the rule's facts
    for run in dropped:
        event = deps.runs.get_timeline(run.run_id)[-1]
        assert event.type is TimelineEventType.run_cancelled and event.actor == "flow_control"
        assert event.detail["rule"] == "rate_limit" and event.detail["limit"] == 2


def test_a_rate_limit_window_slides_with_time(deps: Fakes) -> None:
    # Given customer a's two starts used up the minute
    start(deps, "hook", customer_id="a")
    deps.clock.advance(30)
    start(deps, "hook", customer_id="a")
    # When 31 s later (the first start's minute is over) a third arrives, then a fourth
    deps.clock.advance(31)
    third = start(deps, "hook", customer_id="a")
    fourth = start(deps, "hook", customer_id="a")
    # Then the third starts (one slot freed) and the fourth is dropped
    assert third.run_id in deps.executions.names
    assert deps.runs.get_run(fourth.run_id).status is RunStatus.cancelled


def test_a_redelivered_dropped_start_stays_dropped_and_uses_no_slot(deps: Fakes) -> None:
    # Given a's minute used up and a third delivery dropped
    for n in range(3):
        start(deps, "hook", dedupe=f"d{n}", customer_id="a")
    # When the dropped delivery is redelivered
    again = start(deps, "hook", dedupe="d2", customer_id="a")
    # Then it is the same cancelled run, and nothing more started
    assert again.status is RunStatus.cancelled and len(deps.executions.names) == 2


def test_a_singleton_skips_a_start_while_its_key_runs_and_takes_the_next(deps: Fakes) -> None:
    # Given a run of account x running
    first = start(deps, "nightly", account="x")
    # When x starts again meanwhile, and y starts
    skipped = start(deps, "nightly", account="x")
    other = start(deps, "nightly", account="y")
    # Then x's second is skipped with the reason; y runs
    assert deps.runs.get_run(skipped.run_id).status is RunStatus.cancelled
    assert deps.runs.get_run(skipped.run_id).status_reason == (
        "singleton: a run of this key is running"
    )
    assert other.run_id in deps.executions.names
    # And once the first run ends, the next start of x runs
    assert run_segment(RunSegment(first.run_id), deps).status == "succeeded"
    later = start(deps, "nightly", account="x")
    assert later.run_id in deps.executions.names


def test_a_throttled_burst_is_delayed_in_order_not_dropped(deps: Fakes) -> None:
    # Given a workflow throttled to 3 starts per minute per customer
    # When 10 starts for customer a arrive at once
    runs = [start(deps, "paced", customer_id="a", n=str(n)) for n in range(10)]
    # Then every one has its execution (none dropped) and waits queued
    assert sorted(deps.executions.names) == sorted(r.run_id for r in runs)
    stored = [deps.runs.get_run(r.run_id) for r in runs]
    assert {r.status for r in stored} == {RunStatus.queued}
    # And 3 may start now; the 7 others are delayed in arrival order, 3 per minute
    delays = [r.trigger.detail.get("throttle", {}).get("delay", 0) for r in stored]
    assert delays == [0, 0, 0, 60, 60, 60, 120, 120, 120, 180]
    # And a delayed run says why and until when, on its record and its timeline
    assert (stored[9].status_reason or "").startswith("throttle: 3 per 1m; starts at ")
    event = deps.runs.get_timeline(runs[9].run_id)[-1]
    assert event.type is TimelineEventType.resource_waiting and event.actor == "flow_control"
    assert (event.detail["reason"], event.detail["delay_seconds"]) == ("throttle", 180)


def test_each_throttled_run_starts_in_its_own_window(deps: Fakes) -> None:
    # Given 10 starts at once under 3 per minute
    runs = [start(deps, "paced", customer_id="a", n=str(n)) for n in range(10)]
    # When each minute the state machine runs (or wakes) every run not yet done
    ran_in: dict[str, int] = {}
    asleep: set[str] = set()
    for minute in range(4):
        for run in runs:
            if run.run_id in ran_in:
                continue
            woke = {"woke": True} if run.run_id in asleep else None
            result = run_segment(RunSegment(run.run_id, resume=woke), deps)
            if result.status == "succeeded":
                ran_in[run.run_id] = minute
            else:
                assert result.status == "sleeping" and result.seconds
                asleep.add(run.run_id)
        deps.clock.advance(60)
    # Then every run ran once, 3 per minute, in the order they arrived: none lost
    assert [ran_in[r.run_id] for r in runs] == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3]


def test_throttle_keys_are_counted_apart(deps: Fakes) -> None:
    # Given customer a's minute used up
    for _ in range(3):
        start(deps, "paced", customer_id="a")
    # When customer b starts
    other = start(deps, "paced", customer_id="b")
    # Then b is not delayed
    assert "throttle" not in deps.runs.get_run(other.run_id).trigger.detail


def fire(deps: Fakes, workflow: str, minute: int) -> Any:
    from langorch.app.triggers import handle_schedule
    from langorch.domain.triggers import ScheduleFired, schedule_name

    slot = f"2026-11-27T10:{minute:02d}:00Z"
    fired = ScheduleFired(
        source="langorch.schedule",
        workflow_id=workflow,
        schedule=schedule_name(workflow, 0),
        scheduled_time=slot,
    )
    [run] = handle_schedule(fired, deps).started
    return deps.runs.get_run(run.run_id)


def running(deps: Fakes, runs: list[Any]) -> list[str]:
    """The runs of ``runs`` whose execution started and that have not ended."""
    names = set(deps.executions.names)
    return [
        r.run_id for r in runs if r.run_id in names and not deps.runs.get_run(r.run_id).is_terminal
    ]


def test_a_triggers_concurrency_limits_the_runs_it_starts_in_order(deps: Fakes) -> None:
    # Given a workflow whose schedule trigger runs one at a time (the workflow allows 2)
    # When 3 slots fire at once
    slots = [fire(deps, "feeds", minute) for minute in range(3)]
    # Then one runs; the others wait queued on the trigger's own key, saying so
    assert running(deps, slots) == [slots[0].run_id]
    event = deps.runs.get_timeline(slots[1].run_id)[-1]
    assert event.detail["resource"] == "concurrency:feeds@schedule:"
    # And each end starts the next, in the order they fired
    for now, after in itertools.pairwise(slots):
        assert run_segment(RunSegment(now.run_id), deps).status == "succeeded"
        assert running(deps, slots) == [after.run_id]


def test_a_run_starts_only_when_its_trigger_and_its_workflow_both_have_room(deps: Fakes) -> None:
    # Given one scheduled run and one run by hand filling the workflow's 2 slots
    first = fire(deps, "feeds", 0)
    manual = start(deps, "feeds")
    # When a second slot fires, and another run is started by hand
    second = fire(deps, "feeds", 1)
    manual2 = start(deps, "feeds")
    everyone = [first, manual, second, manual2]
    assert running(deps, everyone) == [first.run_id, manual.run_id]
    # Then the first scheduled run's end lets the run by hand in (the workflow's next in line);
    # the second slot, holding its trigger's key, now waits for the workflow's
    assert run_segment(RunSegment(first.run_id), deps).status == "succeeded"
    assert running(deps, everyone) == [manual.run_id, manual2.run_id]
    holders = deps.resources.get("concurrency:feeds:").queue
    assert [w.holder for w in holders] == [f"{second.run_id}/run"]
    # And once a run of the workflow ends, it starts: never more than 2 at once, 1 scheduled
    assert run_segment(RunSegment(manual.run_id), deps).status == "succeeded"
    assert running(deps, everyone) == [second.run_id, manual2.run_id]


def test_queued_runs_of_a_key_start_by_priority_then_in_arrival_order(deps: Fakes) -> None:
    # Given team t's one slot taken
    first = start(deps, "jobs", team="t", urgency="0")
    # When four more queue: two at urgency 0, two at urgency 5, interleaved
    low1, high1, low2, high2 = (
        start(deps, "jobs", team="t", urgency=u) for u in ("0", "5", "0", "5")
    )
    # Then each run that ends starts the highest-priority one queued, first come first
    order = []
    running = first
    for _ in range(4):
        assert run_segment(RunSegment(running.run_id), deps).status == "succeeded"
        running = deps.runs.get_run(deps.executions.names[-1])
        order.append(running.run_id)
    assert order == [high1.run_id, high2.run_id, low1.run_id, low2.run_id]


def test_a_queued_run_records_its_priority_on_its_timeline(deps: Fakes) -> None:
    # Given team t's slot taken
    start(deps, "jobs", team="t", urgency="1")
    # When a run of urgency 7 queues behind it
    queued = start(deps, "jobs", team="t", urgency="7")
    # Then its waiting event says why and at which priority
    event = deps.runs.get_timeline(queued.run_id)[-1]
    assert event.type is TimelineEventType.resource_waiting
    assert (event.detail["reason"], event.detail["priority"]) == ("concurrency", 7)


def test_a_priority_that_is_not_a_whole_number_refuses_the_start(deps: Fakes) -> None:
    from langorch.domain.errors import InputValidationError

    # Given team t's slot taken
    start(deps, "jobs", team="t", urgency="1")
    # When a run whose urgency is not a number starts
    with pytest.raises(InputValidationError) as refused:
        start(deps, "jobs", team="t", urgency="soon")
    # Then the problem names the field and says what it must be
    assert refused.value.problems[0].path == "priority"
    assert "whole number" in refused.value.problems[0].message


def test_cancel_running_cancels_the_keys_running_run_and_starts_the_new_one(deps: Fakes) -> None:
    # Given a run of account x running, under singleton mode cancel_running
    first = start(deps, "latest", account="x")
    # When x starts again
    second = start(deps, "latest", account="x")
    # Then the first is cancelled, saying by which run, by flow control
    old = deps.runs.get_run(first.run_id)
    assert old.status is RunStatus.cancelled
    assert old.status_reason == f"singleton: replaced by run {second.run_id}"
    cancelled = deps.runs.get_timeline(first.run_id)[-1]
    assert (cancelled.type, cancelled.actor) == (TimelineEventType.run_cancelled, "flow_control")
    # And the second started, its timeline naming the run it cancelled
    assert second.run_id in deps.executions.names
    took = deps.runs.get_timeline(second.run_id)[-1]
    assert took.type is TimelineEventType.resource_acquired
    assert took.detail["cancelled"] == [first.run_id]


def test_cancel_running_leaves_other_keys_running(deps: Fakes) -> None:
    # Given runs of accounts x and y running
    x = start(deps, "latest", account="x")
    y = start(deps, "latest", account="y")
    # When x starts again
    start(deps, "latest", account="x")
    # Then only x's first run was cancelled
    assert deps.runs.get_run(x.run_id).status is RunStatus.cancelled
    assert deps.runs.get_run(y.run_id).status is RunStatus.queued


def test_after_a_replaced_run_the_new_one_holds_the_key_until_it_ends(deps: Fakes) -> None:
    # Given x's first run replaced by a second
    start(deps, "latest", account="x")
    second = start(deps, "latest", account="x")
    # When the second ends, and x starts again
    assert run_segment(RunSegment(second.run_id), deps).status == "succeeded"
    third = start(deps, "latest", account="x")
    # Then the third starts cancelling nothing (the ended second is left as it was)
    assert deps.runs.get_run(second.run_id).status is RunStatus.succeeded
    assert deps.runs.get_timeline(third.run_id)[-1].type is TimelineEventType.run_started


def test_a_debounced_burst_runs_once_with_the_last_input_and_the_count(deps: Fakes) -> None:
    # Given a workflow debounced for 30 s per topic
    # When 5 starts for topic t arrive over 1.25 s
    runs = []
    for n in range(5):
        runs.append(start(deps, "digest", topic="t", n=str(n)))
        deps.clock.advance(0.25)
    # Then the first 4 are cancelled as debounced, each saying by which run
    for earlier, later in itertools.pairwise(runs):
        run = deps.runs.get_run(earlier.run_id)
        assert run.status is RunStatus.cancelled
        assert run.status_reason == f"debounce: replaced by run {later.run_id} within 30s"
    # And the last is held, carrying the count of starts and its own input
    last = deps.runs.get_run(runs[-1].run_id)
    assert last.trigger.detail["debounce"]["count"] == 5 and last.input["n"] == "4"
    # And it sleeps out its period, then runs
    assert run_segment(RunSegment(last.run_id), deps).status == "sleeping"
    deps.clock.advance(30)
    woke = run_segment(RunSegment(last.run_id, resume={"woke": True}), deps)
    assert woke.status == "succeeded"


def test_a_start_after_the_debounce_period_starts_a_new_count(deps: Fakes) -> None:
    # Given topic t's held run whose period is over
    first = start(deps, "digest", topic="t")
    deps.clock.advance(31)
    # When t starts again
    second = start(deps, "digest", topic="t")
    # Then the first is left to run and the second counts from 1
    assert deps.runs.get_run(first.run_id).status is RunStatus.queued
    assert deps.runs.get_run(second.run_id).trigger.detail["debounce"]["count"] == 1


def test_a_batched_burst_runs_in_batches_of_max_size_covering_each_start_once(
    deps: Fakes,
) -> None:
    # Given a workflow batching up to 4 starts per topic
    # When 10 starts for topic t arrive
    runs = [start(deps, "collect", topic="t", n=str(n)) for n in range(10)]
    # Then 3 runs remain (the others were moved into them): 4, 4 and 2 items
    kept = [deps.runs.get_run(r.run_id) for r in runs]
    kept = [r for r in kept if r.status is not RunStatus.cancelled]
    assert [len(r.input["items"]) for r in kept] == [4, 4, 2]
    # And together they carry each start's input once, in arrival order
    assert [i["n"] for r in kept for i in r.input["items"]] == [str(n) for n in range(10)]
    # And the full ones run at once; the open one sleeps until its timeout, then runs
    assert [run_segment(RunSegment(r.run_id), deps).status for r in kept] == [
        "succeeded",
        "succeeded",
        "sleeping",
    ]
    deps.clock.advance(60)
    woke = run_segment(RunSegment(kept[2].run_id, resume={"woke": True}), deps)
    assert woke.status == "succeeded"


def _plan(**flow: Any) -> dict[str, Any]:
    return {
        "plan_id": "w",
        "steps": [{"step_id": "a", "kind": "transform", "transform": {"x": "1"}}],
        **flow,
    }


@pytest.mark.parametrize(
    ("flow", "path", "says"),
    [
        ({"rate_limit": {"limit": 0, "period": "1m"}}, "rate_limit.limit", "greater than"),
        ({"throttle": {"limit": 5000, "period": "1m"}}, "throttle.limit", "less than"),
        ({"throttle": {"limit": 2, "period": "5x"}}, "throttle.period", "is not a period"),
        ({"debounce": {"period": "8d"}}, "debounce.period", "longer than 7d"),
        ({"batch": {"max_size": 5000, "timeout": "60s"}}, "batch.max_size", "less than"),
        ({"singleton": {"key": "{{ x", "mode": "skip"}}, "singleton.key", "not a valid template"),
        ({"singleton": {"mode": "kill"}}, "singleton.mode", "'skip' or 'cancel_running'"),
        ({"priority": "{{"}, "priority", "not a valid template"),
        ({"rate_limit": {"limit": 1, "period": "1m", "per": 2}}, "rate_limit.per", "unknown field"),
    ],
)
def test_each_flow_control_key_is_validated_with_its_field_path(
    flow: dict[str, Any], path: str, says: str, tmp_path: Any
) -> None:
    # Given a workflow file with one bad flow-control key
    import json

    file = tmp_path / "w.json"
    file.write_text(json.dumps({"workflows": [_plan(**flow)]}))
    # When it is validated
    with pytest.raises(DefinitionError) as refused:
        validate_files([file])
    # Then the problem names the field path and what is wrong
    found = refused.value.problems
    assert any(p.path.endswith(path) and says in p.message for p in found), found


def test_catch_up_is_refused_on_a_trigger_that_is_not_a_schedule() -> None:
    plan = TaskPlan.model_validate(_plan(triggers=[{"type": "webhook", "catch_up": "all"}]))
    errors = check_workflow(plan, InMemoryLookup(), tools=None, providers=None).errors
    assert [(p.path, p.message) for p in errors if "catch_up" in p.path] == [
        ("triggers[0].catch_up", "a webhook trigger ignores catch_up")
    ]


def test_a_triggers_concurrency_is_stored_without_a_warning() -> None:
    plan = TaskPlan.model_validate(
        _plan(triggers=[{"type": "webhook", "concurrency": {"limit": 2}}])
    )
    found = check_workflow(plan, InMemoryLookup(), tools=None, providers=None)
    assert found.ok and not [p for p in found.warnings if "not enforced" in p.message]


def test_catch_up_on_a_schedule_is_stored_without_a_warning() -> None:
    plan = TaskPlan.model_validate(
        _plan(
            triggers=[
                {
                    "type": "schedule",
                    "schedule": {"cron_expression": "0 * * * *"},
                    "catch_up": "latest",
                }
            ],
        )
    )
    found = check_workflow(plan, InMemoryLookup(), tools=None, providers=None)
    assert found.ok and not [p for p in found.warnings if "not enforced" in p.message]


def test_an_unset_flow_control_key_is_left_out_of_the_stored_definition() -> None:
    assert "rate_limit" not in TaskPlan.model_validate(_plan()).model_dump(mode="json")


def test_enforced_keys_are_stored_without_a_warning() -> None:
    plan = TaskPlan.model_validate(
        _plan(
            concurrency={"limit": 1},
            priority="{{ urgency }}",
            throttle={"limit": 5, "period": "30s", "key": "{{ k }}"},
            debounce={"period": "30s"},
            batch={"max_size": 5, "timeout": "30s"},
            singleton={"key": "{{ k }}", "mode": "cancel_running"},
        )
    )
    found = check_workflow(plan, InMemoryLookup(), tools=None, providers=None)
    assert found.ok and not [p for p in found.warnings if "not enforced" in p.message]
