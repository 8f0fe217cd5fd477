"""The DynamoDB process's lean path answers every request exactly as moto's full path does.

Random sequences of DynamoDB requests — puts, conditional updates (SET and REMOVE, conditions
that fail), gets, queries, deletes, batches, transactions (some cancelled by a failed
condition), requests moto refuses (a missing table, a malformed expression, unused names, a
body that is not JSON), no body, another region's host, and requests the lean path must hand
on (a CORS request, DynamoDB Streams, an unknown operation) — are sent as raw signed HTTP
requests to moto's full application (dispatcher, Flask) and, from the same fresh state, to
:class:`LeanDynamoDB` over it (with the lean process's moto patches: action names listed
once, update expressions read once). Both run with the DynamoDB process's patches
(``local_dynamodb``). Status lines, every header (names, order, values; the random request
id only by its shape) and the body bytes must be equal, and the requests meant for the lean
path must not have reached the full one.
"""

from __future__ import annotations

import http.client
import io
import json
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import moto.core.responses as moto_responses
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws
from moto.core.utils import method_names_from_class
from moto.dynamodb.responses import DynamoHandler
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import make_server
from werkzeug.test import EnvironBuilder

from langorch.local.dynamodb_lean import (
    LeanDynamoDB,
    cache_action_names,
    lean_request_handler,
    parse_header_lines,
    read_header_lines,
    read_update_expressions_once,
)
from langorch.local.emulator import (
    keep_alive_handler,
    local_dynamodb,
    route_outside_the_lock,
    wsgi_answer,
)

TABLE = "lean"
EU_HOST = "dynamodb.eu-west-1.amazonaws.com"
AUTH = (
    "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/{service}/aws4_request, "
    "SignedHeaders=host;x-amz-date;x-amz-target, Signature=0123456789abcdef"
)
CREATE_TABLE = {
    "TableName": TABLE,
    "KeySchema": [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ],
    "AttributeDefinitions": [
        {"AttributeName": "pk", "AttributeType": "S"},
        {"AttributeName": "sk", "AttributeType": "S"},
    ],
    "BillingMode": "PAY_PER_REQUEST",
}

Request = tuple[str, Any, dict[str, str], bool]
"""(operation, JSON body or raw bytes, extra headers, whether the lean path answers it)."""

pks = st.sampled_from(["a", "b"])
sks = st.sampled_from(["record", "c1", "c2", "c3"])
texts = st.text("xyz é", max_size=6)
key = st.builds(lambda p, s: {"pk": {"S": p}, "sk": {"S": s}}, pks, sks)
table = st.sampled_from([TABLE, TABLE, TABLE, "missing"])
item = st.builds(
    lambda k, v, n, data: {**k, "v": {"N": str(v)}, "s": {"S": n}, "data": {"S": data * 300}},
    key,
    st.integers(0, 3),
    texts,
    st.sampled_from(["", "ab", "0123456"]),
)


def _put(t: str, i: dict[str, Any], guarded: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"TableName": t, "Item": i}
    if guarded:
        body["ConditionExpression"] = "attribute_not_exists(pk)"
    return body


def _update(t: str, k: dict[str, Any], v: int, s: str, returns: str, expr: str) -> dict[str, Any]:
    return {
        "TableName": t,
        "Key": k,
        "UpdateExpression": expr,
        "ConditionExpression": "attribute_exists(pk) AND #v >= :v",
        "ExpressionAttributeNames": {"#v": "v", "#s": "s", "#x": "gone"},
        "ExpressionAttributeValues": {":v": {"N": str(v)}, ":s": {"S": s}, ":one": {"N": "1"}},
        "ReturnValues": returns,
    }


