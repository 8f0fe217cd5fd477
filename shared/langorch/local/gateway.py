"""The local HTTP gateway: API Gateway (HTTP API, payload format 2.0) in front of the handlers.

Local mode serves the deployed routes itself, on 127.0.0.1, turns each request into the event
API Gateway would send and invokes the function through the local Lambda service (the
dispatcher, :mod:`langorch.local.lambdas`: that is how the handler gets the stack's settings):

- ``POST /hooks/{workflow_id}``            → ``langorch-trigger`` (``functions/trigger``)
- ``GET|HEAD|POST /approvals/{id}``        → ``langorch-approval-callback``
- ``POST /slack/interactions``             → ``langorch-approval-callback`` (Slack's buttons)
  (``functions/approval_callback``)

The event follows the 2.0 payload format as documented: ``version``, ``routeKey``, ``rawPath``,
``rawQueryString``, lower-cased ``headers`` (repeated headers joined with commas, ``cookie``
moved to ``cookies``), ``queryStringParameters`` (repeated values joined with commas; absent when
there is no query), URL-decoded ``pathParameters``, ``requestContext`` (``http.method``,
``http.path``, ``http.sourceIp``, ``http.userAgent``, ``requestId``, ``time``, ``timeEpoch``, …)
and ``body`` with ``isBase64Encoded``. Like API Gateway, only text bodies (``text/*``, JSON, XML,
JavaScript) are passed as text: anything else — including an HTML form's
``application/x-www-form-urlencoded`` POST — arrives base64-encoded, so handlers meet locally
what they meet in the cloud.

The response is read as API Gateway reads a 2.0 response: a dict with ``statusCode`` is used as
is (``headers``, ``cookies`` → ``Set-Cookie``, ``body``, ``isBase64Encoded``); anything else is
JSON with status 200. An unknown route answers 404 and a handler that raises answers 500, both
with API Gateway's ``{"message": ...}`` bodies.

The access log has the method, the path, the status and the duration only: query strings carry
link signatures and are never logged.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from langorch.config import Settings
from langorch.local._invoke import (
    ACCOUNT_ID,
    APPROVAL_CALLBACK,
    TRIGGER,
    FunctionError,
    Handler,
    LambdaContext,
    LambdaInvoker,
    Transport,
)

LISTEN_BACKLOG = 1024
"""Connections the kernel queues before refusing: a burst of 100 clicks overflowed the
standard library's default of 5 (1-3 s retransmit stalls)."""

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 1_048_576
"""Requests with a larger body are refused with 413 before the handler runs."""

API_ID = "local"
STAGE = "$default"

DEFAULT_ROUTES: Mapping[str, str] = {
    "POST /hooks/{workflow_id}": TRIGGER,
    "GET /approvals/{id}": APPROVAL_CALLBACK,
    "HEAD /approvals/{id}": APPROVAL_CALLBACK,
    "POST /approvals/{id}": APPROVAL_CALLBACK,
    "POST /slack/interactions": APPROVAL_CALLBACK,
}
"""Route key → the Lambda function it invokes, as the deployed HTTP API routes them."""

_TEXT_TYPES = re.compile(
    r"^(text/.*|application/(json|xml|javascript|[\w.+-]+\+(json|xml)))$", re.IGNORECASE
)


class _Route:
    def __init__(self, key: str, handler: Handler) -> None:
        method, _, template = key.partition(" ")
        self.key = key
        self.method = method.upper()
        self.handler = handler
        # A path parameter is one path segment, as in API Gateway ({name+} is not used here).
        segments = [
            f"(?P<{part[1:-1]}>[^/]+)"
            if part.startswith("{") and part.endswith("}")
            else re.escape(part)
            for part in template.split("/")
        ]
        self.pattern = re.compile("^" + "/".join(segments) + "$")

    def match(self, method: str, path: str) -> dict[str, str] | None:
        if method != self.method:
            return None
        found = self.pattern.match(path)
        if found is None:
            return None
        return {name: unquote(value) for name, value in found.groupdict().items()}


def _routes(
    routes: Mapping[str, Handler | str] | None, settings: Settings, transport: Transport | None
) -> list[_Route]:
    table: dict[str, Handler | str] = dict(DEFAULT_ROUTES)
    if routes is not None:
        table.update(routes)
    invokers: dict[str, LambdaInvoker] = {}
    built: list[_Route] = []
    for key, handler in table.items():
        if isinstance(handler, str):
            # One invoker (and connection pool) per function, shared by its routes.
            if transport is None:
                handler = _no_lambda_service(handler)
            else:
                handler = invokers.setdefault(handler, LambdaInvoker(handler, transport))
        built.append(_Route(key, handler))
    return built


