"""Named errors. Each carries a message a user can act on: what was wrong, where, how to fix it.

They say what happened, never how to answer it: HTTP status codes and the words of a page are
chosen in one table at the web edge (:mod:`langorch.web.errors`), Step Functions error names in
the state machine. Nothing else matches on AWS error codes.
"""

from __future__ import annotations

from dataclasses import dataclass


class LangorchError(Exception):
    """Base of every error langorch raises on purpose."""


@dataclass(frozen=True)
class Problem:
    """One problem found in a definition or an input: where, what, and how to fix it."""

    path: str
    message: str
    hint: str = ""

    def __str__(self) -> str:
        text = f"{self.path}: {self.message}" if self.path else self.message
        return f"{text} (hint: {self.hint})" if self.hint else text


class DefinitionError(LangorchError):
    """A block or workflow definition is invalid; ``problems`` lists every problem found."""

    def __init__(self, subject: str, problems: list[Problem]) -> None:
        self.subject = subject
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{subject}: {len(problems)} problem(s)\n{lines}")


class InputValidationError(DefinitionError):
    """A run's input does not satisfy the workflow's inputs schema."""


class JsonInputError(InputValidationError):
    """A JSON value a door was given is not one a run can carry; ``problems`` holds the one
    problem (where, what, the limit, how to fix it), which is also the one-line message."""

    def __init__(self, problem: Problem) -> None:
        self.subject = problem.path
        self.problems = [problem]
        LangorchError.__init__(self, str(problem))


class JsonSyntaxError(JsonInputError):
    """Text that is not JSON: the problem names the line and column."""


class JsonShapeError(JsonInputError):
    """JSON nested deeper than :data:`~langorch.domain.limits.MAX_JSON_DEPTH`, or holding what
    strict JSON has no room for (NaN, Infinity, a number too large for a float, a lone
    surrogate): the problem names the field path and the limit."""


class NotFoundError(LangorchError):
    """A definition, run or approval does not exist."""


class ConflictError(LangorchError):
    """A conditional write lost: someone else changed the record first."""


class RunNotFinishedError(LangorchError):
    """A run driven in-process did not end within its segment bound."""


class LeaseHeldError(ConflictError):
    """Another segment holds the run's lease; this one must not touch the graph."""


class LeaseLostError(LeaseHeldError):
    """This segment's lease was taken over: its checkpoint write was refused, nothing written.

    A subclass of :class:`LeaseHeldError` because it is handled the same way: the segment
    stops, the state machine retries, and the retry finds the run where the newer segment
    left it.
    """


class UnknownInterruptError(LangorchError):
    """A resume named an interrupt the run is not waiting on."""

    retryable = False


class StepFailedError(LangorchError):
    """A step failed in a way another attempt cannot fix, or after its retries with no route."""

    retryable = False


class ReviewLoopExhaustedError(StepFailedError):
    """An approval's review loop reached ``max_iterations`` with a rejection and declares no
    ``on_max_iterations`` route: the run fails rather than going on with a rejected draft."""


class LoopLimitReachedError(StepFailedError):
    """The run came back to a step that has run ``max_iterations`` times (the outcome
    ``LoopLimitReached``) and the step declares no ``on_max_iterations`` route: the run fails
    rather than going round again."""


class HookFailedError(StepFailedError):
    """A step's pre or post hook failed: its tool answered with an error, or is not bound."""


class MissingInputError(StepFailedError):
    """A required input mapping resolved to nothing: the step cannot run without it."""


class StepTimeoutError(LangorchError):
    """A step ran longer than its ``timeout_seconds``."""


class LLMError(LangorchError):
    """An LLM provider failed or answered with something that does not fit the block."""


class ProviderNotAvailableError(LLMError):
    """A provider's SDK or credentials are missing."""


class StorageError(LangorchError):
    """A storage backend failed (named translation of an AWS ``ClientError``).

    Transient for the run: the segment is abandoned and retried, the run does not fail.
    """


class CheckpointPayloadMissingError(StorageError):
    """A checkpoint's offloaded payload is gone: never fall back to an older checkpoint."""


class TaskClosedError(LangorchError):
    """Step Functions no longer waits on this task token (timed out, finished or unknown)."""


class SecretNotFoundError(NotFoundError):
    """A Secrets Manager secret does not exist."""


class RequestRejectedError(LangorchError):
    """A request is refused for what it carries (a signature, a size, a media type, a link, a
    form); nothing was done. ``problems`` lists input problems by path.

    Raised by the webhook and approval request checks; the answer each gets at the edge is in
    :mod:`langorch.web.errors`.
    """

    def __init__(self, message: str, *, problems: list[Problem] | None = None) -> None:
        self.problems = problems or []
        super().__init__(message)


class SignatureError(RequestRejectedError):
    """A webhook signature or a signed link does not verify."""


class PayloadTooLargeError(RequestRejectedError):
    """A request body is over the limit."""


class UnsupportedMediaTypeError(RequestRejectedError):
    """A request body is not JSON."""


class FileReadError(LangorchError):
    """A ``read_file`` step could not read or parse its file.

    ``retryable`` is true only for what another attempt can fix (S3 throttling, a 5xx, a
    dropped connection); the step's retry policy then tries again.
    """

    retryable = False

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        self.retryable = retryable
        super().__init__(message)


class FileMissingError(FileReadError):
    """The object (or its bucket) does not exist."""


class FileTooLargeError(FileReadError):
    """The object is larger than the step's ``max_bytes``."""


class FileRefusedError(FileReadError):
    """The step may not read that object: another bucket, or langorch's checkpoint prefix."""


class FileContentError(FileReadError):
    """The object's bytes are not what its format says (bad UTF-8, JSON, YAML or CSV)."""


class RecordTooLargeError(StorageError):
    """A run record does not fit its item even with its outputs and pending request bounded.

    Only an input over the budget can cause it (``domain.limits``): a door let it in.
    """


class UnreadableRecordError(StorageError):
    """A stored record does not parse back (corrupt, or nested deeper than the parser reads).

    Not transient: reading it again fails the same way (a distinct name, so the state machine's
    Retry on ``StorageError`` does not match it). Listings skip such a record with a warning;
    reading it by id raises this, naming the record and the way out.
    """