def _transact(check: dict[str, Any], v: int, puts: list[dict[str, Any]]) -> dict[str, Any]:
    condition = {
        "TableName": TABLE,
        "Key": check,
        "ConditionExpression": "attribute_exists(pk) AND v <= :v",
        "ExpressionAttributeValues": {":v": {"N": str(v)}},
    }
    return {
        "TransactItems": [
            {"ConditionCheck": condition},
            *({"Put": {"TableName": TABLE, "Item": p}} for p in puts),
        ]
    }


lean_requests: st.SearchStrategy[Request] = st.one_of(
    st.builds(lambda b: ("PutItem", b, {}, True), st.builds(_put, table, item, st.booleans())),
    st.builds(
        lambda b: ("UpdateItem", b, {}, True),
        st.builds(
            _update,
            table,
            key,
            st.integers(0, 4),
            texts,
            st.sampled_from(["NONE", "ALL_NEW", "UPDATED_OLD"]),
            st.sampled_from(
                [
                    "SET #s = :s, v = v + :one REMOVE #x",
                    "SET #s = :s REMOVE #x",
                    "SET #s = :s, v = v + :one",
                    "SET #s = ",  # a syntax error
                    "REMOVE #x",  # leaves names and values unused
                ]
            ),
        ),
    ),
    st.builds(
        lambda t, k, p: ("GetItem", {"TableName": t, "Key": k, **p}, {}, True),
        table,
        key,
        st.sampled_from([{}, {"ProjectionExpression": "s, v"}, {"ConsistentRead": True}]),
    ),
    st.builds(
        lambda t, p, forward, limit: (
            "Query",
            {
                "TableName": t,
                "KeyConditionExpression": "pk = :pk",
                "ExpressionAttributeValues": {":pk": {"S": p}},
                "ScanIndexForward": forward,
                "Limit": limit,
            },
            {},
            True,
        ),
        table,
        pks,
        st.booleans(),
        st.integers(1, 3),
    ),
    st.builds(
        lambda t, k: (
            "DeleteItem",
            {"TableName": t, "Key": k, "ReturnValues": "ALL_OLD"},
            {},
            True,
        ),
        table,
        key,
    ),
    st.builds(
        lambda items: (
            "BatchWriteItem",
            {"RequestItems": {TABLE: [{"PutRequest": {"Item": i}} for i in items]}},
            {},
            True,
        ),
        st.lists(item, min_size=1, max_size=2, unique_by=lambda i: (i["pk"]["S"], i["sk"]["S"])),
    ),
    st.builds(
        lambda b: ("TransactWriteItems", b, {}, True),
        st.builds(
            _transact,
            key,
            st.integers(0, 3),
            st.lists(
                item, min_size=1, max_size=2, unique_by=lambda i: (i["pk"]["S"], i["sk"]["S"])
            ),
        ),
    ),
    st.just(("GetItem", b"{not json", {}, True)),
    st.just(("ListTables", {}, {}, True)),
    st.just(("ListTables", b"", {}, True)),  # no parameters: moto reads the headers instead
    st.builds(  # another host names another region (moto reads it from the URL)
        lambda k: ("GetItem", {"TableName": TABLE, "Key": k}, {"Host": EU_HOST}, True), key
    ),
)
handed_on: st.SearchStrategy[Request] = st.sampled_from(
    [
        (
            "GetItem",
            {"TableName": TABLE, "Key": {"pk": {"S": "a"}, "sk": {"S": "record"}}},
            {"Origin": "http://localhost:3000"},
            False,
        ),
        ("NoSuchOperation", {}, {}, False),
        ("DynamoDBStreams_20120810.ListStreams", {}, {}, False),
    ]
)
sequences = st.lists(st.one_of(lean_requests, lean_requests, handed_on), min_size=1, max_size=12)


