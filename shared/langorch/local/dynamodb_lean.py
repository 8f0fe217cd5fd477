"""A short way through moto for the DynamoDB process's requests, with the answers moto gives.

A DynamoDB call reached moto's ``DynamoHandler`` through moto's domain dispatcher (the host
lookup), a Flask app (URL routing, a request context, the CORS extension's after-request hook,
response finalising) and ``convert_to_flask_response``: about a fifth of the DynamoDB process's
CPU under 100 concurrent runs, for a request whose handler is known from its ``X-Amz-Target``
alone. :class:`LeanDynamoDB` calls ``DynamoHandler.dispatch`` itself, as moto's Flask view does
(the same request class, URL and headers), and writes the status, headers and body as Flask
and werkzeug would have: the same status line, the same headers in the same order (moto's,
``Content-Length``, then the CORS extension's ``Access-Control-Allow-Origin: *``) and the same
bytes. Whatever it is not sure of goes the full way: another service or API version, another
path or method, a query string, a CORS request (``Origin``), a compressed body, an operation
moto does not implement, or a request moto fails to read.
``tests/integration/test_dynamodb_lean.py`` sends the same random requests both ways.
"""

from __future__ import annotations

import email.parser
import http.client
import io
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from http import HTTPStatus
from typing import Any

from langorch.local._patching import replace_in

_TARGET_PREFIX = "DynamoDB_20120810."
"""The JSON API's target prefix; moto routes older versions (and Streams) elsewhere."""

_CORS_HEADERS = [("Access-Control-Allow-Origin", "*")]
"""What moto's CORS extension adds to the answer of a request without an ``Origin``."""

_FLASK_DEFAULT_CONTENT_TYPE = "text/html; charset=utf-8"

_URL_PARTS = (
    "wsgi.url_scheme",
    "HTTP_HOST",
    "SERVER_NAME",
    "SERVER_PORT",
    "SCRIPT_NAME",
    "RAW_URI",
    "REQUEST_URI",
    "PATH_INFO",
    "QUERY_STRING",
)
"""Everything werkzeug and moto read to make a request's ``raw_url`` (no trusted hosts)."""

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class LeanDynamoDB:
    """WSGI app: DynamoDB JSON calls straight to moto's handler, the rest to ``fallback``.

    Args:
        fallback: moto's full application (the domain dispatcher), for every other request.
    """

    def __init__(self, fallback: WSGIApp) -> None:
        from moto.core.request import Request
        from moto.core.utils import camelcase_to_underscores, method_names_from_class
        from moto.dynamodb.responses import DynamoHandler

        class ServerRequest(Request):
            from_wsgi_server = True  # as moto's Flask request class says (no Date header)

        self._fallback = fallback
        self._request_class = ServerRequest
        self._handler = DynamoHandler
        implemented = set(method_names_from_class(DynamoHandler))
        self._to_action = camelcase_to_underscores
        self._implemented = implemented
        self._urls: dict[tuple[Any, ...], str] = {}

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if not self._is_lean(environ):
            return self._fallback(environ, start_response)
        stream = environ.get("wsgi.input")
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = stream.read(length) if stream is not None and length > 0 else b""
        environ["wsgi.input"] = io.BytesIO(body)
        answer = self._answer(environ)
        if answer is None:  # moto could not read it: the full way says how it fails
            environ["wsgi.input"] = io.BytesIO(body)
            return self._fallback(environ, start_response)
        status, headers, data = answer
        start_response(status, headers)
        return [data]

    def _is_lean(self, environ: dict[str, Any]) -> bool:
        target = str(environ.get("HTTP_X_AMZ_TARGET") or "")
        return (
            target.startswith(_TARGET_PREFIX)
            and environ.get("REQUEST_METHOD") == "POST"
            and environ.get("PATH_INFO") == "/"
            and not environ.get("QUERY_STRING")
            and not environ.get("wsgi.input_terminated")
            and "HTTP_ORIGIN" not in environ
            and "HTTP_CONTENT_ENCODING" not in environ
            and _signed_service(environ) == "dynamodb"
            and self._to_action(target[len(_TARGET_PREFIX) :]) in self._implemented
        )

    def _answer(self, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes] | None:
        from botocore.exceptions import ClientError
        from moto.moto_api import recorder
        from werkzeug.exceptions import HTTPException

        request = self._request_class(environ)
        recorder._record_request(request)
        handler = self._handler()
        try:
            # As moto's Flask view calls ``DynamoHandler.dispatch``.
            handler.setup_class(request, self._raw_url(request), _Headers(request))
        except Exception:
            return None  # nothing was applied yet
        try:
            result = handler.call_action()
        except ClientError as exc:  # as ``convert_to_flask_response`` answers it
            result = 400, {}, exc.response["Error"]["Message"]
        except HTTPException as exc:  # as Flask answers an HTTP error a view raised
            return _full_response(exc.get_response(environ), environ)
        if len(result) == 3:
            status, headers, content = result
        else:
            status, headers, content = 200, {}, result
        return _response(status, headers, content, environ)

    def _raw_url(self, request: Any) -> str:
        # werkzeug works the URL out afresh for every request (~4 % of a call); it is the
        # same for the same parts, and one client's calls all have the same parts.
        key = tuple(request.environ.get(name) for name in _URL_PARTS)
        url = self._urls.get(key)
        if url is None:
            url = str(request.raw_url)
            if len(self._urls) > 256:
                self._urls.clear()
            self._urls[key] = url
        return url


