"""Approver edits: typed inputs, checked against the field's type and size before any write.

An approval step names the state keys an approver may edit (``editable_keys``); the page shows
each with an input that fits its current value, and a POST's edits are read back the same way:

==========  ==================================  ==============================================
kind        current value                       input, and what is read back
==========  ==================================  ==============================================
text        a string, or nothing yet (None)     a text box; the text as typed
number      an int or a float                   a number box; an int stays an int
yes_no      a bool                              yes / no; ``True`` / ``False``
lines       a list of strings (or empty list)   a text box, one item per line; a list of str
json        an object, or a list of non-strings a text box of JSON; the same type back
==========  ==================================  ==============================================

A key nothing provides before the approval (the approver fills it in) is declared with its type
in ``approval.editable_types``; its field starts from that type's empty value
(:func:`empty_value`), so an empty list is a list editor and reads back as a list, never a
string.

Each edited field is bounded by :data:`MAX_EDIT_FIELD_BYTES` and all of a POST's edits by
:data:`MAX_EDITS_TOTAL_BYTES` (UTF-8 JSON), so a decision always fits the run record and Step
Functions' payload; and held to the shape every door keeps (at most
:data:`~langorch.domain.limits.MAX_JSON_DEPTH` levels, strict JSON: no NaN, Infinity or lone
surrogate). A bad edit raises :class:`EditRejectedError` naming the field: the page is
shown again with what the person typed, and nothing is written.

Pure: no I/O.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Literal

from langorch.domain.approvals.refusals import InvalidDecisionError
from langorch.domain.errors import JsonShapeError, JsonSyntaxError
from langorch.domain.limits import json_shape_problem, loads_strict, was_cut

EDIT_PREFIX = "edit."
"""Form fields of edits are named ``edit.<key>``."""
MAX_EDIT_FIELD_BYTES = 32 * 1024
"""The largest one edited value may be (UTF-8 bytes of its JSON)."""
MAX_EDITS_TOTAL_BYTES = 128 * 1024
"""The largest all edits of one decision may be together (UTF-8 bytes of their JSON)."""
MAX_EDIT_CHARS = 20_000
"""A current value longer than this (as text) is shown read-only, not offered for editing; so
is a value that was cut before it reached the approval (:func:`is_editable_here`)."""


EditableType = Literal["text", "number", "yes_no", "list", "json"]
"""The declared type of a key the approver fills in (``approval.editable_types``)."""


def empty_value(kind: EditableType) -> Any:
    """The value a declared editable key starts from when nothing provided it: an input of
    that type, empty (``list``: a list editor, one item per line; ``json``: an object)."""
    return {"text": "", "number": 0, "yes_no": False, "list": [], "json": {}}[kind]


class EditKind(StrEnum):
    """Which input an editable value gets (see the module's table)."""

    text = "text"
    number = "number"
    yes_no = "yes_no"
    lines = "lines"
    json = "json"


class EditRejectedError(InvalidDecisionError):
    """An edit does not fit its field's type or size; nothing was written.

    Attributes:
        key: the edited key (without the ``edit.`` prefix).
        problem: what is wrong with it, as the end of a sentence ("is not a number").
    """

    def __init__(self, key: str, problem: str) -> None:
        self.key = key
        self.problem = problem
        super().__init__(f"{EDIT_PREFIX}{key}: {problem}")


def kind_of(value: Any) -> EditKind:
    """The input a current value gets."""
    if isinstance(value, bool):
        return EditKind.yes_no
    if isinstance(value, int | float):
        return EditKind.number
    if value is None or isinstance(value, str):
        return EditKind.text
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return EditKind.lines
    return EditKind.json


def as_text(value: Any) -> str:
    """How a current value appears in its input (what an unchanged form sends back)."""
    kind = kind_of(value)
    if kind is EditKind.text:
        return value or ""
    if kind is EditKind.yes_no:
        return "yes" if value else "no"
    if kind is EditKind.number:
        return json.dumps(value)
    if kind is EditKind.lines:
        return "\n".join(value)
    return json.dumps(value, indent=2, default=str, ensure_ascii=False)


def is_editable_here(value: Any) -> bool:
    """Whether a page offers ``value`` for editing.

    Not when it would have to be cut to be shown (longer than :data:`MAX_EDIT_CHARS`), nor when
    it was cut before it reached the approval (a long value of a large request is stored cut,
    :func:`~langorch.domain.limits.bounded_request`): saving what is shown would store the cut
    text, marker included, over the whole value.
    """
    return not was_cut(value) and len(as_text(value)) <= MAX_EDIT_CHARS


def edit_elsewhere(run_id: str, step_id: str, key: str) -> str:
    """Why a value is shown but not offered for editing, and how to change it all the same."""
    return (
        "Too long to edit here: it is shown cut, and saving it would keep only the part shown. "
        "Decide on it as it is; to change it, fork the run at this step with the whole value: "
        f"langorch runs fork {run_id} --at {step_id} --set {key}=JSON"
    )


def parse_edits(editable: Mapping[str, Any], form: Mapping[str, str]) -> dict[str, Any]:
    """The edits a form carries, typed like the current values and bounded.

    Args:
        editable: the approval's editable keys and their current values.
        form: the POSTed fields (``edit.<key>``; others are ignored).

    Returns:
        The changed keys and their new values (unchanged fields are left out).

    Raises:
        EditRejectedError: an edit has the wrong type or is too large, or changes a value that
            is not editable here (shown cut) (names the field).
    """
    edits: dict[str, Any] = {}
    total = 0
    for key, original in editable.items():
        typed = form.get(EDIT_PREFIX + key)
        if typed is None:
            continue
        # Browsers send a textarea's line breaks as CRLF.
        typed = typed.replace("\r\n", "\n")
        if not is_editable_here(original):
            if typed != as_text(original):
                # The page offers no input for it: this form is forged or from an older page.
                raise EditRejectedError(
                    key,
                    "is shown cut, so it cannot be edited here (saving it would store the cut "
                    "text); leave it as it is, or change it with `langorch runs fork RUN_ID "
                    f"--at STEP --set {key}=JSON`",
                )
            continue
        if len(typed.encode("utf-8")) > MAX_EDIT_FIELD_BYTES:
            raise EditRejectedError(key, f"is larger than {MAX_EDIT_FIELD_BYTES // 1024} KB")
        if typed == as_text(original) or (original is None and not typed.strip()):
            continue
        value = _parse(key, original, typed)
        shape = json_shape_problem(value, EDIT_PREFIX + key)
        if shape is not None:
            raise EditRejectedError(key, f"{shape.message} (at {shape.path}): {shape.hint}")
        size = len(json.dumps(value, ensure_ascii=False).encode("utf-8"))
        if size > MAX_EDIT_FIELD_BYTES:
            raise EditRejectedError(key, f"is larger than {MAX_EDIT_FIELD_BYTES // 1024} KB")
        total += size
        if total > MAX_EDITS_TOTAL_BYTES:
            raise EditRejectedError(
                key, f"makes the edits larger than {MAX_EDITS_TOTAL_BYTES // 1024} KB in all"
            )
        edits[key] = value
    return edits


def _parse(key: str, original: Any, typed: str) -> Any:
    kind = kind_of(original)
    if kind is EditKind.text:
        return typed
    if kind is EditKind.lines:
        return [line for line in typed.split("\n") if line.strip()]
    if kind is EditKind.yes_no:
        answer = typed.strip().lower()
        if answer not in ("yes", "no"):
            raise EditRejectedError(key, "must be yes or no")
        return answer == "yes"
    if kind is EditKind.number:
        return _number(key, original, typed.strip())
    try:
        value = loads_strict(typed, EDIT_PREFIX + key)
    except JsonSyntaxError:
        raise EditRejectedError(key, "must be JSON (as shown when the page opened)") from None
    except JsonShapeError as exc:
        shape = exc.problems[0]
        raise EditRejectedError(key, f"{shape.message} (at {shape.path}): {shape.hint}") from None
    if type(value) is not type(original):
        wanted = "an object" if isinstance(original, dict) else "a list"
        raise EditRejectedError(key, f"must be JSON {wanted} (as shown when the page opened)")
    return value


def _number(key: str, original: Any, typed: str) -> int | float:
    if isinstance(original, int):
        try:
            return int(typed)
        except ValueError:
            pass
    try:
        value = float(typed)
    except ValueError:
        raise EditRejectedError(key, f"must be a number (like {original})") from None
    if not math.isfinite(value):
        raise EditRejectedError(key, f"must be a finite number (like {original})")
    return value
