"""Step Functions: start a run's execution, answer a parked approval's task token."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from langorch.domain.errors import NotFoundError, StorageError, TaskClosedError

_CLOSED = frozenset({"InvalidToken", "TaskTimedOut", "TaskDoesNotExist"})


class StepFunctions:
    """The run state machine's executions.

    Args:
        client: a boto3 ``stepfunctions`` client.
        state_machine_arn: the run state machine.
    """

    def __init__(self, client: Any, state_machine_arn: str | None) -> None:
        self._client = client
        self._arn = state_machine_arn

    @property
    def state_machine_arn(self) -> str:
        if not self._arn:
            raise NotFoundError("no run state machine is configured (LANGORCH_STATE_MACHINE_ARN)")
        return self._arn

    def start(self, run_id: str, payload: dict[str, Any]) -> tuple[str, bool]:
        """Start the execution named ``run_id``; starting it again is a no-op.

        Returns:
            The execution ARN and whether this call started it.
        """
        arn = self.state_machine_arn
        try:
            response = self._client.start_execution(
                stateMachineArn=arn, name=run_id, input=json.dumps(payload)
            )
            return str(response["executionArn"]), True
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ExecutionAlreadyExists":
                return self.execution_arn(run_id), False
            raise StorageError(f"cannot start execution {run_id}: {exc}") from exc

    def execution_arn(self, run_id: str) -> str:
        """The ARN of the execution named ``run_id`` (derived, no call)."""
        return self.state_machine_arn.replace(":stateMachine:", ":execution:") + f":{run_id}"

    def send_success(self, task_token: str, output: dict[str, Any]) -> None:
        """Resume the task waiting on ``task_token`` with ``output``.

        Raises:
            TaskClosedError: nothing waits on the token any more (timed out, ended, unknown).
        """
        try:
            self._client.send_task_success(taskToken=task_token, output=json.dumps(output))
        except ClientError as exc:
            code = exc.response["Error"]["Code"]
            if code in _CLOSED:
                raise TaskClosedError(f"the approval's task is closed ({code})") from exc
            raise StorageError(f"cannot resume the task ({code})") from exc

    def send_failure(self, task_token: str, error: str, cause: str) -> None:
        """Fail the task waiting on ``task_token`` (``TaskClosedError`` when closed)."""
        try:
            self._client.send_task_failure(taskToken=task_token, error=error, cause=cause[:32_000])
        except ClientError as exc:
            code = exc.response["Error"]["Code"]
            if code in _CLOSED:
                raise TaskClosedError(f"the task is closed ({code})") from exc
            raise StorageError(f"cannot fail the task ({code})") from exc

    def stop(self, run_id: str, cause: str) -> None:
        """Stop the run's execution (a missing or ended execution is fine)."""
        try:
            self._client.stop_execution(executionArn=self.execution_arn(run_id), cause=cause)
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ExecutionDoesNotExist":
                return
            raise StorageError(f"cannot stop execution {run_id}: {exc}") from exc

    def describe(self, run_id: str) -> dict[str, Any]:
        """The execution's status and times (``NotFoundError`` when it does not exist)."""
        try:
            return dict(self._client.describe_execution(executionArn=self.execution_arn(run_id)))
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ExecutionDoesNotExist":
                raise NotFoundError(f"no execution for run {run_id}") from exc
            raise StorageError(f"cannot describe execution {run_id}: {exc}") from exc
