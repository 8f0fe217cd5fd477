"""The local functions' Lambda-like sandboxes: one invocation at a time each, a pool per function.

The handlers here are small files written by the tests (a ``functions``-like folder of its
own), run by the same :class:`~langorch.local.lambdas.Dispatcher` that ``langorch dev`` uses.
"""

from __future__ import annotations

import json
import textwrap
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from langorch.local.lambdas import FUNCTIONS, Dispatcher

TRIGGER = FUNCTIONS["trigger"]

HANDLER = """
import json, os, time
from pathlib import Path

CALLS = []  # a module global, as Powertools' app.current_event is one


def handler(event, context):
    CALLS.append(event.get("n"))
    if event.get("hold"):
        # Held until the test lets go (a file), so two invocations overlap for sure.
        Path(event["hold"], f"in-{event['n']}").write_text(str(os.getpid()))
        deadline = time.monotonic() + 30
        while not Path(event["hold"], "go").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
    if event.get("fail"):
        raise KeyError("no such thing")
    return {
        "pid": os.getpid(),
        "calls": list(CALLS),
        "request_id": context.aws_request_id,
        "setting": os.environ.get("LANGORCH_RUNS_TABLE"),
    }
"""


@pytest.fixture
def dispatcher(tmp_path: Path) -> Iterator[Dispatcher]:
    functions = tmp_path / "sandboxed_functions"
    (functions / "trigger").mkdir(parents=True)
    (functions / "__init__.py").write_text("")
    (functions / "trigger" / "__init__.py").write_text("")
    (functions / "trigger" / "handler.py").write_text(textwrap.dedent(HANDLER))
    running = Dispatcher(
        functions_dir=functions, environment={"LANGORCH_RUNS_TABLE": "runs-of-this-stack"}
    )
    yield running
    running.uninstall()


def _wait_for(path: Path, count: int) -> None:
    deadline = time.monotonic() + 30
    while len(list(path.glob("in-*"))) < count:
        assert time.monotonic() < deadline, "the invocations did not start"
        time.sleep(0.02)


def test_overlapping_invocations_run_in_different_sandboxes(dispatcher: Dispatcher, tmp_path):
    # Given two invocations of one function that are both running at the same moment
    hold = tmp_path / "hold"
    hold.mkdir()
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [
            pool.submit(dispatcher.call, TRIGGER, {"n": n, "hold": str(hold)}) for n in (1, 2)
        ]
        _wait_for(hold, 2)
        (hold / "go").write_text("")
        first, second = (f.result(timeout=60) for f in futures)

    # Then each ran in its own sandbox: its own process, its own module globals
    assert first["pid"] != second["pid"]
    assert first["calls"] == [1]
    assert second["calls"] == [2]
    assert first["request_id"] != second["request_id"]


def test_a_sandbox_is_reused_warm_and_gets_the_functions_environment(dispatcher: Dispatcher):
    # Given one invocation finished
    first = dispatcher.call(TRIGGER, {"n": 1})

    # When the next comes after it
    second = dispatcher.call(TRIGGER, {"n": 2})

    # Then it runs in the same (warm) sandbox, whose module kept its state, as Lambda's does
    assert second["pid"] == first["pid"]
    assert second["calls"] == [1, 2]
    assert second["setting"] == "runs-of-this-stack"


def test_a_handler_exception_is_answered_as_lambdas_error_payload(dispatcher: Dispatcher):
    # When the handler raises
    answer = dispatcher.invoke(TRIGGER, {"n": 1, "fail": True})

    # Then the answer is Lambda's: an Unhandled function error named after the exception
    assert answer.function_error == "Unhandled"
    payload = json.loads(answer.payload)
    assert payload["errorType"] == "KeyError"
    assert "no such thing" in payload["errorMessage"]


def test_an_invocation_past_its_timeout_is_a_timeout_error(dispatcher: Dispatcher, tmp_path):
    # Given an invocation held for longer than the function's timeout
    hold = tmp_path / "never"
    hold.mkdir()

    # When it is invoked with a one-second timeout
    answer = dispatcher.invoke(TRIGGER, {"n": 1, "hold": str(hold)}, timeout=1)

    # Then it fails as Lambda reports a timeout, and the next invocation gets a fresh sandbox
    assert json.loads(answer.payload)["errorType"] == "Sandbox.Timedout"
    (hold / "go").write_text("")
    assert dispatcher.call(TRIGGER, {"n": 2})["calls"] == [2]
