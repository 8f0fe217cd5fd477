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


def _add(existing: int | None, new: int | None) -> int:
    return (existing or 0) + (new or 0)


def _latest(existing: Any, new: Any) -> Any:
    """Last write wins, also when parallel steps write in the same superstep."""
    return new


CLEARED_BY = "cleared_by"
"""The key of a write to ``error`` that clears it: ``{"cleared_by": step_id}``."""


def _error(existing: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
    """A failure replaces the error; a success clears it only if it is that step's error.

    Conditional in the reducer, not in the step: a step that fails beside the succeeding one in
    the same superstep keeps its error, whatever order the writes land in.
    """
    if new is not None and CLEARED_BY in new:
        standing = existing or {}
        return {} if standing.get("step_id") == new[CLEARED_BY] else standing
    return dict(new or {})


class StepError(TypedDict):
    """The normalised error object templates can use as ``error.message`` and so on."""

    step_id: str
    node_id: str
    """The same as ``step_id``: seed 001 writes ``error.node_id``."""
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
    retry_count: Annotated[int, _add]
    """Retries the run's steps took in all (attempts past each step's first)."""
    last_error: Annotated[str | None, _latest]
    error: Annotated[dict[str, Any], _error]
    """The last step error still standing, normalised (``StepError``); empty when none. A later
    success of the step that failed clears it, so a check inside a loop sees this item's."""
    results: Annotated[dict[str, list[str]], _merge_dicts]
    """Per step id, the ``shared_context`` keys its last run wrote: its result, readable as
    ``<step_id>.output`` and ``<step_id>.<key>`` (seed 004's ``state.results[node.id]``)."""
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
    """Tokens used per LLM call: ``{"step_id", "provider", "model", "input", "output"}``, with
    ``cost_usd`` when priced and ``budget_granted`` when an approval raised the run's budget
    before the call."""