def _environ(operation: str, body: Any, extra: dict[str, str]) -> dict[str, Any]:
    target = operation if "." in operation else f"DynamoDB_20120810.{operation}"
    service = "dynamodb"
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {
        "Host": "127.0.0.1:8000",
        "X-Amz-Target": target,
        "Content-Type": "application/x-amz-json-1.0",
        "X-Amz-Date": "20260101T000000Z",
        "Authorization": AUTH.format(service=service),
        "User-Agent": "Boto3/1.40 md/Botocore#1.40 ua/2.1 os/linux",
        **extra,
    }
    environ: dict[str, Any] = EnvironBuilder(
        method="POST", path="/", headers=list(headers.items()), data=data
    ).get_environ()
    return environ


def _comparable(answer: tuple[str, list[tuple[str, str]], bytes]) -> tuple[Any, ...]:
    status, headers, body = answer
    shown = [
        (name, f"<{len(value)} characters>" if name == "x-amzn-requestid" else value)
        for name, value in headers
    ]
    return status, shown, body


@contextmanager
def _fresh_moto() -> Iterator[None]:
    with mock_aws():
        yield


def _run(
    app: Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]],
    requests: list[Request],
) -> list[tuple[Any, ...]]:
    with _fresh_moto():
        created = wsgi_answer(app, _environ("CreateTable", CREATE_TABLE, {}))
        assert created[0] == "200 OK", created
        return [
            _comparable(wsgi_answer(app, _environ(op, body, extra)))
            for op, body, extra, _ in requests
        ]


@pytest.fixture(scope="module")
def apps() -> Iterator[tuple[Any, Any, list[dict[str, Any]]]]:
    undo = local_dynamodb()
    full = route_outside_the_lock(DomainDispatcherApplication(create_backend_app))
    fell_back: list[dict[str, Any]] = []

    def counted(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        fell_back.append(environ)
        return full(environ, start_response)

    try:
        yield full, LeanDynamoDB(counted), fell_back
    finally:
        undo()


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(requests=sequences)
def test_the_lean_path_answers_as_moto_does(
    apps: tuple[Any, Any, list[dict[str, Any]]], requests: list[Request]
) -> None:
    full, lean, fell_back = apps
    expected = _run(full, requests)
    fell_back.clear()
    undos = [cache_action_names(), read_update_expressions_once()]
    try:
        answered = _run(lean, requests)
    finally:
        for undo in undos:
            undo()
    assert answered == expected
    handed = [e["HTTP_X_AMZ_TARGET"] for e in fell_back]
    assert handed == [
        _environ(op, body, extra)["HTTP_X_AMZ_TARGET"]
        for op, body, extra, is_lean in requests
        if not is_lean
    ]
    for (status, headers, _), (*_, is_lean) in zip(answered, requests, strict=True):
        names = [name for name, _ in headers]
        if is_lean and not status.startswith("500"):
            assert "x-amz-crc32" in names and "x-amzn-requestid" in names


def test_listed_actions_are_moto_s_and_listed_once() -> None:
    undo = cache_action_names()
    try:
        cached = vars(moto_responses)["method_names_from_class"]
        assert cached is not method_names_from_class
        assert cached(DynamoHandler) == method_names_from_class(DynamoHandler)
        first = cached(DynamoHandler)
        first.append("not_an_action")  # a caller's list is its own
        assert "not_an_action" not in cached(DynamoHandler)
    finally:
        undo()
    assert vars(moto_responses)["method_names_from_class"] is method_names_from_class


def test_update_expressions_are_read_once_and_alike() -> None:
    import moto.dynamodb.responses as handler_module
    from moto.dynamodb.exceptions import InvalidUpdateExpression
    from moto.dynamodb.parsing.expressions import (  # type: ignore[attr-defined]
        ExpressionAttributeName,
        ExpressionAttributeValue,
        UpdateExpressionParser,
    )

    text = "SET #s = :s, v = v + :one REMOVE #x"
    undo = read_update_expressions_once()
    try:
        reader = vars(handler_module)["UpdateExpressionParser"]
        first, again = reader.make(text), reader.make(text)
        fresh = UpdateExpressionParser.make(text)
        assert first is again

        def used(tree: Any) -> tuple[list[str], list[str]]:
            names = tree.find_clauses([ExpressionAttributeName])
            values = tree.find_clauses([ExpressionAttributeValue])
            return (
                [each.get_attribute_name_placeholder() for each in names],
                [each.get_value_name() for each in values],
            )

        assert used(first) == used(fresh) == (["#s", "#x"], [":s", ":one"])
        for _ in range(2):
            with pytest.raises(InvalidUpdateExpression):
                reader.make("SET #s = ")
    finally:
        undo()
    assert vars(handler_module)["UpdateExpressionParser"] is UpdateExpressionParser


header_names = st.one_of(
    st.sampled_from(["Host", "Content-Length", "X-Amz-Target", "From", "Connection", "Expect"]),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=0, max_size=8),
)
header_values = st.binary(max_size=12).map(lambda raw: raw.decode("iso-8859-1"))
header_lines = st.one_of(
    st.builds(
        lambda n, v, end: f"{n}:{v}{end}",
        header_names,
        header_values,
        st.sampled_from(["\r\n", "\n"]),
    ),
    st.builds(lambda v: f" {v}\r\n", header_values),  # a folded line
    st.just("From someone\r\n"),
)


