"""Outbound HTTP for ``http`` steps, on urllib3 (already shipped with botocore)."""

from __future__ import annotations

import json
from typing import Any

import urllib3

from langorch.domain.errors import JsonShapeError, JsonSyntaxError, LangorchError
from langorch.domain.limits import loads_strict

MAX_RESPONSE_BYTES = 1_000_000
"""Responses larger than this are refused rather than stored in the run's state."""

_POOL = urllib3.PoolManager(retries=False)


class HttpCallError(LangorchError):
    """The call did not get an answer (connection, timeout): worth another attempt."""

    retryable = True


class HttpResponseTooLargeError(HttpCallError):
    """The answer is past :data:`MAX_RESPONSE_BYTES`; asking again gets the same answer."""

    retryable = False


class HttpResponseShapeError(HttpCallError):
    """The answer is JSON nested deeper than ``MAX_JSON_DEPTH`` or not strict JSON (NaN,
    Infinity, a lone surrogate): the run could not carry it, and asking again gets the same."""

    retryable = False


def http_call(
    method: str, url: str, *, headers: dict[str, str], body: Any, timeout: float
) -> tuple[int, Any]:
    """Make one HTTP request; returns ``(status, parsed JSON or text)``.

    Raises:
        HttpCallError: no answer in time, or a connection failure.
        HttpResponseTooLargeError: a response past :data:`MAX_RESPONSE_BYTES`.
        HttpResponseShapeError: a JSON response nested too deep or not strict JSON.
    """
    if not url.startswith(("http://", "https://")):
        raise LangorchError(f"http steps call http(s) URLs only, got {url[:60]!r}")
    data: bytes | None = None
    headers = dict(headers)
    if body is not None:
        data = json.dumps(body).encode()
        headers.setdefault("Content-Type", "application/json")
    try:
        response = _POOL.request(
            method, url, body=data, headers=headers, timeout=timeout, preload_content=False
        )
        raw = response.read(MAX_RESPONSE_BYTES + 1)
        response.release_conn()
    except urllib3.exceptions.HTTPError as exc:
        raise HttpCallError(f"{method} {url.split('?')[0]} failed: {type(exc).__name__}") from exc
    if len(raw) > MAX_RESPONSE_BYTES:
        raise HttpResponseTooLargeError(
            f"response from {url.split('?')[0]} is over {MAX_RESPONSE_BYTES} bytes: ask the "
            "service for less (paging, a filter) or fetch the data in a file"
        )
    text = raw.decode(errors="replace")
    if not text:
        return response.status, None
    try:
        return response.status, loads_strict(text, "body")
    except JsonSyntaxError:
        return response.status, text  # not JSON: kept as text
    except JsonShapeError as exc:
        raise HttpResponseShapeError(
            f"response from {url.split('?')[0]}: {exc}; ask the service for a flatter, strict "
            "JSON answer"
        ) from None
