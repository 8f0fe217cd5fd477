"""Typed, bounded approver edits (pure rules of :mod:`langorch.domain.approvals.edits`)."""

from __future__ import annotations

from typing import Any

import pytest

from langorch.domain.approvals.edits import (
    MAX_EDIT_FIELD_BYTES,
    EditKind,
    EditRejectedError,
    as_text,
    kind_of,
    parse_edits,
)
from langorch.web.errors import http_status


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (None, EditKind.text),
        ("x", EditKind.text),
        (3, EditKind.number),
        (2.5, EditKind.number),
        (True, EditKind.yes_no),
        (["a"], EditKind.lines),
        ([], EditKind.lines),
        ([1, 2], EditKind.json),
        ({"a": 1}, EditKind.json),
    ],
)
def test_the_input_follows_the_current_value(value: Any, kind: EditKind) -> None:
    assert kind_of(value) is kind
    # An unchanged form (every input as shown) edits nothing.
    assert parse_edits({"k": value}, {"edit.k": as_text(value)}) == {}


def test_numbers_keep_their_type_and_refuse_words() -> None:
    assert parse_edits({"n": 1}, {"edit.n": " 7 "}) == {"n": 7}
    assert parse_edits({"n": 1}, {"edit.n": "7.5"}) == {"n": 7.5}
    for bad in ("Chipotle", "nan", "inf", "1" * 5000):
        with pytest.raises(EditRejectedError, match=r"edit\.n: must be a"):
            parse_edits({"n": 1}, {"edit.n": bad})


def test_a_field_is_bounded_before_it_is_parsed() -> None:
    with pytest.raises(EditRejectedError) as refused:
        parse_edits({"j": {}}, {"edit.j": "[" * (MAX_EDIT_FIELD_BYTES + 1)})
    assert refused.value.key == "j" and http_status(refused.value) == 422
