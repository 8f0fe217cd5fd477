"""What a newcomer meets at the command line (issue 16): errors that say what to do, flags that
are refused rather than ignored, output a person can read.

Every command runs through ``main(argv)`` against a moto server found through a local stack file,
exactly as after ``make dev``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from langorch.composition.container import Container
from langorch.config import Settings
from langorch.domain.runs import RunError, TimelineEvent, TimelineEventType
from tests.support.cli import emulator_home, runner, use_stack
from tests.support.records import a_run

DEFINITIONS = """
blocks:
  - block_id: shout
    name: Shout
    input_keys: [text]
    output_keys: [loud]
    prompt_template: "Shout {text}"
workflows:
  - plan_id: greet
    memory: false
    steps:
      - {step_id: hello, kind: transform, transform: {greeting: "'hi'"}}
  - plan_id: boom
    memory: false
    steps:
      - {step_id: divide, kind: transform, transform: {x: "1 // 0"}, max_retries: 0}
"""

A_MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:langorch-runs"


@pytest.fixture
def home(endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh emulator, and the local stack file `make dev` would have written for it."""
    return emulator_home(endpoint, tmp_path / ".langorch", monkeypatch)


@pytest.fixture
def langorch(home: Path, capsys: pytest.CaptureFixture[str]) -> Any:
    return runner(capsys)


@pytest.fixture
def definitions(langorch: Any, tmp_path: Path) -> str:
    path = tmp_path / "definitions.yaml"
    path.write_text(DEFINITIONS)
    assert langorch("workflows", "put", str(path)).code == 0
    return str(path)


# --- errors that say what was wrong and how to fix it -------------------------------------


def test_a_local_run_of_a_workflow_the_files_do_not_define_names_those_they_do(
    langorch: Any, tmp_path: Path
):
    path = tmp_path / "definitions.yaml"
    path.write_text(DEFINITIONS)

    result = langorch("runs", "start", "nope", "--local", str(path))

    assert result.code == 2
    assert "--local files define the workflows greet, boom, not nope" in result.stderr
    assert "workflows put" not in result.stderr  # nothing to register: --local reads the files


def test_a_local_review_loop_says_what_was_asked_last_round_and_ends_failed_when_exhausted(
    langorch: Any,
):
    # Given the blog review example, rejected every round from the command line
    example = Path(__file__).resolve().parents[2] / "examples" / "blog_review"
    result = langorch(
        "runs",
        "start",
        "--local",
        str(example / "definitions.yaml"),
        "--reject",
        "--comment",
        "shorter, please",
        "--input",
        '{"commit_message": "Add S3 offload"}',
    )

    # Then rounds 2 and 3 say what was asked and what changed, and the run ends failed at
    # abandon with the loop shown as exhausted (before: published, succeeded)
    assert result.code == 1, result.stderr
    assert (
        '  round 2: cli rejected round 1 and asked: "shorter, please"; '
        "changed since: title, body" in result.stderr
    )
    assert "  round 3: cli rejected round 2" in result.stderr
    assert "-> exhausted  exhausted=after 3 rounds -> abandon" in result.stdout
    assert " publish " not in result.stdout
    assert "end                               failed" in result.stdout


def test_dev_with_an_examples_folder_that_does_not_exist_refuses_to_start_without_them(
    langorch: Any, tmp_path: Path
):
    # (was: a stack with no workflows, the typo unmentioned)
    result = langorch("dev", "--examples", str(tmp_path / "exmaples"), "--ready-only")

    assert result.code == 2
    assert f"--examples {tmp_path / 'exmaples'}: no such folder" in result.stderr
    assert "langorch dev is ready" not in result.stdout


@pytest.mark.parametrize("flag", [["--repeat", "2"], ["--max-sleep", "1"]])
def test_start_on_a_state_machine_refuses_the_flags_of_a_run_driven_here(
    langorch: Any, definitions: str, home: Path, endpoint: str, flag: list[str]
):
    # Given a stack whose state machine runs the runs (nothing is started: the flag is refused)
    use_stack(home, endpoint, state_machine_arn=A_MACHINE)

    result = langorch("runs", "start", "greet", *flag)

    assert result.code == 2
    assert f"{flag[0]} applies when this command drives the run" in result.stderr


def test_blocks_put_stores_only_the_blocks_and_says_where_the_workflows_go(
    langorch: Any, tmp_path: Path
):
    path = tmp_path / "both.yaml"
    path.write_text(DEFINITIONS)

    result = langorch("blocks", "put", str(path), "--json")

    assert result.code == 0, result.stderr
    assert [(r["kind"], r["id"]) for r in result.json()["results"]] == [("block", "shout")]
    assert result.json()["skipped_workflows"] == ["greet", "boom"]
    assert f"store them with `langorch workflows put {path}`" in result.stderr
    assert langorch("workflows", "list", "--json").json()["workflows"] == []


# --- output a person can read ---------------------------------------------------------------


