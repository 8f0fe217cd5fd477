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

Shape, not only size: every door also holds JSON to :data:`MAX_JSON_DEPTH` levels of nesting and
to strict JSON — no NaN or Infinity (nor a number like ``1e999`` that reads as Infinity), no lone
surrogate — with :func:`check_json_shape` (a value already parsed) and :func:`loads_strict`
(text). The records are written and read by pydantic, whose reader stops near 200 levels and
whose writer stops near 255, and which writes NaN as ``null``: 64 levels leave room for the
record's own envelope (``pending.request.editable.<key>`` …) and anything a door accepted is read
back as it was written. The doors parse with the standard library's ``json``, which reads deeper
(about 1,000 levels) and so can name the path of a value nested 250 levels deep.

Pure: sizes are measured on compact JSON (UTF-8), as the record stores them.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from langorch.domain.errors import (
    InputValidationError,
    JsonShapeError,
    JsonSyntaxError,
    Problem,
)

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

MAX_JSON_DEPTH = 64
"""How deeply objects and lists may nest in anything a door accepts (``{"a": 1}`` is 1 level):
well under every parser on the path (pydantic reads about 200, the standard library about
1,000), with room for the record's own nesting around it."""

TRUNCATED_MARKER = "…[truncated: {size} bytes, limit {limit}]"
"""Appended where a value was cut, so nobody mistakes a cut value for the whole."""
_CUT = re.compile(
    re.escape(TRUNCATED_MARKER).replace(r"\{size\}", r"\d+").replace(r"\{limit\}", r"\d+") + r"\Z"
)
_SURROGATE = re.compile("[\ud800-\udfff]")
_PATH_PARTS_SHOWN = 4
"""A path deeper than this is shown as its first parts and an ellipsis."""
_DEPTH_MEASURED = 1_000
"""How deep a refused value is measured: past this the message says "at least" (a YAML alias
can make a list that contains itself, endlessly deep)."""

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


