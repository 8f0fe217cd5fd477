"""The ports the approval use-cases need, as Protocols (implemented by adapters and by fakes).

:class:`ApprovalsStore` is the approvals repository: DynamoDB's in the cloud
(``adapters/dynamodb/approvals/repository.py``), SQLite's in the embedded default
(``adapters/sqlite/approvals/store.py``), and the in-memory fake of the tests
(``tests/fakes/approvals.py``); all three pass one contract suite,
``tests/contracts/test_approvals_store.py``. :class:`RequestPorts` and :class:`PagePorts` are what
:func:`~langorch.app.approvals.requests.request_approval` and the page use-cases read, built from
the shared ports of :mod:`langorch.app.ports` (runs, executions, secrets, email, clock): the
composition root's ``Container`` satisfies them structurally, and tests pass fakes.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from langorch.app.ports import (
    ApprovalNotifier,
    Clock,
    EmailSender,
    Executions,
    RunsStore,
    SecretsStore,
)

if TYPE_CHECKING:
    from langorch.domain.approvals.policy import Vote
    from langorch.domain.approvals.record import Approval, ApprovalStatus, AuditEntry

__all__ = [
    "ApprovalTimers",
    "ApprovalsStore",
    "Clock",
    "EmailSender",
    "LinkSettings",
    "PagePorts",
    "RequestPorts",
]


class ApprovalsStore(Protocol):
    """Approvals, their server-side secrets (task token, code hashes) and audit trails.

    The writes that move an approval are conditional (the decide-once rule lives here, not in
    a read-then-write): of concurrent ``decide`` calls exactly one wins.
    """

    def put_pending(self, approval: Approval, task_token: str) -> tuple[Approval, bool]:
        """Store a new pending approval and its token once; a retry replaces a pending token.

        Returns:
            The stored approval and whether this call created it.
        """
        ...

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
        """Record the decision once (pending and not expired), with the votes that reached it.

        Raises:
            AlreadyDecidedError: someone decided first.
            LinkExpiredError: expired or timed out.
            RunEndedError: cancelled.
            NotFoundError: no such approval.
        """
        ...

    def record_vote(self, approval_id: str, slot: str, vote: Vote) -> bool:
        """Record one vote in an approver's slot, only while the approval is decidable.

        Returns:
            ``False`` when the slot holds a vote or a delegation already.

        Raises:
            AlreadyDecidedError, LinkExpiredError, RunEndedError, NotFoundError: as
            :meth:`decide`, when the approval is no longer decidable.
        """
        ...

    def votes(self, approval_id: str) -> builtins.list[Vote]:
        """Every vote recorded, oldest first."""
        ...

    def delegate(self, approval_id: str, slot: str, delegator: str, to: str, now: datetime) -> bool:
        """Hand the delegator's slot to ``to`` (recorded on the approval as ``delegations``).

        Returns:
            ``False`` when the slot was used (voted or delegated) or ``to`` is a delegate.

        Raises:
            AlreadyDecidedError, LinkExpiredError, RunEndedError, NotFoundError: not decidable.
        """
        ...

    def advance_timer(self, approval_id: str, counter: str, seen: int) -> bool:
        """Move ``reminders_sent``/``escalation_level`` from ``seen`` to ``seen + 1`` while
        pending; whether this call moved it (a timer fired twice sends once)."""
        ...

    def reopen(self, approval: Approval) -> bool:
        """Undo exactly this undelivered decision; whether it was reopened."""
        ...

    def mark_delivered(self, approval_id: str, now: datetime) -> Approval | None:
        """Note the decision reached the run (first time kept); ``None`` if no decision."""
        ...

    def mark(self, approval_id: str, status: ApprovalStatus) -> bool:
        """Close as ``timed_out``/``cancelled``/``superseded`` unless closed or delivered;
        whether it did."""
        ...

    def mark_emailed(self, approval_id: str, approver_ref: str) -> None:
        """Remember that this approver's email went out."""
        ...

    def claim_code_attempt(self, approval_id: str, approver_ref: str, limit: int) -> int | None:
        """Count one code attempt of one approver's link atomically; ``None`` at ``limit``."""
        ...

    def reissue_links(self, approval_id: str, approver_refs: Sequence[str]) -> Approval | None:
        """Raise a pending approval's link generation; forget its emails, codes and attempts.

        Returns ``None`` (and changes nothing) unless it is pending."""
        ...

    def use_view_token(self, approval_id: str, view_id: str) -> bool:
        """Record a page view's token as used; ``False`` when it was used before."""
        ...

    def set_code_hash(self, approval_id: str, approver_ref: str, hashed: str) -> None:
        """Store the keyed hash of an approver's one-time code."""
        ...

    def get(self, approval_id: str) -> Approval | None:
        """The approval, read consistently."""
        ...

    def task_token(self, approval_id: str) -> str:
        """The task token the run waits on (raises NotFoundError without one)."""
        ...

    def code_hash(self, approval_id: str, approver_ref: str) -> str | None:
        """The stored code hash of an approver, if one was issued."""
        ...

    def list(
        self, *, pending_only: bool = False, run_id: str | None = None, limit: int = 50
    ) -> builtins.list[Approval]:
        """Approvals, newest first."""
        ...

    def append_audit(self, entry: AuditEntry) -> None:
        """Add one line to the approval's audit trail (never overwritten)."""
        ...

    def audit(self, approval_id: str) -> builtins.list[AuditEntry]:
        """The approval's audit trail, oldest first."""
        ...