class _Headers(Mapping[str, str]):
    """``dict(request.headers)``, made only if asked for.

    moto's view hands ``setup_class`` a copy of the headers, which it reads only when a request
    carries no parameters at all (an empty body); copying them was ~3 % of a call.
    """

    def __init__(self, request: Any) -> None:
        self._request = request
        self._copy: dict[str, str] | None = None

    def _headers(self) -> dict[str, str]:
        if self._copy is None:
            self._copy = dict(self._request.headers)
        return self._copy

    def __getitem__(self, name: str) -> str:
        return self._headers()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._headers())

    def __len__(self) -> int:
        return len(self._headers())


def _signed_service(environ: dict[str, Any]) -> str | None:
    """The service moto's dispatcher reads from a SigV4 ``Authorization`` header."""
    auth = str(environ.get("HTTP_AUTHORIZATION") or "")
    try:
        scope = auth.split(",")[0].split()[1]
        _, _, _, service, _ = scope.split("/")
    except (IndexError, ValueError):
        return None
    return service.lower()


def _response(
    status: Any, headers: Any, content: Any, environ: dict[str, Any]
) -> tuple[str, list[tuple[str, str]], bytes]:
    """The WSGI status, headers and body Flask and werkzeug make of moto's answer."""
    from werkzeug.http import HTTP_STATUS_CODES

    plain = (
        type(status) is int
        and status in HTTP_STATUS_CODES
        and isinstance(headers, dict)
        and isinstance(content, str | bytes)
        and not 100 <= status < 200
        and status not in (204, 304)
    )
    if not plain:
        from flask import Response

        return _full_response(Response(response=content, status=status, headers=headers), environ)
    data = content.encode("utf-8") if isinstance(content, str) else content
    listed: list[tuple[str, str]] = []
    typed = False
    for name, value in headers.items():
        text = str(value)
        if "\n" in text or "\r" in text:  # werkzeug refuses these; let it say so
            from flask import Response

            return _full_response(
                Response(response=content, status=status, headers=headers), environ
            )
        lowered = name.lower()
        if lowered == "content-length":
            continue  # werkzeug sets it from the body, where it stood
        typed = typed or lowered == "content-type"
        listed.append((name, text))
    if not typed:
        listed.append(("Content-Type", _FLASK_DEFAULT_CONTENT_TYPE))
    _set_length(listed, headers, len(data))
    listed += _cors_headers()
    return f"{status} {HTTP_STATUS_CODES[status].upper()}", listed, data


