"""One-time codes: six digits emailed to each approver when a step sets ``require_code``.

Only a keyed hash of each code is stored, so the 10^6 codes cannot be tried offline; counting
attempts (per approver link, atomically) is the store's. Pure.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable

from langorch.domain.approvals.record import (
    CODE_DIGITS,
    Approval,
    CodeMismatchError,
    CodeMissingError,
    LinkClaims,
    _b64,
    _mac,
)


def new_code(randbelow: Callable[[int], int]) -> str:
    """A fresh six-digit one-time code (``randbelow``: e.g. ``secrets.randbelow``)."""
    return f"{randbelow(10**CODE_DIGITS):0{CODE_DIGITS}d}"


def code_hash(approval_id: str, ref: str, code: str, key: bytes) -> str:
    """The stored form of an approver's code: keyed, so the 10^6 codes cannot be tried offline."""
    return _b64(_mac(key, "code", approval_id, ref, code.strip()))


def typed_code(code: str | None) -> str:
    """The code as typed, without the spaces people put between digits."""
    return re.sub(r"\s", "", code or "")


def check_code(
    approval: Approval, claims: LinkClaims, code: str, stored_hash: str | None, key: bytes
) -> None:
    """Check the one-time code typed on the page (only when the step requires one).

    Counting attempts is the store's (one conditional update per attempt, per approver link);
    the caller claims an attempt before calling this, and never for an empty code.

    Raises:
        CodeMissingError: no code was typed (not a guess).
        CodeMismatchError: the code is malformed or wrong.
    """
    if not approval.require_code:
        return
    typed = typed_code(code)
    if not typed:
        raise CodeMissingError(f"approval {approval.approval_id}: no code was typed")
    if not (stored_hash and typed.isdigit() and len(typed) == CODE_DIGITS):
        raise CodeMismatchError(f"approval {approval.approval_id}: code malformed or not issued")
    expected = code_hash(approval.approval_id, claims.approver_ref, typed, key)
    if not hmac.compare_digest(expected.encode(), stored_hash.encode()):
        raise CodeMismatchError(f"approval {approval.approval_id}: wrong code")
