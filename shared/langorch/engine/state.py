"""The graph state every compiled workflow runs over (seed 000 ``OrchestrationState``).

``shared_context`` is the shared bus: each step reads its input keys from it and merges its
output keys into it. ``block_results`` is an append-only log. The bookkeeping channels
(``visits``, ``loops``, ``error``) merge too, so steps running in the same superstep never
collide; single-value channels that parallel steps may write keep the last value.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict


def _append_list(existing: list[Any] | None, new: list[Any] | None) -> list[Any]:
    return (existing or []) + (new or [])


def _merge_dicts(existing: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
    return {**(existing or {}), **(new or {})}


def _latest(existing: Any, new: Any) -> Any:
    """Last write wins, also when parallel steps write in the same superstep."""
    return new


class StepError(TypedDict):
    """The normalised error object templates can use as ``error.message`` and so on."""

    step_id: str
    type: str
    message: str
    attempts: int


class OrchestrationState(TypedDict, total=False):
    """The state of one run."""

    # Identity
    run_id: str
    agent_id: str
    """The workflow id (seed 000 calls an agent what langorch calls a workflow)."""
    user_id: str

    # The block of the step running now (seed 000); informational for the timeline.
    current_block: Annotated[dict[str, Any], _latest]

    # Results from completed steps (append reducer)
    block_results: Annotated[list[dict[str, Any]], _append_list]

    # Shared data flowing between steps (merge reducer)
    shared_context: Annotated[dict[str, Any], _merge_dicts]

    # Long-term memory (loaded at the start of the run)
    user_preferences: Annotated[dict[str, Any], _latest]
    user_history: Annotated[list[dict[str, Any]], _latest]

    # Execution tracking
    status: Annotated[str, _latest]
    retry_count: int
    last_error: Annotated[str | None, _latest]
    error: Annotated[dict[str, Any], _merge_dicts]
    """The last step error, normalised (``StepError``); empty when none."""
    visits: Annotated[dict[str, int], _merge_dicts]
    """How many times each step has finished in this run (review loops, loop bodies)."""
    fixes: Annotated[dict[str, Any], _merge_dicts]
    """Per step that asks a person to fix it: its failure (``{"error", "round"}``) until the
    person's answer is acted on, then ``None`` (:mod:`langorch.engine.fixes`)."""
    loops: Annotated[dict[str, Any], _merge_dicts]
    """Per loop step: ``{"index": i, "items": [...], "results": [...]}``."""
    outputs: Annotated[dict[str, Any], _merge_dicts]
    """The run's outputs (set by ``terminate``; default: ``shared_context`` at the end)."""
    usage: Annotated[list[dict[str, Any]], _append_list]
    """Tokens used per LLM call: ``{"step_id", "provider", "model", "input", "output"}``."""
