"""One size budget per run: what every door may accept so that the run can carry it.

A run carries its data in three places, each with a hard limit:

* **The run record** — one DynamoDB item (400 KB). The record is stored as JSON in one
  attribute (``body``) and rewritten with ``UpdateItem`` on every status change. DynamoDB
  counts only the resulting item, but the local stack's emulator (moto) counts the replaced
  value *and* the new one against its 405,000-byte limit during an update. So a body must stay
  under half of that: :data:`MAX_RECORD_BODY_BYTES` = 190,000 bytes, which leaves 12,500 bytes
  for the other attributes (ids, status, times, index keys; about 1 KB in practice).
* **Step Functions payloads** — 256 KB (262,144 bytes). The state machine carries only the run
  id, the status and the approval request between states; run input and outputs never travel
  in it. The approval request is bounded by :data:`MAX_PENDING_BYTES`, far below.
* **Checkpoints** — DynamoDB items too, but values over the checkpointer's inline limit are
  offloaded to S3, so the graph's state is bounded only by S3.

The record's body is split into bounded parts that add up to less than the body's budget::

    input            100,000   refused at the door (413 for a webhook body, 422 otherwise)
    outputs           40,000   larger outputs are summarised (the checkpoint keeps them whole)
    pending request   32,000   approval fields shown to people are truncated with a marker
    error + reason     4,000   messages are truncated (domain.runs MAX_ERROR_MESSAGE_CHARS)
    the rest          ~2,000   ids, trigger detail, times
                     -------
                     178,000   <= MAX_RECORD_BODY_BYTES (190,000): 12 KB of slack

So whatever a door accepts fits the record at every later write: the input is the only part a
caller controls directly, and it is refused at the door; the others grow with the work done and
are bounded where the run side stores them.

Pure: sizes are measured on compact JSON (UTF-8), as the record stores them.
"""

from __future__ import annotations

import json
from typing import Any

DYNAMODB_ITEM_BYTES = 400 * 1024
"""DynamoDB's item limit."""
EMULATOR_ITEM_BYTES = 405_000
"""moto's item limit; during an update it counts the old value of an attribute and the new."""
STEP_FUNCTIONS_PAYLOAD_BYTES = 262_144
"""Step Functions' limit on a state's input or output."""

MAX_RECORD_BODY_BYTES = 190_000
"""The run record's JSON: the old and the new value of an update both fit the emulator's item."""
MAX_INPUT_BYTES = 100_000
"""A run's input as compact JSON: every door (webhook, CLI, schedule, S3) refuses more."""
MAX_OUTPUTS_BYTES = 40_000
"""Outputs kept on the record; past this they are summarised (``outputs_truncated``)."""
MAX_PENDING_BYTES = 32_000
"""The parked interrupt's request on the record (what an approval shows, a wait's seconds)."""
MAX_SHOWN_VALUE_CHARS = 4_000
"""One value shown on an approval, as text; longer values are cut and marked."""
MAX_REASON_CHARS = 500
"""A minimal terminal record's reason (written when the full record cannot be)."""

TRUNCATED_MARKER = "…[truncated: {size} bytes, limit {limit}]"
"""Appended where a value was cut, so nobody mistakes a cut value for the whole."""

assert MAX_INPUT_BYTES + MAX_OUTPUTS_BYTES + MAX_PENDING_BYTES + 6_000 <= MAX_RECORD_BODY_BYTES
assert 2 * MAX_RECORD_BODY_BYTES + 12_000 <= EMULATOR_ITEM_BYTES
assert MAX_PENDING_BYTES < STEP_FUNCTIONS_PAYLOAD_BYTES


def json_bytes(value: Any) -> int:
    """The size of ``value`` as compact UTF-8 JSON (how the record stores it)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return len(text.encode("utf-8"))


def cut(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters with a marker saying how long it was."""
    if len(text) <= limit:
        return text
    return text[:limit] + TRUNCATED_MARKER.format(size=len(text.encode("utf-8")), limit=limit)


def bounded_request(request: dict[str, Any], limit: int = MAX_PENDING_BYTES) -> dict[str, Any]:
    """A parked interrupt's request that fits ``limit`` bytes of JSON.

    Top-level keys are kept (the approval needs ``step_id``, ``approvers``, ``fields``...);
    long strings anywhere inside are cut to :data:`MAX_SHOWN_VALUE_CHARS` with a marker, and
    if the request is still too large every nested value is cut to its short JSON text.

    Args:
        request: the request as the engine parked it.
        limit: the budget in bytes.

    Returns:
        ``request`` itself when it fits, else a bounded copy.
    """
    if json_bytes(request) <= limit:
        return request
    shortened = _shorten(request, MAX_SHOWN_VALUE_CHARS)
    if json_bytes(shortened) <= limit:
        return dict(shortened)
    per_key = max(64, limit // max(1, 2 * len(request)))
    return {
        key: value
        if isinstance(value, (int, float, bool)) or value is None
        else cut(json.dumps(value, ensure_ascii=False, default=str), per_key)
        for key, value in request.items()
    }


def _shorten(value: Any, chars: int) -> Any:
    if isinstance(value, str):
        return cut(value, chars)
    if isinstance(value, dict):
        return {key: _shorten(item, chars) for key, item in value.items()}
    if isinstance(value, list):
        return [_shorten(item, chars) for item in value]
    return value


def ensure_input_fits(workflow_id: str, data: Any) -> None:
    """Refuse an input the run record could not carry (every door that starts a run).

    Raises:
        InputValidationError: ``data`` is over :data:`~langorch.domain.limits.MAX_INPUT_BYTES`.
    """
    from langorch.domain.errors import InputValidationError, Problem

    size = json_bytes(data)
    if size > MAX_INPUT_BYTES:
        raise InputValidationError(
            f"input of workflow {workflow_id}",
            [
                Problem(
                    "input",
                    f"is {size} bytes of JSON; the limit is {MAX_INPUT_BYTES} bytes",
                    "pass large data as a file (drop it in the bucket and give its S3 key)",
                )
            ],
        )
