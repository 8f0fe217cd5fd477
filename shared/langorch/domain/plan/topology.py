"""A plan's topology, resolved and checked: references, reachability, cycles, branches, joins.

:func:`step_graph` is all the runner needs of a definition (the compiler builds the LangGraph
graph from the :class:`~langorch.domain.plan.graph.StepGraph` it returns); the rest of definition
validation (kinds' own checks, data flow, triggers, registries) is in
:mod:`langorch.domain.validation`, off the runner's import path. What a kind means for the
topology (branching, looping, ending the run, bounding a cycle) it says itself
(:class:`~langorch.domain.kinds.base.StepKind`); nothing here branches on kind names. The edges
are wired by :class:`~langorch.domain.plan.wiring.Wiring`; :class:`Topology` checks what they form.

Topology rules:

* ``depends_on: [A]`` on step ``S`` is an edge ``A → S`` (kind ``next``); so is ``A`` listed
  just before ``S`` in the plan's ``chain``.
* A branching step ``D`` (decision, approval) with ``branches {label: T}`` has an edge ``D → T``
  (kind ``branch``); ``T`` may also list ``D`` in ``depends_on``. Depending on a branching step
  without being one of its branch targets is a problem.
* A loop ``L``: body *entries* (body steps with no dependency inside the body) get ``L → entry``
  (``loop_body``); body *exits* (no successor inside the body) get ``exit → L`` (``loop_back``);
  steps that depend on ``L`` outside the body run after the loop (``loop_done``).
* ``on_error`` (``on_error``), where a bound leads (``on_max_iterations``: the step's own, or a
  kind's such as an approval's ``approval.on_max_iterations``), and the plan's ``on_failure``
  (``on_failure``, from every step that has no ``on_error`` and is not on the failure route
  itself). ``on_error: ask`` and ``on_failure: ask`` add no edge: the step asks a person and
  runs again, or is skipped, in place.
* Entry steps: ``entry_step_id``; else every step with no ``depends_on`` that is not a loop body
  member, not an error route (``on_error``/``on_failure``/``on_max_iterations`` target) and not a
  branch target — except a branch target that leads back to the step branching to it (the first
  step of a review loop: it runs first, and again after a rejection).
* A cycle is legal only through a loop's back-edge, or through a step with ``max_iterations`` or
  a kind's own bound (``approval.max_iterations``). Error routes (``on_error``) count;
  ``on_failure`` does not (a failure inside the failure route ends the run instead of routing
  again).
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from langorch.domain.definitions import (
    PlanStep,
    TaskPlan,
)
from langorch.domain.errors import DefinitionError
from langorch.domain.hooks import hook_outputs
from langorch.domain.lookup import DefinitionLookup
from langorch.domain.plan.graph import (
    CYCLE_EDGES,
    FORWARD,
    JOIN_EDGES,
    Edge,
    EdgeKind,
    Join,
    LoopInfo,
    StepGraph,
    StepNode,
    branch_tags,
    cycle_path,
    exclusive_pair,
    reach,
    strongly_connected,
)
from langorch.domain.plan.wiring import Wiring


def step_graph(plan: TaskPlan, lookup: DefinitionLookup) -> StepGraph:
    """The resolved topology of a plan whose topology is valid.

    Args:
        plan: The workflow.
        lookup: Where referenced blocks (at the pinned versions) are found.

    Returns:
        The step graph.

    Raises:
        DefinitionError: ``workflow <plan_id>`` with every topology problem (unknown blocks,
            steps or routes, unreachable steps, cycles outside loops, impossible joins).
    """
    topology = Topology(plan, lookup)
    if topology.problems:
        raise DefinitionError(f"workflow {plan.plan_id}", topology.problems)
    return topology.graph


class Topology(Wiring):
    """One pass over a plan: resolves the graph and collects every topology problem."""

    def __init__(self, plan: TaskPlan, lookup: DefinitionLookup) -> None:
        """Resolve ``plan`` against ``lookup``; ``problems`` lists what is wrong.

        Args:
            plan: The workflow.
            lookup: Where referenced blocks are found.
        """
        super().__init__(plan, lookup)
        self.outputs: dict[str, frozenset[str]] = {}
        self.wire()
        entry = self._entry(self.out)
        self._reachability(entry, self.out)
        self._cycles(self.out)
        joins = self._joins(self.out, self.inc)
        for step in self.steps():
            self.outputs[step.step_id] = self._step_outputs(step)
        self.graph = self._graph(entry, joins, self.loops, self.out, self.inc)

    def _entry(self, out: dict[str, list[Edge]]) -> list[str]:
        plan = self.plan
        if plan.entry_step_id is not None:
            if not self.known(plan.entry_step_id):
                self.unknown("entry_step_id", plan.entry_step_id)
                return []
            if plan.entry_step_id in self.loop_of:
                self.add(
                    "entry_step_id",
                    f"{plan.entry_step_id!r} is in the body of loop "
                    f"{self.loop_of[plan.entry_step_id]!r}",
                    "start with the loop step or a step outside loops",
                )
            return [plan.entry_step_id]
        routes = {e.target for e in self.edges if e.kind in ("on_error", "on_failure")}
        routes |= {e.target for e in self.edges if e.kind == "on_max_iterations"}
        entry: list[str] = []
        for step in self.steps():
            sid = step.step_id
            if self.dependencies(step) or sid in self.loop_of or sid in routes:
                continue
            sources = {e.source for e in self.edges if e.kind == "branch" and e.target == sid}
            # A branch target that reaches back to its decision starts a review loop: it runs
            # first, and again when the decision sends the run back.
            if sources and not sources <= reach([sid], out, FORWARD):
                continue
            entry.append(sid)
        if not entry and not self.dangling:  # else a reference that could not be wired is why
            self.add(
                "steps",
                "no step can run first: every step depends on another or is a branch target",
                "set entry_step_id, or give the first step no depends_on",
            )
        return entry

    def _reachability(self, entry: list[str], out: dict[str, list[Edge]]) -> None:
        reached = reach([*entry, *self.dangling], out, None)
        for step in self.steps():
            if step.step_id not in reached and entry:
                self.add(
                    self.sp(step.step_id),
                    f"step {step.step_id!r} can never run: no path leads to it from "
                    f"{', '.join(repr(e) for e in entry)}",
                    "add it to the depends_on or branches of an earlier step, or remove it",
                )

    def _cycles(self, out: dict[str, list[Edge]]) -> None:
        for component in strongly_connected(list(self.index), out, CYCLE_EDGES):
            members = set(component)
            if len(component) == 1:
                only = component[0]
                if not any(e.target == only for e in out[only] if e.kind in CYCLE_EDGES):
                    continue
            if any(self._bounded(sid) for sid in component):
                continue
            start = min(component, key=self.index.__getitem__)
            cycle = cycle_path(start, members, out)
            self.add(
                self.sp(start),
                f"cycle outside a loop: {' → '.join(cycle)}",
                "bound it with max_iterations on one of its steps (or approval.max_iterations "
                "for a review loop), use a loop step, or break the cycle",
            )

    def _bounded(self, step_id: str) -> bool:
        step = self.plan.steps[self.index[step_id]]
        if step.max_iterations is not None:
            return True
        kind = self.specs[step_id]
        return kind is not None and kind.max_iterations(step) is not None

    def _joins(self, out: dict[str, list[Edge]], inc: dict[str, list[Edge]]) -> dict[str, Join]:
        """The join mode of every step, and explicit ``join: all`` that would never run."""
        tags = branch_tags(list(self.index), self.branches, out)
        joins: dict[str, Join] = {}
        for step in self.steps():
            sid = step.step_id
            incoming = [e for e in inc[sid] if e.kind in JOIN_EDGES]
            reach_from_here = reach([sid], out, FORWARD)
            back = [e for e in incoming if e.source in reach_from_here]
            conflict = exclusive_pair(incoming, tags)
            default: Join = "any" if back or conflict else "all"
            joins[sid] = step.join or default
            if step.join == "all" and len(incoming) > 1:
                if conflict is not None:
                    a, b, d = conflict
                    self.add(
                        f"{self.sp(sid)}.join",
                        f"join 'all' never runs: {a!r} and {b!r} are on different branches "
                        f"of {d!r}",
                        "use join: any (or leave join out)",
                    )
                elif back:
                    self.add(
                        f"{self.sp(sid)}.join",
                        f"join 'all' never runs the first time: {back[0].source!r} comes "
                        f"after {sid!r}",
                        "use join: any (or leave join out)",
                    )
        return joins

    def _step_outputs(self, step: PlanStep) -> frozenset[str]:
        """The ``shared_context`` keys a step writes (as its kind's executor writes them)."""
        sid = step.step_id
        block = self.blocks[sid]
        kind = self.specs[sid]
        hooks = hook_outputs(step.hooks)
        if kind is None:
            return frozenset(block.output_keys if block else ()) | hooks
        return frozenset(kind.outputs(sid, step, block, self.lookup)) | hooks

    # -- result -------------------------------------------------------------------------------

    def _graph(
        self,
        entry: list[str],
        joins: dict[str, Join],
        loops: dict[str, LoopInfo],
        out: dict[str, list[Edge]],
        inc: dict[str, list[Edge]],
    ) -> StepGraph:
        resolved_loops: dict[str, LoopInfo] = {}
        for sid, info in loops.items():
            spec = self.plan.steps[self.index[sid]].loop
            collect = tuple(spec.collect) if spec and spec.collect else ()
            if not collect:
                collect = tuple(sorted(set().union(*(self.outputs[s] for s in info.body))))
            resolved_loops[sid] = replace(info, collect=collect)
        failure_edges = {e.source: e.target for e in self.edges if e.kind == "on_failure"}
        nodes: dict[str, StepNode] = {}
        for step in self.steps():
            sid = step.step_id
            nodes[sid] = StepNode(
                step_id=sid,
                index=self.index[sid],
                step=step,
                kind=self.kinds[sid],
                block=self.blocks[sid],
                branches=MappingProxyType(dict(self.branches[sid])),
                join=joins.get(sid, "all"),
                loop=self.loop_of.get(sid),
                outputs=self.outputs[sid],
                error_route=step.on_error if self.known(step.on_error) else failure_edges.get(sid),
                ask=self.ask_of(step),
            )
        terminal_kinds: tuple[EdgeKind, ...] = ("next", "branch", "loop_done", "on_max_iterations")
        terminals = tuple(
            sid
            for sid in nodes
            if sid not in self.loop_of and not any(e.kind in terminal_kinds for e in out[sid])
        )
        return StepGraph(
            plan_id=self.plan.plan_id,
            steps=MappingProxyType(nodes),
            edges=tuple(self.edges),
            entry=tuple(entry),
            loops=MappingProxyType(resolved_loops),
            on_failure=self.plan.on_failure if self.known(self.plan.on_failure) else None,
            terminals=terminals,
            _out=MappingProxyType({k: tuple(v) for k, v in out.items()}),
            _in=MappingProxyType({k: tuple(v) for k, v in inc.items()}),
        )