@settings(max_examples=30, deadline=None)
@given(lines=st.lists(header_lines, max_size=6), end=st.sampled_from(["\r\n", "\n", ""]))
def test_headers_are_read_as_http_client_reads_them(lines: list[str], end: str) -> None:
    raw = "".join(lines).encode("iso-8859-1") + end.encode() + b"body"
    reference = io.BytesIO(raw)
    try:
        expected = http.client.parse_headers(reference)
    except http.client.HTTPException as error:
        with pytest.raises(type(error)):
            parse_header_lines(read_header_lines(io.BytesIO(raw)), http.client.HTTPMessage)
        return
    stream = io.BytesIO(raw)
    parsed = parse_header_lines(read_header_lines(stream), http.client.HTTPMessage)
    assert parsed.items() == expected.items()
    assert type(parsed) is type(expected)
    assert stream.read() == reference.read()  # what follows is left as http.client leaves it


def test_the_lean_handler_keeps_connections_and_bodies() -> None:
    seen: list[tuple[str, str, bytes, str]] = []

    def echo(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        body = environ["wsgi.input"].read()
        seen.append(
            (
                environ["REQUEST_METHOD"],
                environ["PATH_INFO"],
                body,
                environ.get("HTTP_X_FOLDED", ""),
            )
        )
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"got " + body]

    server = make_server(
        "127.0.0.1",
        0,
        echo,
        threaded=True,
        request_handler=lean_request_handler(keep_alive_handler()),
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with socket.create_connection(("127.0.0.1", server.server_port), timeout=10) as sock:
            stream = sock.makefile("rb")

            def ask(request: bytes) -> tuple[bytes, dict[str, str], bytes]:
                sock.sendall(request)
                status = stream.readline()
                headers = http.client.parse_headers(stream)
                body = stream.read(int(headers["Content-Length"]))
                return status, dict(headers.items()), body

            first = ask(b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
            folded = b"X-Folded: one\r\n two\r\n"  # not plain: http.server reads it
            second = ask(
                b"POST //b HTTP/1.1\r\nHost: x\r\n" + folded + b"Content-Length: 2\r\n\r\nhi"
            )
            third = ask(b"GET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert stream.read() == b""  # closed after the answer, as asked
        assert [s for s, _, _ in (first, second, third)] == [b"HTTP/1.1 200 OK\r\n"] * 3
        assert [b for _, _, b in (first, second, third)] == [b"got hello", b"got hi", b"got "]
        assert third[1].get("Connection") == "close" and "Connection" not in first[1]
        assert seen == [
            ("POST", "/a", b"hello", ""),
            ("POST", "/b", b"hi", "one two"),
            ("GET", "/c", b"", ""),
        ]
    finally:
        server.shutdown()
        thread.join()
