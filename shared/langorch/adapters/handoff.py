"""Work handed on out of a request: an asynchronous Lambda invocation, or a worker thread.

:class:`LambdaHandoff` is the cloud's :class:`~langorch.app.ports.Handoff`: the function invokes
itself asynchronously (``InvocationType="Event"``), the lazy-listener pattern of Slack's Bolt
for Lambda. Lambda answers 202 once the event is queued durably, and runs it again (twice, by
the function's asynchronous configuration) when the run raises. :class:`ThreadHandoff` is the
local stack's: the same job run in this process on one worker thread, again after an error (as
Lambda would), so ``langorch dev`` acknowledges as fast as the cloud does.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from langorch.app.ports import Job
from langorch.domain.errors import StorageError

logger = logging.getLogger(__name__)

ATTEMPTS = 3
"""Runs of a job before it is dropped: Lambda's default for asynchronous invocations (one
and two retries)."""


class LambdaHandoff:
    """Hands a job to a function as an asynchronous invocation.

    Args:
        client: a boto3 ``lambda`` client.
    """

    def __init__(self, client: Any) -> None:
        self._client = client

    def hand_off(self, job: Job, *, function_arn: str, run: Callable[[Job], None]) -> None:
        """Queue ``job`` as ``function_arn``'s event (``run`` is what that function does with
        it; it runs there, not here)."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._client.invoke(
                FunctionName=function_arn,
                InvocationType="Event",
                Payload=json.dumps(dict(job)).encode("utf-8"),
            )
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"Lambda Invoke (Event) failed: {type(exc).__name__}") from exc


class ThreadHandoff:
    """Runs handed-on jobs in this process, one at a time, on a daemon worker thread.

    A job whose run raises is run again, up to :data:`ATTEMPTS` times (then logged, ids only).
    Jobs live in memory: a process that ends drops the ones not yet run (the person presses
    again; a press is idempotent).
    """

    def __init__(self, attempts: int = ATTEMPTS) -> None:
        self._attempts = attempts
        self._jobs: queue.Queue[tuple[Job, Callable[[Job], None]]] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._lock = threading.Lock()

    def hand_off(self, job: Job, *, function_arn: str, run: Callable[[Job], None]) -> None:
        """Queue ``job`` for ``run`` on the worker thread (``function_arn`` is not needed here)."""
        with self._lock:
            if self._worker is None:
                self._worker = threading.Thread(
                    target=self._work, name="langorch-handoff", daemon=True
                )
                self._worker.start()
        self._jobs.put((job, run))

    def drain(self) -> None:
        """Wait until every job handed on so far has run (tests; a stack stopping)."""
        self._jobs.join()

    def _work(self) -> None:
        while True:
            job, run = self._jobs.get()
            try:
                self._run(job, run)
            finally:
                self._jobs.task_done()

    def _run(self, job: Job, run: Callable[[Job], None]) -> None:
        for attempt in range(1, self._attempts + 1):
            try:
                run(job)
                return
            except Exception as exc:  # a job's failure must not end the worker
                logger.warning(
                    "handed-on job failed",
                    extra={
                        "kind": job.get("kind"),
                        "attempt": attempt,
                        "error": type(exc).__name__,
                    },
                )
        logger.error("handed-on job dropped after %d attempts", self._attempts)
