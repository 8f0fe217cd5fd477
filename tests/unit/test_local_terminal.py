"""What `langorch dev` shows a person: one line per event; JSON lines go to the log file."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from langorch.adapters.sqlite._db import Database
from langorch.adapters.sqlite.runs import SqliteRuns
from langorch.domain.runs import RunError, RunRecord, TimelineEvent, TimelineEventType
from langorch.local._sandbox import LineRouter
from langorch.local.terminal import TerminalSink, TimelineFollower, human_line, timeline_line
from tests.support.records import a_run

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _event(seq: int, type_: TimelineEventType, **fields: Any) -> TimelineEvent:
    return TimelineEvent(seq=seq, at=T0 + timedelta(seconds=seq), type=type_, **fields)


def test_a_failed_run_reads_as_one_line_with_the_step_and_the_reason() -> None:
    # Given the run_finished event a failed run ends its timeline with
    error = RunError(step_id="fetch", type="StepTimeoutError", message="step fetch took 31 s")
    event = _event(9, TimelineEventType.run_finished, detail={"status": "failed"}, error=error)
    # Then a person reads the run, the workflow, where and why
    assert timeline_line("run-1", "invoice", event) == (
        "run-1 (invoice) failed at fetch: StepTimeoutError: step fetch took 31 s"
    )


def test_each_event_a_person_follows_reads_as_what_happened() -> None:
    line = timeline_line
    assert line("r", "w", _event(1, TimelineEventType.run_started)) == "r (w) started"
    assert line("r", "w", _event(2, TimelineEventType.approval_requested, step_id="review")) == (
        "r (w) asks for approval at review"
    )
    decided = _event(
        3,
        TimelineEventType.approval_decided,
        step_id="review",
        actor="ana@example.com",
        detail={"decision": "approved"},
    )
    assert line("r", "w", decided) == "r (w) review approved by ana@example.com"
    cancelled = _event(4, TimelineEventType.run_cancelled, actor="cli", detail={"reason": "typo"})
    assert line("r", "w", cancelled) == "r (w) cancelled by cli: typo"
    finished = _event(5, TimelineEventType.run_finished, detail={"status": "succeeded"})
    assert line("r", "w", finished) == "r (w) finished: succeeded"


def test_a_pause_and_its_resume_read_as_who_did_what_and_why() -> None:
    # Given a run paused while it waited on its approval, then resumed (issue 28 item 3)
    paused = _event(
        1,
        TimelineEventType.run_paused,
        step_id="review",
        actor="cli:alice",
        detail={"reason": "month-end freeze", "while": "waiting_approval"},
    )
    resumed = _event(2, TimelineEventType.run_resumed, actor="console:bob")
    # Then the terminal says so, each in one line
    assert timeline_line("r", "w", paused) == (
        "r (w) paused by cli:alice (waiting at review): month-end freeze"
    )
    assert timeline_line("r", "w", resumed) == "r (w) resumed by console:bob"


def test_steps_and_segments_stay_in_the_timeline_not_the_terminal() -> None:
    for kind in (TimelineEventType.step_started, TimelineEventType.segment_ended):
        assert timeline_line("r", "w", _event(1, kind, step_id="s")) is None


def test_the_follower_prints_every_runs_events_once_whoever_stored_them(
    sqlite_db: Database,
) -> None:
    # Given the local runs store, a follower started on it, and a run another process started
    runs = SqliteRuns(sqlite_db)
    out = io.StringIO()
    follower = TimelineFollower(runs, out)
    runs.create_run(_run("run-7"))
    runs.append_events("run-7", [_event(1, TimelineEventType.run_started)])
    # When it follows, and the same event is stored again (a replayed segment), and the run ends
    follower.pump()
    runs.append_events("run-7", [_event(1, TimelineEventType.run_started)])
    runs.append_events(
        "run-7",
        [_event(2, TimelineEventType.run_cancelled, actor="cli", detail={"reason": "by hand"})],
    )
    follower.pump()
    # Then each event is one line, in order, never twice
    printed = [line.split("  ", 1)[1] for line in out.getvalue().splitlines()]
    assert printed == ["run-7 (probe) started", "run-7 (probe) cancelled by cli: by hand"]


def test_the_follower_starts_from_now_not_from_the_history(sqlite_db: Database) -> None:
    runs = SqliteRuns(sqlite_db)
    runs.create_run(_run("old"))
    runs.append_events("old", [_event(1, TimelineEventType.run_started)])
    out = io.StringIO()
    assert TimelineFollower(runs, out).pump() == [] and out.getvalue() == ""


def _run(run_id: str) -> RunRecord:
    return a_run(run_id, workflow_id="probe", at=T0)


def test_a_segment_that_failed_and_will_be_retried_is_a_log_line() -> None:
    record = {
        "message": "segment failed",
        "run_id": "run-1",
        "workflow_id": "invoice",
        "error_type": "StorageError",
        "error_message": "the store was busy",
    }
    assert human_line(record) == (
        "run-1 (invoice) segment failed (retried or failed by the state machine): "
        "StorageError: the store was busy"
    )


def test_records_that_are_not_events_stay_in_the_log_file():
    assert human_line({"message": "lease taken", "run_id": "r"}) is None
    assert human_line({"message": "run started", "run_id": "r"}) is None  # the timeline says it


def test_the_sink_prints_only_the_events_of_an_invocation():
    # Given an invocation that logged an event, a detail and a non-JSON line
    out = io.StringIO()
    lines = [
        (
            1_700_000_000_000,
            json.dumps(
                {
                    "message": "webhook rejected",
                    "workflow_id": "w",
                    "status": 401,
                    "reason": "bad signature",
                }
            ),
        ),
        (1_700_000_000_001, json.dumps({"message": "lease taken", "run_id": "run-9"})),
        (1_700_000_000_002, "not json"),
    ]

    # When the sink gets its lines
    TerminalSink(out)("langorch-trigger", "req-1", lines)

    # Then one short line is printed, stamped with its time
    printed = out.getvalue().splitlines()
    assert len(printed) == 1
    assert printed[0].endswith("  webhook for w refused (401): bad signature")


def test_json_lines_go_to_the_file_and_text_lines_to_the_terminal():
    terminal, log_file = io.StringIO(), io.StringIO()
    router = LineRouter(terminal, log_file)

    # When a log record, a metric and a notice are written, the record in two pieces
    router.write('{"level": "INFO", "message": "run ')
    router.write('started"}\n{"_aws": {}}\napproval email to a@example.com: http://link\n')

    # Then the JSON lines are in the file only, the notice on the terminal only
    assert log_file.getvalue().splitlines() == [
        '{"level": "INFO", "message": "run started"}',
        '{"_aws": {}}',
    ]
    assert terminal.getvalue() == "approval email to a@example.com: http://link\n"


def test_verbose_shows_the_json_lines_on_the_terminal_too():
    terminal, log_file = io.StringIO(), io.StringIO()
    LineRouter(terminal, log_file, echo_json=True).write('{"message": "x"}\n')
    assert terminal.getvalue() == log_file.getvalue() == '{"message": "x"}\n'
