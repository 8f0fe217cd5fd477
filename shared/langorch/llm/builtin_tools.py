"""The registry of tools a block may give its model (``BlockDefinition.tools_required``).

Only tools listed here exist: validation checks ``tools_required`` against :data:`KNOWN_TOOLS`,
so an unknown tool is a definition error, not a runtime surprise. The tool bodies are plain
functions (tested without any LLM); LangChain is imported only when a real provider binds them.
"""

from __future__ import annotations

import ast
import ipaddress
import operator
import socket
import urllib.parse
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from langorch.llm.base import LLMCallError
from langorch.llm.names import KNOWN_TOOLS as KNOWN_TOOLS  # re-exported

if TYPE_CHECKING:
    import urllib.request

    from langchain_core.tools import BaseTool

# --------------------------------------------------------------------------------------------
# current_time
# --------------------------------------------------------------------------------------------


def current_time(timezone: str = "UTC", *, now: Callable[[], datetime] | None = None) -> str:
    """The current time as ISO 8601 in an IANA time zone.

    Args:
        timezone: An IANA zone name such as ``Europe/Paris``.
        now: Clock returning an aware UTC datetime (injected by tests).

    Returns:
        For example ``2025-01-31T09:30:00+01:00``.

    Raises:
        ValueError: The zone is unknown.
    """
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {timezone!r}; use an IANA name like UTC") from exc
    moment = now() if now is not None else datetime.now(UTC)
    return moment.astimezone(zone).isoformat(timespec="seconds")


# --------------------------------------------------------------------------------------------
# calculator
# --------------------------------------------------------------------------------------------

MAX_EXPRESSION_LENGTH = 200
MAX_EXPONENT = 64
"""Bounds ``**`` so ``9**9**9`` cannot hang the Lambda."""
MAX_MAGNITUDE = 1e100

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


def calculate(expression: str) -> int | float:
    """Evaluate arithmetic: numbers, ``+ - * / // % **`` and parentheses.

    The expression is parsed with :mod:`ast` and only whitelisted nodes are evaluated; names,
    calls, attributes and everything else are rejected (never ``eval``).

    Args:
        expression: For example ``(12.5 + 7) * 3``.

    Returns:
        The value.

    Raises:
        ValueError: The expression is too long, not arithmetic, divides by zero, or its result
            (or an exponent) is too large.
    """
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise ValueError(f"expression longer than {MAX_EXPRESSION_LENGTH} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not an arithmetic expression: {expression!r}") from exc
    return _evaluate(tree.body)


