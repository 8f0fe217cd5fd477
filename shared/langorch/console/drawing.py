"""Pictures of a run as inline SVG: the workflow graph and the timeline bars.

The graph is laid out in layers (a longest-path layering of the plan's forward edges, back
edges of review loops and loops drawn around the side), coloured by each step's state and
by the path the run took. It is built as text with every label escaped by MarkupSafe, not
with a template: a 400-step graph is thousands of elements and must render in well under a
second (PERFORMANCE.md P9). No layout library is pulled in for it: the ones that exist
(Graphviz, ELK) need a native binary or a JavaScript runtime, and the console must work
offline from the Python package alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from markupsafe import Markup, escape

from langorch.domain.plan.graph import StepGraph

NODE_W = 176
NODE_H = 44
GAP_X = 28
GAP_Y = 40
MARGIN = 24
MAX_LABEL = 22

STATES = ("succeeded", "failed", "running", "waiting", "skipped", "pending")
"""A step's state as drawn (``pending``: not reached)."""

_DRAWN_EDGES = frozenset(
    {"next", "branch", "loop_body", "loop_back", "loop_done", "on_error", "on_max_iterations"}
)


@dataclass(frozen=True)
class Placed:
    """Where a step is drawn."""

    step_id: str
    x: int
    y: int


def layout(graph: StepGraph) -> dict[str, Placed]:
    """Each step's top-left corner: layers top to bottom, plan order left to right."""
    order = {step_id: i for i, step_id in enumerate(graph.steps)}
    out: dict[str, list[str]] = {s: [] for s in graph.steps}
    for edge in graph.edges:
        if edge.kind in _DRAWN_EDGES and edge.kind != "loop_back":
            out[edge.source].append(edge.target)
    back = _back_edges(graph, out, order)
    indegree = {s: 0 for s in graph.steps}
    for source, targets in out.items():
        for target in targets:
            if (source, target) not in back:
                indegree[target] += 1
    layer = {s: 0 for s in graph.steps}
    ready = [s for s in graph.steps if indegree[s] == 0]
    while ready:
        step = ready.pop()
        for target in out[step]:
            if (step, target) in back:
                continue
            layer[target] = max(layer[target], layer[step] + 1)
            indegree[target] -= 1
            if indegree[target] == 0:
                ready.append(target)
    rows: dict[int, list[str]] = {}
    for step_id in graph.steps:
        rows.setdefault(layer[step_id], []).append(step_id)
    widest = max((len(r) for r in rows.values()), default=1)
    placed: dict[str, Placed] = {}
    for depth, members in rows.items():
        members.sort(key=order.__getitem__)
        offset = (widest - len(members)) * (NODE_W + GAP_X) // 2
        for i, step_id in enumerate(members):
            x = MARGIN + offset + i * (NODE_W + GAP_X)
            placed[step_id] = Placed(step_id, x, MARGIN + depth * (NODE_H + GAP_Y))
    return placed


def _back_edges(
    graph: StepGraph, out: Mapping[str, list[str]], order: Mapping[str, int]
) -> set[tuple[str, str]]:
    """Edges that close a cycle (review loops, error routes back), found by an iterative DFS."""
    back: set[tuple[str, str]] = set()
    state: dict[str, int] = {}
    starts = list(graph.entry) + sorted(graph.steps, key=order.__getitem__)
    for start in starts:
        if start in state:
            continue
        state[start] = 1
        stack = [(start, iter(out[start]))]
        while stack:
            node, targets = stack[-1]
            target = next(targets, None)
            if target is None:
                state[node] = 2
                stack.pop()
            elif state.get(target) == 1:
                back.add((node, target))
            elif target not in state:
                state[target] = 1
                stack.append((target, iter(out[target])))
    return back


