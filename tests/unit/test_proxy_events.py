"""The REST API of the ``waf`` option sends API Gateway's 1.0 proxy events: the webhook and
approval handlers answer them exactly as they answer the HTTP API's 2.0 events of the same
request (``langorch.web.proxy_events``)."""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs

import pytest

from functions.trigger import handler as trigger
from langorch.domain.triggers import event_kind
from langorch.web.http import raw_body
from langorch.web.proxy_events import http_api_event, is_rest_event, rest_response
from tests.support.events import invoke, load_event
from tests.unit.approvals_support import ALICE, FakeStack, call, event, nonce, read
from tests.unit.triggers_support import make_deps

HANDLER_READS = ("headers", "pathParameters")


def _projection(built: dict[str, Any]) -> dict[str, Any]:
    """What the handlers read of a 2.0 event: the path routed on (Powertools strips a named
    stage), headers, body, query, visitor."""
    from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2

    http = built["requestContext"]["http"]
    return {
        **{key: built.get(key) for key in HANDLER_READS},
        "path": APIGatewayProxyEventV2(built).path,
        "body": raw_body(built.get("body"), bool(built.get("isBase64Encoded"))),
        "route": built["routeKey"],
        "query": built.get("queryStringParameters"),
        "cookies": built.get("cookies"),
        "visitor": (http["method"], http["sourceIp"], http["userAgent"]),
    }


@pytest.mark.parametrize(
    ("rest", "http_api"),
    [
        ("apigw_v1_webhook.json", "apigw_v2_webhook.json"),
        ("apigw_v1_approval_get.json", "approval_get.json"),
    ],
)
def test_a_rest_request_reads_as_the_same_http_api_request(rest: str, http_api: str) -> None:
    # Given the same request as the REST API and the HTTP API deliver it
    v1, v2 = load_event(rest), load_event(http_api)
    # When the 1.0 event is read in the 2.0 shape
    converted = http_api_event(v1)
    # Then the handlers see the same route, headers (lowercased), body bytes (the REST API
    # sends every body base64-encoded: binary media types */*), query and visitor
    assert is_rest_event(v1) and not is_rest_event(v2)
    assert _projection(converted) == _projection(v2)
    # ...and the trigger function takes both for HTTP requests
    assert event_kind(v1) == event_kind(v2) == "http"


def test_repeated_headers_and_query_values_are_joined_as_the_http_api_joins_them() -> None:
    # Given a REST request with a header and a query parameter given twice
    v1 = load_event("apigw_v1_approval_get.json")
    v1["multiValueHeaders"]["X-Forwarded-For"] = ["203.0.113.7", "10.0.0.1"]
    v1["multiValueQueryStringParameters"]["tag"] = ["a", "b"]
    # When it is read in the 2.0 shape
    converted = http_api_event(v1)
    # Then the values are comma-joined, and the raw query string keeps them apart
    assert converted["headers"]["x-forwarded-for"] == "203.0.113.7,10.0.0.1"
    assert converted["queryStringParameters"]["tag"] == "a,b"
    assert parse_qs(converted["rawQueryString"])["tag"] == ["a", "b"]


def test_cookies_set_by_an_answer_reach_a_rest_client_as_set_cookie_headers() -> None:
    # Given a 2.0 answer that sets a cookie (1.0 has no `cookies` field)
    answer = {"statusCode": 200, "headers": {"Content-Type": "text/html"}, "cookies": ["a=1"]}
    # When it is answered to a REST request
    converted = rest_response(answer)
    # Then the cookie is a Set-Cookie header and the rest is unchanged
    assert converted == {
        "statusCode": 200,
        "headers": {"Content-Type": "text/html"},
        "multiValueHeaders": {"Set-Cookie": ["a=1"]},
    }


@pytest.fixture
def fresh_trigger() -> Iterator[Any]:
    """The trigger handler answering from fresh fakes each time it is called."""

    def answer(built: dict[str, Any]) -> dict[str, Any]:
        previous = trigger.container.use(make_deps())  # type: ignore[arg-type]
        try:
            return invoke(trigger, built)
        finally:
            trigger.container.use(previous)

    yield answer


def test_a_signed_webhook_gets_the_same_answer_from_either_api(fresh_trigger: Any) -> None:
    # Given the same signed delivery through the REST API and through the HTTP API
    # When each reaches the trigger function (each on an empty deployment)
    rest = fresh_trigger(load_event("apigw_v1_webhook.json"))
    http_api = fresh_trigger(load_event("apigw_v2_webhook.json"))
    # Then both start the same run with the same answer (in its own shape: 1.0 has no cookies)
    assert rest["statusCode"] == 202
    assert rest == rest_response(http_api)


def test_a_changed_body_is_refused_through_the_rest_api_too(fresh_trigger: Any) -> None:
    # Given the REST delivery with its body changed in transit
    built = load_event("apigw_v1_webhook.json")
    raw = base64.b64decode(built["body"]).replace(b"42", b"43")
    built["body"] = base64.b64encode(raw).decode()
    # Then its signature does not verify
    assert fresh_trigger(built)["statusCode"] == 401


def _rest(built: dict[str, Any]) -> dict[str, Any]:
    """The REST API's event for the request ``built`` (a 2.0 approval event) stands for."""
    rest = copy.deepcopy(load_event("apigw_v1_approval_get.json"))
    http = built["requestContext"]["http"]
    query = built.get("queryStringParameters") or {}
    rest["httpMethod"] = rest["requestContext"]["httpMethod"] = http["method"]
    rest["path"] = built["rawPath"]
    rest["pathParameters"] = built["pathParameters"]
    rest["queryStringParameters"] = query or None
    rest["multiValueQueryStringParameters"] = {k: [v] for k, v in query.items()} or None
    rest["requestContext"]["identity"]["sourceIp"] = http["sourceIp"]
    if built.get("body") is not None:
        rest["body"], rest["isBase64Encoded"] = built["body"], True  # binary media types */*
        content_type = "application/x-www-form-urlencoded"
        rest["headers"]["Content-Type"] = content_type
        rest["multiValueHeaders"]["Content-Type"] = [content_type]
    return rest


def _open_and_approve(through_rest: bool) -> tuple[dict[str, Any], dict[str, Any], FakeStack]:
    """Alice opens her link's page and approves, through the REST API or the HTTP API."""
    from functions.approval_callback import handler

    stack = FakeStack()
    previous = handler.container.use(stack.container)
    try:
        parked = stack.park()
        link = parked.links[ALICE]
        shape = _rest if through_rest else (lambda built: built)
        page = call(handler, shape(event(link)))
        form = {"nonce": read(handler, page["body"]), "decision": "approved"}
        decided = call(handler, shape(event(link, method="POST", form=form)))
        return page, decided, stack
    finally:
        handler.container.use(previous)


def test_an_approval_is_shown_and_decided_alike_through_either_api() -> None:
    # Given alice's approval, opened and approved through the REST API
    page, decided, stack = _open_and_approve(through_rest=True)
    # Then she saw the page and her decision resumed the run
    assert page["statusCode"] == 200 and nonce(page["body"])
    assert decided["statusCode"] == 200
    assert len(stack.steps.sent) == 1
    # ...with the same answers (status, headers, page) as through the HTTP API; only the
    # page's form nonce differs, random on every view
    same_page, same_decided, _ = _open_and_approve(through_rest=False)
    assert _unsalted(page) == _unsalted(rest_response(same_page))
    assert decided == rest_response(same_decided)


def _unsalted(answer: dict[str, Any]) -> dict[str, Any]:
    return {**answer, "body": answer["body"].replace(nonce(answer["body"]), "<nonce>")}
