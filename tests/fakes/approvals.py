"""An in-memory approvals store: the ``ApprovalsStore`` port without DynamoDB.

It passes the same contract suite as the DynamoDB adapter
(``tests/contracts/test_approvals_store.py``): decide once under concurrency, mark delivered,
reopen only the exact undelivered decision, close (time out / cancel) only what the run did not
get. A lock stands for DynamoDB's per-item serialisation of conditional writes.
"""

from __future__ import annotations

import builtins
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from langorch.domain.approvals.audit import chain_key, chained
from langorch.domain.approvals.policy import Vote, VotesChangedError
from langorch.domain.approvals.record import (
    CLOSED,
    DECISIONS,
    AlreadyDecidedError,
    Approval,
    ApprovalStatus,
    AuditEntry,
    LinkExpiredError,
    RunEndedError,
    SupersededError,
)
from langorch.domain.errors import NotFoundError
from langorch.domain.evidence import GENESIS

MAX_COMMENT_CHARS = 4000
MAX_LIST = 1000


def _undecided() -> dict[str, Any]:
    """The fields of a pending approval that no decision has touched (fresh: ``edits`` is a
    new dict each time)."""
    return {
        "status": ApprovalStatus.pending,
        "decided_by": None,
        "decided_at": None,
        "comment": None,
        "edits": {},
    }


def _stored_time(moment: datetime) -> datetime:
    # The adapter stores times as UTC text to the microsecond: read back, they are UTC.
    return moment.astimezone(UTC)


