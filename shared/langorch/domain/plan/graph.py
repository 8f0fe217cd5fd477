"""The resolved topology of a plan: edges, loops, joins, and the graph algorithms over them.

:class:`StepGraph` is what :func:`langorch.domain.plan.topology.step_graph` resolves and the
compiler builds the LangGraph graph from, so validation and compilation agree on what every edge
means. The edge kinds are described in :mod:`langorch.domain.plan.topology`.
"""

from __future__ import annotations

import difflib
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from langorch.domain.definitions import BlockDefinition, BlockType, KindName, PlanStep
    from langorch.domain.step_settings import AskSpec

EdgeKind = Literal[
    "next", "branch", "loop_body", "loop_back", "loop_done", "on_error", "on_max_iterations",
    "on_failure",
]  # fmt: skip
"""How control moves along an edge (see the module docstring)."""

Join = Literal["all", "any"]

FORWARD: frozenset[EdgeKind] = frozenset(
    {"next", "branch", "loop_body", "loop_done", "on_max_iterations"}
)
"""Edges of the normal flow: what runs after what on the way to the end."""
CYCLE_EDGES: frozenset[EdgeKind] = FORWARD | {"on_error"}
"""Edges a forbidden cycle may use (loop back-edges are legal; on_failure never re-routes)."""
JOIN_EDGES: frozenset[EdgeKind] = frozenset({"next", "branch", "loop_done"})
"""Incoming edges a step joins on."""


@dataclass(frozen=True)
class Edge:
    """One edge of the step graph."""

    source: str
    target: str
    kind: EdgeKind
    label: str | None = None
    """The branch label (``branch`` edges only)."""


@dataclass(frozen=True)
class LoopInfo:
    """A for-each loop step, resolved."""

    step_id: str
    body: tuple[str, ...]
    """Direct body members in plan order (a nested loop's own body belongs to that loop)."""
    entries: tuple[str, ...]
    """Body steps each iteration starts with (``loop_body`` edges from the loop step)."""
    exits: tuple[str, ...]
    """Body steps after which an iteration ends (``loop_back`` edges to the loop step)."""
    done: tuple[str, ...]
    """Steps that run once, after the last iteration (``loop_done`` edges)."""
    item_key: str
    index_key: str
    collect: tuple[str, ...]
    """Keys collected from each iteration (``loop.collect``, else the body steps' outputs)."""
    collect_key: str
    """Where the collected list goes (``loop.collect_key``, else ``<step_id>_results``)."""


@dataclass(frozen=True)
class StepNode:
    """One step of the plan, resolved."""

    step_id: str
    index: int
    """Position in ``plan.steps`` (paths in problems are ``steps[index]``)."""
    step: PlanStep
    kind: BlockType | KindName | None
    """``step.kind`` or the block's ``block_type``; ``None`` only in an invalid plan."""
    block: BlockDefinition | None
    """The referenced block at the resolved version; ``None`` for inline steps."""
    branches: Mapping[str, str]
    """Label -> target step id: the step's branches, else the block's (decisions, approvals)."""
    join: Join
    """With several incoming ``next``/``branch``/``loop_done`` edges: wait for ``all`` or run
    after ``any`` (explicit ``join``, else ``any`` when two of them lie on different branches of
    one decision/approval or one closes a review cycle, else ``all``)."""
    loop: str | None
    """The innermost loop whose body this step is in."""
    outputs: frozenset[str]
    """``shared_context`` keys this step writes."""
    error_route: str | None
    """Where a failure after the retries goes: ``on_error``, else the plan's ``on_failure`` (unless
    the step is on the failure route itself), else ``None`` (the run fails, or asks: ``ask``)."""
    ask: AskSpec | None = None
    """Who is asked to fix a failure after the retries (``on_error: ask`` or the plan's
    ``on_failure: ask``); ``None``: a failure routes or fails the run."""


@dataclass(frozen=True)
class StepGraph:
    """The resolved topology of a plan, shared by validation and the compiler."""

    plan_id: str
    steps: Mapping[str, StepNode]
    """Every step by id, in plan order."""
    edges: tuple[Edge, ...]
    entry: tuple[str, ...]
    """Steps that run first (from ``START``), in plan order."""
    loops: Mapping[str, LoopInfo]
    """Every loop step by id."""
    on_failure: str | None
    terminals: tuple[str, ...]
    """Steps outside loop bodies with no ``next``/``branch``/``loop_done``/``on_max_iterations``
    successor: the run ends after them."""
    _out: Mapping[str, tuple[Edge, ...]] = field(repr=False, compare=False)
    _in: Mapping[str, tuple[Edge, ...]] = field(repr=False, compare=False)

    def successors(self, step_id: str, *kinds: EdgeKind) -> tuple[Edge, ...]:
        """Outgoing edges of a step, optionally only of these kinds, in a stable order."""
        edges = self._out.get(step_id, ())
        return tuple(e for e in edges if e.kind in kinds) if kinds else edges

    def predecessors(self, step_id: str, *kinds: EdgeKind) -> tuple[Edge, ...]:
        """Incoming edges of a step, optionally only of these kinds, in a stable order."""
        edges = self._in.get(step_id, ())
        return tuple(e for e in edges if e.kind in kinds) if kinds else edges

    def branch_targets(self, step_id: str) -> Mapping[str, str]:
        """Label -> target of a decision or approval (empty for other steps)."""
        return self.steps[step_id].branches


