"""Approval evidence an auditor can check: a hash chain over a run's approval events.

Each entry carries ``prev`` (the previous entry's ``digest``; :data:`GENESIS` for the first) and
its own ``digest``: SHA-256 of the entry's canonical JSON without ``digest``. A decision also
carries ``authorised``: the digest of what it let through (the decision, the edits, the comment,
what was shown, the workflow version). Changing, dropping or reordering any entry breaks the
chain from there on, and :func:`verify` names the first entry that does not hold.

Pure: the entries come from the approvals store (:mod:`langorch.app.evidence`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

GENESIS = "0" * 64
"""The ``prev`` of a chain's first entry."""


def canonical(value: Any) -> bytes:
    """The JSON every digest is taken over: sorted keys, no spaces, UTF-8."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return text.encode("utf-8")


def digest(value: Any) -> str:
    """SHA-256 (hex) of ``value``'s canonical JSON."""
    return hashlib.sha256(canonical(value)).hexdigest()


def chain(entries: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``entries`` numbered (``seq`` from 1) and linked: each with ``prev`` and ``digest``."""
    linked: list[dict[str, Any]] = []
    prev = GENESIS
    for seq, entry in enumerate(entries, start=1):
        body = {**entry, "seq": seq, "prev": prev}
        body.pop("digest", None)
        body["digest"] = prev = digest(body)
        linked.append(body)
    return linked


@dataclass(frozen=True)
class Verified:
    """What :func:`verify` found.

    Attributes:
        entries: How many entries were read.
        first_bad: The line number (1-based) of the first entry that does not hold, else
            ``None``.
        reason: Why it does not hold.
    """

    entries: int
    first_bad: int | None = None
    reason: str = ""

    @property
    def ok(self) -> bool:
        """Whether the whole chain holds."""
        return self.first_bad is None


def verify(lines: Sequence[str]) -> Verified:
    """Check a JSONL ledger (one entry a line, as exported): every digest and every link.

    Args:
        lines: The file's lines (blank lines are skipped; they count for line numbers).
    """
    prev = GENESIS
    count = 0
    links: dict[str, set[str]] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        count += 1
        try:
            entry = json.loads(line)
        except ValueError as exc:
            return Verified(count, number, f"line {number} is not JSON: {exc}")
        if not isinstance(entry, dict) or not isinstance(entry.get("digest"), str):
            return Verified(count, number, f"line {number} is not a ledger entry (no digest)")
        if entry.get("prev") != prev:
            return Verified(
                count,
                number,
                f"line {number} does not follow line {number - 1}: its prev is "
                f"{str(entry.get('prev'))[:16]}…, the entry before has {prev[:16]}…",
            )
        body = {k: v for k, v in entry.items() if k != "digest"}
        if digest(body) != entry["digest"]:
            return Verified(
                count, number, f"line {number} was altered: its content no longer has its digest"
            )
        prev = entry["digest"]
        stored = _stored_problem(entry, number, links)
        if stored:
            return Verified(count, number, stored)
    return Verified(count)


def _stored_problem(entry: Mapping[str, Any], number: int, links: dict[str, set[str]]) -> str:
    """What is wrong with an exported audit line's stored link ("" when it holds).

    The line as stored is the exported one without the export's fields, ``stored_prev`` as its
    ``prev``; its digest must be ``stored_digest``, and no other line of its run may follow the
    same line (a fork: a line inserted or replaced beside the chain).
    """
    if entry.get("kind") != "event" or "stored_digest" not in entry:
        return ""
    body = {k: v for k, v in entry.items() if k not in _EXPORT_FIELDS}
    body["prev"] = body.pop("stored_prev", None)
    if digest(body) != entry["stored_digest"]:
        return (
            f"line {number} was altered in the store: the audit line no longer has the digest "
            "written with it"
        )
    followed = links.setdefault(str(entry.get("run_id")), set())
    if body["prev"] in followed:
        return f"line {number} follows a line another line of its run already follows"
    followed.add(str(body["prev"]))
    return ""


_EXPORT_FIELDS = frozenset({"kind", "seq", "prev", "digest", "stored_digest"})
"""What an export adds to a stored audit line."""