def _evaluate(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return _bounded(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _bounded(_UNARY[type(node.op)](_evaluate(node.operand)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ValueError(f"exponent larger than {MAX_EXPONENT}")
        try:
            return _bounded(_BINARY[type(node.op)](left, right))
        except ZeroDivisionError as exc:
            raise ValueError("division by zero") from exc
        except OverflowError as exc:
            raise ValueError("result too large") from exc
    raise ValueError(f"not allowed in a calculation: {ast.dump(node)[:40]}")


def _bounded(value: Any) -> int | float:
    if isinstance(value, complex):
        raise ValueError("result is not a real number")
    if abs(value) > MAX_MAGNITUDE:
        raise ValueError("result too large")
    return value  # type: ignore[no-any-return]


# --------------------------------------------------------------------------------------------
# http_get
# --------------------------------------------------------------------------------------------

HTTP_TIMEOUT_SECONDS = 10.0
HTTP_MAX_BYTES = 100_000


def _public_only_opener() -> urllib.request.OpenerDirector:
    """An opener that re-checks every redirect target: a public URL must not bounce into the
    VPC. ``urllib.request`` (with ``http.client`` and ``ssl``) is imported here, on the first
    fetch, not with the module: ``workflows validate`` reads :data:`KNOWN_TOOLS` (issue 26)."""
    import urllib.request

    class PublicOnlyRedirects(urllib.request.HTTPRedirectHandler):
        def redirect_request(
            self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str
        ) -> Any:
            _check_public_url(newurl)
            return super().redirect_request(req, fp, code, msg, headers, newurl)

    return urllib.request.build_opener(PublicOnlyRedirects)


def _check_public_url(url: str) -> None:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ValueError(f"only http(s) URLs with a host can be fetched: {url!r}")
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or None, proto=socket.IPPROTO_TCP)
    except OSError as exc:
        raise ValueError(f"cannot resolve {parts.hostname!r}") from exc
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        # The model chooses the URL: keep it away from metadata endpoints, the Lambda runtime
        # API and anything private (server-side request forgery).
        if not address.is_global:
            raise ValueError(f"{parts.hostname!r} is not a public address")


def http_get(url: str) -> str:
    """Fetch a public URL with GET and return the start of its body as text.

    Args:
        url: An ``http`` or ``https`` URL whose host resolves to public addresses only.

    Returns:
        ``"<status> <content-type>\\n<body>"``, the body cut at :data:`HTTP_MAX_BYTES`.

    Raises:
        ValueError: The URL is not http(s), or its host (or a redirect's) is not public.
        OSError: The request failed or timed out.
    """
    import urllib.error
    import urllib.request

    _check_public_url(url)
    opener = _public_only_opener()
    request = urllib.request.Request(url, headers={"User-Agent": "langorch-http-get"})  # noqa: S310 - scheme checked above
    try:
        with opener.open(request, timeout=HTTP_TIMEOUT_SECONDS) as response:
            body = response.read(HTTP_MAX_BYTES + 1)
            status, content_type = response.status, response.headers.get_content_type()
            charset = response.headers.get_content_charset() or "utf-8"
    except urllib.error.HTTPError as exc:
        return f"{exc.code} {exc.reason}"
    text = body[:HTTP_MAX_BYTES].decode(charset, errors="replace")
    truncated = "\n[truncated]" if len(body) > HTTP_MAX_BYTES else ""
    return f"{status} {content_type}\n{text}{truncated}"


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------


def _current_time_tool() -> BaseTool:
    from langchain_core.tools import StructuredTool

    def run(timezone: str = "UTC") -> str:
        return current_time(timezone)

    return StructuredTool.from_function(
        run,
        name="current_time",
        description="The current date and time (ISO 8601) in an IANA time zone, default UTC.",
    )


def _calculator_tool() -> BaseTool:
    from langchain_core.tools import StructuredTool

    def run(expression: str) -> str:
        return str(calculate(expression))

    return StructuredTool.from_function(
        run,
        name="calculator",
        description="Evaluate arithmetic with + - * / // % ** and parentheses, e.g. (2+3)*4.",
    )


def _http_get_tool() -> BaseTool:
    from langchain_core.tools import StructuredTool

    return StructuredTool.from_function(
        http_get,
        name="http_get",
        description=(
            f"GET a public http(s) URL; returns the status, content type and the first "
            f"{HTTP_MAX_BYTES} bytes of the body."
        ),
    )


ToolFactory = Callable[[], "BaseTool"]

TOOL_FACTORIES: dict[str, ToolFactory] = {
    "current_time": _current_time_tool,
    "calculator": _calculator_tool,
    "http_get": _http_get_tool,
}
"""Tool name -> factory of the LangChain tool."""


def check_tools(names: Iterable[str]) -> None:
    """Refuse unknown tool names.

    Raises:
        LLMCallError: Naming the unknown tools and listing the known ones.
    """
    unknown = sorted(set(names) - KNOWN_TOOLS)
    if unknown:
        raise LLMCallError(
            f"unknown tool(s) {', '.join(unknown)}; known tools: {', '.join(sorted(KNOWN_TOOLS))}"
        )


def build_tools(names: Iterable[str]) -> list[BaseTool]:
    """The LangChain tools for ``names``, in order, without duplicates.

    Raises:
        LLMCallError: A name is not in :data:`KNOWN_TOOLS`.
    """
    ordered = list(dict.fromkeys(names))
    check_tools(ordered)
    return [TOOL_FACTORIES[name]() for name in ordered]
