"""The local gateway builds API Gateway HTTP API (2.0) events and reads 2.0 responses back."""

from __future__ import annotations

import base64
import http.client
import json
import logging
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from langorch.config import Settings
from langorch.local.gateway import parse_response, start_gateway
from tests.support.polling import wait_for


class Recorder:
    """A handler that records its events and answers with a canned response."""

    def __init__(self, response: Any = None, error: Exception | None = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.contexts: list[Any] = []
        self.response = response if response is not None else {"statusCode": 202, "body": "{}"}
        self.error = error

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        self.events.append(event)
        self.contexts.append(context)
        if self.error is not None:
            raise self.error
        return self.response


@pytest.fixture
def hooks() -> Recorder:
    return Recorder({"statusCode": 202, "body": json.dumps({"run_id": "run-x"})})


@pytest.fixture
def approvals() -> Recorder:
    return Recorder(
        {
            "statusCode": 200,
            "headers": {"Content-Type": "text/html; charset=utf-8"},
            "cookies": ["a=1; HttpOnly"],
            "body": "<p>page</p>",
        }
    )


@pytest.fixture
def gateway(hooks: Recorder, approvals: Recorder) -> Iterator[str]:
    url, stop = start_gateway(
        Settings(),
        port=0,
        routes={
            "POST /hooks/{workflow_id}": hooks,
            "GET /approvals/{id}": approvals,
            "HEAD /approvals/{id}": approvals,
            "POST /approvals/{id}": approvals,
        },
        max_body_bytes=1024,
    )
    yield url
    stop()


def call(
    url: str, method: str = "GET", body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=5)
    try:
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        connection.request(method, target, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def test_a_webhook_post_becomes_a_v2_event_with_the_raw_body(gateway: str, hooks: Recorder):
    # Given a JSON delivery with mixed-case headers, a query and a cookie
    body = b'{"commit_message": "x"}'

    # When it is posted to the hook route
    status, _, payload = call(
        f"{gateway}/hooks/blog%5Freview?a=1&a=2&b=",
        "POST",
        body,
        {
            "Content-Type": "application/json",
            "Webhook-Id": "d-1",
            "User-Agent": "tests/1.0",
            "Cookie": "c1=v1; c2=v2",
        },
    )

    # Then the handler got API Gateway's 2.0 event and its answer came back
    assert (status, json.loads(payload)) == (202, {"run_id": "run-x"})
    event = hooks.events[0]
    assert event["version"] == "2.0"
    assert event["routeKey"] == "POST /hooks/{workflow_id}"
    assert event["rawPath"] == "/hooks/blog%5Freview"
    assert event["rawQueryString"] == "a=1&a=2&b="
    assert event["queryStringParameters"] == {"a": "1,2", "b": ""}
    assert event["pathParameters"] == {"workflow_id": "blog_review"}
    assert event["headers"]["webhook-id"] == "d-1"
    assert all(name == name.lower() for name in event["headers"])
    assert "cookie" not in event["headers"]
    assert event["cookies"] == ["c1=v1", "c2=v2"]
    http = event["requestContext"]["http"]
    assert (http["method"], http["sourceIp"], http["userAgent"]) == (
        "POST",
        "127.0.0.1",
        "tests/1.0",
    )
    assert event["requestContext"]["routeKey"] == "POST /hooks/{workflow_id}"
    assert event["requestContext"]["stage"] == "$default"
    assert (event["body"], event["isBase64Encoded"]) == (body.decode(), False)
    assert hooks.contexts[0].get_remaining_time_in_millis() > 0


def test_a_form_post_arrives_base64_encoded_as_in_api_gateway(gateway: str, approvals: Recorder):
    form = b"decision=approve&nonce=n%2B1"

    call(
        f"{gateway}/approvals/apr-1",
        "POST",
        form,
        {"Content-Type": "application/x-www-form-urlencoded"},
    )

    event = approvals.events[0]
    assert event["isBase64Encoded"] is True
    assert base64.b64decode(event["body"]) == form
    assert event["pathParameters"] == {"id": "apr-1"}
    assert "queryStringParameters" not in event


def test_the_response_headers_cookies_and_html_body_are_written_back(gateway: str):
    status, headers, body = call(f"{gateway}/approvals/apr-1?sig=secret")

    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert headers["Set-Cookie"] == "a=1; HttpOnly"
    assert body == b"<p>page</p>"


def test_head_answers_headers_without_a_body(gateway: str, approvals: Recorder):
    status, _, body = call(f"{gateway}/approvals/apr-1", "HEAD")

    assert (status, body) == (200, b"")
    assert approvals.events[0]["requestContext"]["http"]["method"] == "HEAD"


def test_unknown_routes_and_methods_are_404_like_api_gateway(gateway: str, hooks: Recorder):
    assert call(f"{gateway}/nope")[0] == 404
    assert call(f"{gateway}/hooks/wf")[0] == 404  # GET on a POST-only route
    assert call(f"{gateway}/hooks/a/b", "POST", b"{}")[0] == 404
    assert hooks.events == []


def test_a_body_over_the_limit_is_413_and_never_reaches_the_handler(gateway: str, hooks: Recorder):
    status, _, body = call(
        f"{gateway}/hooks/wf", "POST", b"x" * 2048, {"Content-Type": "application/json"}
    )

    assert status == 413
    assert json.loads(body) == {"message": "Request Entity Too Large"}
    assert hooks.events == []


def test_a_failing_handler_is_a_500_with_api_gateways_body():
    url, stop = start_gateway(
        Settings(), port=0, routes={"POST /hooks/{workflow_id}": Recorder(error=RuntimeError("x"))}
    )
    try:
        status, _, body = call(
            f"{url}/hooks/wf", "POST", b"{}", {"Content-Type": "application/json"}
        )
    finally:
        stop()

    assert (status, json.loads(body)) == (500, {"message": "Internal Server Error"})


def test_the_access_log_never_has_the_query_string(gateway: str, caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO, logger="langorch.local.gateway")
    # Attached to the logger itself: Powertools may have turned propagation off on langorch.*
    gateway_logger = logging.getLogger("langorch.local.gateway")
    gateway_logger.addHandler(caplog.handler)

    call(f"{gateway}/approvals/apr-1?ap=ref&sig=SIGNATURE-VALUE")

    def lines() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == "langorch.local.gateway"]

    # The server thread logs after it has answered: wait for its line.
    wait_for(
        lambda: any(line.startswith("GET /approvals/apr-1 200") for line in lines()),
        what="the gateway's access-log line",
    )
    gateway_logger.removeHandler(caplog.handler)
    assert any(line.startswith("GET /approvals/apr-1 200") for line in lines())
    assert not any("SIGNATURE-VALUE" in line or "sig=" in line for line in lines())


def test_a_result_without_status_code_is_a_200_json_body():
    assert parse_response({"ok": True}) == (
        200,
        [("Content-Type", "application/json")],
        b'{"ok": true}',
    )


def test_a_base64_response_body_is_decoded():
    status, _, body = parse_response(
        {"statusCode": 200, "body": base64.b64encode(b"\x00\x01").decode(), "isBase64Encoded": True}
    )
    assert (status, body) == (200, b"\x00\x01")
