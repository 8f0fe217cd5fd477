"""The approvals store on SQLite: :class:`SqliteApprovals` (tables in :mod:`._tables`).

The same port and rules as :mod:`langorch.adapters.dynamodb.approvals` (``ApprovalsStore``,
held to one contract suite). Every conditional write is one ``BEGIN IMMEDIATE`` transaction
(:meth:`~langorch.adapters.sqlite._db.Database.write`): it reads what the DynamoDB adapter's
condition expression tests and writes only if it holds, and no other thread or process writes
in between. So of two concurrent decisions exactly one wins and the loser reads who won.
"""

from __future__ import annotations

import builtins
import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from langorch.adapters.sqlite._db import Database
from langorch.adapters.sqlite.approvals._tables import (
    RECORD,
    SCHEMA,
    approval_of,
    epoch,
    iso,
    moment,
    request_json,
)
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

# The conditional updates, named (STYLE habit 8): each writes only where its condition holds.
REOPEN_THIS_DECISION = (
    "UPDATE approvals SET status = 'pending', decided_by = NULL, decided_at = NULL,"
    " comment = NULL, edits = NULL WHERE approval_id = ?"
    " AND status = ? AND decided_by = ? AND decided_at = ? AND delivered_at IS NULL"
)
"""Only the exact decision passed in, and only while the run has not got it."""
DELIVER_ONCE = (
    "UPDATE approvals SET delivered_at = coalesce(delivered_at, ?)"
    " WHERE approval_id = ? AND status IN ('approved', 'rejected')"
)
"""A decision is noted delivered once; the first time is kept."""
CLOSE_IF_OPEN = (
    "UPDATE approvals SET status = ? WHERE approval_id = ?"
    " AND status NOT IN ('timed_out', 'cancelled', 'superseded') AND delivered_at IS NULL"
)
"""Timing out or cancelling applies to anything not already closed (including a decision that
could not be delivered because the task had closed), but never to a decision the run got."""
ADVANCE_TIMER = {
    "reminders_sent": "UPDATE approvals SET reminders_sent = ? WHERE approval_id = ?"
    " AND status = 'pending' AND reminders_sent = ?",
    "escalation_level": "UPDATE approvals SET escalation_level = ? WHERE approval_id = ?"
    " AND status = 'pending' AND escalation_level = ?",
}
"""A timer moves its counter only from the value it saw: a second firing finds it moved."""