def _cors_headers() -> list[tuple[str, str]]:
    from moto.settings import DISABLE_GLOBAL_CORS

    return [] if DISABLE_GLOBAL_CORS else _CORS_HEADERS


def _set_length(listed: list[tuple[str, str]], headers: dict[str, Any], length: int) -> None:
    # werkzeug's ``headers["Content-Length"] = ...``: the first one keeps its place.
    for index, name in enumerate(headers):
        if name.lower() == "content-length":
            listed.insert(min(index, len(listed)), ("Content-Length", str(length)))
            return
    listed.append(("Content-Length", str(length)))


def _full_response(
    response: Any, environ: dict[str, Any]
) -> tuple[str, list[tuple[str, str]], bytes]:
    """A werkzeug response finished as Flask with moto's CORS extension finishes it."""
    for name, value in _cors_headers():
        response.headers.add(name, value)
    headers = response.get_wsgi_headers(environ)
    data = b"".join(response.get_app_iter(environ))
    return str(response.status), headers.to_wsgi_list(), data


def cache_action_names() -> Callable[[], None]:
    """Let moto list a response class's action methods once, not on every call.

    moto's ``BaseResponse.call_action`` walks the handler class with ``inspect.getmembers`` on
    every request to see whether the action is implemented (~2 % of the DynamoDB process's
    CPU). The names of a class's functions do not change once the process serves (our patches
    replace methods, they add or remove none), so each class is walked once.

    Returns:
        A function that undoes the change.
    """
    from importlib import import_module

    responses: Any = import_module("moto.core.responses")
    original = responses.method_names_from_class
    names: dict[object, list[str]] = {}
    lock = threading.Lock()

    def method_names_from_class(clazz: object) -> list[str]:
        found = names.get(clazz)
        if found is None:
            with lock:
                found = names.setdefault(clazz, original(clazz))
        return list(found)

    responses.method_names_from_class = method_names_from_class

    def undo() -> None:
        responses.method_names_from_class = original

    return undo


_REQUEST_LINE = re.compile(rb"([A-Z]+) (/[\x21-\x7e]*) HTTP/1\.([01])\r?\n")
"""A plain HTTP/1.x request line; anything else is parsed by ``http.server`` itself."""

_PLAIN_HEADER = re.compile(r"[\041-\071\073-\176]+:[^\r\n\x0b\x0c\x1c-\x1e\x85]*\r?\n")
"""A header line the email parser reads as ``name: value``: no folding, and nothing its
``str.splitlines`` would cut the line at."""

MAX_HEADER_LINE = 65536
MAX_HEADERS = 100
"""``http.client``'s limits (``_MAXLINE``, ``_MAXHEADERS``), kept."""