class InMemoryApprovals:
    """Approvals, their tokens, code hashes and audit trails in dicts (one process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._approvals: dict[str, Approval] = {}
        self._tokens: dict[str, str] = {}
        self._codes: dict[tuple[str, str], str] = {}
        self._attempts: dict[tuple[str, str], int] = {}
        self._views: set[tuple[str, str]] = set()
        self._audit: dict[str, list[AuditEntry]] = {}
        self._heads: dict[str, str] = {}
        """Chain key -> the digest of its last audit line."""
        self._slots: dict[tuple[str, str], Vote | str] = {}
        """(approval, slot) -> the vote in it, or the delegate it was handed to."""
        self._vote_counts: dict[str, int] = {}

    # Writes ---------------------------------------------------------------------------------

    def put_pending(self, approval: Approval, task_token: str) -> tuple[Approval, bool]:
        with self._lock:
            stored = self._approvals.get(approval.approval_id)
            if stored is None:
                fresh = approval.model_copy(
                    update={**_undecided(), "delivered_at": None, "emailed": []},
                    deep=True,
                )
                self._approvals[approval.approval_id] = fresh
                self._tokens[approval.approval_id] = task_token
                return fresh.model_copy(deep=True), True
            if stored.is_pending:
                self._tokens[approval.approval_id] = task_token
            return stored.model_copy(deep=True), False

    def decide(
        self,
        approval_id: str,
        decision: ApprovalStatus,
        approver: str,
        comment: str | None,
        edits: dict[str, Any],
        now: datetime,
        votes: Sequence[Vote] = (),
    ) -> Approval:
        if decision not in DECISIONS:
            raise ValueError(f"a decision is approved or rejected, not {decision}")
        with self._lock:
            stored = self._approvals.get(approval_id)
            if stored is None:
                raise NotFoundError(f"approval {approval_id} does not exist")
            decidable = stored.is_pending and int(stored.expires_at.timestamp()) > int(
                now.timestamp()
            )
            if not decidable:
                raise self._refusal(stored)
            if votes and self._vote_counts.get(approval_id, 0) != len(votes):
                raise VotesChangedError(f"approval {approval_id}: a vote arrived meanwhile")
            decided = stored.model_copy(
                update={
                    "status": decision,
                    "decided_by": approver,
                    "decided_at": _stored_time(now),
                    "comment": (comment or "")[:MAX_COMMENT_CHARS] or None,
                    "edits": json.loads(json.dumps(edits, default=str)),
                    "votes": [v.model_copy() for v in votes],
                }
            )
            self._approvals[approval_id] = decided
            return decided.model_copy(deep=True)

    @staticmethod
    def _refusal(stored: Approval) -> Exception:
        if stored.status in DECISIONS:
            return AlreadyDecidedError(
                stored.approval_id, stored.status, stored.decided_by, stored.decided_at
            )
        if stored.status is ApprovalStatus.cancelled:
            return RunEndedError(f"approval {stored.approval_id} was cancelled")
        if stored.status is ApprovalStatus.superseded:
            return SupersededError(f"approval {stored.approval_id} was superseded")
        return LinkExpiredError(f"approval {stored.approval_id} expired before the decision")

    def _decidable(self, approval_id: str, now: datetime) -> Approval:
        stored = self._existing(approval_id)
        if not (stored.is_pending and int(stored.expires_at.timestamp()) > int(now.timestamp())):
            raise self._refusal(stored)
        return stored

    def record_vote(self, approval_id: str, slot: str, vote: Vote) -> bool:
        with self._lock:
            self._decidable(approval_id, vote.at)
            if (approval_id, slot) in self._slots:
                return False
            self._slots[(approval_id, slot)] = vote.model_copy()
            self._vote_counts[approval_id] = self._vote_counts.get(approval_id, 0) + 1
            return True

    def votes(self, approval_id: str) -> builtins.list[Vote]:
        with self._lock:
            found = [
                v.model_copy()
                for (aid, _), v in self._slots.items()
                if aid == approval_id and isinstance(v, Vote)
            ]
        return sorted(found, key=lambda v: v.at)

    def delegate(self, approval_id: str, slot: str, delegator: str, to: str, now: datetime) -> bool:
        with self._lock:
            stored = self._decidable(approval_id, now)
            key = to.strip().lower()
            if (approval_id, slot) in self._slots or key in stored.delegations:
                return False
            self._slots[(approval_id, slot)] = to
            delegations = {**stored.delegations, key: delegator}
            self._approvals[approval_id] = stored.model_copy(update={"delegations": delegations})
            return True

    def advance_timer(self, approval_id: str, counter: str, seen: int) -> bool:
        if counter not in ("reminders_sent", "escalation_level"):
            raise ValueError(f"no timer counter {counter!r}")
        with self._lock:
            stored = self._approvals.get(approval_id)
            if stored is None or not stored.is_pending or getattr(stored, counter) != seen:
                return False
            self._approvals[approval_id] = stored.model_copy(update={counter: seen + 1})
            return True

    def reopen(self, approval: Approval) -> bool:
        if approval.decided_at is None or approval.decided_by is None:
            return False
        with self._lock:
            stored = self._approvals.get(approval.approval_id)
            same = (
                stored is not None
                and stored.status is approval.status
                and stored.decided_by == approval.decided_by
                and stored.decided_at == _stored_time(approval.decided_at)
                and stored.delivered_at is None
            )
            if stored is None or not same:
                return False
            self._approvals[approval.approval_id] = stored.model_copy(update=_undecided())
            return True

    def mark_delivered(self, approval_id: str, now: datetime) -> Approval | None:
        with self._lock:
            stored = self._approvals.get(approval_id)
            if stored is None or stored.status not in DECISIONS:
                return None
            if stored.delivered_at is None:
                stored = stored.model_copy(update={"delivered_at": _stored_time(now)})
                self._approvals[approval_id] = stored
            return stored.model_copy(deep=True)

    def mark(self, approval_id: str, status: ApprovalStatus) -> bool:
        if status not in CLOSED:
            raise ValueError(f"mark closes an approval as one of {sorted(CLOSED)}, not {status}")
        with self._lock:
            stored = self._approvals.get(approval_id)
            if stored is None or stored.status in CLOSED or stored.delivered_at is not None:
                return False
            self._approvals[approval_id] = stored.model_copy(update={"status": status})
            return True

    def mark_emailed(self, approval_id: str, approver_ref: str) -> None:
        with self._lock:
            stored = self._existing(approval_id)
            emailed = sorted({*stored.emailed, approver_ref})
            self._approvals[approval_id] = stored.model_copy(update={"emailed": emailed})

    def claim_code_attempt(self, approval_id: str, approver_ref: str, limit: int) -> int | None:
        with self._lock:
            self._existing(approval_id)
            made = self._attempts.get((approval_id, approver_ref), 0)
            if made >= limit:
                return None
            self._attempts[(approval_id, approver_ref)] = made + 1
            return made + 1

    def reissue_links(self, approval_id: str, approver_refs: Sequence[str]) -> Approval | None:
        with self._lock:
            stored = self._existing(approval_id)
            if not stored.is_pending:
                return None
            for ref in approver_refs:
                self._codes.pop((approval_id, ref), None)
                self._attempts.pop((approval_id, ref), None)
            fresh = stored.model_copy(
                update={"link_generation": stored.link_generation + 1, "emailed": []}
            )
            self._approvals[approval_id] = fresh
            return fresh.model_copy(deep=True)

    def use_view_token(self, approval_id: str, view_id: str) -> bool:
        with self._lock:
            self._existing(approval_id)
            if (approval_id, view_id) in self._views:
                return False
            self._views.add((approval_id, view_id))
            return True

    def set_code_hash(self, approval_id: str, approver_ref: str, hashed: str) -> None:
        with self._lock:
            self._existing(approval_id)
            self._codes[(approval_id, approver_ref)] = hashed

    def _existing(self, approval_id: str) -> Approval:
        stored = self._approvals.get(approval_id)
        if stored is None:
            raise NotFoundError(f"approval {approval_id} does not exist")
        return stored

    # Reads ----------------------------------------------------------------------------------

    def get(self, approval_id: str) -> Approval | None:
        with self._lock:
            stored = self._approvals.get(approval_id)
            return None if stored is None else stored.model_copy(deep=True)

    def task_token(self, approval_id: str) -> str:
        with self._lock:
            token = self._tokens.get(approval_id)
        if token is None:
            raise NotFoundError(f"approval {approval_id} has no stored task token")
        return token

    def code_hash(self, approval_id: str, approver_ref: str) -> str | None:
        with self._lock:
            return self._codes.get((approval_id, approver_ref))

    def list(
        self, *, pending_only: bool = False, run_id: str | None = None, limit: int = 50
    ) -> builtins.list[Approval]:
        limit = max(1, min(limit, MAX_LIST))
        with self._lock:
            found = [
                a.model_copy(deep=True)
                for a in self._approvals.values()
                if (not pending_only or a.is_pending) and (run_id is None or a.run_id == run_id)
            ]
        found.sort(key=lambda a: (_stored_time(a.created_at), a.approval_id), reverse=True)
        return found[:limit]

    # Audit ----------------------------------------------------------------------------------

    def append_audit(self, entry: AuditEntry) -> None:
        with self._lock:  # the run's chain head is read and moved under the lock
            approval = self._approvals.get(entry.approval_id)
            run_id = approval.run_id if approval is not None else None
            key = chain_key(entry.approval_id, run_id)
            line = chained(entry, run_id, self._heads.get(key, GENESIS))
            assert line.digest is not None
            self._heads[key] = line.digest
            self._audit.setdefault(entry.approval_id, []).append(line)

    def audit(self, approval_id: str) -> builtins.list[AuditEntry]:
        with self._lock:
            entries = list(self._audit.get(approval_id, []))
        # Oldest first; entries of the same instant keep the order they were written in.
        return sorted(entries, key=lambda e: _stored_time(e.at))


class RecordingApprovalTimers:
    """The ``ApprovalTimers`` port in memory: the one wake-up per approval, and what was
    cancelled (the cloud's one-time schedules, without the Scheduler)."""

    def __init__(self) -> None:
        self.scheduled: dict[str, datetime] = {}
        self.cancelled: list[str] = []

    def schedule(self, approval_id: str, at: datetime) -> None:
        self.scheduled[approval_id] = at

    def cancel(self, approval_id: str) -> None:
        if self.scheduled.pop(approval_id, None) is not None:
            self.cancelled.append(approval_id)


class InlineHandoff:
    """Runs handed-on work at once on the caller's thread, and remembers each job."""

    def __init__(self) -> None:
        self.jobs: list[dict[str, Any]] = []

    def hand_off(
        self, job: Mapping[str, Any], *, function_arn: str, run: Callable[[Mapping[str, Any]], None]
    ) -> None:
        self.jobs.append(dict(job))
        run(job)
