"""One LLM call as a step makes it: within the step's time, once, every token counted.

The step owns the retry policy (``max_retries``, ``retry_backoff_seconds``, ``timeout_seconds``);
below it nothing retries (the SDKs' retries are off, see ``openai.py`` and ``bedrock.py``). For
one attempt, :func:`call_model`:

* gives the call what is left of the step's ``timeout_seconds`` (less a small margin, so the
  call's own, named timeout fires before the step's generic one) and cancels it when that runs
  out: OpenAI's async client closes the connection; each Bedrock request uses a client whose read
  timeout is what is left when it is sent, so its request ends then too;
* counts the tokens of every response the attempt received, and puts them on the error when the
  attempt fails (a refused or cut answer is billed all the same);
* leaves waiting to the step: :func:`retry_delay` is the wait the server asked for
  (``Retry-After``, "try again in 20s"), bounded by the step's own time.

A call still throttled on the step's last attempt does not fail the step: the step parks the run
(a ``wait`` interrupt: Step Functions sleeps, no Lambda runs) for
:func:`throttle_park_seconds` and calls again when it wakes (issue 33: a burst over a model's
quota queues runs instead of failing them).
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from langorch.llm._langchain import ATTEMPT_TALLY, Tally
from langorch.llm.base import LLMCallError, LLMRequest, LLMResult
from langorch.llm.errors import ThrottledError, timed_out

MAX_MARGIN_SECONDS = 0.25
"""How much earlier than the step the call gives up (at most; 5% of short budgets)."""


class Invoker(Protocol):
    """What answers requests: the registry, or a test's fake (``invoke`` only is enough)."""

    def invoke(self, request: LLMRequest) -> LLMResult: ...


def call_budget(step_seconds: float) -> float:
    """The seconds a call may take when the step has ``step_seconds`` left."""
    return max(step_seconds - min(MAX_MARGIN_SECONDS, step_seconds * 0.05), 0.001)


_CLOSE_MARGIN_SECONDS = 5.0
"""How much longer than its own timeouts an abandoned request is waited for."""


async def call_model(
    llm: Invoker,
    request: LLMRequest,
    *,
    budget_seconds: float | None,
    started: float | None = None,
) -> LLMResult:
    """Make one attempt of ``request`` within ``budget_seconds``.

    Args:
        llm: The registry (``ainvoke`` is used when it has one, else ``invoke`` in a thread).
        request: The call; its ``timeout_seconds`` is set here from the budget.
        budget_seconds: The step's ``timeout_seconds``; ``None``: no limit beyond the
            provider's own request timeout.
        started: ``time.monotonic()`` when the step's attempt started (default: now); the
            time since then is taken off the budget.

    Returns:
        The validated result.

    Raises:
        LLMTimeoutError: the budget ran out; the call was cancelled.
        LLMError: any other failure, with ``input_tokens``/``output_tokens`` set to what the
            attempt was billed for.
    """
    tally = Tally()
    reset = ATTEMPT_TALLY.set(tally)
    try:
        if budget_seconds is None:
            return await _invoke(llm, request)
        spent = time.monotonic() - started if started is not None else 0.0
        seconds = call_budget(budget_seconds - spent)
        request = replace(request, timeout_seconds=seconds, deadline=time.monotonic() + seconds)
        try:
            async with asyncio.timeout(seconds) as deadline:
                return await _invoke(llm, request)
        except TimeoutError as exc:
            if not deadline.expired():
                raise
            label = {"openai": "OpenAI", "bedrock": "Bedrock", "anthropic": "Anthropic"}.get(
                request.provider, "The model"
            )
            raise timed_out(request, label, seconds) from exc
    except LLMCallError as exc:
        exc.input_tokens = max(exc.input_tokens, tally.input_tokens)
        exc.output_tokens = max(exc.output_tokens, tally.output_tokens)
        raise
    finally:
        ATTEMPT_TALLY.reset(reset)
        # Cut off (by this deadline or the step's), a synchronous SDK's call runs on in its
        # thread: a request it has not sent yet is not sent (``request_opened`` refuses it),
        # and one it has sent runs until its own timeouts end it, which a busy machine may push
        # past the deadline. The attempt ends when that request has closed, so the step's next
        # attempt never sends beside it; bounded by its connect and read timeouts (each at most
        # the budget) and a margin.
        if tally.abandon() and budget_seconds is not None:
            await _until_closed(tally, 2 * budget_seconds + _CLOSE_MARGIN_SECONDS)