def _pending(container: Container, title: str) -> str:
    from langorch.domain.approvals.record import new_approval

    approval = new_approval(
        run_id="run-0123456789abcdef0123456789abcdef",
        workflow_id="blog_review",
        request={
            "interrupt_id": "i-1",
            "step_id": "review",
            "title": title,
            "approvers": ["editor@example.com", "chief.editor@example.com"],
            "timeout_seconds": 3600,
        },
        now=datetime(2026, 11, 22, 9, 0, tzinfo=UTC),
    )
    container.approvals.put_pending(approval, "task-token")
    return approval.approval_id


def test_approvals_list_fits_the_terminal_and_wide_shows_everything(
    langorch: Any, endpoint: str, monkeypatch: pytest.MonkeyPatch
):
    title = "Review: Draft 3 of a long post about durable checkpoints in DynamoDB and S3"
    approval_id = _pending(Container(Settings(endpoint_url=endpoint)), title)
    monkeypatch.setenv("COLUMNS", "100")

    fitted = langorch("approvals", "list")
    wide = langorch("approvals", "list", "--wide")

    assert fitted.code == wide.code == 0
    assert max(len(line) for line in fitted.stdout.splitlines()) <= 100, fitted.stdout
    assert approval_id in fitted.stdout  # ids stay whole: they are typed into `approvals show`
    assert "…" in fitted.stdout and title not in fitted.stdout
    assert title in wide.stdout and "run-0123456789abcdef0123456789abcdef" in wide.stdout


def test_start_and_show_json_say_why_a_run_has_no_execution(langorch: Any, definitions: str):
    # Given a run driven by the command that started it (this stack has no state machine)
    started = langorch("runs", "start", "greet", "--json")
    run_id = started.json()["runs"][0]["run"]["run_id"]

    shown = langorch("runs", "show", run_id, "--json").json()
    text = langorch("runs", "show", run_id).stdout

    assert "execution_arn" not in started.json()["runs"][0]["run"]
    assert started.json()["runs"][0]["execution"]["reason"] in shown["execution"]["reason"]
    assert "execution_arn" not in shown["run"]
    assert shown["execution"]["arn"] is None
    assert "driven by the langorch command that started it" in shown["execution"]["reason"]
    assert "no Step Functions execution: this stack has no state machine" in text


def test_logs_of_a_failed_step_give_the_reason(langorch: Any, definitions: str, endpoint: str):
    # Given a failed run and the runner's line for its failed step, which names only the
    # error's type (as the runner's Powertools logger writes it)
    started = langorch("runs", "start", "boom", "--json")
    run_id = started.json()["runs"][0]["run"]["run_id"]
    logs = Container(Settings(endpoint_url=endpoint)).client("logs")
    group, stream = "/aws/lambda/langorch-run-segment", "2026/11/23/[$LATEST]abc"
    logs.create_log_group(logGroupName=group)
    logs.create_log_stream(logGroupName=group, logStreamName=stream)
    line = {
        "level": "ERROR",
        "message": "step failed",
        "run_id": run_id,
        "step_id": "divide",
        "error_type": "TemplateError",
    }
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    logs.put_log_events(
        logGroupName=group,
        logStreamName=stream,
        logEvents=[{"timestamp": now_ms, "message": json.dumps(line)}],
    )

    text = langorch("runs", "logs", run_id)
    document = langorch("runs", "logs", run_id, "--json").json()

    assert text.code == 0, text.stderr
    assert "step failed: TemplateError: expression '1 // 0' failed: ZeroDivisionError" in (
        text.stdout
    )
    assert document["lines"][0]["reason"].startswith("TemplateError: expression '1 // 0'")


def test_a_timed_out_approval_reads_as_no_decision_with_how_long_it_waited():
    from langorch.cli.timeline import render_run
    from langorch.domain.runs import RunStatus

    at = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
    events = [
        TimelineEvent(
            seq=1,
            at=at,
            segment=1,
            type=TimelineEventType.approval_requested,
            step_id="review",
            detail={"approvers": ["a@example.com"], "iteration": 1},
        ),
        TimelineEvent(
            seq=2,
            at=at + timedelta(seconds=3600),
            segment=2,
            type=TimelineEventType.approval_timed_out,
            step_id="review",
            detail={"decision": "timed_out", "comment": ""},
        ),
    ]
    run = a_run(
        workflow_id="wf",
        at=at,
        status=RunStatus.failed,
        error=RunError(type="ApprovalTimedOut", message="nobody decided"),
    )

    text = render_run(run, events)

    assert "by unknown" not in text
    assert "no decision: timed out after 60 min" in text


def test_runs_start_records_who_started_it_and_refuses_what_is_not_an_address(
    langorch: Any, tmp_path: Path
):
    # (separation of duties needs the run's starter; before, the CLI recorded none)
    path = tmp_path / "definitions.yaml"
    path.write_text(DEFINITIONS)

    refused = langorch("runs", "start", "greet", "--local", str(path), "--started-by", "ann")
    started = langorch(
        "runs", "start", "greet", "--local", str(path), "--started-by", "ann@example.com", "--json"
    )

    assert refused.code == 2
    assert "--started-by 'ann' is not an email address" in refused.stderr
    assert started.code == 0, started.stderr
    assert '"started_by": "ann@example.com"' in started.stdout
