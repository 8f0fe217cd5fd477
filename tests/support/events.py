"""What a Lambda function's handler is called with, for tests that call it directly: the recorded
events of ``tests/fixtures/events``, an API Gateway v2 request for an approval link, and the
context Powertools reads; and what the function logs."""

from __future__ import annotations

import base64
import contextlib
import copy
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

EVENTS = Path(__file__).resolve().parents[1] / "fixtures" / "events"


def load_event(name: str) -> dict[str, Any]:
    """A recorded event from ``tests/fixtures/events`` (a fresh copy: tests may change it)."""
    data: dict[str, Any] = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    return data


@dataclass(frozen=True)
class LambdaContext:
    """What Powertools reads from a Lambda context, for the function named ``function_name``."""

    function_name: str = "langorch-trigger"
    aws_request_id: str = "req-1"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 256

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:123456789012:function:{self.function_name}"


def approval_event(
    link: str,
    *,
    method: str = "GET",
    form: dict[str, str] | None = None,
    source_ip: str = "203.0.113.7",
) -> dict[str, Any]:
    """A recorded API Gateway v2 event of opening (GET) or posting (POST) ``link``'s page.

    Args:
        link: The approval link as emailed (path ``…/approvals/<id>``, signed query).
        method: The HTTP method.
        form: The posted form, sent base64-encoded as API Gateway does.
        source_ip: The visitor's address.
    """
    name = "approval_post.json" if method == "POST" else "approval_get.json"
    built: dict[str, Any] = copy.deepcopy(load_event(name))
    parts = urlsplit(link)
    approval_id = parts.path.rsplit("/", 1)[-1]
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    built["rawPath"] = built["requestContext"]["http"]["path"] = parts.path
    built["rawQueryString"] = parts.query
    built["queryStringParameters"] = query or None
    built["pathParameters"] = {"id": approval_id}
    built["requestContext"]["http"]["method"] = method
    built["requestContext"]["http"]["sourceIp"] = source_ip
    built["routeKey"] = built["requestContext"]["routeKey"] = f"{method} /approvals/{{id}}"
    if form is not None:
        built["body"] = base64.b64encode(urlencode(form).encode()).decode()
    return built


def invoke(handler_module: Any, event: dict[str, Any]) -> dict[str, Any]:
    """Call a function's handler with ``event`` as Lambda would (with a context Powertools
    reads)."""
    return handler_module.handler(event, LambdaContext())  # type: ignore[no-any-return]


@contextlib.contextmanager
def function_log(handler_module: Any) -> Iterator[io.StringIO]:
    """Everything a function's handler module logs while inside (its Powertools JSON handler is
    shared with the ``langorch.*`` loggers)."""
    stream = io.StringIO()
    handler = handler_module.logger.registered_handler
    previous = handler.setStream(stream)
    try:
        yield stream
    finally:
        handler.setStream(previous)
