"""`langorch dev`'s state outlives the stack: stop it, start it again on the same home.

The home's SQLite file and bucket folder hold it; the emulator runs on free loopback ports.
(The crash case — SIGKILL of a `langorch dev` process with runs in flight — is
``test_dev_restart.py``.)
"""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime
from pathlib import Path

import pytest

from langorch.domain.runs import RunRecord, TimelineEvent, TimelineEventType
from langorch.local.stack import HomeLayoutError, PortBusyError, free_port, start_local_stack
from tests.support.records import a_run


def test_runs_files_secrets_schedules_and_log_lines_survive_a_restart(tmp_path: Path) -> None:
    # Given a stack that stored a run with its timeline, a dropped file, a secret, a schedule
    # and a log line, then stopped
    home = tmp_path / ".langorch"
    first = start_local_stack(home=home, port=free_port(), examples=None)
    try:
        container = first.container
        run, _ = container.runs.create_run(_run("run-kept"))
        container.runs.append_events(run.run_id, [_event(1), _event(2)])
        source = tmp_path / "a b+c.txt"
        source.write_bytes(b"hi")
        container.bucket.put("in/a b+c.txt", source)
        container.secrets.put_json("probe/secret", {"value": "s3cret"})
        container.schedules.put("probe", "cron(0 9 ? * MON *)", "UTC", {"x": 1})
        container.logs.put(
            "/aws/lambda/probe", "s1", [(1_000, json.dumps({"run_id": "run-kept", "n": 1}))]
        )
        signing_key = container.secrets.get_json(first.settings.link_signing_secret)
    finally:
        first.stop()

    # When a new stack starts on the same home (another emulator port)
    second = start_local_stack(home=home, port=free_port(), examples=None)
    try:
        container = second.container
        # Then everything is there, unchanged
        assert container.runs.get_run("run-kept").workflow_id == "probe"
        assert [e.seq for e in container.runs.get_timeline("run-kept")] == [1, 2]
        assert container.files.read(second.settings.bucket, "in/a b+c.txt", max_bytes=10)[0] == (
            b"hi"
        )
        assert container.secrets.get_json("probe/secret") == {"value": "s3cret"}
        assert container.secrets.get_json(second.settings.link_signing_secret) == signing_key
        assert [s.name for s in container.schedules.list()] == ["probe"]
        assert len(container.logs.lines_for_run("run-kept", ["/aws/lambda/probe"])) == 1
    finally:
        second.stop()


def test_a_home_of_the_previous_layout_is_refused_with_the_fix(tmp_path: Path) -> None:
    # Given a home the journaled emulator wrote (its state only in state/emulator.journal)
    home = tmp_path / ".langorch"
    (home / "state").mkdir(parents=True)
    (home / "state" / "emulator.journal").write_text('{"environ": {}}\n')
    # When a stack starts on it
    with pytest.raises(HomeLayoutError) as refused:
        start_local_stack(home=home, port=free_port(), examples=None)
    # Then it is refused in one line naming the file and the way out, and nothing was emptied
    message = str(refused.value)
    assert "\n" not in message and "emulator.journal" in message and "mv " in message
    assert (home / "state" / "emulator.journal").read_text() == '{"environ": {}}\n'
    assert not (home / "langorch.db").exists()


def _run(run_id: str) -> RunRecord:
    return a_run(run_id, workflow_id="probe", at=datetime(2026, 1, 1, tzinfo=UTC))


def _event(seq: int) -> TimelineEvent:
    return TimelineEvent(
        seq=seq, at=datetime(2026, 1, 1, tzinfo=UTC), type=TimelineEventType.step_finished
    )


def test_a_busy_gateway_port_fails_at_once_naming_the_option(tmp_path: Path) -> None:
    # Given something listening on the port asked for the gateway
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # When a stack is started on it
        with pytest.raises(PortBusyError) as raised:
            start_local_stack(home=tmp_path, port=free_port(), gateway_port=port)
    # Then it fails before starting anything, naming the port and the option to change it
    assert f"127.0.0.1:{port}" in str(raised.value)
    assert "--port" in str(raised.value)
    assert not (tmp_path / "stack.json").exists()


def test_a_busy_emulator_port_fails_at_once_naming_the_option(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(PortBusyError) as raised:
            start_local_stack(home=tmp_path, port=port)
    assert "--emulator-port" in str(raised.value)


def test_langorch_dev_on_a_busy_port_exits_at_once_with_the_reason_and_the_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from langorch.cli.main import main

    (tmp_path / "none").mkdir()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # When `langorch dev` is asked for the taken port
        code = main(
            [
                "dev",
                "--ready-only",
                "--port",
                str(port),
                "--emulator-port",
                str(free_port()),
                "--home",
                str(tmp_path / "home"),
                "--examples",
                str(tmp_path / "none"),
            ]
        )
    # Then it exits non-zero, saying which port is taken and how to pick another
    err = capsys.readouterr().err
    assert code != 0
    assert f"127.0.0.1:{port}" in err and "--port PORT" in err


def test_what_runs_call_is_up_before_in_flight_runs_resume(tmp_path: Path) -> None:
    # Given a home with a run left in flight (queued, its execution gone with the last stack)
    home = tmp_path / ".langorch"
    first = start_local_stack(home=home, port=free_port(), examples=None)
    try:
        first.container.runs.create_run(_run("run-in-flight"))
    finally:
        first.stop()
    seen: dict[str, object] = {}

    def start_tools(stack: object) -> None:
        # What the stack looked like when the tool servers would start
        seen["recovered"] = list(getattr(stack, "recovered", []))
        seen["gateway"] = getattr(stack, "gateway_url", None)

    # When the stack starts again with tool servers to start
    second = start_local_stack(
        home=home, port=free_port(), examples=None, before_recovery=start_tools
    )
    try:
        # Then they started before any run resumed and before the gateway took a click, and the
        # run was recovered after
        assert seen == {"recovered": [], "gateway": None}
        assert second.recovered == ["run-in-flight"]
    finally:
        second.stop()


def test_langorch_dev_says_the_model_limits_it_runs_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from langorch.cli.main import main

    # Given a model limit in the environment
    (tmp_path / "none").mkdir()
    monkeypatch.setenv("LANGORCH_MODEL_LIMITS", '{"offline": {"concurrency": 1}}')
    # When `langorch dev` starts
    code = main(
        [
            "dev",
            "--ready-only",
            "--port",
            str(free_port()),
            "--emulator-port",
            str(free_port()),
            "--console-port",
            "0",
            "--home",
            str(tmp_path / "home"),
            "--examples",
            str(tmp_path / "none"),
        ]
    )
    # Then its banner names them and where they came from
    out = capsys.readouterr().out
    assert code == 0
    assert '  model limits  {"offline": {"concurrency": 1}}  (LANGORCH_MODEL_LIMITS)' in out
