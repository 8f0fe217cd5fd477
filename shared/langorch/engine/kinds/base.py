"""What every executor gets and returns: the resolved step and its outcome, and the helpers
the kinds share (the template scope, the step's inputs, where a single result goes)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from langgraph.graph import END

from langorch.domain.definitions import AskSpec, BlockDefinition, BlockType, KindName, PlanStep
from langorch.engine.context import EngineContext
from langorch.engine.state import OrchestrationState

SUMMARY_CHARS = 300
"""Bound on each value shown in a timeline outputs summary."""


@dataclass(frozen=True)
class StepSpec:
    """A plan step resolved against its block and the plan's topology, ready to execute."""

    step: PlanStep
    block: BlockDefinition | None
    kind: BlockType | KindName
    successors: tuple[str, ...]
    """Where to go after success (for a loop: after the last iteration). Empty: the end."""
    branch_targets: dict[str, str] = field(default_factory=dict)
    loop_entries: tuple[str, ...] = ()
    loop_parent: str | None = None
    """For a loop body's exit step: the loop step to return to."""
    loop_collect: tuple[str, ...] = ()
    """For a loop step: the body's output keys, collected per iteration by default."""
    join_deps: tuple[str, ...] = ()
    """Dependencies that must all have finished before this step runs (``join: all``)."""
    on_error: str | None = None
    """Where a failure after the retries goes: the step's ``on_error``, else the plan's
    ``on_failure`` (unless this step is on the failure route), else nowhere: the run fails
    (or asks a person, with ``ask``)."""
    ask: AskSpec | None = None
    """Who is asked to fix a failure after the retries (``on_error: ask`` or the plan's
    ``on_failure: ask``; :mod:`langorch.engine.fixes`); ``None``: it routes or fails."""
    inputs: tuple[str, ...] = ()
    """With ``ask``: the ``shared_context`` keys the step reads (what the person may edit)."""
    outputs: tuple[str, ...] = ()
    """With ``ask``: the ``shared_context`` keys the step writes (what a skip may give)."""
    branching: bool = False
    """The kind routes by branch label (a skip, which chooses none, is not offered)."""
    routes: tuple[str, ...] = ()
    """Other steps the kind may route to (an approval's ``on_max_iterations``)."""
    end_node: str = END
    provider: str | None = None
    model: str | None = None
    temperature: float | None = None
    """LLM steps: the block's temperature, else the workflow's (``None``: the default)."""
    max_tokens: int | None = None
    """LLM steps: the block's output token limit, else the workflow's (``None``: the default)."""
    approvers: tuple[str, ...] = ()
    parks: bool = False
    """The kind parks or delegates (approval, wait, loop, subflow): no step timeout."""
    ends_run: bool = False
    """The kind ends the run (terminate)."""

    @property
    def step_id(self) -> str:
        """The step's id (its node's name)."""
        return self.step.step_id

    @property
    def max_attempts(self) -> int:
        """Attempts in all: the step's ``max_retries`` (else its block's) plus one."""
        retries = self.step.max_retries
        if retries is None:
            retries = self.block.max_retries if self.block else 0
        return retries + 1

    @property
    def timeout_seconds(self) -> float | None:
        """The step's time limit (``None``: it parks or delegates; children have their own)."""
        if self.parks:
            return None
        if self.step.timeout_seconds is not None:
            return float(self.step.timeout_seconds)
        return float(self.block.timeout_seconds) if self.block else 60.0

    def destinations(self) -> tuple[str, ...]:
        """Every node this step can route to (drawn as the graph's edges)."""
        targets = [*self.successors, *self.branch_targets.values(), *self.loop_entries]
        for extra in (self.loop_parent, self.on_error):
            if extra:
                targets.append(extra)
        targets.extend(self.routes)
        if not self.successors or self.ends_run:
            targets.append(self.end_node)
        return tuple(dict.fromkeys(targets))


