"""Helpers the runs-table adapters share: timestamps as stored, and reading a ClientError."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from botocore.exceptions import ClientError


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
