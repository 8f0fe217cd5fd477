"""Calls that start in the emulator's own process reach the dispatcher or its app directly.

The local gateway, the scheduler tick, the S3 event poller and moto's Step Functions
interpreter run in the process that serves the emulator and its Lambda dispatcher
(:mod:`langorch.local.lambdas`). Through the emulator's ``lambda:Invoke`` API, each of their
invocations is an HTTP round trip to this very process: botocore builds and signs the request,
the emulator's HTTP server parses it and moto routes it to the backend whose ``invoke`` the
dispatcher replaced. That cost 4.0-4.6 ms of this process's CPU per invocation against
1.9 ms for the same invocation handed to the dispatcher (measured here, 300 of each), on
the one interpreter every other request of the stack needs, plus ~3 ms before the handler ran.
And moto's interpreter builds a new boto3 client for every Lambda task (~55-63 ms of botocore
data each) with retries off, so one dropped loopback connection failed the task with
``States.Runtime``; it builds none now.

For the Lambda invocations, the same two steps happen without the trip: moto's record of the
function is looked up (its ARN, environment and timeout, as the API's handler reads them) and
given to the dispatcher, whose answer is Lambda's (the handler's result, or its error payload
with the function error). An unknown function is refused as the API refuses it
(``ResourceNotFoundException``). The other calls this process makes to the emulator (the
start-up's provisioning, the log shipper's ``PutLogEvents``: ~560 per 100 runs) are handed to
its WSGI app on the caller's thread (:func:`answer_in_process`): the same app the HTTP server
serves, journal included, without the socket and the server's request parsing (a
``PutLogEvents`` took 1.9-2.1 ms of this process's CPU over HTTP, client and server, and
1.1-1.2 ms handed over). Calls from the sandboxes, the CLI and tests, in other processes,
still go through the API.
"""

from __future__ import annotations

import io
import threading
import uuid
from collections.abc import Callable
from importlib import import_module
from typing import Any, Protocol
from urllib.parse import urlsplit

from langorch.local._invoke import ACCOUNT_ID, Transport

INTERPRETER_LAMBDA = (
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.lambda_eval_utils"
)
"""The module of moto's interpreter that builds its Lambda client (``boto_client_for``)."""


class Invoking(Protocol):
    """What is needed of the dispatcher (:class:`langorch.local.lambdas.Dispatcher`)."""

    def invoke_function(self, fn: Any, payload: Any) -> Any:
        """Invoke moto's function record ``fn``: an answer with ``payload`` and
        ``function_error``."""


def function_record(function: str, region: str, qualifier: str | None = None) -> Any:
    """moto's record of ``function``: its ARN, or its name in ``region`` of moto's account.

    Raises:
        botocore.exceptions.ClientError: ``ResourceNotFoundException``, no such function.
    """
    from botocore.exceptions import ClientError
    from moto.awslambda.utils import get_backend
    from moto.core.exceptions import JsonRESTError

    parts = function.split(":")
    account = ACCOUNT_ID
    if function.startswith("arn:") and len(parts) >= 7:
        region, account = parts[3], parts[4]
    try:
        return get_backend(account, region).get_function(function, qualifier)
    except JsonRESTError as exc:  # what the API answers, as botocore raises it
        answer: Any = {
            "Error": {"Code": exc.error_type, "Message": exc.message},
            "ResponseMetadata": {"HTTPStatusCode": exc.code, "RequestId": str(uuid.uuid4())},
        }
        raise ClientError(answer, "Invoke") from None


def transport(dispatcher: Invoking, region: str) -> Transport:
    """A :class:`~langorch.local._invoke.LambdaInvoker` transport through ``dispatcher``."""

    def invoke(function: str, payload: bytes) -> tuple[bytes, str | None]:
        answer = dispatcher.invoke_function(function_record(function, region), payload)
        return answer.payload, answer.function_error

    return invoke


class _InterpreterLambda:
    """The Lambda client moto's interpreter gets: ``invoke(**parameters)`` as boto3's answers
    a synchronous invocation; another invocation type goes to the client it had before."""

    def __init__(self, dispatcher: Invoking, region: str, other: Callable[[], Any]) -> None:
        self._dispatcher = dispatcher
        self._region = region
        self._other = other

    def invoke(self, **parameters: Any) -> dict[str, Any]:
        if parameters.get("InvocationType", "RequestResponse") != "RequestResponse":
            return dict(self._other().invoke(**parameters))
        fn = function_record(
            str(parameters["FunctionName"]), self._region, parameters.get("Qualifier")
        )
        answer = self._dispatcher.invoke_function(fn, parameters.get("Payload") or b"")
        response: dict[str, Any] = {
            "StatusCode": 200,
            "ExecutedVersion": "$LATEST",
            "Payload": io.BytesIO(answer.payload),
        }
        if answer.function_error:
            response["FunctionError"] = answer.function_error
        return response


def route_interpreter_lambda_calls(dispatcher: Invoking) -> Callable[[], None]:
    """Give moto's Step Functions interpreter ``dispatcher`` as its Lambda client.

    Returns:
        A function that gives the interpreter its previous client back.
    """
    module: Any = import_module(INTERPRETER_LAMBDA)
    previous = module.boto_client_for

    def client_for(region: str, service: str, state_credentials: Any = None) -> Any:
        def other() -> Any:
            return previous(region=region, service=service, state_credentials=state_credentials)

        if service != "lambda":
            return other()
        return _InterpreterLambda(dispatcher, region, other)

    module.boto_client_for = client_for

    def undo() -> None:
        if module.boto_client_for is client_for:
            module.boto_client_for = previous

    return undo


def answer_in_process(session: Any, app: Any, endpoint_url: str) -> Callable[[], None]:
    """Hand the requests of ``session``'s clients for ``endpoint_url`` to ``app`` directly.

    Clients the boto3 ``session`` builds from now on call ``app`` (the emulator's WSGI app)
    on their own thread instead of sending the request over a socket; requests for any other
    endpoint (the DynamoDB process) are sent as before.

    Returns:
        A function after which those clients send their requests over HTTP again.
    """
    live = threading.Event()
    live.set()
    prefix = endpoint_url.rstrip("/") + "/"

    def send(request: Any, **_: Any) -> Any:
        if not live.is_set() or not (request.url + "/").startswith(prefix):
            return None  # botocore sends it
        return _answer(app, request)

    session.events.register("before-send", send)
    return live.clear


def _answer(app: Any, request: Any) -> Any:
    """``app``'s answer to botocore's prepared ``request``, as botocore's response (a 500 if
    the app raised, as the emulator's HTTP server answers)."""
    from botocore.awsrequest import AWSResponse, HTTPHeaders
    from moto.core.botocore_stubber import MockRawResponse
    from werkzeug.test import EnvironBuilder

    from langorch.local.emulator import wsgi_answer

    url = urlsplit(request.url)
    headers = {
        name: value.decode("utf-8") if isinstance(value, bytes) else str(value)
        for name, value in request.headers.items()
    }
    body = request.body
    if hasattr(body, "read"):  # a file-like body (an upload)
        body = body.read()
    environ = EnvironBuilder(
        method=request.method,
        base_url=f"{url.scheme}://{url.netloc}",
        path=url.path or "/",
        query_string=url.query,
        headers=headers,
        data=body or b"",
        environ_base={"REMOTE_ADDR": "127.0.0.1"},
    ).get_environ()
    status, answer_headers, content = wsgi_answer(app, environ)
    return AWSResponse(
        request.url,
        int(status.split(" ", 1)[0]),
        HTTPHeaders.from_pairs(answer_headers),
        MockRawResponse(content),
    )