def _no_lambda_service(function_name: str) -> Handler:
    """A route's handler when the gateway was given no transport: every request is a 500."""

    def unavailable(event: Any, context: Any) -> Any:
        raise RuntimeError(f"no Lambda service to invoke {function_name} (no transport)")

    return unavailable


def _is_text(content_type: str | None) -> bool:
    if not content_type:
        return False
    return bool(_TEXT_TYPES.match(content_type.split(";")[0].strip()))


def build_event(
    *,
    route_key: str,
    method: str,
    raw_path: str,
    raw_query: str,
    headers: list[tuple[str, str]],
    body: bytes,
    path_parameters: Mapping[str, str],
    source_ip: str,
    domain_name: str,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The API Gateway HTTP API (payload 2.0) event for one request.

    Args:
        route_key: the matched route, e.g. ``"POST /hooks/{workflow_id}"``.
        method: the request method.
        raw_path: the path as sent (still URL-encoded).
        raw_query: the query string as sent, without ``?``.
        headers: the request headers in order (names in any case).
        body: the raw request body.
        path_parameters: decoded path parameters of the route.
        source_ip: the client's address.
        domain_name: the ``Host`` the gateway answered on.
        now: the request time (default: now).
    """
    now = now or datetime.now(UTC)
    merged: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in headers:
        lowered = name.lower()
        if lowered == "cookie":
            cookies.extend(part.strip() for part in value.split(";") if part.strip())
            continue
        merged[lowered] = f"{merged[lowered]},{value}" if lowered in merged else value
    request_id = base64.b32encode(uuid.uuid4().bytes[:10]).decode("ascii").rstrip("=")
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": raw_path,
        "rawQueryString": raw_query,
        "headers": merged,
    }
    if cookies:
        event["cookies"] = cookies
    if raw_query:
        query: dict[str, str] = {}
        for name, value in parse_qsl(raw_query, keep_blank_values=True):
            query[name] = f"{query[name]},{value}" if name in query else value
        event["queryStringParameters"] = query
    event["requestContext"] = {
        "accountId": ACCOUNT_ID,
        "apiId": API_ID,
        "domainName": domain_name,
        "domainPrefix": domain_name.split(".")[0].split(":")[0],
        "http": {
            "method": method,
            "path": raw_path,
            "protocol": "HTTP/1.1",
            "sourceIp": source_ip,
            "userAgent": merged.get("user-agent", ""),
        },
        "requestId": request_id,
        "routeKey": route_key,
        "stage": STAGE,
        "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
        "timeEpoch": int(now.timestamp() * 1000),
    }
    if path_parameters:
        event["pathParameters"] = dict(path_parameters)
    if body:
        if _is_text(merged.get("content-type")):
            event["body"] = body.decode("utf-8", errors="replace")
            event["isBase64Encoded"] = False
        else:
            event["body"] = base64.b64encode(body).decode("ascii")
            event["isBase64Encoded"] = True
    else:
        event["isBase64Encoded"] = False
    return event


def parse_response(result: Any) -> tuple[int, list[tuple[str, str]], bytes]:
    """Status, headers and body from a handler's result, as API Gateway reads a 2.0 response.

    A dict with ``statusCode`` is a full response; anything else (a dict without it, a string,
    a list) is the body of a 200 JSON response.
    """
    if not (isinstance(result, dict) and "statusCode" in result):
        text = result if isinstance(result, str) else json.dumps(result)
        return 200, [("Content-Type", "application/json")], text.encode("utf-8")
    status = int(result["statusCode"])
    headers = [(str(k), str(v)) for k, v in (result.get("headers") or {}).items()]
    headers += [("Set-Cookie", str(cookie)) for cookie in result.get("cookies") or []]
    raw = result.get("body")
    body: bytes
    if raw is None:
        body = b""
    elif result.get("isBase64Encoded"):
        body = base64.b64decode(raw)
    else:
        body = (raw if isinstance(raw, str) else json.dumps(raw)).encode("utf-8")
    if not any(name.lower() == "content-type" for name, _ in headers) and body:
        headers.append(("Content-Type", "application/json"))
    return status, headers, body


class _TooLargeError(Exception):
    pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # A burst of concurrent webhook deliveries (the pipeline bench sends 100 at once) must queue
    # in the kernel, not be refused or retransmitted: the default backlog is 5.
    request_queue_size = LISTEN_BACKLOG

    def __init__(
        self,
        address: tuple[str, int],
        routes: list[_Route],
        region: str,
        max_body: int,
    ) -> None:
        super().__init__(address, _RequestHandler)
        self.routes = routes
        self.region = region
        self.max_body = max_body


class _RequestHandler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    server_version = "langorch-local-gateway"
    sys_version = ""

    def do_GET(self) -> None:
        self._serve()

    def do_HEAD(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_PATCH(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def do_OPTIONS(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: Any) -> None:
        # The base class logs the request line, query string (link signatures) included.
        return

    def _read_body(self) -> bytes:
        limit = self.server.max_body
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            return self._read_chunked(limit)
        length = int(self.headers.get("Content-Length") or 0)
        if length > limit:
            raise _TooLargeError
        return self.rfile.read(length) if length > 0 else b""

    def _read_chunked(self, limit: int) -> bytes:
        body = bytearray()
        while True:
            size = int(self.rfile.readline(1024).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                # Trailers end with an empty line.
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass
                return bytes(body)
            if len(body) + size > limit:
                raise _TooLargeError
            body += self.rfile.read(size)
            self.rfile.readline(1024)

    def _serve(self) -> None:
        started = time.monotonic()
        parts = urlsplit(self.path)
        path = parts.path
        status = 500
        try:
            status = self._dispatch(path, parts.query)
        finally:
            logger.info(
                "%s %s %d %.0f ms",
                self.command,
                path,
                status,
                (time.monotonic() - started) * 1000,
            )

    def _dispatch(self, path: str, query: str) -> int:
        method = self.command.upper()
        try:
            body = self._read_body()
        except _TooLargeError:
            self.close_connection = True
            return self._send(413, [], {"message": "Request Entity Too Large"})
        except ValueError:
            self.close_connection = True
            return self._send(400, [], {"message": "Bad Request"})
        for route in self.server.routes:
            params = route.match(method, path)
            if params is None:
                continue
            event = build_event(
                route_key=route.key,
                method=method,
                raw_path=path,
                raw_query=query,
                headers=list(self.headers.items()),
                body=body,
                path_parameters=params,
                source_ip=self.client_address[0],
                domain_name=self.headers.get("Host") or "127.0.0.1",
            )
            name = getattr(route.handler, "name", "langorch-local")
            context = LambdaContext(
                function_name=name, region=self.server.region, timeout_seconds=29
            )
            try:
                result = route.handler(event, context)
                status, headers, payload = parse_response(result)
            except FunctionError as exc:
                # What API Gateway answers when the function fails; its trace is in its logs.
                logger.error("%s failed: %s", route.key, str(exc)[:300])
                return self._send(500, [], {"message": "Internal Server Error"})
            except Exception:
                logger.exception("%s failed", route.key)
                return self._send(500, [], {"message": "Internal Server Error"})
            return self._send_raw(status, headers, payload)
        return self._send(404, [], {"message": "Not Found"})

    def _send(self, status: int, headers: list[tuple[str, str]], body: Any) -> int:
        return self._send_raw(
            status,
            [*headers, ("Content-Type", "application/json")],
            json.dumps(body).encode("utf-8"),
        )

    def _send_raw(self, status: int, headers: list[tuple[str, str]], body: bytes) -> int:
        self.send_response(status)
        for name, value in headers:
            if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("apigw-requestid", uuid.uuid4().hex[:16])
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)
        return status


def start_gateway(
    settings: Settings,
    *,
    port: int,
    routes: Mapping[str, Handler | str] | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    transport: Transport | None = None,
) -> tuple[str, Callable[[], None]]:
    """Serve the deployed HTTP routes on ``127.0.0.1:port`` in a background thread.

    Args:
        settings: the stack's settings (the region goes into the Lambda context).
        port: the port to listen on (0: any free one).
        routes: route keys (``"POST /hooks/{workflow_id}"``) to handlers, replacing or adding to
            :data:`DEFAULT_ROUTES`; a handler is ``handler(event, context)`` called in this
            thread, or the name of a function invoked through ``transport`` (whose
            handler :mod:`langorch.local.lambdas` imports on its first invocation).
        max_body_bytes: larger request bodies are answered with 413.
        transport: how a function named in ``routes`` is invoked (the dispatcher's).

    Returns:
        The gateway's base URL (what ``settings.public_base_url`` becomes) and a function that
        stops it.
    """
    server = _Server(
        ("127.0.0.1", port), _routes(routes, settings, transport), settings.region, max_body_bytes
    )
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": 0.2},
        name="langorch-gateway",
        daemon=True,
    )
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    return url, stop