# --------------------------------------------------------------------------------------------
# Algorithms
# --------------------------------------------------------------------------------------------


def reach(
    start: Iterable[str],
    adjacency: Mapping[str, list[Edge]],
    kinds: frozenset[EdgeKind] | None,
    *,
    avoid: str | None = None,
    backwards: bool = False,
) -> set[str]:
    """Steps reachable from ``start`` (included) along edges of ``kinds`` (``None``: all)."""
    seen: set[str] = set()
    queue = deque(s for s in start if s != avoid)
    while queue:
        sid = queue.popleft()
        if sid in seen:
            continue
        seen.add(sid)
        for edge in adjacency.get(sid, []):
            if kinds is not None and edge.kind not in kinds:
                continue
            nxt = edge.source if backwards else edge.target
            if nxt != avoid and nxt not in seen:
                queue.append(nxt)
    return seen


def strongly_connected(
    nodes: list[str], out: Mapping[str, list[Edge]], kinds: frozenset[EdgeKind]
) -> list[list[str]]:
    """Tarjan's strongly connected components, iterative (plans may have hundreds of steps)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work: list[tuple[str, Iterator[Edge]]] = [(root, iter(out.get(root, [])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            advanced = False
            for edge in edges:
                if edge.kind not in kinds:
                    continue
                target = edge.target
                if target not in index:
                    index[target] = low[target] = counter
                    counter += 1
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(out.get(target, []))))
                    advanced = True
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(component)
    return components


def cycle_path(start: str, members: set[str], out: Mapping[str, list[Edge]]) -> list[str]:
    """One concrete cycle through ``start`` inside a strongly connected component."""
    parents: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for edge in out.get(node, []):
            if edge.kind not in CYCLE_EDGES or edge.target not in members:
                continue
            if edge.target == start:
                path = [node]
                while path[-1] != start:
                    path.append(parents[path[-1]])
                return [*reversed(path), start]
            if edge.target not in parents:
                parents[edge.target] = node
                queue.append(edge.target)
    return [start, start]


def branch_tags(
    step_ids: list[str], branches: Mapping[str, Mapping[str, str]], out: Mapping[str, list[Edge]]
) -> dict[str, dict[str, str]]:
    """Step -> {branching step: label} for each branching step it lies on exactly one branch of.

    A step lies on a branch of ``D`` when it is downstream of exactly one of ``D``'s labels.
    """
    inside: dict[str, dict[str, set[str]]] = {sid: {} for sid in step_ids}
    for d in step_ids:
        for label, target in branches[d].items():
            if target not in inside:
                continue
            for sid in reach([target], out, FORWARD, avoid=d):
                inside[sid].setdefault(d, set()).add(label)
    return {
        sid: {d: next(iter(labels)) for d, labels in per.items() if len(labels) == 1}
        for sid, per in inside.items()
    }


def exclusive_pair(
    incoming: list[Edge], tags: Mapping[str, Mapping[str, str]]
) -> tuple[str, str, str] | None:
    """Two incoming edges on different branches of one decision: ``(a, b, decision)``."""

    def tag(edge: Edge) -> dict[str, str]:
        own = dict(tags.get(edge.source, {}))
        if edge.kind == "branch" and edge.label is not None:
            own[edge.source] = edge.label
        return own

    tagged = [(edge.source, tag(edge)) for edge in incoming]
    for i, (a, tag_a) in enumerate(tagged):
        for b, tag_b in tagged[i + 1 :]:
            for decision, label in tag_a.items():
                if decision in tag_b and tag_b[decision] != label:
                    return a, b, decision
    return None


def unknown_step(step_id: str, known: Mapping[str, int]) -> tuple[str, str]:
    """Message and hint for a reference to a step that does not exist: names the bad target,
    and the step it probably meant (else the steps there are)."""
    close = closest_step(step_id, known)
    if close:
        hint = f"did you mean {close!r}?"
    else:
        names = list(known)
        listed = ", ".join(repr(n) for n in names[:12]) + (", …" if len(names) > 12 else "")
        hint = f"use the step_id of a step of this workflow: {listed or '(none)'}"
    return f"{step_id!r} is not a step of this workflow", hint


def closest_step(name: str, candidates: Iterable[str]) -> str | None:
    """The step id ``name`` most likely misspells (``None`` when none is close)."""
    matches = difflib.get_close_matches(name, list(candidates), n=1)
    return matches[0] if matches else None


def where(loop: str | None) -> str:
    """Where a step lies, for messages."""
    return f"inside loop {loop!r}" if loop else "outside any loop"
