"""An approval's append-only audit trail: what happened, to whom, from where.

(Re-exported by :mod:`langorch.domain.approvals.record`, where it used to live.)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

AuditAction = Literal[
    "requested",
    "emailed",
    "posted",
    "view",
    "decide",
    "redeliver",
    "held",
    "refused",
    "expired",
    "too_late",
    "cancelled",
    "reissued",
    "vote",
    "reminded",
    "escalated",
    "delegated",
    "override",
    "superseded",
    "undeliverable",
]


class AuditEntry(BaseModel):
    """One line of an approval's append-only audit trail."""

    model_config = ConfigDict(extra="ignore")

    approval_id: str
    at: datetime
    action: AuditAction
    outcome: str
    actor: str | None = None
    """The approver's address once a link verified; the link's ref otherwise."""
    source_ip: str | None = None
    user_agent: str | None = None
    reason: str | None = None
    method: str | None = None
    channel: str | None = None
    """Where it came from when not the emailed link: ``console``, ``slack``."""
    operator: str | None = None
    """Who acted through that channel (``ana (OS user)``, an IAM principal's ARN)."""
    run_id: str | None = None
    """The run of the approval; its lines form one chain per run (set by the store)."""
    prev: str | None = None
    """The digest of the run's line written before this one (``GENESIS`` for its first)."""
    digest: str | None = None
    """SHA-256 of this line's canonical JSON without ``digest`` (set by the store, as the line
    is written; :func:`chained`)."""


def chained(entry: AuditEntry, run_id: str | None, prev: str) -> AuditEntry:
    """``entry`` as the next line of its run's chain: after the line whose digest is ``prev``.

    The store calls this while it holds the run's chain head, and writes the line and the new
    head together (one transaction, or one conditional write of the head).
    """
    from langorch.domain.evidence import digest

    body = entry.model_copy(update={"run_id": run_id, "prev": prev, "digest": None})
    return body.model_copy(update={"digest": digest(line_body(body))})


def line_body(entry: AuditEntry) -> dict[str, object]:
    """What a line's digest is taken over: its JSON fields but the digest (as stored)."""
    return entry.model_dump(mode="json", exclude_none=True, exclude={"digest"})


def chain_key(approval_id: str, run_id: str | None) -> str:
    """Which chain a line joins: its run's, or its approval's when no run is known."""
    return f"run#{run_id}" if run_id else f"approval#{approval_id}"


@dataclass(frozen=True)
class Visitor:
    """Who caused an audited event from outside: what its audit lines record of them.

    Built by whatever received the visit (the approval callback from its request, the console
    from its own), never read from anything the visitor can sign or forge into a decision.
    """

    method: str
    """How the visit came: ``GET``, ``HEAD`` (a page view) or ``POST`` (a form sent)."""
    source_ip: str | None = None
    """The client's address."""
    user_agent: str | None = None
    """What the client says it is (bounded when written)."""
    channel: str | None = None
    """``console`` for the console's decisions, ``slack`` for a chat's (``None``: the emailed
    link)."""
    operator: str | None = None
    """Who acted through that channel (audited beside the approver): ``slack:U012AB3CD``."""
