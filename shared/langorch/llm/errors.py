"""Named LLM failures: what went wrong, in the model's own words, and what to do about it.

Every failure of a real provider reaches the engine as one of these (all are
:class:`~langorch.llm.base.LLMCallError`), so the timeline says *refusal* or *cut by max_tokens*
rather than "does not parse". Each message names the block and step, quotes what the model said
(when it said anything), says whether the step will try again, and how to fix it. The tokens the
failed call was billed for travel with the error so the step can record them.

Kept free of any SDK: the providers' adapters (``openai.py``, ``bedrock.py``, ``_langchain.py``)
build these errors; the engine only reads their attributes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from langorch.domain.errors import StepTimeoutError
from langorch.llm.base import LLMCallError

if TYPE_CHECKING:
    from langorch.llm.base import LLMRequest

MAX_QUOTE_CHARS = 500
"""Bound on the model's words quoted in a message (it may have written pages)."""


def quote(text: object) -> str:
    """The model's words, trimmed to :data:`MAX_QUOTE_CHARS`, ready to put in a message."""
    words = " ".join(str(text).split())
    if len(words) > MAX_QUOTE_CHARS:
        words = words[: MAX_QUOTE_CHARS - 1] + "…"
    return f'"{words}"'


def where(request: LLMRequest) -> str:
    """``block 'b' (step 's')`` or ``step 's'``: where a failure happened."""
    if request.block_id and request.block_id != request.step_id:
        return f"block {request.block_id!r} (step {request.step_id!r})"
    return f"step {request.step_id!r}"


def retry_note(request: LLMRequest, *, retryable: bool, why_not: str = "") -> str:
    """Whether the step will try again, as a sentence for the message."""
    of = f"attempt {request.attempt} of {request.max_attempts}"
    if not retryable:
        return f"Not retried ({of}){': ' + why_not if why_not else ''}."
    if request.attempt < request.max_attempts:
        return f"The step will try again ({of})."
    return f"No attempts left ({of}): raise max_retries on the step or block to try more often."


class NamedLLMError(LLMCallError):
    """A provider failure with a name: the base of the errors below.

    Attributes:
        model_text: What the model said (refusal text, guardrail message, cut answer), if any.
        retry_after: Seconds the server asked to wait before the next attempt, if it said.
    """

    default_retryable = False

    def __init__(
        self,
        message: str,
        *,
        retryable: bool | None = None,
        model_text: str | None = None,
        input_tokens: int = 0,
        output_tokens: int = 0,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(
            message,
            retryable=self.default_retryable if retryable is None else retryable,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
        )
        self.model_text = model_text
        self.retry_after = retry_after


class ModelRefusalError(NamedLLMError):
    """The model declined to answer. Asking again unchanged gets the same refusal."""


class GuardrailInterventionError(NamedLLMError):
    """A Bedrock guardrail or a content filter blocked the prompt or the answer."""


class OutputTruncatedError(NamedLLMError):
    """The answer was cut by the output token limit (``max_tokens``): never accepted."""


class MalformedOutputError(NamedLLMError):
    """The answer is not the JSON object asked for. A sampled model may do better next time."""

    default_retryable = True


class ThrottledError(NamedLLMError):
    """The provider refused the call for rate or quota reasons; ``retry_after`` if it said."""

    default_retryable = True


class LLMTimeoutError(NamedLLMError, StepTimeoutError):
    """The call did not answer within what was left of the step's ``timeout_seconds``.

    A :class:`StepTimeoutError` too: it is the step's timeout, named for what ran out.
    """

    default_retryable = True


def refusal(request: LLMRequest, label: str, text: str, tokens: tuple[int, int]) -> NamedLLMError:
    """The model refused: its words, no retry, and what to change."""
    return ModelRefusalError(
        f"{label} refused to answer {where(request)}: {quote(text)}. "
        + retry_note(request, retryable=False, why_not="the same prompt gets the same refusal")
        + " Fix: reword the block's prompt or system_prompt, or check the input it was given.",
        model_text=text,
        input_tokens=tokens[0],
        output_tokens=tokens[1],
    )


def guardrail(
    request: LLMRequest, label: str, what: str, text: str, tokens: tuple[int, int]
) -> NamedLLMError:
    """A guardrail or content filter intervened: its message, no retry, and where to look."""
    said = f": {quote(text)}" if text else ""
    return GuardrailInterventionError(
        f"{what} blocked the answer of {where(request)} on {label}{said}. "
        + retry_note(request, retryable=False, why_not="the same input is blocked again")
        + " Fix: change the input or the prompt, or review the guardrail's policies.",
        model_text=text or None,
        input_tokens=tokens[0],
        output_tokens=tokens[1],
    )


def truncated(request: LLMRequest, label: str, text: str, tokens: tuple[int, int]) -> NamedLLMError:
    """The answer was cut by the output limit: never accepted, never retried unchanged."""
    limit = f"max_tokens={request.max_tokens}" if request.max_tokens else "the model's default"
    shown = f" It ended: {quote(text[-200:])}." if text else ""
    return OutputTruncatedError(
        f"{label} cut the answer of {where(request)} at the output limit ({limit}, "
        f"{tokens[1]} tokens written).{shown} "
        + retry_note(request, retryable=False, why_not="the same limit cuts it again")
        + " Fix: raise max_tokens on the block (or llm_max_tokens on the workflow, or "
        "LANGORCH_DEFAULT_LLM_MAX_TOKENS), or ask for a shorter answer.",
        model_text=text or None,
        input_tokens=tokens[0],
        output_tokens=tokens[1],
    )


def malformed(
    request: LLMRequest, label: str, problem: str, text: str, tokens: tuple[int, int]
) -> NamedLLMError:
    """The answer is not the JSON asked for: retryable (a sampled model may do better)."""
    shown = f" It said: {quote(text)}." if text else ""
    return MalformedOutputError(
        f"{label} answer for {where(request)} is not the JSON object asked for: {problem}.{shown} "
        + retry_note(request, retryable=True)
        + " Fix, if it keeps failing: make the prompt ask for exactly the output keys, or use a "
        "stronger model (llm_model).",
        model_text=text or None,
        input_tokens=tokens[0],
        output_tokens=tokens[1],
    )


def throttled(
    request: LLMRequest, label: str, detail: str, retry_after: float | None
) -> NamedLLMError:
    """The provider throttled the call: retryable, after the wait it asked for."""
    wait = f" It asked to wait {retry_after:g}s." if retry_after is not None else ""
    return ThrottledError(
        f"{label} throttled the call of {where(request)}: {detail}.{wait} "
        + retry_note(request, retryable=True)
        + " Fix, if it persists: raise the account's quota, lower concurrency, or give the step "
        "more max_retries and retry_backoff_seconds.",
        retry_after=retry_after,
    )


def timed_out(request: LLMRequest, label: str, seconds: float) -> NamedLLMError:
    """The call ran out of the step's time: retryable."""
    return LLMTimeoutError(
        f"{label} did not answer {where(request)} within {seconds:.1f}s (what was left of the "
        f"step's timeout_seconds); the call was abandoned. "
        + retry_note(request, retryable=True)
        + " Fix: raise timeout_seconds on the step or block (up to 900), lower max_tokens, or "
        "use a faster model.",
    )
