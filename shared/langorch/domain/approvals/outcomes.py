"""What the approval page use-cases answer: typed outcomes and the named errors they raise.

The use-cases (:mod:`langorch.app.approvals.decisions`) never pick a status code or write a
page's words: they return one of these outcomes or raise one of the errors, and the web edge's
one table (:mod:`langorch.web.errors`) gives each its status code, title and sentence. Refusals
are the :class:`~langorch.domain.approvals.record.ApprovalLinkError` family (forged or expired
link, not an approver, no view token, wrong or locked code, run ended, too late); each says what
happened in facts and a message for developers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from langorch.domain.approvals.record import AlreadyDecidedError, Approval, ApprovalLinkError
from langorch.domain.errors import LangorchError, NotFoundError


@dataclass(frozen=True)
class Shown:
    """A pending approval's page: what is asked, and the form (with this view's token) to decide."""

    approval: Approval
    approver: str
    nonce: str


@dataclass(frozen=True)
class FormAgain:
    """The form shown again: the POST could not decide (unreadable edit, wrong code)."""

    approval: Approval
    approver: str
    nonce: str
    error: ApprovalLinkError
    """Why (its class picks the status code and the sentence above the form, at the edge)."""
    values: Mapping[str, str] = field(default_factory=dict, repr=False)
    """What the person typed (comment, ``edit.*`` fields), shown again in the form."""


@dataclass(frozen=True)
class Decided:
    """This approver's decision was recorded and reached the run."""

    approval: Approval


@dataclass(frozen=True)
class Voted(Decided):
    """This approver's vote (or delegation) was recorded; the policy needs more votes.

    A :class:`Decided` whose approval is still pending (its ``votes`` are the current ones):
    the page thanks the voter and shows the progress; nothing has resumed yet.
    """

    progress: str = ""
    """``1 of 3 approvals; waiting for …``."""
    recorded: bool = True
    """``False``: this approver had voted before; the earlier vote stands."""
    delegated_to: str | None = None


@dataclass(frozen=True)
class DecisionHeld(Decided):
    """This approver's decision was recorded, but the run is not running: its execution ended
    (stopped, failed, timed out) while the run still waited on this approval.

    The decision is kept, not lost and not asked again: a redrive of the run parks on this same
    approval and hands it the recorded decision (no second email).
    """


@dataclass(frozen=True)
class AlreadyDecided:
    """Someone decided first: "already approved by X at T" (an outcome, not an error)."""

    notice: AlreadyDecidedError

    @classmethod
    def of(cls, approval: Approval) -> AlreadyDecided:
        """The outcome for a decided approval."""
        return cls(
            AlreadyDecidedError(
                approval.approval_id, approval.status, approval.decided_by, approval.decided_at
            )
        )


ViewOutcome = Shown | AlreadyDecided
DecideOutcome = Decided | AlreadyDecided | FormAgain


class ApprovalNotFoundError(NotFoundError):
    """A validly signed link to an approval that no longer exists."""


class DecisionNotDeliveredError(LangorchError):
    """The decision was recorded but could not reach the run (storage or Step Functions failed
    transiently); it was reopened, so pressing the button again works."""
