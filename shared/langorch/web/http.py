"""The wire at the web edge: request bodies as sent, JSON answers, and the errors reading a
request raises. Which status each error or outcome gets is :mod:`langorch.web.errors`'s table.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from langorch.domain.errors import LangorchError


def error_body(error: LangorchError) -> dict[str, Any]:
    """The JSON body of an error response: a message and, for input problems, their paths."""
    problems = getattr(error, "problems", None) or []
    body: dict[str, Any] = {
        "error": str(error).splitlines()[0] if str(error) else type(error).__name__
    }
    if problems:
        body["problems"] = [
            {"path": p.path, "message": p.message, "hint": p.hint} for p in problems
        ]
    return body


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """An API Gateway HTTP API (v2) proxy response with a JSON body."""
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json", **(headers or {})},
        "body": json.dumps(body),
    }


class UnreadableBodyError(LangorchError, ValueError):
    """A request body that is not what its envelope says (bad base64)."""


class FormNotReadableError(LangorchError):
    """A POST to an approval page that is not a form (another content type, or none)."""


class FormContentError(LangorchError):
    """A form body that is not what an approval page sends: not UTF-8, undecodable, or more
    fields than a page has."""


class FormTooLargeError(LangorchError):
    """A POST body larger than an approval accepts."""


def raw_body(body: str | None, is_base64: bool) -> bytes:
    """A proxy event's body byte for byte as sent (a signature covers exactly these bytes).

    Raises:
        UnreadableBodyError: ``isBase64Encoded`` is set and the body is not base64.
    """
    if body is None:
        return b""
    if not is_base64:
        return body.encode("utf-8", "surrogateescape")
    try:
        return base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise UnreadableBodyError("the body is not valid base64") from exc
