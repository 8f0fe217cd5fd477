"""In-memory Step Functions executions: one per name, task tokens answered once."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from langorch.domain.errors import NotFoundError, StorageError, TaskClosedError

STATE_MACHINE_ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:langorch-runs"


@dataclass
class _Execution:
    name: str
    input: str
    status: str = "RUNNING"
    start_date: datetime = field(default_factory=lambda: datetime.now(UTC))
    output: str | None = None
    stop_cause: str | None = None
    error: str | None = None
    cause: str | None = None


class InMemoryExecutions:
    """The run state machine's executions, as Step Functions keeps them.

    Like ``StartExecution``: starting a running execution's name again with the same input is
    idempotent (same ARN, reported as started), with another input it starts nothing and
    reports ``False``. A task token answers once; after that, or when unknown, it is closed.

    Args:
        state_machine_arn: the run state machine (``None``: not configured).
    """

    def __init__(self, state_machine_arn: str | None = STATE_MACHINE_ARN) -> None:
        self._arn = state_machine_arn
        self._executions: dict[str, _Execution] = {}
        self._tokens: dict[str, str] = {}
        self._issued = 0
        self._lock = threading.Lock()

    @property
    def state_machine_arn(self) -> str:
        """The run state machine's ARN (``NotFoundError`` when none is configured)."""
        if not self._arn:
            raise NotFoundError("no run state machine is configured (LANGORCH_STATE_MACHINE_ARN)")
        return self._arn

    def execution_arn(self, run_id: str) -> str:
        """The ARN of the execution named ``run_id``."""
        return self.state_machine_arn.replace(":stateMachine:", ":execution:") + f":{run_id}"

    def start(self, run_id: str, payload: dict[str, Any]) -> tuple[str, bool]:
        """Start the execution named ``run_id``; see the class docstring for repeats."""
        arn = self.execution_arn(run_id)
        text = json.dumps(payload)
        with self._lock:
            existing = self._executions.get(run_id)
            if existing is None:
                self._executions[run_id] = _Execution(run_id, text)
                return arn, True
            same = existing.status == "RUNNING" and json.loads(existing.input) == payload
            return arn, same

    def stop(self, run_id: str, cause: str) -> None:
        """Abort a running execution; a missing or ended one is left as it is."""
        with self._lock:
            execution = self._executions.get(run_id)
            if execution is not None and execution.status == "RUNNING":
                execution.status, execution.stop_cause = "ABORTED", cause
                self._tokens = {t: r for t, r in self._tokens.items() if r != run_id}

    def describe(self, run_id: str) -> dict[str, Any]:
        """``executionArn``, ``name``, ``status``, ``input``, ``startDate`` (and ``output``)."""
        with self._lock:
            execution = self._executions.get(run_id)
            if execution is None:
                raise NotFoundError(f"no execution for run {run_id}")
            data: dict[str, Any] = {
                "executionArn": self.execution_arn(run_id),
                "stateMachineArn": self.state_machine_arn,
                "name": execution.name,
                "status": execution.status,
                "input": execution.input,
                "startDate": execution.start_date,
            }
            if execution.output is not None:
                data["output"] = execution.output
            if execution.error is not None:
                data["error"] = execution.error
            if execution.cause is not None:
                data["cause"] = execution.cause
            return data

    def end(self, run_id: str, status: str, *, error: str | None = None, cause: str = "") -> None:
        """End the execution as Step Functions would after its last state (tests drive it).

        Its task tokens close with it: an ended execution's task answers no ``SendTaskSuccess``
        (``InvalidToken``), as in Step Functions."""
        with self._lock:
            execution = self._executions[run_id]
            execution.status, execution.error, execution.cause = status, error, cause or None
            self._tokens = {t: r for t, r in self._tokens.items() if r != run_id}

    def send_success(self, task_token: str, output: dict[str, Any]) -> None:
        """End the execution waiting on ``task_token`` with ``output`` (once)."""
        self._answer(task_token, "SUCCEEDED", json.dumps(output))

    def send_failure(self, task_token: str, error: str, cause: str) -> None:
        """Fail the execution waiting on ``task_token`` (once)."""
        self._answer(task_token, "FAILED", None)

    def _answer(self, task_token: str, status: str, output: str | None) -> None:
        with self._lock:
            run_id = self._tokens.pop(task_token, None)
            if run_id is None:
                raise TaskClosedError("the approval's task is closed (InvalidToken)")
            execution = self._executions[run_id]
            execution.status, execution.output = status, output

    # --- for tests -----------------------------------------------------------------------

    def time_out_tasks(self, run_id: str) -> None:
        """The run's waiting task timed out (its ``TimeoutSeconds``): its token is closed, and
        the execution goes on RUNNING (into the state machine's ``States.Timeout`` catch)."""
        with self._lock:
            self._tokens = {t: r for t, r in self._tokens.items() if r != run_id}

    def park(self, run_id: str, payload: dict[str, Any] | None = None) -> str:
        """Start (if needed) the run's execution and park it on a task; returns the token."""
        self.start(run_id, payload or {"run_id": run_id, "resume": None})
        with self._lock:
            self._issued += 1
            token = f"token-{run_id}-{self._issued}"
            self._tokens[token] = run_id
            return token

    def lose_all(self) -> None:
        """The local stack was killed: its executions and their tokens are gone (they lived in
        the emulator's threads) until the restart starts them again."""
        with self._lock:
            self._executions.clear()
            self._tokens.clear()

    @property
    def names(self) -> list[str]:
        """Every execution's name, in start order."""
        with self._lock:
            return list(self._executions)

    def fail_next_start(self) -> None:
        """Make the next :meth:`start` raise ``StorageError`` (Step Functions unavailable)."""
        original = self.start

        def failing(run_id: str, payload: dict[str, Any]) -> tuple[str, bool]:
            self.start = original  # type: ignore[method-assign]
            raise StorageError(f"cannot start execution {run_id}: ServiceUnavailable")

        self.start = failing  # type: ignore[method-assign]
