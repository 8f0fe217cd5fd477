"""The one table of HTTP answers: each named error and outcome a request can meet, its status
code and, for a page, the title and sentence a person reads.

Errors in ``domain/`` and ``app/`` say what happened (a name, the facts, a message for developers
and the CLI); how the web edge answers is decided here and nowhere else. The approval callback,
the trigger's webhook route and the console all answer from this table.

An error is looked up by its class, then by its ancestors, so a new refusal of a link answers as
its family until it gets a row of its own. An error with no row is not the request's fault (a
storage failure, a bug): the edge lets it raise, and the platform answers 500 while the logs say
why. ``tests/unit/test_http_edge.py`` holds every error that can reach an edge to a row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from langorch.domain.approvals.edits import EditRejectedError
from langorch.domain.approvals.outcomes import (
    AlreadyDecided,
    ApprovalNotFoundError,
    Decided,
    DecisionHeld,
    DecisionNotDeliveredError,
    FormAgain,
    Shown,
)
from langorch.domain.approvals.record import (
    AlreadyDecidedError,
    ApprovalLinkError,
    CodeLockedError,
    CodeMismatchError,
    CodeMissingError,
    FormExpiredError,
    InvalidDecisionError,
    LinkExpiredError,
    LinkForgedError,
    NotAnApproverError,
    RunEndedError,
    SupersededError,
    TooLateError,
    human_time,
)
from langorch.domain.approvals.views import (
    LinkReissuedError,
    SubmittedTooSoonError,
    ViewTokenUsedError,
)
from langorch.domain.approvals.votes import (
    DelegatedAwayError,
    DelegationRefusedError,
    SelfApprovalError,
)
from langorch.domain.errors import (
    ConflictError,
    DefinitionError,
    NotFoundError,
    PayloadTooLargeError,
    RequestRejectedError,
    SignatureError,
    UnsupportedMediaTypeError,
)
from langorch.domain.resources import QueueFullError
from langorch.domain.triggers import StartedRun
from langorch.web.http import (
    FormContentError,
    FormNotReadableError,
    FormTooLargeError,
    UnreadableBodyError,
)

Wording = str | Callable[[Any], str]
"""A title or sentence: fixed, or written from the error's facts."""


def _message(error: BaseException) -> str:
    return str(error)


@dataclass(frozen=True)
class Answer:
    """How the edge answers one error: the status code, a page's title and sentence.

    An answer without wording of its own reads "Cannot do that" and the error's message (for
    developers and operators: the webhook's JSON body and the console's error page).
    """

    status: int
    title: Wording = "Cannot do that"
    sentence: Wording = _message

    def title_for(self, error: BaseException) -> str:
        """The page's title for ``error``."""
        return self.title if isinstance(self.title, str) else self.title(error)

    def sentence_for(self, error: BaseException) -> str:
        """The sentence the page says for ``error``."""
        return self.sentence if isinstance(self.sentence, str) else self.sentence(error)


def _wrong_code(error: CodeMismatchError) -> str:
    sentence = (
        "The one-time code is missing or does not match the one in your email; "
        "nothing was changed. Type the six digits from the email and try again."
    )
    if error.attempts_left is None:
        return sentence
    return f"{sentence} ({error.attempts_left} attempts left.)"


def _bad_edit(error: EditRejectedError) -> str:
    return (
        f"The field {error.key} {error.problem}; nothing was changed. "
        "Correct it and press the button again."
    )


def _unreadable_decision(error: InvalidDecisionError) -> str:
    # What the form carried instead of a decision, said as the form is shown again.
    return str(error) or "The form could not be read; nothing was changed. Please try again."


def _already_decided(error: AlreadyDecidedError) -> str:
    when = human_time(error.decided_at) if error.decided_at else "an earlier time"
    return f"This approval was already {error.outcome.value} by {error.decided_by} at {when}."


