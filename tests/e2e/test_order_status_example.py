"""The order_status example as `make dev` runs it: the example's MCP server started and
registered as the tool ``orders`` (its token in the local Secrets Manager), then a run started
from the CLI calls it through the tool loop, and ``runs show`` tells each call."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from langorch.cli.main import main
from langorch.composition.bootstrap import build_container
from langorch.local.example_tools import ExampleTools, start_example_tools
from langorch.local.stack import LocalStack, free_port, start_local_stack
from tests.support.cli import last_document as _result
from tests.support.stacks import EXAMPLES


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalStack, ExampleTools]]:
    # `langorch dev` in this process; the CLI finds its stack file from the working directory.
    home = tmp_path_factory.mktemp("order_status") / ".langorch"
    cwd = os.getcwd()
    os.chdir(home.parent)
    stack = start_local_stack(home=home, port=free_port(), examples=EXAMPLES)
    tools = start_example_tools(stack.settings, EXAMPLES)
    yield stack, tools
    tools.stop()
    stack.stop()
    os.chdir(cwd)


def langorch(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[Any, str]:
    """The command's JSON document, and everything printed (the handlers run in this process
    and print their log lines to the same stdout)."""
    code = main([*args, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return _result(captured.out), captured.out + captured.err


def test_the_example_run_calls_the_order_desk_and_shows_each_call(
    dev: tuple[LocalStack, ExampleTools],
    capsys: pytest.CaptureFixture[str],
) -> None:
    stack, tools = dev
    # (every example's tool server is started: the refund desk's too)
    assert list(tools.registered) == ["orders", "refunds"]
    container = build_container(stack.settings)
    assert [s.name for s in container.tool_servers.list()] == ["orders", "refunds"]

    started, printed = langorch(capsys, "runs", "start", "order_status", "--wait")
    run_id = started["runs"][0]["run"]["run_id"]
    shown, shown_text = langorch(capsys, "runs", "show", run_id)

    assert shown["run"]["status"] == "succeeded"
    assert shown["run"]["outputs"]["status_text"].startswith("order A100: out for delivery")
    calls = [e["detail"] for e in shown["timeline"] if e["type"] == "tool_called"]
    assert [(c["tool"], c["outcome"]) for c in calls] == [
        ("lookup_order", "ok"),
        ("estimate_delivery", "ok"),
    ]
    # And the function's log lines, read back as a person would (`runs logs`: the handlers run
    # in sandbox processes, their lines shipped to the emulator's CloudWatch Logs in the
    # background, a moment after the run ended at most), name each call
    deadline = time.monotonic() + 30
    while True:
        logs, logs_text = langorch(capsys, "runs", "logs", run_id)
        logged = [
            row["fields"] for row in logs["lines"] if row["fields"].get("message") == "tool called"
        ]
        if len(logged) >= 2 or time.monotonic() > deadline:
            break
    assert [(e["run_id"], e["step_id"], e["tool"]) for e in logged] == [
        (run_id, "track", "lookup_order"),
        (run_id, "track", "estimate_delivery"),
    ]
    token = container.secrets.get_json("langorch/tools/orders")["value"].split()[-1]
    assert token not in printed + shown_text + logs_text


def test_starting_the_order_desk_leaves_the_terminal_to_langorch(tmp_path: Path):
    # Given a process as `langorch dev` is before it starts the example tool servers: nothing
    # configured the root logger (a fresh interpreter, not this test's, whose pytest did)
    script = tmp_path / "start.py"
    script.write_text(
        "import logging, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})\n"
        "from order_desk import load_order_desk\n"
        "running = load_order_desk().serve('a-token')\n"
        "logging.getLogger('some.library').info('an INFO line of some library')\n"
        "running.stop()\n"
        "print('served', running.url.startswith('http://127.0.0.1:'))\n"
    )
    # When it starts the order desk (the MCP SDK's server) and a library logs at INFO
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    # Then the server served, and neither the SDK's "session manager started" nor the other
    # library's INFO line reached the terminal (the SDK configures the root logger)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "served True"
    assert "StreamableHTTP" not in done.stderr and "INFO line" not in done.stderr, done.stderr
