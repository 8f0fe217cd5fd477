"""An ``on_approval`` for ``run_to_end`` that answers every approval the same way and keeps
what it was asked."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

OnApproval = Callable[[dict[str, Any]], dict[str, Any]]


def recording_approver(answer: dict[str, Any]) -> tuple[list[dict[str, Any]], OnApproval]:
    """The requests asked so far (filled in as they come), and the ``on_approval`` that records
    each request and answers ``answer`` (decision, approver, edits, votes, ...)."""
    asked: list[dict[str, Any]] = []

    def on_approval(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request)
        return copy.deepcopy(answer)  # each resume gets its own, as from a real approver

    return asked, on_approval