def lean_request_handler(base: type) -> type:
    """The keep-alive request handler, reading a plain request's headers without the email parser.

    ``http.server`` parses every request's headers with the ``email`` package's feed parser
    (~45 µs a request, ~5 % of the DynamoDB process's CPU); for a plain HTTP/1.x request
    whose header lines are all ``name: value`` the same ``HTTPMessage`` is built line by line
    here, as the parser would build it (the value after the colon, leading blanks dropped, the
    line end removed). Anything else — another request line, a folded or odd header line —
    goes through ``http.server``'s own parsing, limits and error answers.
    ``tests/integration/test_dynamodb_lean.py`` compares both on random header blocks.

    Args:
        base: the handler class to extend (``keep_alive_handler()``).

    Returns:
        The handler class to pass to ``werkzeug.serving.make_server``.
    """

    class LeanRequestHandler(base):  # type: ignore[valid-type,misc]
        def parse_request(self) -> bool:
            line = _REQUEST_LINE.fullmatch(self.raw_requestline)
            if line is None:
                return bool(super().parse_request())
            # http.server's steps, in its order, for the one shape of request line matched.
            minor = line.group(3)
            self.requestline = self.raw_requestline.decode("iso-8859-1").rstrip("\r\n")
            self.request_version = "HTTP/1." + minor.decode("ascii")
            self.close_connection = not (minor == b"1" and self.protocol_version >= "HTTP/1.1")
            self.command = line.group(1).decode("ascii")
            self.path = line.group(2).decode("ascii")
            if self.path.startswith("//"):  # http.server's guard against open redirects
                self.path = "/" + self.path.lstrip("/")
            try:
                self.headers = parse_header_lines(read_header_lines(self.rfile), self.MessageClass)
            except http.client.LineTooLong as error:
                self.send_error(
                    HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Line too long", str(error)
                )
                return False
            except http.client.HTTPException as error:
                self.send_error(
                    HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Too many headers", str(error)
                )
                return False
            connection = self.headers.get("Connection", "").lower()
            if connection == "close":
                self.close_connection = True
            elif connection == "keep-alive" and self.protocol_version >= "HTTP/1.1":
                self.close_connection = False
            expect = self.headers.get("Expect", "").lower()
            if (
                expect == "100-continue"
                and self.protocol_version >= "HTTP/1.1"
                and self.request_version >= "HTTP/1.1"
            ):
                return bool(self.handle_expect_100())
            return True

    return LeanRequestHandler


def read_header_lines(stream: Any) -> list[bytes]:
    """A request's header lines up to the blank one, as ``http.client`` reads them.

    Raises:
        http.client.LineTooLong: a line is longer than ``MAX_HEADER_LINE``.
        http.client.HTTPException: more than ``MAX_HEADERS`` lines.
    """
    lines: list[bytes] = []
    while True:
        line = stream.readline(MAX_HEADER_LINE + 1)
        if len(line) > MAX_HEADER_LINE:
            raise http.client.LineTooLong("header line")
        lines.append(line)
        if len(lines) > MAX_HEADERS:
            raise http.client.HTTPException(f"got more than {MAX_HEADERS} headers")
        if line in (b"\r\n", b"\n", b""):
            return lines


def parse_header_lines(lines: list[bytes], message_class: Any) -> Any:
    """The ``HTTPMessage`` ``http.client.parse_headers`` makes of these lines."""
    text = [line.decode("iso-8859-1") for line in lines]
    if not all(_PLAIN_HEADER.fullmatch(each) for each in text[:-1]) or text[0].startswith("From "):
        return email.parser.Parser(_class=message_class).parsestr("".join(text))
    message = message_class()
    for each in text[:-1]:
        name, _, value = each.partition(":")
        message[name] = value.lstrip(" \t").rstrip("\r\n")
    return message


def read_update_expressions_once() -> Callable[[], None]:
    """Let moto's DynamoDB parse each UpdateExpression text once.

    moto parses an UpdateItem's expression twice: its request handler parses it only to list
    the ``#names`` and ``:values`` it uses (``find_clauses``, which reads the tree), and its
    backend parses it again to validate and apply it. The runner sends the same few expressions
    over and over, so one parse per expression text is kept (a bounded cache) and given to
    both. Neither changes it: the backend's validator works on its own deep copy of the tree
    (``Validator.__init__``), which it rewrites and applies. An expression that fails to parse
    is never kept, so its error is raised as before.

    Returns:
        A function that undoes the change.
    """
    from moto.dynamodb.parsing.expressions import (  # type: ignore[attr-defined]
        UpdateExpressionParser as original,
    )

    parsed: dict[str, Any] = {}

    class ReadOnlyParses:
        @staticmethod
        def make(expression: str) -> Any:
            tree = parsed.get(expression)
            if tree is None:
                tree = original.make(expression)
                if len(parsed) >= 512:
                    parsed.clear()
                parsed[expression] = tree
            return tree

    return replace_in(
        ["moto.dynamodb.responses", "moto.dynamodb.models"],
        "UpdateExpressionParser",
        lambda _original: ReadOnlyParses,
    )


