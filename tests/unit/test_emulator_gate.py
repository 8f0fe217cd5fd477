"""The emulator's gate: `langorch dev` is ready before moto's interpreter is warm, and a Step
Functions call made meanwhile waits for the run state machine instead of failing (issue 25)."""

from __future__ import annotations

import json
import threading
from typing import Any

from langorch.local.emulator import ExecutionsGate


class App:
    """moto's app, as the gate sees it: records what reached it."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        self.calls.append(environ.get("HTTP_X_AMZ_TARGET", environ["PATH_INFO"]))
        start_response("200 OK", [])
        return [b"{}"]


def call(gate: ExecutionsGate, target: str | None) -> tuple[str, bytes]:
    environ = {"PATH_INFO": "/", **({"HTTP_X_AMZ_TARGET": target} if target else {})}
    status: list[str] = []
    body = b"".join(gate(environ, lambda s, _headers: status.append(s)))
    return status[0], body


def test_a_start_execution_made_before_the_gate_opens_goes_through_once_it_opens():
    # Given a closed gate, and a StartExecution waiting at it
    app = App()
    gate = ExecutionsGate(app, wait_seconds=600)
    answers: list[tuple[str, bytes]] = []
    waiting = threading.Thread(
        target=lambda: answers.append(call(gate, "AWSStepFunctions.StartExecution"))
    )
    waiting.start()

    # When the state machine exists and the gate opens
    gate.open()
    waiting.join()

    # Then the call reached moto and was answered as moto answers
    assert answers == [("200 OK", b"{}")]
    assert app.calls == ["AWSStepFunctions.StartExecution"]


def test_a_call_kept_waiting_too_long_is_answered_with_an_error_the_sdks_retry():
    # Given a gate that stays closed longer than a call may wait
    app = App()
    gate = ExecutionsGate(app, wait_seconds=0)

    # When a Step Functions call arrives
    status, body = call(gate, "AWSStepFunctions.SendTaskSuccess")

    # Then it is answered 503 ServiceUnavailable (botocore retries it) without reaching moto
    assert status == "503 Service Unavailable"
    assert json.loads(body)["__type"] == "ServiceUnavailable"
    assert app.calls == []


def test_what_creates_the_state_machine_and_other_services_pass_a_closed_gate():
    # Given a closed gate
    app = App()
    gate = ExecutionsGate(app, wait_seconds=0)

    # When the warm-up creates the state machine, and other services are called
    answers = [
        call(gate, "AWSStepFunctions.CreateStateMachine"),
        call(gate, "AWSStepFunctions.ListStateMachines"),
        call(gate, None),  # IAM, moto's own API: no Step Functions target
    ]

    # Then each reached moto
    assert [status for status, _ in answers] == ["200 OK"] * 3
    assert app.calls == [
        "AWSStepFunctions.CreateStateMachine",
        "AWSStepFunctions.ListStateMachines",
        "/",
    ]


def test_when_the_warm_up_failed_a_waiting_call_is_told_why():
    # Given a gate opened with the warm-up's failure
    app = App()
    gate = ExecutionsGate(app, wait_seconds=600)
    gate.open("the local stack's state machine failed: EmulatorError: moved")

    # When a run is started
    status, body = call(gate, "AWSStepFunctions.StartExecution")

    # Then the answer says why, and nothing reached moto
    assert status == "503 Service Unavailable"
    assert "EmulatorError: moved" in json.loads(body)["message"]
    assert app.calls == []
