"""Invoking the stack's Lambda functions from the local gateway, tick and bucket watcher.

In the cloud, API Gateway, EventBridge Scheduler and EventBridge invoke the Lambda service, which
runs the handler with the function's environment. Locally the dispatcher
(:mod:`langorch.local.lambdas`) is that service: it runs ``functions/<name>/handler.py`` in a
Lambda-like sandbox with the function's ``LANGORCH_*`` environment, ships its log lines, and
answers an unhandled exception as a function error — what API Gateway turns into a 500. Callers
here reach it through a :data:`Transport`; tests may inject plain ``handler(event, context)``
callables instead, with :class:`LambdaContext`.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Handler = Callable[[Any, Any], Any]
"""``handler(event, context)``, as the Lambda runtime calls it."""

Transport = Callable[[str, bytes], tuple[bytes, str | None]]
"""``(function name or ARN, request payload) -> (response payload, function error or None)``:
one synchronous invocation, as ``lambda:Invoke`` answers it."""

TRIGGER = "langorch-trigger"
APPROVAL_CALLBACK = "langorch-approval-callback"
"""The functions' names (:data:`langorch.local.lambdas.FUNCTIONS`)."""

ACCOUNT_ID = "123456789012"
"""The emulator's account: ARNs built here match the ones it returns."""


def function_arn(region: str, name: str) -> str:
    """The ARN of the local function ``name``."""
    return f"arn:aws:lambda:{region}:{ACCOUNT_ID}:function:{name}"


class FunctionError(Exception):
    """The invoked function raised (Lambda's ``FunctionError: Unhandled``)."""


@dataclass
class LambdaContext:
    """What the Lambda runtime passes as ``context`` (what handlers and Powertools read)."""

    function_name: str
    region: str = "us-east-1"
    memory_limit_in_mb: int = 1024
    timeout_seconds: float = 30.0
    function_version: str = "$LATEST"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    _started: float = field(default_factory=time.monotonic)

    @property
    def invoked_function_arn(self) -> str:
        return function_arn(self.region, self.function_name)

    @property
    def log_group_name(self) -> str:
        return f"/aws/lambda/{self.function_name}"

    @property
    def log_stream_name(self) -> str:
        return f"local/[{self.function_version}]{self.aws_request_id[:8]}"

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before the function's timeout, as on Lambda."""
        left = self.timeout_seconds - (time.monotonic() - self._started)
        return max(0, int(left * 1000))


class LambdaInvoker:
    """``invoke(event)``: one synchronous invocation of a local function.

    Args:
        function_name: the function to invoke.
        transport: how (the dispatcher's :meth:`~langorch.local.lambdas.Dispatcher.transport`).
    """

    def __init__(self, function_name: str, transport: Transport) -> None:
        self.name = function_name
        self._transport = transport

    def __call__(self, event: Any, context: Any = None) -> Any:
        """Invoke the function with ``event`` and return its decoded result.

        Raises:
            FunctionError: the handler raised (its error type and message are in the text).
        """
        raw, function_error = self._transport(self.name, json.dumps(event).encode("utf-8"))
        payload = json.loads(raw) if raw else None
        if function_error:
            detail = payload if isinstance(payload, dict) else {}
            raise FunctionError(
                f"{self.name}: {detail.get('errorType', 'Error')}: {detail.get('errorMessage', '')}"
            )
        return payload