def copy_updated_items_only_for_streams() -> Callable[[], None]:
    """Let moto's UpdateItem skip its copy of the item when the table has no stream.

    moto deep-copies the item before every UpdateItem only to hand the old image to the
    table's stream (``stream_shard.add``); it restores nothing from it. Our tables have no
    stream, and the copy of a run record (its attributes as ``DynamoType`` objects) was 13 %
    of an UpdateItem's CPU, spent under the emulator's write lock. A table with a stream still
    gets the copy.

    Returns:
        A function that undoes the change.
    """
    import types
    from importlib import import_module

    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.dynamo_type import Item

    models: Any = import_module("moto.dynamodb.models")
    outer = models.copy  # moto's ``copy`` module, or another fix's shim of it
    uncopied = threading.local()

    def deepcopy(value: Any, memo: Any = None) -> Any:
        if isinstance(value, Item) and getattr(uncopied, "on", False):
            uncopied.on = False  # the one copy update_item makes of the item
            return value
        return outer.deepcopy(value, memo)

    original = DynamoDBBackend.update_item

    def update_item(self: Any, table_name: str, *args: Any, **kwargs: Any) -> Any:
        table = self.tables.get(table_name)
        uncopied.on = table is not None and table.stream_shard is None
        try:
            return original(self, table_name, *args, **kwargs)
        finally:
            uncopied.on = False

    models.copy = types.SimpleNamespace(**{**vars(outer), "deepcopy": deepcopy})
    DynamoDBBackend.update_item = update_item  # type: ignore[method-assign]

    def undo() -> None:
        models.copy = outer
        DynamoDBBackend.update_item = original  # type: ignore[method-assign]

    return undo


def parse_update_conditions_once() -> Callable[[], None]:
    """Let moto parse an UpdateItem's ConditionExpression once per request, not twice.

    moto's request handler parses the condition only to list the ``#names`` and ``:values`` it
    uses, then hands the same expression, names and values to the backend, which parses them
    again to evaluate them: a fifth of an UpdateItem's CPU went to the second parse, under the
    emulator's write lock. Within one UpdateItem request the backend now gets the handler's
    parse (the same three objects, unchanged in between; evaluating a parsed condition changes
    nothing). Outside an UpdateItem request every parse is moto's own.

    Returns:
        A function that undoes the change.
    """
    from moto.dynamodb.comparisons import create_condition_expression_parser as create_parser
    from moto.dynamodb.responses import DynamoHandler

    handler = DynamoHandler.update_item
    request = threading.local()

    class ParsedOnce:
        """A condition parser whose ``parse()`` runs once; everything else is the parser's."""

        def __init__(self, parser: Any) -> None:
            self._parser = parser
            self._parsed: Any = None

        def parse(self) -> Any:
            if self._parsed is None:
                self._parsed = self._parser.parse()
            return self._parsed

        def __getattr__(self, name: str) -> Any:
            return getattr(self._parser, name)

    def create(expression: Any, names: Any, values: Any) -> Any:
        kept: list[tuple[Any, Any, Any, ParsedOnce]] | None = getattr(request, "kept", None)
        if kept is None:
            return create_parser(expression, names, values)
        for same_expression, same_names, same_values, parser in kept:
            if same_expression == expression and same_names is names and same_values is values:
                return parser
        parser = ParsedOnce(create_parser(expression, names, values))
        kept.append((expression, names, values, parser))
        return parser

    def update_item(self: Any) -> Any:
        request.kept = []
        try:
            return handler(self)
        finally:
            request.kept = None

    undo_parsers = replace_in(
        ["moto.dynamodb.responses", "moto.dynamodb.models"],
        "create_condition_expression_parser",
        lambda _original: create,
    )
    DynamoHandler.update_item = update_item  # type: ignore[method-assign]

    def undo() -> None:
        undo_parsers()
        DynamoHandler.update_item = handler  # type: ignore[method-assign]

    return undo