class LinkSettings(Protocol):
    """The settings links are built and signed with."""

    @property
    def public_base_url(self) -> str:
        """The configured public URL links start with (never taken from a request)."""
        ...

    @property
    def link_signing_secret(self) -> str:
        """The name of the link-signing secret."""
        ...

    @property
    def approval_form_dwell_seconds(self) -> float:
        """How long after its page view an approval form may decide."""
        ...

    @property
    def approval_channels(self) -> Sequence[str]:
        """Where requests go when their step names no channels."""
        ...

    @property
    def console_url(self) -> str | None:
        """Where the console is served (a chat message's Details button opens it)."""
        ...


class PagePorts(Protocol):
    """What the approval page use-cases (view, decide) read."""

    @property
    def approvals(self) -> ApprovalsStore:
        """The approvals repository."""
        ...

    @property
    def runs(self) -> RunsStore:
        """The runs (read only: whether the run still waits on the approval)."""
        ...

    @property
    def executions(self) -> Executions:
        """The run's execution (``SendTaskSuccess`` resumes its task)."""
        ...

    @property
    def secrets(self) -> SecretsStore:
        """The secret holding the link-signing keys."""
        ...

    @property
    def settings(self) -> LinkSettings:
        """Public URL and signing secret name."""
        ...

    @property
    def clock(self) -> Clock:
        """The service's clock."""
        ...


class ApprovalTimers(Protocol):
    """One-time wake-ups of an approval's reminders and escalations (EventBridge Scheduler
    one-time schedules in the cloud; the local ticker in ``langorch dev``)."""

    def schedule(self, approval_id: str, at: datetime) -> None:
        """Wake the approval's timers at ``at`` (replacing an earlier wake-up)."""
        ...

    def cancel(self, approval_id: str) -> None:
        """Forget the approval's wake-up (none: nothing happens)."""
        ...


class RequestPorts(PagePorts, Protocol):
    """What :func:`~langorch.app.approvals.requests.request_approval` reads: the page ports
    and email."""

    @property
    def email(self) -> EmailSender:
        """Where approval emails go."""
        ...

    @property
    def approval_timers(self) -> ApprovalTimers:
        """Where reminders and escalations are scheduled (and cancelled)."""
        ...

    @property
    def notifiers(self) -> Mapping[str, ApprovalNotifier]:
        """The chat channels this stack can post requests to, by name (``slack``)."""
        ...
