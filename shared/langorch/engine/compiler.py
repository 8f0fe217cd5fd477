"""Compile a workflow version into a LangGraph ``StateGraph`` (seed 000 step 7).

``START → load_memory → entry steps → … → save_memory → END``: one node per plan step, all of
them the same generic node (:mod:`langorch.engine.executors`) with a different
:class:`StepSpec`; what a kind means (its executor, whether it parks or ends the run) comes
from the kind registries, never from a branch on kind names. Routing is decided by each node's
``Command``; ``destinations`` make the possible edges visible in ``get_graph()``.
``save_memory`` is deferred, so it runs once, after every branch has finished.

Compiled graphs are cached per workflow version (content hash included, so a test that reuses a
version number with other content never gets a stale graph). A pinned version, once read, is kept
too: stored versions are written once and never change, so each segment after a process's first
skips the definitions read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from threading import Lock
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import RetryPolicy

from langorch.domain.definitions import (
    DEFAULT_MAX_PARALLEL,
    BlockDefinition,
    BlockType,
    TaskPlan,
)
from langorch.domain.errors import DefinitionError, NotFoundError, Problem
from langorch.domain.kinds import registry as kinds
from langorch.domain.kinds.base import StepKind, reads_of
from langorch.domain.tasks import MEMORY_LOAD_STEP, fingerprint
from langorch.engine.context import EngineContext
from langorch.engine.executors import is_retryable, make_step_node
from langorch.engine.kinds.base import OWN_NAMES, StepSpec, summarize
from langorch.engine.state import OrchestrationState

if TYPE_CHECKING:
    from langorch.domain.lookup import DefinitionLookup
    from langorch.domain.plan.graph import StepGraph, StepNode

logger = logging.getLogger(__name__)

LOAD_MEMORY = "load_memory"
SAVE_MEMORY = "save_memory"


def resolve_blocks(plan: TaskPlan, lookup: DefinitionLookup) -> dict[str, BlockDefinition | None]:
    """Each step's block at its pinned version (``None`` for inline control steps).

    Raises:
        DefinitionError: a referenced block or version does not exist.
    """
    blocks: dict[str, BlockDefinition | None] = {}
    problems: list[Problem] = []
    for index, step in enumerate(plan.steps):
        if step.block_id is None:
            blocks[step.step_id] = None
            continue
        block = lookup.get_block(step.block_id, step.block_version)
        if block is None:
            at = f"@{step.block_version}" if step.block_version else ""
            problems.append(
                Problem(
                    f"steps[{index}].block_id",
                    f"unknown block {step.block_id}{at}",
                    "register it with `langorch blocks put`",
                )
            )
        blocks[step.step_id] = block
    if problems:
        raise DefinitionError(f"workflow {plan.plan_id}", problems)
    return blocks


def step_specs(
    plan: TaskPlan, blocks: dict[str, BlockDefinition | None], topology: StepGraph
) -> list[StepSpec]:
    """Resolve every step of ``plan`` into what the executor needs."""
    end_node = SAVE_MEMORY if plan.memory else END
    specs: list[StepSpec] = []
    for step in plan.steps:
        sid = step.step_id
        node = topology.steps[sid]
        block = blocks.get(sid)
        loop = topology.loops.get(sid)
        incoming = topology.predecessors(sid, "next", "branch", "loop_done")
        join_deps = (
            tuple(dict.fromkeys(e.source for e in incoming))
            if node.join == "all" and len({e.source for e in incoming}) > 1
            else ()
        )
        back = topology.successors(sid, "loop_back")
        kind = node.kind or BlockType.action
        behaviour = kinds.require(kind)
        specs.append(
            StepSpec(
                step=step,
                block=block,
                kind=kind,
                successors=tuple(
                    e.target for e in topology.successors(sid, "loop_done" if loop else "next")
                ),
                branch_targets=dict(node.branches),
                loop_entries=loop.entries if loop else (),
                loop_parent=back[0].target if back else None,
                loop_collect=loop.collect if loop else (),
                join_deps=join_deps,
                on_error=node.error_route,
                ask=node.ask,
                inputs=_inputs(node, behaviour) if node.ask is not None else (),
                outputs=tuple(sorted(node.outputs)) if node.ask is not None else (),
                branching=behaviour.branching,
                routes=tuple(e.target for e in topology.successors(sid, "on_max_iterations")),
                end_node=end_node,
                provider=step.llm_provider
                or (block.llm_provider if block else None)
                or plan.llm_provider,
                model=step.llm_model or (block.llm_model if block else None) or plan.llm_model,
                temperature=_first(block.temperature if block else None, plan.llm_temperature),
                max_tokens=_first(block.max_tokens if block else None, plan.llm_max_tokens),
                approvers=tuple(plan.approvers),
                parks=behaviour.parks,
                ends_run=behaviour.ends_run,
            )
        )
    return specs


def max_parallel(plan: TaskPlan) -> int:
    """How many of a run's steps run at once: the plan's ``max_parallel``, else the default.

    It is LangGraph's ``max_concurrency``: tasks of one superstep past it wait for a free slot.
    """
    return plan.max_parallel if plan.max_parallel is not None else DEFAULT_MAX_PARALLEL


def _inputs(node: StepNode, kind: StepKind) -> tuple[str, ...]:
    """The ``shared_context`` keys a step reads, each once, in the order it reads them."""
    keys = (key for _, key, _ in reads_of(node.step, node.block, kind, ""))
    return tuple(k for k in dict.fromkeys(keys) if k not in OWN_NAMES)


def _first(*values: Any) -> Any:
    """The first value that is set (0 and 0.0 count as set)."""
    return next((v for v in values if v is not None), None)


def build_graph(
    plan: TaskPlan,
    blocks: dict[str, BlockDefinition | None],
    topology: StepGraph | None = None,
) -> StateGraph[Any, Any, Any, Any]:
    """The uncompiled ``StateGraph`` of a plan whose blocks are resolved."""
    if topology is None:
        topology = _step_graph(plan, _BlocksLookup(blocks))
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(
        OrchestrationState, context_schema=EngineContext
    )
    specs = step_specs(plan, blocks, topology)
    for spec in specs:
        builder.add_node(
            spec.step_id,
            make_step_node(spec),
            retry_policy=RetryPolicy(
                max_attempts=spec.max_attempts,
                initial_interval=spec.step.retry_backoff_seconds,
                backoff_factor=2.0,
                max_interval=30.0,
                retry_on=is_retryable,
            ),
            destinations=spec.destinations(),
        )
    entries = list(topology.entry)
    if plan.memory:
        builder.add_node(LOAD_MEMORY, load_memory)
        builder.add_node(SAVE_MEMORY, make_save_memory(plan.remember), defer=True)
        builder.add_edge(START, LOAD_MEMORY)
        for entry in entries:
            builder.add_edge(LOAD_MEMORY, entry)
        builder.add_edge(SAVE_MEMORY, END)
    else:
        for entry in entries:
            builder.add_edge(START, entry)
    return builder


def _step_graph(plan: TaskPlan, lookup: DefinitionLookup) -> StepGraph:
    # Imported on first compile: the topology stays off the runner's import path (PERFORMANCE
    # P3), and definition validation (data flow, triggers, cron) is never imported by it.
    from langorch.domain.plan.topology import step_graph

    return step_graph(plan, lookup)


class _BlocksLookup:
    """A ``DefinitionLookup`` over already-resolved blocks, workflows from the store."""

    def __init__(
        self, blocks: dict[str, BlockDefinition | None], workflows: DefinitionLookup | None = None
    ) -> None:
        self._blocks = {(b.block_id, b.version): b for b in blocks.values() if b is not None}
        self._latest = {b.block_id: b for b in blocks.values() if b is not None}
        self._workflows = workflows

    def get_block(self, block_id: str, version: int | None = None) -> BlockDefinition | None:
        if version is None:
            return self._latest.get(block_id)
        return self._blocks.get((block_id, version))

    def get_workflow(self, workflow_id: str, version: int | None = None) -> TaskPlan | None:
        if self._workflows is None:
            return None
        return self._workflows.get_workflow(workflow_id, version)


async def load_memory(state: OrchestrationState, runtime: Runtime[EngineContext]) -> dict[str, Any]:
    """Load the user's preferences and this workflow's history before the first step.

    What was loaded is recorded with the run's calls (a ``memory`` task record of the
    :data:`~langorch.domain.tasks.MEMORY_LOAD_STEP`), so a replay of the run loads the same.
    """
    ctx = runtime.context
    memory = ctx.memory
    if memory is None:
        return {"status": "running"}

    async def read() -> dict[str, Any]:
        prefs, history = await asyncio.gather(
            asyncio.to_thread(memory.get_preferences, ctx.user_id),
            asyncio.to_thread(memory.get_history, ctx.user_id, ctx.workflow_id, 10),
        )
        return {"user_preferences": prefs, "user_history": history}

    if ctx.side_effects is None:
        loaded = await read()
    else:
        effects = ctx.side_effects.begin(
            step_id=MEMORY_LOAD_STEP, visit=0, attempt=1, tools=[], emit=lambda _event: None
        )
        try:
            loaded, _ = await effects.once("memory", fingerprint("load", ctx.workflow_id), read)
        finally:
            await effects.aclose()
    return {
        "user_preferences": loaded["user_preferences"],
        "user_history": loaded["user_history"],
        "status": "running",
    }


def make_save_memory(remember: Iterable[str] = ()) -> Any:
    """The run's last node: remember the run in the user's history of the workflow.

    Args:
        remember: the ``shared_context`` keys kept with the entry as they are
            (``TaskPlan.remember``; seed 000: "persists shared_context to long-term store").
    """
    keys = tuple(remember)

    async def save_memory(
        state: OrchestrationState, runtime: Runtime[EngineContext]
    ) -> dict[str, Any]:
        """Record this run in the user's history for the workflow (deferred: runs once, last)."""
        ctx = runtime.context
        status = state.get("status") or "running"
        final = "failed" if status == "failed" else "succeeded"
        if ctx.memory is not None:
            shared = state.get("shared_context") or {}
            summary: dict[str, Any] = {
                "status": final,
                "outputs": summarize(state.get("outputs") or shared),
            }
            if keys:
                summary["context"] = {key: shared[key] for key in keys if key in shared}
            await asyncio.to_thread(
                ctx.memory.save_history, ctx.user_id, ctx.workflow_id, ctx.run_id, summary
            )
        return {"status": final}

    return save_memory


