"""What `langorch dev` shows a person: one line per event; JSON lines go to the log file."""

from __future__ import annotations

import io
import json

from langorch.local._sandbox import LineRouter
from langorch.local.terminal import TerminalSink, human_line


def test_a_failed_run_reads_as_one_line_with_its_reason():
    # Given the record the runner logs when a run fails
    record = {
        "level": "ERROR",
        "message": "run failed",
        "run_id": "run-1",
        "workflow_id": "invoice",
        "error_type": "StepTimeoutError",
        "error_message": "step fetch took over 30 s",
    }

    # Then a person reads the run, the workflow and why
    assert human_line(record) == (
        "run-1 (invoice) failed: StepTimeoutError: step fetch took over 30 s"
    )


def test_segment_outcomes_read_as_what_the_run_does_next():
    assert human_line({"message": "segment ended", "run_id": "r", "status": "succeeded"}) == (
        "r finished: succeeded"
    )
    assert human_line(
        {"message": "segment ended", "run_id": "r", "status": "waiting_approval"}
    ) == ("r waiting for approval")
    assert (
        human_line({"message": "segment ended", "run_id": "r", "segment": 2, "status": "continue"})
        == "r segment 2 done, continuing"
    )
    # a failed segment says nothing here: "run failed" carries the reason
    assert human_line({"message": "segment ended", "run_id": "r", "status": "failed"}) is None


def test_records_that_are_not_events_stay_in_the_log_file():
    assert human_line({"message": "lease taken", "run_id": "r"}) is None


def test_the_sink_prints_only_the_events_of_an_invocation():
    # Given an invocation that logged an event, a detail and a non-JSON line
    out = io.StringIO()
    lines = [
        (1_700_000_000_000, json.dumps({"message": "run started", "run_id": "run-9"})),
        (1_700_000_000_001, json.dumps({"message": "lease taken", "run_id": "run-9"})),
        (1_700_000_000_002, "not json"),
    ]

    # When the sink gets its lines
    TerminalSink(out)("langorch-trigger", "req-1", lines)

    # Then one short line is printed, stamped with its time
    printed = out.getvalue().splitlines()
    assert len(printed) == 1
    assert printed[0].endswith("  run-9 started")


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
