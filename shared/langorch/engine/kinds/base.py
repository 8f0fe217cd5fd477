"""What every executor gets and returns: the resolved step and its outcome, and the helpers
the kinds share (the template scope, the step's inputs, where a single result goes)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from langgraph.graph import END

from langorch.domain.definitions import AskSpec, BlockDefinition, BlockType, KindName, PlanStep
from langorch.domain.errors import MissingInputError
from langorch.domain.step_settings import InputMapping
from langorch.domain.templates import PathMissing, walk
from langorch.engine.context import EngineContext
from langorch.engine.state import OrchestrationState

SUMMARY_CHARS = 300
"""Bound on each value shown in a timeline outputs summary."""

LOOP_LIMIT_REACHED = "LoopLimitReached"
"""The named outcome of a step or loop whose bound stopped it (timeline, results, outputs)."""


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

    A name resolves as seed 000 says: from ``shared_context``, else a step's result under its
    id (seed 004's ``analyze.output``, see :func:`step_results`), else the user's stored
    preference of that name (loaded before the first step), else empty (missing names render
    as ``""``). Validation warns about the names this is needed for. The run's own names
    (``run_id``, ``user_preferences``, …) come last: no preference can shadow them. The step's
    input mappings are resolved over the same names.
    """
    shared = dict(state.get("shared_context") or {})
    preferences = state.get("user_preferences") or {}
    names = {**preferences, **step_results(state, shared), **shared}
    scope: dict[str, Any] = {
        **names,
        "user_preferences": preferences,
        "user_history": state.get("user_history") or [],
        "error": state.get("error") or {},
        "run_id": state.get("run_id", ""),
        "user_id": state.get("user_id", ""),
    }
    if spec is not None:
        for key, mapping in (spec.step.input_mappings or {}).items():
            scope[key] = _mapped(spec, key, mapping, names)
    return scope


def _mapped(spec: StepSpec, key: str, mapping: str | InputMapping, names: dict[str, Any]) -> Any:
    """One mapped input: its value, else its default (``""`` for the short form).

    Raises:
        MissingInputError: a required mapping resolves to nothing (or to null).
    """
    if isinstance(mapping, str):
        return resolve_input(mapping, names)
    try:
        value = names[mapping.path] if mapping.path in names else walk(names, mapping.path)
        missing = f"{mapping.path} is null" if value is None else None
    except PathMissing as exc:
        value, missing = None, str(exc)
    if missing is None:
        return value
    if mapping.required:
        raise MissingInputError(
            f"step {spec.step_id}: required input {key!r} (input_mappings.{key}) reads "
            f"{mapping.path!r}, which resolves to nothing: {missing}; provide it in the run's "
            "input or an earlier step, or make the mapping optional with a default"
        )
    return mapping.default


def step_results(state: OrchestrationState, shared: dict[str, Any]) -> dict[str, Any]:
    """Each finished step's result under its id: the keys it wrote (``analyze.summary``), and
    all of them as ``output`` (``analyze.output``; a key the step wrote named ``output`` is
    itself).

    The state keeps only which keys each step wrote (``results``); the values are read from
    ``shared_context``, so a step's outputs are not stored twice in every checkpoint. A later
    step writing the same key changes what this view shows.
    """
    views: dict[str, Any] = {}
    for step_id, keys in (state.get("results") or {}).items():
        view = {key: shared[key] for key in keys if key in shared}
        view.setdefault("output", dict(view))
        views[step_id] = view
    return views


def resolve_input(key: str, names: dict[str, Any]) -> Any:
    """One input as seed 000 resolves it: ``shared_context``, else the preference, else ``""``.

    Args:
        key: The ``shared_context`` key (an input key, or the source of an input mapping), or a
            dotted path into one (``request.user.name``, ``analyze.output``; seed 004), walked
            as a ``{request.user.name}`` placeholder is (:func:`~langorch.domain.templates.walk`).
        names: What names resolve to (:func:`scope_of`): ``shared_context`` over the steps'
            results over the user's preferences.

    Returns:
        The value; ``""`` when nothing holds it.
    """
    if key in names:
        return names[key]  # a key with a dot in it is still a key
    try:
        return walk(names, key)
    except PathMissing:
        return ""


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


def step_event(event: str, spec: StepSpec, **fields: Any) -> dict[str, Any]:
    """An engine event of a step for the run's timeline (``None`` fields left out); a kind
    emits its own with ``langgraph.config.get_stream_writer()``."""
    return {
        "event": event,
        "step_id": spec.step_id,
        "kind": spec.kind.value,
        "at": datetime.now(UTC).isoformat(),
        **{k: v for k, v in fields.items() if v is not None},
    }


def summarize(values: dict[str, Any]) -> dict[str, str]:
    """A bounded, printable view of a step's outputs for the timeline."""
    summary: dict[str, str] = {}
    for key, value in list(values.items())[:20]:
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        summary[key] = text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"
    return summary


async def recorded_once(
    spec: StepSpec,
    ctx: EngineContext,
    *,
    kind: str,
    visit: int,
    attempt: int,
    digest: str,
    call: Callable[[], Awaitable[dict[str, Any]]],
) -> dict[str, Any]:
    """``call``'s result, recorded the first time and read back from the record after (a
    re-run step, a replay); made unrecorded when the run keeps no records (no side-effects
    store). The record emits no events of its own: the step's events say what it did."""
    if ctx.side_effects is None:
        return await call()
    effects = ctx.side_effects.begin(
        step_id=spec.step_id, visit=visit, attempt=attempt, tools=[], emit=_no_events
    )
    try:
        result, _ = await effects.once(kind, digest, call)
    finally:
        await effects.aclose()
    return result


def _no_events(event: Any) -> None:
    """A recorded call of a step kind emits nothing itself."""