@dataclass(frozen=True)
class _CacheKey:
    workflow_id: str
    version: int
    content: str
    checkpointed: bool


class GraphCompiler:
    """Compiles workflow versions and caches the compiled graphs for the process's lifetime."""

    def __init__(
        self,
        lookup: DefinitionLookup,
        checkpointer: BaseCheckpointSaver[Any] | None = None,
    ) -> None:
        self._lookup = lookup
        self._checkpointer = checkpointer
        self._cache: dict[_CacheKey, Any] = {}
        self._versions: dict[tuple[str, int], TaskPlan] = {}
        self._lock = Lock()

    def compile(self, plan: TaskPlan, *, checkpointed: bool = True) -> Any:
        """The compiled graph of ``plan`` (cached per version and content)."""
        key = _CacheKey(plan.plan_id, plan.version, plan.content_hash(), checkpointed)
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None:
            return cached
        blocks = resolve_blocks(plan, self._lookup)
        # The topology reuses the blocks just resolved (no second read per block); subflow
        # workflows still come from the store.
        builder = build_graph(
            plan,
            blocks,
            _step_graph(plan, _BlocksLookup(blocks, self._lookup)),
        )
        # A child graph compiled without a checkpointer inherits its parent's when it runs
        # inside a node, so subflows checkpoint (and interrupt) under the parent's thread.
        graph = builder.compile(
            checkpointer=self._checkpointer if checkpointed else None, name=plan.plan_id
        ).with_config(max_concurrency=max_parallel(plan))
        with self._lock:
            self._cache[key] = graph
        return graph

    def workflow(self, workflow_id: str, version: int | None) -> TaskPlan:
        """A pinned workflow version from the definitions store (kept once read: a stored
        version never changes), or the latest one when ``version`` is ``None`` (always read)."""
        if version is not None:
            with self._lock:
                known = self._versions.get((workflow_id, version))
            if known is not None:
                return known
        plan = self._lookup.get_workflow(workflow_id, version)
        if plan is None:
            at = f"@{version}" if version else ""
            raise NotFoundError(f"workflow {workflow_id}{at} not found")
        if version is not None:
            with self._lock:
                self._versions[workflow_id, version] = plan
        return plan

    def subflow(self, workflow_id: str, version: int | None) -> tuple[TaskPlan, Any]:
        """A child workflow and its graph, for ``subflow`` steps."""
        plan = self.workflow(workflow_id, version)
        return plan, self.compile(plan, checkpointed=False)

    def cached(self) -> Iterable[_CacheKey]:
        """The cache's keys (for tests and diagnostics)."""
        return list(self._cache)
