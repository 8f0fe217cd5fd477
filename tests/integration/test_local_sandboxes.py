"""The local functions' Lambda-like sandboxes: one invocation at a time each, a pool per function.

The handlers here are small files written by the tests (a ``functions``-like folder of its
own), run by the same :class:`~langorch.local.lambdas.Dispatcher` that ``langorch dev`` uses.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from langorch.local.lambdas import FUNCTIONS, Dispatcher
from tests.support.polling import wait_for

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
        "stream": context.log_stream_name,
        "setting": os.environ.get("LANGORCH_RUNS_TABLE"),
    }
"""


SANDBOX_STREAM = re.compile(r"\d{4}/\d{2}/\d{2}/\[\$LATEST\][0-9a-f]{32}")
"""A Lambda execution environment's log stream: ``YYYY/MM/DD/[$LATEST]<32 hex>``."""

Shipped = list[tuple[str, str, list[tuple[int, str]]]]


@pytest.fixture
def shipped() -> Shipped:
    """What the dispatcher handed its log sink: ``(function, stream, lines)`` per invocation."""
    return []


@pytest.fixture
def dispatcher(tmp_path: Path, shipped: Shipped) -> Iterator[Dispatcher]:
    functions = tmp_path / "sandboxed_functions"
    (functions / "trigger").mkdir(parents=True)
    (functions / "__init__.py").write_text("")
    (functions / "trigger" / "__init__.py").write_text("")
    (functions / "trigger" / "handler.py").write_text(textwrap.dedent(HANDLER))
    running = Dispatcher(
        functions_dir=functions,
        environment={"LANGORCH_RUNS_TABLE": "runs-of-this-stack"},
        log_sink=lambda function, stream, lines: shipped.append((function, stream, lines)),
    )
    yield running
    running.uninstall()


def _wait_for(path: Path, count: int) -> None:
    wait_for(lambda: len(list(path.glob("in-*"))) >= count, what=f"{count} invocations to start")


def test_overlapping_invocations_run_in_different_sandboxes(
    dispatcher: Dispatcher, tmp_path: Path, shipped: Shipped
):
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
    # And each writes its lines to its own stream, named as Lambda names an environment's
    assert first["stream"] != second["stream"]
    assert SANDBOX_STREAM.fullmatch(first["stream"])
    assert sorted(stream for _, stream, _ in shipped) == sorted([first["stream"], second["stream"]])


def test_a_sandbox_is_reused_warm_and_gets_the_functions_environment(dispatcher: Dispatcher):
    # Given one invocation finished
    first = dispatcher.call(TRIGGER, {"n": 1})

    # When the next comes after it
    second = dispatcher.call(TRIGGER, {"n": 2})

    # Then it runs in the same (warm) sandbox, whose module kept its state, as Lambda's does
    assert second["pid"] == first["pid"]
    assert second["calls"] == [1, 2]
    assert second["setting"] == "runs-of-this-stack"
    # And both invocations' lines go to the sandbox's one stream
    assert SANDBOX_STREAM.fullmatch(first["stream"])
    assert second["stream"] == first["stream"]


def test_each_invocation_ends_with_lambdas_report_line_in_its_sandboxs_stream(
    dispatcher: Dispatcher, shipped: Shipped
):
    # When a function is invoked
    answer = dispatcher.call(TRIGGER, {"n": 1})

    # Then the sink gets the invocation's lines to the sandbox's stream, REPORT last
    [(function, stream, lines)] = shipped
    assert (function, stream) == (TRIGGER, answer["stream"])
    report = re.fullmatch(
        r"REPORT RequestId: (\S+)\tDuration: (\d+\.\d\d) ms\tBilled Duration: (\d+) ms\t"
        r"Memory Size: 1024 MB\tMax Memory Used: (\d+) MB",
        lines[-1][1],
    )
    assert report is not None, lines[-1][1]
    assert report[1] == answer["request_id"]
    assert int(report[3]) >= float(report[2])
    assert int(report[4]) > 0


def test_a_handler_exception_is_answered_as_lambdas_error_payload(dispatcher: Dispatcher):
    # When the handler raises
    answer = dispatcher.invoke(TRIGGER, {"n": 1, "fail": True})

    # Then the answer is Lambda's: an Unhandled function error named after the exception
    assert answer.function_error == "Unhandled"
    payload = json.loads(answer.payload)
    assert payload["errorType"] == "KeyError"
    assert "no such thing" in payload["errorMessage"]


def test_an_invocation_past_its_timeout_is_a_timeout_error(dispatcher: Dispatcher, tmp_path):
    # Given a sandbox, and an invocation in it held for longer than the function's timeout
    before = dispatcher.call(TRIGGER, {"n": 0})
    hold = tmp_path / "never"
    hold.mkdir()

    # When it is invoked with a one-second timeout
    answer = dispatcher.invoke(TRIGGER, {"n": 1, "hold": str(hold)}, timeout=1)

    # Then it fails as Lambda reports a timeout, and the next invocation gets a fresh sandbox
    assert json.loads(answer.payload)["errorType"] == "Sandbox.Timedout"
    (hold / "go").write_text("")
    after = dispatcher.call(TRIGGER, {"n": 2})
    assert after["calls"] == [2]
    # And the fresh sandbox writes to a stream of its own, as a new Lambda environment does
    assert after["stream"] != before["stream"]