class SqliteApprovals:
    """Approvals, their task tokens, codes, votes and audit trails in the local store; satisfies
    ``ApprovalsStore``.

    Args:
        db: the home's database.
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        db.ensure_schema("approvals", SCHEMA)

    # ----------------------------------------------------------------------------------------
    # Writes
    # ----------------------------------------------------------------------------------------

    def put_pending(self, approval: Approval, task_token: str) -> tuple[Approval, bool]:
        """Store a new pending approval and its task token, once per approval id.

        A retried request (same run and interrupt) stores nothing new and returns the stored
        approval; if it is still pending its token is replaced, since Step Functions waits on
        the newest one.

        Returns:
            The stored approval and whether this call created it.
        """
        approval_id = approval.approval_id
        with self._db.write() as connection:
            stored = self._read(connection, approval_id)
            if stored is not None:
                if stored.is_pending:
                    connection.execute(
                        "UPDATE approval_secrets SET task_token = ? WHERE approval_id = ?",
                        (task_token, approval_id),
                    )
                return stored, False
            connection.execute(
                "INSERT INTO approvals (approval_id, run_id, workflow_id, status, created_at,"
                " expires_at, body) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    approval_id,
                    approval.run_id,
                    approval.workflow_id,
                    ApprovalStatus.pending.value,
                    iso(approval.created_at),
                    epoch(approval.expires_at),
                    request_json(approval),
                ),
            )
            connection.execute(
                "INSERT OR REPLACE INTO approval_secrets (approval_id, task_token) VALUES (?, ?)",
                (approval_id, task_token),
            )
            return self._existing(connection, approval_id), True

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
        """Record the decision, once: only while pending and not expired.

        ``votes``: every vote of a counted decision, recorded with it (so a decision delivered
        again carries exactly the same votes); the write then also requires that no vote was
        added since they were read, else :class:`VotesChangedError`.

        Returns:
            The decided approval.

        Raises:
            AlreadyDecidedError: someone decided first (carries who and when).
            LinkExpiredError: the approval expired or timed out.
            RunEndedError: the approval was cancelled.
            NotFoundError: no such approval.
            VotesChangedError: a vote arrived after ``votes`` were read.
        """
        if decision not in DECISIONS:
            raise ValueError(f"a decision is approved or rejected, not {decision}")
        with self._db.write() as connection:
            self._decidable(connection, approval_id, now)
            if votes and self._vote_count(connection, approval_id) != len(votes):
                raise VotesChangedError(f"approval {approval_id}: a vote arrived meanwhile")
            connection.execute(
                "UPDATE approvals SET status = ?, decided_by = ?, decided_at = ?, comment = ?,"
                " edits = ?, votes = ? WHERE approval_id = ?",
                (
                    decision.value,
                    approver,
                    iso(now),
                    (comment or "")[:MAX_COMMENT_CHARS],
                    json.dumps(edits, default=str),
                    json.dumps([v.model_dump(mode="json") for v in votes]),
                    approval_id,
                ),
            )
            return self._existing(connection, approval_id)

    def reopen(self, approval: Approval) -> bool:
        """Undo a decision that could not be delivered, so the approver can press again.

        Only the exact decision passed in is undone (same status, approver and time), so a
        decision made by anyone else is never touched.

        Returns:
            Whether it was reopened.
        """
        if approval.decided_at is None or approval.decided_by is None:
            return False
        with self._db.write() as connection:
            cursor = connection.execute(
                REOPEN_THIS_DECISION,
                (
                    approval.approval_id,
                    approval.status.value,
                    approval.decided_by,
                    iso(approval.decided_at),
                ),
            )
        return cursor.rowcount > 0

    def record_vote(self, approval_id: str, slot: str, vote: Vote) -> bool:
        """Record one vote in the approver's slot; ``False`` when the slot has one already (a
        vote or a delegation).

        Raises:
            AlreadyDecidedError, LinkExpiredError, RunEndedError, NotFoundError: the approval
            is no longer decidable (as :meth:`decide`).
        """
        with self._db.write() as connection:
            # The slot first, as DynamoDB's transaction reports it: a second press by someone
            # who voted reads "your vote stands", whatever happened since.
            if self._slot_taken(connection, approval_id, slot):
                return False
            self._decidable(connection, approval_id, vote.at)
            connection.execute(
                "INSERT INTO approval_slots (approval_id, slot, vote) VALUES (?, ?, ?)",
                (approval_id, slot, vote.model_dump_json(exclude_none=True)),
            )
        return True

    def delegate(self, approval_id: str, slot: str, delegator: str, to: str, now: datetime) -> bool:
        """Hand the delegator's slot to ``to``; ``False`` when the slot was used (voted or
        delegated) or ``to`` is a delegate already. Raises like :meth:`record_vote` when the
        approval is no longer decidable."""
        delegate = to.strip().lower()  # the key of ``Approval.delegations``, as in DynamoDB
        with self._db.write() as connection:
            if self._slot_taken(connection, approval_id, slot):
                return False
            self._decidable(connection, approval_id, now)
            named = connection.execute(
                "SELECT 1 FROM approval_slots WHERE approval_id = ? AND delegate = ?",
                (approval_id, delegate),
            ).fetchone()
            if named is not None:
                return False
            connection.execute(
                "INSERT INTO approval_slots (approval_id, slot, delegate, delegator)"
                " VALUES (?, ?, ?, ?)",
                (approval_id, slot, delegate, delegator),
            )
        return True

    def advance_timer(self, approval_id: str, counter: str, seen: int) -> bool:
        """Count a reminder or escalation once (from ``seen``); whether this call did."""
        statement = ADVANCE_TIMER.get(counter)
        if statement is None:
            raise ValueError(f"no timer counter {counter!r}")
        with self._db.write() as connection:
            cursor = connection.execute(statement, (seen + 1, approval_id, seen))
        return cursor.rowcount > 0

    def mark_delivered(self, approval_id: str, now: datetime) -> Approval | None:
        """Note that the recorded decision reached the run (the first time noted is kept).

        From then on the decision is final: :meth:`mark` and :meth:`reopen` leave it alone.

        Returns:
            The decided approval, or ``None`` when it holds no decision (pending, closed or
            missing): then there is nothing to deliver.
        """
        with self._db.write() as connection:
            cursor = connection.execute(DELIVER_ONCE, (iso(now), approval_id))
            if cursor.rowcount == 0:
                return None
            return self._existing(connection, approval_id)

    def mark(self, approval_id: str, status: ApprovalStatus) -> bool:
        """Close the approval as ``timed_out``, ``cancelled`` or ``superseded`` unless it is
        closed already.

        Returns:
            Whether this call changed it (``False``: missing, already closed, or a decision
            already delivered to the run).
        """
        if status not in CLOSED:
            raise ValueError(f"mark closes an approval as one of {sorted(CLOSED)}, not {status}")
        with self._db.write() as connection:
            cursor = connection.execute(CLOSE_IF_OPEN, (status.value, approval_id))
        return cursor.rowcount > 0

    def mark_emailed(self, approval_id: str, approver_ref: str) -> None:
        """Remember that this approver's email went out (a retried request skips them).

        Raises:
            NotFoundError: no such approval.
        """
        with self._db.write() as connection:
            emailed = set(self._existing(connection, approval_id).emailed)
            connection.execute(
                "UPDATE approvals SET emailed = ? WHERE approval_id = ?",
                (json.dumps(sorted({*emailed, approver_ref})), approval_id),
            )

    def claim_code_attempt(self, approval_id: str, approver_ref: str, limit: int) -> int | None:
        """Count one code attempt of one approver's link, unless it made ``limit`` already.

        Read and counted in one write transaction: however many requests (threads or
        processes) race, at most ``limit`` attempts are ever granted per approver.

        Returns:
            The attempt's number (1..limit), or ``None`` when the limit was reached.

        Raises:
            NotFoundError: no such approval.
        """
        with self._db.write() as connection:
            self._must_exist(connection, approval_id)
            row = connection.execute(
                "SELECT attempts FROM approval_codes WHERE approval_id = ? AND approver_ref = ?",
                (approval_id, approver_ref),
            ).fetchone()
            made = 0 if row is None else int(row[0])
            if made >= limit:
                return None
            connection.execute(
                "INSERT INTO approval_codes (approval_id, approver_ref, attempts)"
                " VALUES (?, ?, ?) ON CONFLICT (approval_id, approver_ref)"
                " DO UPDATE SET attempts = excluded.attempts",
                (approval_id, approver_ref, made + 1),
            )
        return made + 1

    def reissue_links(self, approval_id: str, approver_refs: Sequence[str]) -> Approval | None:
        """Raise a pending approval's link generation; forget its emails, and the approvers'
        code hashes and attempt counters.

        Returns:
            The approval after, or ``None`` (nothing changed) unless it is pending.

        Raises:
            NotFoundError: no such approval.
        """
        with self._db.write() as connection:
            cursor = connection.execute(
                "UPDATE approvals SET link_generation = link_generation + 1, emailed = '[]'"
                " WHERE approval_id = ? AND status = 'pending'",
                (approval_id,),
            )
            if cursor.rowcount == 0:
                self._must_exist(connection, approval_id)
                return None
            connection.executemany(
                "DELETE FROM approval_codes WHERE approval_id = ? AND approver_ref = ?",
                [(approval_id, ref) for ref in approver_refs],
            )
            return self._existing(connection, approval_id)

    def use_view_token(self, approval_id: str, view_id: str) -> bool:
        """Record a page view's token as used; ``False`` if it was.

        Raises:
            NotFoundError: no such approval.
        """
        with self._db.write() as connection:
            self._must_exist(connection, approval_id)
            cursor = connection.execute(
                "INSERT OR IGNORE INTO approval_views (approval_id, view_id) VALUES (?, ?)",
                (approval_id, view_id),
            )
        return cursor.rowcount > 0

    def set_code_hash(self, approval_id: str, approver_ref: str, hashed: str) -> None:
        """Store the keyed hash of an approver's one-time code (never the code).

        Raises:
            NotFoundError: no such approval.
        """
        with self._db.write() as connection:
            self._must_exist(connection, approval_id)
            connection.execute(
                "INSERT INTO approval_codes (approval_id, approver_ref, code_hash)"
                " VALUES (?, ?, ?) ON CONFLICT (approval_id, approver_ref)"
                " DO UPDATE SET code_hash = excluded.code_hash",
                (approval_id, approver_ref, hashed),
            )

    # ----------------------------------------------------------------------------------------
    # Reads
    # ----------------------------------------------------------------------------------------

    def get(self, approval_id: str) -> Approval | None:
        """The approval (``None`` when there is none)."""
        with self._db.read() as connection:
            return self._read(connection, approval_id)

    def votes(self, approval_id: str) -> builtins.list[Vote]:
        """The approval's votes, oldest first."""
        with self._db.read() as connection:
            rows = connection.execute(
                "SELECT vote FROM approval_slots WHERE approval_id = ? AND vote IS NOT NULL",
                (approval_id,),
            ).fetchall()
        return sorted((Vote.model_validate_json(vote) for (vote,) in rows), key=lambda v: v.at)

    def task_token(self, approval_id: str) -> str:
        """The task token the run waits on: read only to resume it, never shown or logged.

        Raises:
            NotFoundError: no such approval.
        """
        with self._db.read() as connection:
            row = connection.execute(
                "SELECT task_token FROM approval_secrets WHERE approval_id = ?", (approval_id,)
            ).fetchone()
        if row is None:
            raise NotFoundError(f"approval {approval_id} has no stored task token")
        return str(row[0])

    def code_hash(self, approval_id: str, approver_ref: str) -> str | None:
        """The stored hash of an approver's one-time code (``None`` when none was issued)."""
        with self._db.read() as connection:
            row = connection.execute(
                "SELECT code_hash FROM approval_codes WHERE approval_id = ? AND approver_ref = ?",
                (approval_id, approver_ref),
            ).fetchone()
        return None if row is None or row[0] is None else str(row[0])

    def list(
        self, *, pending_only: bool = False, run_id: str | None = None, limit: int = 50
    ) -> builtins.list[Approval]:
        """Approvals, newest first.

        Args:
            pending_only: only those still waiting for a decision.
            run_id: only this run's.
            limit: at most this many (capped at 1000).
        """
        # The literal ``status = 'pending'`` lets SQLite use the partial index.
        where = ["a.status = 'pending'"] if pending_only else []
        parameters: builtins.list[Any] = []
        if run_id is not None:
            where.append("a.run_id = ?")
            parameters.append(run_id)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        parameters.append(max(1, min(limit, MAX_LIST)))
        with self._db.read() as connection:
            rows = connection.execute(
                f"{RECORD}{clause} ORDER BY a.created_at DESC, a.approval_id DESC LIMIT ?",
                parameters,
            ).fetchall()
        return [approval_of(row) for row in rows]

    # ----------------------------------------------------------------------------------------
    # Audit
    # ----------------------------------------------------------------------------------------

    def append_audit(self, entry: AuditEntry) -> None:
        """Add one line to the approval's audit trail (insert-only, never overwritten), chained
        after its run's last line: the line and the run's new head in one transaction."""
        with self._db.write() as connection:
            found = connection.execute(
                "SELECT run_id FROM approvals WHERE approval_id = ?", (entry.approval_id,)
            ).fetchone()
            run_id = found[0] if found is not None else None
            key = chain_key(entry.approval_id, run_id)
            head = connection.execute(
                "SELECT digest FROM approval_audit_heads WHERE chain = ?", (key,)
            ).fetchone()
            line = chained(entry, run_id, head[0] if head is not None else GENESIS)
            connection.execute(
                "INSERT INTO approval_audit (approval_id, at, body) VALUES (?, ?, ?)",
                (line.approval_id, iso(line.at), line.model_dump_json(exclude_none=True)),
            )
            connection.execute(
                "INSERT INTO approval_audit_heads (chain, digest) VALUES (?, ?) "
                "ON CONFLICT (chain) DO UPDATE SET digest = excluded.digest",
                (key, line.digest),
            )

    def audit(self, approval_id: str) -> builtins.list[AuditEntry]:
        """The approval's audit trail, oldest first (lines of one instant in written order)."""
        with self._db.read() as connection:
            rows = connection.execute(
                "SELECT body FROM approval_audit WHERE approval_id = ? ORDER BY at, seq",
                (approval_id,),
            ).fetchall()
        return [AuditEntry.model_validate_json(body) for (body,) in rows]

    # ----------------------------------------------------------------------------------------
    # Inside a transaction
    # ----------------------------------------------------------------------------------------

    @staticmethod
    def _read(connection: sqlite3.Connection, approval_id: str) -> Approval | None:
        row = connection.execute(f"{RECORD} WHERE a.approval_id = ?", (approval_id,)).fetchone()
        return None if row is None else approval_of(row)

    def _existing(self, connection: sqlite3.Connection, approval_id: str) -> Approval:
        found = self._read(connection, approval_id)
        if found is None:
            raise NotFoundError(f"approval {approval_id} does not exist")
        return found

    @staticmethod
    def _must_exist(connection: sqlite3.Connection, approval_id: str) -> None:
        found = connection.execute(
            "SELECT 1 FROM approvals WHERE approval_id = ?", (approval_id,)
        ).fetchone()
        if found is None:
            raise NotFoundError(f"approval {approval_id} does not exist")

    @staticmethod
    def _decidable(connection: sqlite3.Connection, approval_id: str, now: datetime) -> None:
        """Raise the refusal unless the approval is pending and not expired at ``now`` — the
        decide-once rule (the caller's write transaction holds it until the write)."""
        row = connection.execute(
            "SELECT status, expires_at, decided_by, decided_at FROM approvals"
            " WHERE approval_id = ?",
            (approval_id,),
        ).fetchone()
        if row is None:
            raise NotFoundError(f"approval {approval_id} does not exist")
        status, expires_at, decided_by, decided_at = row
        if status == ApprovalStatus.pending.value and int(expires_at) > epoch(now):
            return
        if status in DECISIONS:
            raise AlreadyDecidedError(
                approval_id, ApprovalStatus(status), decided_by, moment(decided_at)
            )
        if status == ApprovalStatus.cancelled.value:
            raise RunEndedError(f"approval {approval_id} was cancelled")
        if status == ApprovalStatus.superseded.value:
            raise SupersededError(f"approval {approval_id} was superseded")
        raise LinkExpiredError(f"approval {approval_id} expired before the decision")

    @staticmethod
    def _slot_taken(connection: sqlite3.Connection, approval_id: str, slot: str) -> bool:
        found = connection.execute(
            "SELECT 1 FROM approval_slots WHERE approval_id = ? AND slot = ?", (approval_id, slot)
        ).fetchone()
        return found is not None

    @staticmethod
    def _vote_count(connection: sqlite3.Connection, approval_id: str) -> int:
        row = connection.execute(
            "SELECT count(*) FROM approval_slots WHERE approval_id = ? AND vote IS NOT NULL",
            (approval_id,),
        ).fetchone()
        return int(row[0])
