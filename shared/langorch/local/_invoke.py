"""Invoking the stack's Lambda functions from the local gateway, tick and S3 event poller.

In the cloud, API Gateway, EventBridge Scheduler and EventBridge invoke the Lambda service, which
runs the handler with the function's environment. Locally the functions exist in the emulator and
:mod:`langorch.local.lambdas` routes their invocations to ``functions/<name>/handler.py`` in this
process, with the function's ``LANGORCH_*`` environment applied around the call (that is how a
handler gets the stack's settings). So the default invokers here call the emulator's
``lambda:Invoke``: the handler is imported on the first event, gets a Lambda-like context and the
right settings, its logs land in the local CloudWatch Logs, and an unhandled exception comes back
as a function error — what API Gateway turns into a 500.

In the process that serves the emulator, ``langorch dev`` gives them a transport to its
dispatcher instead of the HTTP API (:mod:`langorch.local.inprocess`): the same lookup and
answer, without a round trip to itself. Tests inject plain ``handler(event, context)``
callables instead; :class:`LambdaContext` is what
they receive.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langorch.config import Settings

Handler = Callable[[Any, Any], Any]
"""``handler(event, context)``, as the Lambda runtime calls it."""

Transport = Callable[[str, bytes], tuple[bytes, str | None]]
"""``(function ARN, request payload) -> (response payload, function error or None)``: one
synchronous invocation without the emulator's HTTP API, for callers in the process that serves
it (:mod:`langorch.local.inprocess`)."""

TRIGGER = "langorch-trigger"
APPROVAL_CALLBACK = "langorch-approval-callback"
"""The functions' names, as :mod:`langorch.local.lambdas` creates them in the emulator."""

ACCOUNT_ID = "123456789012"
"""moto's default account: ARNs built here match the ones the emulator returns."""


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
        return f"arn:aws:lambda:{self.region}:{ACCOUNT_ID}:function:{self.function_name}"

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


def lambda_client(settings: Settings, *, pool: int = 128) -> Any:
    """A ``lambda`` client at the stack's endpoint, for many concurrent invocations.

    Not :func:`langorch.adapters.aws.make_client`: an invocation must never be retried by
    botocore (a read timeout would run the handler twice), and a burst of gateway requests
    needs more than the default ten pooled connections.
    """
    import boto3
    from botocore.config import Config

    session = boto3.Session(
        aws_access_key_id="local",
        aws_secret_access_key="local",  # noqa: S106 - the emulator's, not a secret
        region_name=settings.region,
    )
    config = Config(
        retries={"max_attempts": 1, "mode": "standard"},
        max_pool_connections=pool,
        connect_timeout=5,
        read_timeout=900,
    )
    return session.client(
        "lambda", region_name=settings.region, endpoint_url=settings.endpoint_url, config=config
    )


class LambdaInvoker:
    """``invoke(event)``: one synchronous invocation of a function in the emulator.

    Args:
        settings: the stack's settings (endpoint, region).
        function_name: the function to invoke.
        client: a ``lambda`` client (default: :func:`lambda_client`, built on first use).
        transport: invokes without the emulator's HTTP API (in the process that serves it);
            ``client`` is then unused.
    """

    def __init__(
        self,
        settings: Settings,
        function_name: str,
        *,
        client: Any = None,
        transport: Transport | None = None,
    ) -> None:
        self.settings = settings
        self.name = function_name
        self.arn = f"arn:aws:lambda:{settings.region}:{ACCOUNT_ID}:function:{function_name}"
        self._client = client
        self._transport = transport
        self._lock = threading.Lock()

    def __call__(self, event: Any, context: Any = None) -> Any:
        """Invoke the function with ``event`` and return its decoded result.

        Raises:
            FunctionError: the handler raised (its error type and message are in the text).
        """
        request = json.dumps(event).encode("utf-8")
        if self._transport is not None:
            raw, function_error = self._transport(self.arn, request)
        else:
            raw, function_error = self._over_http(request)
        payload = json.loads(raw) if raw else None
        if function_error:
            detail = payload if isinstance(payload, dict) else {}
            raise FunctionError(
                f"{self.name}: {detail.get('errorType', 'Error')}: {detail.get('errorMessage', '')}"
            )
        return payload

    def _over_http(self, request: bytes) -> tuple[bytes, str | None]:
        client = self._client
        if client is None:
            # Built once: a burst of first requests must not each build one (~60 ms apiece).
            with self._lock:
                if self._client is None:
                    self._client = lambda_client(self.settings)
                client = self._client
        response = client.invoke(
            FunctionName=self.name, InvocationType="RequestResponse", Payload=request
        )
        return response["Payload"].read(), response.get("FunctionError")
