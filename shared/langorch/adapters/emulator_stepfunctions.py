"""Step Functions at the local emulator, spoken over HTTP without boto3.

The embedded default's executions run on the emulator ``langorch dev`` serves (moto's Step
Functions interpreter, :mod:`langorch.local.emulator`). Importing boto3 and building a client
costs a CLI command about 0.25 s of its 0.3 s budget (issue 26: ``runs show`` took 0.36 s on a
quiet machine, most of it that); the five calls the ``Executions`` port makes are small JSON
requests (the Step Functions JSON 1.0 protocol), so this adapter makes them with the standard
library. The emulator checks no signature: a request names its service and region in a SigV4
``Authorization`` header's credential scope, as moto's server reads it, and signs nothing.
A deployed stack is reached through :class:`langorch.adapters.stepfunctions.StepFunctions`
(boto3, signed requests); both are held to the same contract suite.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from typing import Any

from langorch.domain.errors import NotFoundError, StorageError, TaskClosedError

_CLOSED = frozenset({"InvalidToken", "TaskTimedOut", "TaskDoesNotExist"})
_DATES = ("startDate", "stopDate")
ATTEMPTS = 3
"""Calls answered 503 (the emulator's gate while the run state machine warms up) are tried this
many times in all, as the SDKs' standard retry mode does."""


class EmulatorCallError(StorageError):
    """The emulator answered a Step Functions call with an error (``code`` names it)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


class EmulatorStepFunctions:
    """The run state machine's executions on the local emulator (the ``Executions`` port).

    Args:
        endpoint_url: the emulator (``http://127.0.0.1:PORT``).
        state_machine_arn: the run state machine (``None``: not configured).
        region: the region the emulator keeps the state machine in.
        timeout: seconds one request may take (the emulator's gate holds a call up to 20 s).
    """

    def __init__(
        self,
        endpoint_url: str,
        state_machine_arn: str | None,
        *,
        region: str,
        timeout: float = 30.0,
    ) -> None:
        self._url = endpoint_url.rstrip("/") + "/"
        self._arn = state_machine_arn
        self._region = region
        self._timeout = timeout

    @property
    def state_machine_arn(self) -> str:
        """The run state machine's ARN (``NotFoundError`` when none is configured)."""
        if not self._arn:
            raise NotFoundError("no run state machine is configured (LANGORCH_STATE_MACHINE_ARN)")
        return self._arn

    def execution_arn(self, run_id: str) -> str:
        """The ARN of the execution named ``run_id`` (derived, no call)."""
        return self.state_machine_arn.replace(":stateMachine:", ":execution:") + f":{run_id}"

    def start(self, run_id: str, payload: dict[str, Any]) -> tuple[str, bool]:
        """Start the execution named ``run_id``; starting it again is a no-op.

        Returns:
            The execution ARN and whether this call started it.
        """
        request = {"stateMachineArn": self.state_machine_arn, "name": run_id}
        try:
            response = self._call("StartExecution", {**request, "input": json.dumps(payload)})
        except EmulatorCallError as exc:
            if exc.code == "ExecutionAlreadyExists":
                return self.execution_arn(run_id), False
            raise StorageError(f"cannot start execution {run_id}: {exc}") from exc
        return str(response["executionArn"]), True

    def send_success(self, task_token: str, output: dict[str, Any]) -> None:
        """Resume the task waiting on ``task_token`` with ``output``.

        Raises:
            TaskClosedError: nothing waits on the token any more (timed out, ended, unknown).
        """
        try:
            self._call("SendTaskSuccess", {"taskToken": task_token, "output": json.dumps(output)})
        except EmulatorCallError as exc:
            if exc.code in _CLOSED:
                raise TaskClosedError(f"the approval's task is closed ({exc.code})") from exc
            raise StorageError(f"cannot resume the task ({exc.code})") from exc

    def send_failure(self, task_token: str, error: str, cause: str) -> None:
        """Fail the task waiting on ``task_token`` (``TaskClosedError`` when closed)."""
        request = {"taskToken": task_token, "error": error, "cause": cause[:32_000]}
        try:
            self._call("SendTaskFailure", request)
        except EmulatorCallError as exc:
            if exc.code in _CLOSED:
                raise TaskClosedError(f"the task is closed ({exc.code})") from exc
            raise StorageError(f"cannot fail the task ({exc.code})") from exc

    def stop(self, run_id: str, cause: str) -> None:
        """Stop the run's execution (a missing or ended execution is fine)."""
        try:
            request = {"executionArn": self.execution_arn(run_id), "cause": cause}
            self._call("StopExecution", request)
        except EmulatorCallError as exc:
            if exc.code == "ExecutionDoesNotExist":
                return
            raise StorageError(f"cannot stop execution {run_id}: {exc}") from exc

    def describe(self, run_id: str) -> dict[str, Any]:
        """The execution's status and times, as boto3 gives them (dates as ``datetime``).

        Raises:
            NotFoundError: there is no such execution.
        """
        try:
            request = {"executionArn": self.execution_arn(run_id)}
            described = self._call("DescribeExecution", request)
        except EmulatorCallError as exc:
            if exc.code == "ExecutionDoesNotExist":
                raise NotFoundError(f"no execution for run {run_id}") from exc
            raise StorageError(f"cannot describe execution {run_id}: {exc}") from exc
        for key in _DATES:
            if isinstance(described.get(key), int | float):
                described[key] = datetime.fromtimestamp(described[key], tz=UTC)
        return described

    def _call(self, operation: str, body: dict[str, Any]) -> dict[str, Any]:
        """One Step Functions call; 503s are tried again (:data:`ATTEMPTS`).

        Raises:
            EmulatorCallError: the emulator answered an error.
            StorageError: the emulator could not be reached.
        """
        day = time.strftime("%Y%m%d", time.gmtime())
        headers = {
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": f"AWSStepFunctions.{operation}",
            # Read by moto's server to route the call; the emulator verifies no signature.
            "Authorization": (
                f"AWS4-HMAC-SHA256 Credential=local/{day}/{self._region}/states/aws4_request, "
                "SignedHeaders=content-type;host;x-amz-target, Signature=unsigned"
            ),
        }
        data = json.dumps(body).encode("utf-8")
        attempt = 0
        while True:
            attempt += 1
            request = urllib.request.Request(  # noqa: S310 - the local emulator's endpoint
                self._url, data=data, headers=headers, method="POST"
            )
            try:
                with urllib.request.urlopen(request, timeout=self._timeout) as response:  # noqa: S310
                    answer: dict[str, Any] = json.loads(response.read() or b"{}")
                    return answer
            except urllib.error.HTTPError as exc:
                code, message = _error_of(exc)
                if exc.code == 503 and attempt < ATTEMPTS:
                    continue
                raise EmulatorCallError(code, message) from None
            except OSError as exc:
                raise StorageError(
                    f"cannot reach the AWS emulator at {self._url} ({operation}): {exc}; "
                    "is `langorch dev` running?"
                ) from exc


def _error_of(exc: urllib.error.HTTPError) -> tuple[str, str]:
    """The error's code and message from a JSON 1.0 error body (``__type`` may carry a
    ``namespace#`` prefix, which botocore drops too)."""
    try:
        body = json.loads(exc.read() or b"{}")
    except ValueError:
        body = {}
    code = str(body.get("__type") or f"HTTP{exc.code}").rpartition("#")[2]
    message = str(body.get("message") or body.get("Message") or exc.reason)
    return code, message