def was_cut(value: Any) -> bool:
    """Whether :func:`cut` shortened ``value`` or a string anywhere inside it (its marker ends
    the string): what is left is not the value, and must never be taken for it."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _CUT.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def bounded_request(request: dict[str, Any], limit: int = MAX_PENDING_BYTES) -> dict[str, Any]:
    """A parked interrupt's request that fits ``limit`` bytes of JSON.

    Top-level keys are kept (the approval needs ``step_id``, ``approvers``, ``fields``...);
    long strings anywhere inside are cut to :data:`MAX_SHOWN_VALUE_CHARS` with a marker, and
    if the request is still too large (or nested deeper than :data:`MAX_JSON_DEPTH`, or not
    strict JSON) every nested value is cut to its short JSON text.

    Args:
        request: the request as the engine parked it.
        limit: the budget in bytes.

    Returns:
        ``request`` itself when it fits, else a bounded copy.
    """
    shaped = json_shape_problem(request, "request") is None
    if shaped and json_bytes(request) <= limit:
        return request
    shortened = _shorten(request, MAX_SHOWN_VALUE_CHARS)
    if shaped and json_bytes(shortened) <= limit:
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


def ensure_input_fits(workflow_id: str, data: Any, path: str = "input") -> None:
    """Refuse an input the run record could not carry (every door that starts a run).

    Args:
        workflow_id: the workflow the input is for (the error's subject).
        data: the input.
        path: what ``data`` is called in the error (``input``; a fork's ``shared_context``).

    Raises:
        JsonShapeError: ``data`` nests deeper than :data:`MAX_JSON_DEPTH` or is not strict
            JSON (:func:`check_json_shape`).
        InputValidationError: ``data`` is over :data:`~langorch.domain.limits.MAX_INPUT_BYTES`.
    """
    check_json_shape(data, path)
    size = json_bytes(data)
    if size > MAX_INPUT_BYTES:
        raise InputValidationError(
            f"input of workflow {workflow_id}",
            [
                Problem(
                    path,
                    f"is {size} bytes of JSON; the limit is {MAX_INPUT_BYTES} bytes",
                    "pass large data as a file (drop it in the bucket and give its S3 key)",
                )
            ],
        )


# --------------------------------------------------------------------------------------------
# Shape: depth and strict JSON
# --------------------------------------------------------------------------------------------


def check_json_shape(value: Any, path: str = "value") -> None:
    """Refuse a value nested too deep or holding what strict JSON has no room for.

    The one check every door applies to JSON it accepts (webhook bodies, run inputs, approver
    edits, fork values, files read as JSON, ``http`` responses, model answers).

    Args:
        value: a parsed JSON value (``dict``, ``list``, ``str``, numbers, ``bool``, ``None``).
        path: what the value is called (``input``, ``body``, ``edit.amount``): the start of the
            field path the error names.

    Raises:
        JsonShapeError: naming the field path, what is wrong, the limit and how to fix it.
    """
    problem = json_shape_problem(value, path)
    if problem is not None:
        raise JsonShapeError(problem)


def json_shape_problem(value: Any, path: str = "value") -> Problem | None:
    """What :func:`check_json_shape` would refuse in ``value`` (``None``: nothing).

    The walk is iterative, so a value nested far deeper than the limit is measured, not a
    ``RecursionError``. A NaN, an infinity or a lone surrogate is reported at the first place
    found; otherwise the deepest nesting past :data:`MAX_JSON_DEPTH`, with its path.
    """
    deepest: tuple[int, tuple[str | int, ...]] | None = None
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        item, parts = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return _lone_surrogate(path, parts)
        elif isinstance(item, float):
            if not math.isfinite(item):
                return _not_finite(path, parts, item)
        elif isinstance(item, dict | list | tuple):
            depth = len(parts) + 1
            if depth > MAX_JSON_DEPTH and (deepest is None or depth > deepest[0]):
                deepest = (depth, parts)
            if depth >= _DEPTH_MEASURED:
                continue
            if isinstance(item, dict):
                for key, child in item.items():
                    if isinstance(key, str) and _SURROGATE.search(key):
                        return _lone_surrogate(path, parts)
                    stack.append((child, (*parts, str(key))))
            else:
                stack.extend((child, (*parts, index)) for index, child in enumerate(item))
    if deepest is None:
        return None
    depth, parts = deepest
    levels = f"at least {depth}" if depth >= _DEPTH_MEASURED else str(depth)
    return Problem(
        field_path(path, parts),
        f"is nested {levels} levels deep, more than {MAX_JSON_DEPTH}",
        f"flatten it: at most {MAX_JSON_DEPTH} levels of objects and lists",
    )


def loads_strict(text: str | bytes, path: str = "value") -> Any:
    """Parse JSON text as every door does: the standard library's parser, then
    :func:`check_json_shape`.

    Args:
        text: the JSON text (bytes must be UTF-8).
        path: what the text is called in errors (``body``, ``--input``, ``edit.amount``).

    Returns:
        The value.

    Raises:
        JsonSyntaxError: not UTF-8, or not JSON (the line and column).
        JsonShapeError: nested deeper than :data:`MAX_JSON_DEPTH`, a NaN or an infinity, a
            lone surrogate, or an integer too long to read (the field path).
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JsonSyntaxError(
                Problem(
                    path,
                    f"is not UTF-8 (byte 0x{text[exc.start]:02x} at offset {exc.start})",
                    "send UTF-8 JSON",
                )
            ) from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise JsonSyntaxError(
            Problem(
                path,
                f"is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
                "fix the syntax there (a missing quote, comma or bracket is usual)",
            )
        ) from None
    except RecursionError:
        raise JsonShapeError(
            Problem(
                path,
                f"is nested so deep the parser stopped, far more than {MAX_JSON_DEPTH} levels",
                f"flatten it: at most {MAX_JSON_DEPTH} levels of objects and lists",
            )
        ) from None
    except ValueError as exc:  # an integer past the interpreter's 4,300 digits
        raise JsonShapeError(
            Problem(path, f"holds a number that cannot be read ({exc})", "send it as a string")
        ) from None
    check_json_shape(value, path)
    return value


def field_path(path: str, parts: tuple[str | int, ...]) -> str:
    """``path`` followed by ``parts`` as ``input.a[0].b``, long paths shortened with ``…``
    (an empty ``path`` starts at the first key: ``workflows[0].triggers``)."""
    shown = "".join(
        f"[{part}]" if isinstance(part, int) else f".{cut_key(part)}"
        for part in parts[:_PATH_PARTS_SHOWN]
    )
    joined = path + shown + ("…" if len(parts) > _PATH_PARTS_SHOWN else "")
    return joined if path else joined.removeprefix(".")


def cut_key(key: str, limit: int = 40) -> str:
    """A key as a path shows it: at most ``limit`` characters."""
    return key if len(key) <= limit else key[: limit - 1] + "…"


def _not_finite(path: str, parts: tuple[str | int, ...], number: float) -> Problem:
    name = "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")
    why = "" if math.isnan(number) else f" (1e999, like any number past 1.8e308, reads as {name})"
    return Problem(
        field_path(path, parts),
        f"is {name}, which JSON has no number for{why}",
        "send a finite number, or null",
    )


def _lone_surrogate(path: str, parts: tuple[str | int, ...]) -> Problem:
    return Problem(
        field_path(path, parts),
        "holds a lone surrogate (a \\ud800-\\udfff escape without its pair): not Unicode text",
        "send UTF-8 text; a character outside the BMP is one pair such as \\ud83d\\ude00",
    )