@dataclass
class Outcome:
    """What a kind's executor produced."""

    context: dict[str, Any] = field(default_factory=dict)
    label: str | None = None
    goto: list[str] | None = None
    """Explicit routing (loops, terminate); ``None``: route by label or successors."""
    state: dict[str, Any] = field(default_factory=dict)
    """Other state channels to update (``loops``, ``status``, ``outputs``, ``usage``)."""
    tokens: dict[str, int] | None = None
    summary: dict[str, str] | None = None
    """What the timeline shows of the outputs; ``None``: :func:`summarize` of ``context``.
    A file read shows the content's shape, never the content."""


Executor = Callable[[StepSpec, OrchestrationState, EngineContext, int], Awaitable[Outcome]]
"""A kind's executor: ``(step, state, context, attempt) -> Outcome``. It raises to fail the
attempt; the generic node retries, routes errors and records the result."""

Preparer = Callable[[StepSpec, EngineContext], Awaitable[None]]
"""What a kind loads before each attempt's ``timeout_seconds`` starts (an LLM SDK, its client,
its key): ``(step, context) -> None``. It raises to fail the attempt, as an executor does."""


TRIED = "tried_request"
"""The attribute a step's error may carry: what it sent out (an ``http`` step's method, URL and
body). The timeline keeps it, so a failed call can be read back; headers are never kept, they
carry credentials."""


OWN_NAMES = frozenset({"user_preferences", "user_history", "error", "run_id", "user_id"})
"""The run's own names in every template's scope (:func:`scope_of`): never a step's input."""


def scope_of(spec: StepSpec | None, state: OrchestrationState) -> dict[str, Any]:
    """The names templates and expressions see: ``shared_context`` plus the run's own.

    A name resolves as seed 000 says: from ``shared_context``, else the user's stored
    preference of that name (loaded before the first step), else empty (missing names render
    as ``""``). Validation warns about the names this is needed for. The run's own names
    (``run_id``, ``user_preferences``, …) come last: no preference can shadow them.
    """
    shared = dict(state.get("shared_context") or {})
    preferences = state.get("user_preferences") or {}
    scope: dict[str, Any] = {
        **preferences,
        **shared,
        "user_preferences": preferences,
        "user_history": state.get("user_history") or [],
        "error": state.get("error") or {},
        "run_id": state.get("run_id", ""),
        "user_id": state.get("user_id", ""),
    }
    mappings = spec.step.input_mappings if spec else None
    if mappings:
        for key, source in mappings.items():
            scope[key] = resolve_input(source, shared, preferences)
    return scope


def resolve_input(key: str, shared: dict[str, Any], preferences: dict[str, Any]) -> Any:
    """One input as seed 000 resolves it: ``shared_context``, else the preference, else ``""``.

    Args:
        key: The ``shared_context`` key (an input key, or the source of an input mapping).
        shared: The run's ``shared_context``.
        preferences: The user's stored preferences.

    Returns:
        The value; ``""`` when neither holds the key.
    """
    if key in shared:
        return shared[key]
    return preferences.get(key, "")


def input_scope(spec: StepSpec, state: OrchestrationState) -> dict[str, Any]:
    """:func:`scope_of` with the block's input keys present (``""`` when nothing holds them)."""
    scope = scope_of(spec, state)
    keys = spec.block.input_keys if spec.block else []
    scope.update({key: scope.get(key, "") for key in keys})
    return scope


def output_key(spec: StepSpec, explicit: str | None, default: str) -> str:
    """Where a step's single result goes: the key it names, else its block's first output key,
    else ``default``."""
    if explicit:
        return explicit
    keys = spec.block.output_keys if spec.block else []
    return keys[0] if keys else default


def visits_of(spec: StepSpec, state: OrchestrationState) -> int:
    """How many times this step has finished in this run before now."""
    return (state.get("visits") or {}).get(spec.step_id, 0)


def summarize(values: dict[str, Any]) -> dict[str, str]:
    """A bounded, printable view of a step's outputs for the timeline."""
    summary: dict[str, str] = {}
    for key, value in list(values.items())[:20]:
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        summary[key] = text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"
    return summary