async def _until_closed(tally: Tally, seconds: float) -> None:
    """Wait until the attempt's open request has closed (at most ``seconds``), through any
    cancellation meanwhile (the step's own deadline, just after this call's), which is raised
    after."""
    closed = asyncio.ensure_future(asyncio.to_thread(tally.wait_closed, seconds))
    cancelled = False
    while not closed.done():
        try:
            await asyncio.shield(closed)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError


def prepare(llm: Any, provider: str, *, budget_seconds: float | None) -> None:
    """Load ``provider`` before a step's time starts (``LLMRegistry.prepare``), so an SDK's cold
    import or first client is never paid inside ``budget_seconds``.

    Args:
        llm: The registry (a test's fake with ``invoke`` only has nothing to load).
        provider: The step's provider (empty: the registry's default).
        budget_seconds: The step's ``timeout_seconds`` (``None``: no limit).
    """
    load = getattr(llm, "prepare", None)
    if load is not None:
        load(provider, call_budget(budget_seconds) if budget_seconds is not None else None)


async def _invoke(llm: Any, request: LLMRequest) -> LLMResult:
    ainvoke = getattr(llm, "ainvoke", None)
    if ainvoke is not None:
        result: LLMResult = await ainvoke(request)
        return result
    # A synchronous invoker (a test's fake): its thread cannot be cancelled.
    return await asyncio.to_thread(llm.invoke, request)


def retry_delay(exc: BaseException, *, limit_seconds: float | None) -> float:
    """How long to wait before the next attempt: what the server asked for, within limits.

    Args:
        exc: The failure of this attempt (its ``retry_after``, if any, is the server's wish).
        limit_seconds: The most the step will wait (its ``timeout_seconds``).

    Returns:
        Seconds to sleep before raising for the retry; 0 when the server said nothing.
    """
    wait = getattr(exc, "retry_after", None)
    if not isinstance(wait, int | float) or wait <= 0:
        return 0.0
    return float(min(wait, limit_seconds)) if limit_seconds is not None else float(wait)


THROTTLE_PARK_SECONDS = 10.0
"""The first park of a throttled step when the provider named no wait (it doubles per park)."""
THROTTLE_PARK_MAX_SECONDS = 600.0
"""The longest one park of a throttled step lasts (before jitter)."""


def is_throttled(exc: BaseException) -> bool:
    """Whether the provider refused the call for rate or quota (429, ``ThrottlingException``)."""
    return isinstance(exc, ThrottledError)


def throttle_park_seconds(
    exc: BaseException,
    parks: int,
    *,
    jitter: Callable[[float, float], float] = random.uniform,
) -> int:
    """How long a throttled step parks before it calls again: the server's ``Retry-After`` (or
    :data:`THROTTLE_PARK_SECONDS`) doubled per earlier park, capped, times 0.5-1.5 so that runs
    throttled together do not call again together. Whole seconds, at least 1 (a Step Functions
    ``Wait``). ``jitter`` is the module's generator, which the runner reseeds after a SnapStart
    restore (sandboxes restored from one snapshot must not wake together)."""
    asked = getattr(exc, "retry_after", None)
    base = float(asked) if isinstance(asked, int | float) and asked > 0 else THROTTLE_PARK_SECONDS
    wait: float = min(THROTTLE_PARK_MAX_SECONDS, base * 2 ** min(parks, 16))
    return max(1, math.ceil(wait * float(jitter(0.5, 1.5))))


def error_tokens(exc: BaseException) -> dict[str, int] | None:
    """The tokens a failed attempt was billed for (``{"input", "output"}``), if any."""
    tokens = getattr(exc, "tokens", None)
    return tokens if isinstance(tokens, dict) else None
