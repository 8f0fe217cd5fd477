"""The approval evidence of runs, as a hash-chained ledger (:mod:`langorch.domain.evidence`).

For each run: a ``run`` entry (workflow and its version, status), then each of its approvals in
the order asked — an ``asked`` entry (what was shown, to whom, under which policy), every line of
its audit trail (views, votes, delegations, reminders, escalations, the decision) and, once
decided, a ``decided`` entry with the decided payload and ``authorised``, the digest of what the
decision let through. The export's chain is computed when exported; each audit line also keeps
the link its store wrote with it (``stored_prev``, ``stored_digest``: one chain per run, made as
the line was written), which ``audit verify`` checks too, so a line altered in the store is found.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from langorch.domain.approvals.audit import AuditEntry, line_body
from langorch.domain.errors import NotFoundError
from langorch.domain.evidence import chain, digest

if TYPE_CHECKING:
    from langorch.app.approvals.ports import ApprovalsStore
    from langorch.app.ports import RunsStore
    from langorch.domain.approvals.record import Approval

MAX_APPROVALS = 1000
"""The most approvals one export reads (per run, or since a date)."""


class EvidenceDeps(Protocol):
    """What an export reads: the approvals and the runs."""

    @property
    def approvals(self) -> ApprovalsStore: ...
    @property
    def runs(self) -> RunsStore: ...


def export_ledger(
    deps: EvidenceDeps, *, run_id: str | None = None, since: datetime | None = None
) -> list[dict[str, Any]]:
    """The chained ledger of one run's approvals, or of every run with an approval asked at or
    after ``since``.

    Raises:
        ValueError: neither or both of ``run_id`` and ``since`` given.
        NotFoundError: ``run_id`` names no run.
    """
    if (run_id is None) == (since is None):
        raise ValueError("name a run (--run ID) or a date (--since DATE), not both")
    if run_id is not None:
        runs = [run_id]
        deps.runs.get_run(run_id)  # NotFoundError: say so, rather than export nothing
    else:
        found = deps.approvals.list(limit=MAX_APPROVALS)
        assert since is not None
        runs = list(dict.fromkeys(a.run_id for a in reversed(found) if a.created_at >= since))
    return chain(entry for run in runs for entry in _run_entries(run, deps))


def _run_entries(run_id: str, deps: EvidenceDeps) -> Iterator[dict[str, Any]]:
    try:
        run = deps.runs.get_run(run_id)
        yield {
            "kind": "run",
            "run_id": run_id,
            "workflow_id": run.workflow_id,
            "workflow_version": run.workflow_version,
            "status": run.status.value,
        }
        version: int | None = run.workflow_version
    except NotFoundError:
        version = None
    approvals = deps.approvals.list(run_id=run_id, limit=MAX_APPROVALS)
    for approval in sorted(approvals, key=lambda a: (a.created_at, a.approval_id)):
        yield _asked(approval, version)
        for line in deps.approvals.audit(approval.approval_id):
            yield stored_line(line, run_id)
        if approval.decided_at is not None:
            yield _decided(approval, version)


def stored_line(line: AuditEntry, run_id: str) -> dict[str, Any]:
    """An audit line as exported: as stored, its stored chain link renamed (``stored_prev``,
    ``stored_digest``) beside the export's own ``prev`` and ``digest``."""
    body = line_body(line)
    stored = {"stored_prev": body.pop("prev", None), "stored_digest": line.digest}
    return {
        "kind": "event",
        "run_id": run_id,
        **body,
        **{k: v for k, v in stored.items() if v is not None},
    }


def _asked(approval: Approval, version: int | None) -> dict[str, Any]:
    return {
        "kind": "asked",
        "run_id": approval.run_id,
        "approval_id": approval.approval_id,
        "step_id": approval.step_id,
        "at": approval.created_at.isoformat(),
        "workflow_version": version,
        "title": approval.title,
        "message": approval.message,
        "shown": approval.context,
        "shown_digest": digest(approval.context),
        "approvers": list(approval.approvers),
        "policy": approval.policy.model_dump(mode="json") if approval.policy else None,
    }


def _decided(approval: Approval, version: int | None) -> dict[str, Any]:
    payload = {
        "decision": approval.status.value,
        "edits": approval.edits,
        "comment": approval.comment,
        "shown": approval.context,
        "workflow_version": version,
    }
    return {
        "kind": "decided",
        "run_id": approval.run_id,
        "approval_id": approval.approval_id,
        "at": approval.decided_at.isoformat() if approval.decided_at else None,
        "actor": approval.decided_by,
        "payload": payload,
        "authorised": digest(payload),
    }
