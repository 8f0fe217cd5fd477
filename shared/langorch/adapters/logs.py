"""CloudWatch Logs: the handlers' JSON lines, written (local mode) and read back per run."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from langorch.adapters.log_lines import Event, LogLine
from langorch.domain.errors import StorageError

PUT_MAX_EVENTS = 10_000
"""The most events one PutLogEvents call takes."""
PUT_MAX_BYTES = 1_048_576
"""The most bytes one PutLogEvents call takes: each event's UTF-8 message plus
:data:`EVENT_OVERHEAD_BYTES`."""
EVENT_OVERHEAD_BYTES = 26
PUT_MAX_SPAN_MS = 24 * 60 * 60 * 1000
"""The events of one PutLogEvents call may not span more than 24 hours."""


def put_batches(events: Sequence[Event]) -> Iterator[list[Event]]:
    """``events`` in time order, cut into the fewest PutLogEvents calls CloudWatch's limits allow.

    Each batch holds at most :data:`PUT_MAX_EVENTS` events and :data:`PUT_MAX_BYTES` bytes and
    spans at most :data:`PUT_MAX_SPAN_MS`; events of the same millisecond keep their order.
    """
    batch: list[Event] = []
    size = 0
    for event in sorted(events, key=lambda e: e[0]):
        cost = len(event[1].encode("utf-8")) + EVENT_OVERHEAD_BYTES
        if batch and (
            len(batch) >= PUT_MAX_EVENTS
            or size + cost > PUT_MAX_BYTES
            or event[0] - batch[0][0] > PUT_MAX_SPAN_MS
        ):
            yield batch
            batch, size = [], 0
        batch.append(event)
        size += cost
    if batch:
        yield batch


class CloudWatchLogs:
    """Log groups of the Lambda functions.

    Args:
        client: a boto3 ``logs`` client.
    """

    def __init__(self, client: Any) -> None:
        self._client = client

    def ensure_group(self, group: str, *, retention_days: int | None = None) -> None:
        """Create the log group when missing (and set its retention)."""
        try:
            self._client.create_log_group(logGroupName=group)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ResourceAlreadyExistsException":
                raise StorageError(f"cannot create log group {group}: {exc}") from exc
        if retention_days is not None:
            try:
                self._client.put_retention_policy(
                    logGroupName=group, retentionInDays=retention_days
                )
            except ClientError as exc:
                raise StorageError(f"cannot set retention of {group}: {exc}") from exc

    def put(self, group: str, stream: str, events: Sequence[Event]) -> None:
        """Write ``(epoch ms, message)`` events to a stream, creating the stream when missing."""
        if not events:
            return
        self.create_stream(group, stream)
        for batch in put_batches(events):
            self.put_batch(group, stream, batch)

    def create_stream(self, group: str, stream: str) -> None:
        """Create a log stream in ``group`` (one that exists already is fine)."""
        try:
            self._client.create_log_stream(logGroupName=group, logStreamName=stream)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ResourceAlreadyExistsException":
                raise StorageError(f"cannot create log stream {group}/{stream}: {exc}") from exc
        except BotoCoreError as exc:  # the emulator is gone, or not answering
            raise StorageError(f"cannot create log stream {group}/{stream}: {exc}") from exc

    def put_batch(self, group: str, stream: str, batch: Sequence[Event]) -> None:
        """One PutLogEvents call: ``batch`` must be one of :func:`put_batches`' batches."""
        try:
            self._client.put_log_events(
                logGroupName=group,
                logStreamName=stream,
                logEvents=[{"timestamp": t, "message": m} for t, m in batch],
            )
        except (BotoCoreError, ClientError) as exc:
            raise StorageError(f"cannot write to {group}/{stream}: {exc}") from exc

    def groups(self, prefix: str) -> list[str]:
        """The names of the log groups starting with ``prefix``."""
        names: list[str] = []
        try:
            for page in self._client.get_paginator("describe_log_groups").paginate(
                logGroupNamePrefix=prefix
            ):
                names.extend(str(g["logGroupName"]) for g in page.get("logGroups", []))
        except ClientError as exc:
            raise StorageError(f"cannot list log groups under {prefix}: {exc}") from exc
        return names

    def lines_for_run(
        self, run_id: str, groups: Sequence[str], *, start_ms: int | None = None
    ) -> list[LogLine]:
        """Every line of ``groups`` that belongs to the run, oldest first.

        The filter pattern is a quoted term (which CloudWatch and the emulator both evaluate)
        narrowing the scan server-side; the run is then matched on the line's ``run_id`` field,
        because a JSON filter pattern (``{ $.run_id = ... }``) is not evaluated by the emulator
        and a term also matches lines that only mention the id.
        """
        lines = [
            line
            for group in groups
            for line in self._filter(group, f'"{run_id}"', start_ms)
            if (line.fields() or {}).get("run_id") == run_id
        ]
        lines.sort(key=lambda line: line.timestamp)
        return lines

    def _filter(self, group: str, pattern: str, start_ms: int | None) -> Iterator[LogLine]:
        request: dict[str, Any] = {"logGroupName": group, "filterPattern": pattern}
        if start_ms is not None:
            request["startTime"] = start_ms
        try:
            for page in self._client.get_paginator("filter_log_events").paginate(**request):
                for event in page.get("events", []):
                    yield LogLine(
                        group=group,
                        stream=str(event.get("logStreamName", "")),
                        timestamp=int(event.get("timestamp", 0)),
                        message=str(event.get("message", "")),
                    )
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ResourceNotFoundException":
                return
            raise StorageError(f"cannot read log group {group}: {exc}") from exc