def graph_svg(
    graph: StepGraph,
    states: Mapping[str, str] | None = None,
    taken: Iterable[tuple[str, str]] = (),
    *,
    link_steps: bool = False,
) -> Markup:
    """The workflow as an SVG: boxes coloured by state, the run's path in bold.

    Args:
        graph: the resolved topology.
        states: step id -> one of :data:`STATES` (missing: ``pending``); ``None`` draws the
            plan alone.
        taken: ``(source, target)`` edges the run took.
        link_steps: each box links to ``#step-<id>`` on the same page (keyboard reachable).
    """
    placed = layout(graph)
    taken_set = set(taken)
    width = max((p.x for p in placed.values()), default=0) + NODE_W + MARGIN
    height = max((p.y for p in placed.values()), default=0) + NODE_H + MARGIN
    parts: list[str] = [
        f'<svg class="graph" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="workflow graph of {len(placed)} steps">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" '
        'markerUnits="userSpaceOnUse" markerWidth="9" markerHeight="9" '
        'orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" class="arrowhead"/></marker>'
        "</defs>",
    ]
    # Branches to one step (rejected and timed_out → decline) are one arrow with both labels.
    merged: dict[tuple[str, str, str], list[str]] = {}
    for edge in graph.edges:
        if edge.kind in _DRAWN_EDGES:
            labels = merged.setdefault((edge.source, edge.target, edge.kind), [])
            if edge.label:
                labels.append(edge.label)
    for (source, target, kind), labels in merged.items():
        label = " / ".join(labels) or None
        parts.append(
            _edge(placed[source], placed[target], kind, label, (source, target) in taken_set)
        )
    for step_id, node in graph.steps.items():
        state = "plan" if states is None else states.get(step_id, "pending")
        parts.append(_node(placed[step_id], str(node.kind or "step"), state, link_steps))
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 - every text part is escaped above


def _edge(a: Placed, b: Placed, kind: str, label: str | None, taken: bool) -> str:
    classes = f"edge edge-{kind}" + (" taken" if taken else "")
    x1, y1 = a.x + NODE_W // 2, a.y + NODE_H
    x2, y2 = b.x + NODE_W // 2, b.y
    if y2 <= y1:
        # Back to an earlier layer: around the right side of both boxes.
        x1, y1 = a.x + NODE_W, a.y + NODE_H // 2
        x2, y2 = b.x + NODE_W, b.y + NODE_H // 2
        bend = max(x1, x2) + GAP_X + 8
        path = f"M{x1},{y1} C{bend},{y1} {bend},{y2} {x2 + 2},{y2}"
        mid_x, mid_y = bend - 4, (y1 + y2) // 2
    else:
        dy = (y2 - y1) // 2
        path = f"M{x1},{y1} C{x1},{y1 + dy} {x2},{y2 - dy} {x2},{y2 - 2}"
        mid_x, mid_y = (x1 + x2) // 2, (y1 + y2) // 2
    text = ""
    if label:
        text = (
            f'<text class="edge-label" x="{mid_x}" y="{mid_y}" text-anchor="middle">'
            f"{escape(_short(label, 24))}</text>"
        )
    return f'<g class="{classes}"><path d="{path}" marker-end="url(#arrow)"/>{text}</g>'


_STATE_WORDS = {"pending": "not reached"}
"""How a state reads on a node, where it differs from its name (as the legend and the step
list say it)."""


def _node(at: Placed, kind: str, state: str, link: bool) -> str:
    name = escape(_short(at.step_id, MAX_LABEL))
    words = _STATE_WORDS.get(state, state)
    title = escape(f"{at.step_id} · {kind} · {words}")
    box = (
        f'<rect x="{at.x}" y="{at.y}" width="{NODE_W}" height="{NODE_H}" rx="8"/>'
        f'<text class="step-name" x="{at.x + 12}" y="{at.y + 19}">{name}</text>'
        f'<text class="step-kind" x="{at.x + 12}" y="{at.y + 35}">{escape(kind)}'
        f"{'' if state == 'plan' else ' · ' + escape(words)}</text>"
    )
    inner = f'<g class="node state-{escape(state)}"><title>{title}</title>{box}</g>'
    if link:
        href = escape(f"#step-{at.step_id}")
        return f'<a href="{href}" aria-label="{title}">{inner}</a>'
    return inner


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def bar_svg(start: float, end: float, total: float, kind: str, state: str) -> Markup:
    """One timeline bar, as a fraction of the run's duration (``total`` seconds)."""
    total = max(total, 1e-6)
    x = max(0.0, min(start / total, 1.0)) * 1000
    width = max((max(end, start) - start) / total * 1000, 3.0)
    width = min(width, 1000 - x) if x < 1000 else 3.0
    return Markup(  # noqa: S704 - only numbers and two class names from fixed sets
        f'<svg class="bar" viewBox="0 0 1000 12" preserveAspectRatio="none" aria-hidden="true">'
        f'<rect class="bar-{escape(kind)} state-{escape(state)}" x="{x:.1f}" y="1" '
        f'width="{width:.1f}" height="10" rx="2"/></svg>'
    )
