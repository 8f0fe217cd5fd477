"""Outbound HTTP for ``http`` steps and ``attach`` downloads, on urllib3 (already shipped with
botocore)."""

from __future__ import annotations

import json
from typing import Any

import urllib3

from langorch.domain.artifacts import ArtifactError, check_size
from langorch.domain.errors import JsonShapeError, JsonSyntaxError, LangorchError
from langorch.domain.limits import loads_strict

MAX_RESPONSE_BYTES = 1_000_000
"""Responses larger than this are refused rather than stored in the run's state."""

_POOL = urllib3.PoolManager(retries=False)

_DOWNLOAD_RETRIES = urllib3.Retry(total=None, connect=0, read=0, status=0, other=0, redirect=5)
"""A download follows up to 5 redirects (a file's link often is one) and retries nothing: the
step's ``max_retries`` does, with its backoff."""


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


def http_download(url: str, *, max_bytes: int, timeout: float) -> tuple[bytes, str | None]:
    """GET ``url`` for an ``attach`` step; returns ``(bytes, Content-Type)``.

    Never reads past ``max_bytes``: a ``Content-Length`` over it is refused before the body is
    read, and a body without one is read to ``max_bytes + 1`` at most. Messages name the URL
    without its query (which may carry a token).

    Raises:
        ArtifactError: not an http(s) URL, an error status (retryable for 429 and 5xx), or no
            answer in time (retryable).
        ArtifactTooLargeError: the file is over ``max_bytes``.
    """
    where = url.split("?")[0]
    if not url.startswith(("http://", "https://")):
        raise ArtifactError(f"attach downloads http(s) URLs only, got {url[:60]!r}")
    try:
        response = _POOL.request(
            "GET", url, timeout=timeout, preload_content=False, retries=_DOWNLOAD_RETRIES
        )
        try:
            if response.status >= 400:
                raise ArtifactError(
                    f"downloading {where}: HTTP {response.status}",
                    retryable=response.status == 429 or response.status >= 500,
                )
            length = response.headers.get("Content-Length")
            if length and length.isdigit():
                check_size(int(length), f"the download from {where}", limit=max_bytes)
            data = response.read(max_bytes + 1)
        finally:
            response.release_conn()
    except urllib3.exceptions.HTTPError as exc:
        raise ArtifactError(
            f"downloading {where} failed: {type(exc).__name__}", retryable=True
        ) from exc
    check_size(len(data), f"the download from {where}", limit=max_bytes)
    content_type = response.headers.get("Content-Type")
    return data, str(content_type) if content_type else None
