"""``langorch schedules pause|resume|backfill`` on a local home: the CLI's answers; what the
use-cases do is in ``tests/unit/test_schedules_control.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from langorch.cli.main import main
from tests.integration.conftest import register_text
from tests.support.homes import local_home

HOURLY = """
workflows:
  - plan_id: hourly
    memory: false
    triggers:
      - type: schedule
        schedule: {cron_expression: "0 * * * *", timezone: UTC}
    steps:
      - {step_id: noop, kind: transform, transform: {x: "1"}}
"""


@pytest.fixture
def home(tmp_path: Path) -> list[str]:
    home = tmp_path / ".langorch"
    register_text(local_home(home), HOURLY)  # type: ignore[arg-type]
    return ["--home", str(home)]


def test_pausing_an_unknown_workflow_names_it(
    home: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # When an unknown workflow is paused
    code = main(["schedules", "pause", "nope", *home, "--json"])

    # Then the command fails and says which workflow is missing
    assert code != 0
    assert "workflow nope not found" in json.loads(capsys.readouterr().out)["error"]


def test_a_backfill_over_more_slots_than_max_starts_nothing_and_says_how_to_fix_it(
    home: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # When five days of an hourly schedule are backfilled with the default --max (100)
    code = main(
        ["schedules", "backfill", "hourly", "--from", "2026-11-20", "--to", "2026-11-25", *home]
    )

    # Then it refuses, naming the limit and the flags
    assert code != 0
    said = capsys.readouterr().err
    assert "more than 100 slots" in said and "--max" in said


def test_a_backfill_time_that_is_not_iso_is_a_usage_error(
    home: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["schedules", "backfill", "hourly", "--from", "yesterday", "--to", "now", *home])

    assert code == 2
    assert "--from 'yesterday' is not an ISO-8601 time" in capsys.readouterr().err


def test_triggers_show_lists_a_workflows_schedule_and_its_run_counts(
    home: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # When the triggers of a workflow that never ran are shown
    code = main(["triggers", "show", "hourly", *home])

    # Then its schedule is listed, with no flow control and no runs counted
    said = capsys.readouterr().out
    assert code == 0
    assert '"cron_expression": "0 * * * *"' in said and "(none)" in said
    assert "last 0 run(s)" in said


def test_triggers_show_of_an_unknown_workflow_names_it(
    home: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["triggers", "show", "nope", *home, "--json"])

    assert code != 0
    assert "workflow nope not found" in json.loads(capsys.readouterr().out)["error"]