ERRORS: Mapping[type[Exception], Answer] = {
    # A request's envelope and its JSON body (webhooks), and what a use-case refuses to find,
    # check or change (their messages are for the developer or operator who sent it).
    RequestRejectedError: Answer(400),
    UnreadableBodyError: Answer(400),
    SignatureError: Answer(401),
    PayloadTooLargeError: Answer(413),
    UnsupportedMediaTypeError: Answer(415),
    DefinitionError: Answer(422),
    NotFoundError: Answer(404, "Not found"),
    ConflictError: Answer(409),
    # A concurrency key's (or a resource's) queue at its cap: the start is refused, not queued;
    # the sender retries later (webhook senders back off on 429).
    QueueFullError: Answer(429),
    # The approval page: a refused link or form, in the approver's words.
    ApprovalLinkError: Answer(400, "This link cannot be used", "This link cannot be used."),
    LinkForgedError: Answer(
        403,
        "This link is not valid",
        "This approval link is not valid: it may have been changed or cut short. "
        "Open the link exactly as it appears in your email.",
    ),
    LinkExpiredError: Answer(
        410,
        "This approval has expired",
        "This approval has expired; nothing was changed. The run has moved on.",
    ),
    LinkReissuedError: Answer(
        410,
        "This link was replaced",
        "New links were sent for this approval, so this one no longer works; nothing was "
        "changed. Use the link (and code) in the most recent email.",
    ),
    NotAnApproverError: Answer(
        403,
        "You cannot decide this approval",
        "This link's recipient is not an approver of this step; nothing was changed. "
        "Ask the workflow's owner to add you as an approver.",
    ),
    FormExpiredError: Answer(
        400,
        "Please use the buttons on the page",
        "The decision did not come from this approval's page; nothing was changed. "
        "Open the link from your email and press Approve or Reject there.",
    ),
    SubmittedTooSoonError: Answer(
        409,
        "Please press again",
        "To protect this approval from automated mail scanners, nothing was decided yet. "
        "Please check the page and press your button again.",
    ),
    ViewTokenUsedError: Answer(
        409,
        "Please press again",
        "This form was already sent once; nothing was decided by this submit. "
        "Please check the page and press your button again.",
    ),
    CodeMissingError: Answer(
        400,
        "Enter the code",
        "Enter the six-digit code from your email, then press the button again; "
        "nothing was changed.",
    ),
    CodeMismatchError: Answer(403, "The code does not match", _wrong_code),
    CodeLockedError: Answer(
        403,
        "Too many wrong codes",
        "Too many wrong codes were typed with this link, so it no longer accepts any; "
        "nothing was changed. Ask the workflow's owner to send new links "
        "(langorch approvals reissue).",
    ),
    InvalidDecisionError: Answer(400, "The form could not be read", _unreadable_decision),
    EditRejectedError: Answer(422, "Please correct an edit", _bad_edit),
    RunEndedError: Answer(
        410,
        "This run has ended",
        "The run this approval belongs to has already ended; nothing was changed.",
    ),
    SupersededError: Answer(
        410,
        "This request was superseded",
        "This request was superseded by a newer one, which was sent to you separately; "
        "nothing was changed. Please answer the newer request.",
    ),
    TooLateError: Answer(
        410,
        "Too late",
        "The decision arrived after the approval timed out, so it was not applied; "
        "the run went on as its timeout rule says.",
    ),
    SelfApprovalError: Answer(
        403,
        "You cannot approve your own run",
        "You started this run, and this step requires someone else to approve it "
        "(separation of duties); nothing was changed.",
    ),
    DelegatedAwayError: Answer(
        403,
        "You handed over your vote",
        "You delegated your vote on this approval to someone else, so your link no longer "
        "votes; nothing was changed.",
    ),
    DelegationRefusedError: Answer(
        400,
        "The vote could not be handed over",
        "Your vote could not be handed over: delegation is off for this step, the address is "
        "not an email, that person can already decide, or you voted already. Nothing was "
        "changed.",
    ),
    AlreadyDecidedError: Answer(
        409, lambda error: f"Already {error.outcome.value}", _already_decided
    ),
    ApprovalNotFoundError: Answer(
        404, "Approval not found", "This approval no longer exists; nothing was changed."
    ),
    # Recorded but not delivered, and reopened: the one answer that is not the request's
    # fault, and one that pressing again fixes.
    DecisionNotDeliveredError: Answer(
        503,
        "Please try again",
        "Your decision could not be delivered to the run just now; nothing was changed. "
        "Please press the button again in a minute.",
    ),
    # The approval page's form as the callback reads it, before any use-case.
    FormNotReadableError: Answer(
        415,
        "The form could not be read",
        "Decisions are sent from the approval page's form; nothing was changed.",
    ),
    FormContentError: Answer(
        400,
        "The form could not be read",
        "The form's content is not what an approval page sends; nothing was changed. "
        "Open the link from your email and press a button again.",
    ),
    FormTooLargeError: Answer(
        413,
        "The form is too large",
        "The form is larger than an approval accepts; nothing was changed.",
    ),
}

OUTCOMES: Mapping[type, int] = {
    StartedRun: 202,  # a webhook delivery accepted (its run started, or found started)
    Shown: 200,
    Decided: 200,  # and a vote counted (Voted), thanked with the progress
    DecisionHeld: 202,  # accepted, not acted on: kept for the run's redrive
    AlreadyDecided: 200,  # someone decided first: an outcome to read, not an error
}
"""The status of each outcome a use-case answers (:class:`FormAgain` answers as its error)."""

REFUSED = Answer(400)
"""The console's answer to a named error with no row: a use-case refused what an operator asked
(an unknown step to redrive from, a run that cannot be forked). The cloud edges let such an error
raise instead."""


def answer_for(error: BaseException) -> Answer | None:
    """The row of ``error``'s class or of its nearest ancestor that has one.

    Returns:
        The answer, or ``None``: no row, so not the request's fault (the edge lets it raise).
    """
    for cls in type(error).__mro__:
        answer = ERRORS.get(cls)
        if answer is not None:
            return answer
    return None


def http_status(error: BaseException) -> int:
    """The status code for an error a request caused.

    Raises:
        LookupError: the error has no row (it is not a request's fault).
    """
    answer = answer_for(error)
    if answer is None:
        raise LookupError(f"{type(error).__name__} has no HTTP answer in langorch.web.errors")
    return answer.status


def outcome_status(outcome: object) -> int:
    """The status code for a use-case's outcome (a form shown again answers as its error).

    Raises:
        LookupError: the outcome's type has no row.
    """
    if isinstance(outcome, FormAgain):
        return http_status(outcome.error)
    for cls in type(outcome).__mro__:
        if cls in OUTCOMES:
            return OUTCOMES[cls]
    raise LookupError(f"{type(outcome).__name__} has no HTTP status in langorch.web.errors")


def title_of(error: BaseException) -> str:
    """The page title for ``error`` (its row's; "Cannot do that" without a row)."""
    return (answer_for(error) or REFUSED).title_for(error)


def sentence_of(error: BaseException) -> str:
    """The sentence a page says for ``error`` (its row's; its message without a row)."""
    return (answer_for(error) or REFUSED).sentence_for(error)
