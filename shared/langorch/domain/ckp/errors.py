"""What can go wrong when a CKP procedure's node runs: each a named error with the fix."""

from __future__ import annotations

from langorch.domain.errors import LangorchError, NotFoundError, StepFailedError


class UnboundActionError(StepFailedError):
    """A step's action has no executor in this deployment (no agent, built-in or tool)."""


class AgentBindingChangedError(StepFailedError):
    """An agent's resource key differs from the one bound when the procedure was stored."""


class VerificationFailedError(StepFailedError):
    """A check of a verification (or a sequence's validation) failed with ``on_fail: fail``."""


class SecretUnavailableError(StepFailedError):
    """A ``{{ secrets.NAME }}`` names a secret the deployment does not have (or no string in
    it)."""


class ActionFailedError(LangorchError):
    """A step's action reported a failure (its agent, tool or built-in action said so).

    ``retryable`` says whether another attempt of the node may succeed: an agent may say so;
    otherwise it is, within the node's ``max_retries``.
    """

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        self.retryable = retryable
        super().__init__(message)


class ProcedureInactiveError(NotFoundError):
    """A trigger fired for a procedure with no version that may run now: every version is a
    draft or inactive, or not effective yet."""
