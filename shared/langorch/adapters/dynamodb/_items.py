"""Helpers the runs-table adapters share: timestamps as stored, and reading a ClientError."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, cast

from botocore.exceptions import ClientError

from langorch.domain.errors import StorageError


def utc_iso(moment: datetime) -> str:
    """A time as stored in the runs table: UTC, fixed width, so it sorts as text."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def response(exc: ClientError) -> dict[str, Any]:
    """The error response as the plain dict it is.

    botocore types it as a TypedDict without ReturnValuesOnConditionCheckFailure's ``Item``
    or a transaction's ``CancellationReasons`` items.
    """
    return cast(dict[str, Any], exc.response)


def error_code(exc: ClientError) -> str:
    """The AWS error code (``ConditionalCheckFailedException``, …)."""
    return str(response(exc).get("Error", {}).get("Code", ""))


def old_item(exc: ClientError) -> dict[str, Any] | None:
    """The item as it was when a condition failed (``ReturnValuesOnConditionCheckFailure``)."""
    return cast(dict[str, Any] | None, response(exc).get("Item"))


def batch_get(
    batch_get_item: Callable[..., Any],
    table: str,
    keys: Sequence[dict[str, Any]],
    storage_error: Callable[[str, ClientError], StorageError],
) -> list[dict[str, Any]]:
    """The items of ``keys`` (up to 100), in no particular order; absent ones are left out.

    The listing indexes project keys only (no hot body in an index), so a page of a listing is
    an index query for the keys and one ``BatchGetItem`` for the items. Throttled keys come
    back unprocessed: asked again with a short back-off, then a ``StorageError``.

    ``batch_get_item`` is the client's bound method (``self._client.batch_get_item``), so the
    calling adapter names the operation it makes (tests/infra/aws_calls.py reads it there).
    """
    if not keys:
        return []
    request: dict[str, Any] = {table: {"Keys": list(keys)}}
    found: list[dict[str, Any]] = []
    for attempt in range(8):
        try:
            answer = batch_get_item(RequestItems=request)
        except ClientError as exc:
            raise storage_error("BatchGetItem", exc) from exc
        found.extend(answer.get("Responses", {}).get(table, []))
        request = answer.get("UnprocessedKeys") or {}
        if not request:
            return found
        time.sleep(min(0.05 * 2**attempt, 1.0))  # throttled keys: back off, ask again
    raise StorageError(
        f"BatchGetItem on table {table} left keys unprocessed after retries (throttled); "
        "list again in a moment"
    )
