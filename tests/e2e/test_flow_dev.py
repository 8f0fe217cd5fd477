"""Issue 31's throttle and catch_up on ``langorch dev`` (in this process): a throttled burst
runs one start per slot through the state machine's Wait, none lost; a schedule with
``catch_up: latest`` whose stack was down starts its most recent missed slot when the stack
comes back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langorch.app.runs import StartRun, launch_run
from langorch.app.triggers import handle_schedule
from langorch.domain.runs import RunStatus
from langorch.domain.triggers import ScheduleFired, schedule_name
from tests.support.polling import wait_for
from tests.support.stacks import running_stack

PACED = """
workflows:
  - plan_id: paced
    memory: false
    throttle: {limit: 1, period: 2s}
    steps:
      - {step_id: work, kind: transform, transform: {done: "1"}}
  - plan_id: yearly
    memory: false
    triggers:
      - type: schedule
        schedule: {cron_expression: "0 3 1 1 *"}
        catch_up: latest
    steps:
      - {step_id: work, kind: transform, transform: {done: "1"}}
"""


def _ended(container: Any, run_ids: list[str]) -> list[Any]:
    """The runs once every one has ended (a stuck run fails the test, naming them)."""

    def all_ended() -> list[Any] | None:
        runs = [container.runs.get_run(run_id) for run_id in run_ids]
        return runs if all(run.is_terminal for run in runs) else None

    return wait_for(all_ended, what=f"runs {run_ids} to end", timeout=300, interval=0.2)


def test_a_throttled_burst_runs_one_per_slot_on_the_dev_stack(tmp_path: Path) -> None:
    # Given the dev stack with a workflow throttled to 1 start per 2 s
    with running_stack(tmp_path / ".langorch", definitions=PACED) as stack:
        container = stack.container
        # When 3 runs start at once
        runs = [launch_run(StartRun("paced"), container)[0] for _ in range(3)]
        ended = _ended(container, [r.run_id for r in runs])
    # Then all 3 succeed, none lost, each started no earlier than its slot
    assert [r.status for r in ended] == [RunStatus.succeeded] * 3
    for run in ended[1:]:
        slot = run.trigger.detail["throttle"]["until"]
        assert run.started_at is not None and run.started_at.timestamp() >= slot


def test_catch_up_latest_starts_the_most_recent_missed_slot_when_dev_starts(
    tmp_path: Path,
) -> None:
    home = tmp_path / ".langorch"
    # Given a yearly schedule whose last recorded slot is 2020's, and the stack then down
    with running_stack(home, definitions=PACED) as stack:
        fired = ScheduleFired(
            source="langorch.schedule",
            workflow_id="yearly",
            schedule=schedule_name("yearly"),
            scheduled_time="2020-01-01T03:00:00Z",
        )
        [old] = handle_schedule(fired, stack.container).started
        _ended(stack.container, [old.run_id])
    # When the stack starts again
    with running_stack(home) as stack:
        container = stack.container
        caught = [
            r for r in container.runs.list_runs(workflow_id="yearly") if r.run_id != old.run_id
        ]
        ended = _ended(container, [r.run_id for r in caught])
    # Then one run started, for the most recent missed slot, saying how many it skipped
    [run] = ended
    facts = run.trigger.detail["catch_up"]
    assert run.status is RunStatus.succeeded and facts["mode"] == "latest"
    assert facts["missed"] >= 6 and facts["skipped"] == facts["missed"] - 1
