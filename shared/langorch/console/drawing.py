"""Pictures of a run as inline SVG: the workflow graph and the timeline bars.

The graph is laid out in layers, as Sugiyama's method does: a longest-path layering of the
plan's forward edges; an edge that spans several layers gets a slot (a "dummy") in every layer it
crosses, so it is routed *between* the steps of those layers, never through one; the steps and
slots of each layer are ordered by the barycentre of their neighbours (fewer crossings) and
placed near them. Every stretch of an edge then lies in the empty band between two layers or in
its own slot, so no edge is drawn through a step's box and no label sits under one (issue 26:
the ``normal`` branch ran behind the ``review`` step). Edges back to an earlier layer (review
loops, loop back-edges, error routes back) leave downward, run up a lane right of everything and
come in from above; edges that skip very many layers run down a lane on the left the same way.

It is built as text with every label escaped by MarkupSafe, not with a template: a 400-step
graph is thousands of elements and must render in well under a second (PERFORMANCE.md P9). No
layout library is pulled in for it: the ones that exist (Graphviz, ELK) need a native binary or
a JavaScript runtime, and the console must work offline from the Python package alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import pairwise

from markupsafe import Markup, escape

from langorch.domain.plan.graph import StepGraph

NODE_W = 176
NODE_H = 44
GAP_X = 28
GAP_Y = 48
MARGIN = 24
SLOT_W = 14
"""The width an edge takes in a layer it crosses."""
LANE_W = 14
"""The distance between two lanes (of edges back to an earlier layer, or far down)."""
MAX_SLOTS = 6
"""Layers an edge crosses in slots; one that crosses more runs down a lane left of everything
(a 400-step plan whose steps each join an early step would otherwise take ~10^5 slots)."""
PORT_GAP = 22
"""The distance between the ends of edges that leave or enter one side of a step."""
MAX_LABEL = 22
LABEL_CHAR_W = 6.5
"""A label character's width at the stylesheet's 11 px, estimated a little wide (an estimate
that errs narrow would let two labels touch)."""
LABEL_ASCENT = 10
LABEL_DESCENT = 3
"""A label's extent above and below its baseline at 11 px."""
LABEL_LINE = LABEL_ASCENT + LABEL_DESCENT
"""How far a label moves off another: a line, which keeps it inside the band (GAP_Y)."""
SWEEPS = 4
"""Ordering passes (down and up): enough for the plans people write; each is linear."""

STATES = ("succeeded", "failed", "running", "waiting", "skipped", "pending")
"""A step's state as drawn (``pending``: not reached)."""

_DRAWN_EDGES = frozenset(
    {"next", "branch", "loop_body", "loop_back", "loop_done", "on_error", "on_max_iterations"}
)

Point = tuple[int, int]


@dataclass(frozen=True)
class Placed:
    """Where a step is drawn (its box's top-left corner)."""

    step_id: str
    x: int
    y: int


@dataclass(frozen=True)
class Route:
    """How one edge (or several branches to one step, merged) is drawn.

    ``points`` run from the source's box to the target's; a forward edge alternates band
    crossings (drawn as curves) and slot crossings (straight down), a back edge is a polyline
    through the bands and its lane.
    """

    source: str
    target: str
    kind: str
    label: str | None
    back: bool
    points: tuple[Point, ...]
    lane: bool = False
    """Drawn as straight lines through the bands and a lane (back edges, far jumps)."""


@dataclass
class Layout:
    """The placed steps, the routed edges and the picture's size."""

    nodes: dict[str, Placed]
    routes: list[Route]
    width: int
    height: int


@dataclass
class _Item:
    """A step or an edge's slot in one layer, while laying out."""

    key: str
    layer: int
    width: int
    up: list[str] = field(default_factory=list)
    down: list[str] = field(default_factory=list)
    x: float = 0.0
    """Centre."""


def layout(graph: StepGraph) -> dict[str, Placed]:
    """Each step's top-left corner: layers top to bottom, ordered to keep edges apart."""
    return arrange(graph).nodes


def arrange(graph: StepGraph) -> Layout:
    """Lay the graph out: steps placed, and every drawn edge routed around the steps."""
    order = {step_id: i for i, step_id in enumerate(graph.steps)}
    edges = _drawn(graph)
    layer = _layers(graph, edges, order)
    items: dict[str, _Item] = {
        s: _Item(s, layer[s], NODE_W, x=float(order[s])) for s in graph.steps
    }
    chains: dict[tuple[str, str, str], list[str]] = {}
    far = []
    for source, target, kind in edges:
        if layer[target] <= layer[source]:
            continue  # drawn around the right side
        if layer[target] - layer[source] - 1 > MAX_SLOTS:
            far.append((source, target, kind))
            continue  # drawn down the left side
        chain = [source]
        for depth in range(layer[source] + 1, layer[target]):
            slot = f"\0{source}\0{target}\0{kind}\0{depth}"
            items[slot] = _Item(slot, depth, SLOT_W, x=float(order[source]))
            chain.append(slot)
        chain.append(target)
        for upper, lower in pairwise(chain):
            items[upper].down.append(lower)
            items[lower].up.append(upper)
        chains[source, target, kind] = chain
    rows = _ordered(items)
    _place(rows, items)
    lanes_left = _lanes(far, layer)
    left = min((i.x - i.width / 2 for i in items.values()), default=0.0)
    gutter = (max(lanes_left.values()) + 1) * LANE_W + GAP_X if lanes_left else 0
    shift = MARGIN + gutter - left
    for item in items.values():
        item.x += shift
    right = max((i.x + i.width / 2 for i in items.values()), default=0.0)
    nodes = {s: Placed(s, round(items[s].x - NODE_W / 2), _top(layer[s])) for s in graph.steps}
    routes = _forward_routes(edges, chains, items, layer)
    backs = [(s, t, k) for (s, t, k) in edges if layer[t] <= layer[s]]
    routes += _back_routes(backs, edges, nodes, round(right))
    routes += _far_routes(far, edges, nodes, lanes_left)
    depth = max(layer.values(), default=0)
    lanes = len(backs) * LANE_W + (GAP_X if backs else 0)
    return Layout(nodes, routes, round(right) + lanes + MARGIN, _top(depth) + NODE_H + MARGIN)


def _top(depth: int) -> int:
    return MARGIN + depth * (NODE_H + GAP_Y)


def _drawn(graph: StepGraph) -> dict[tuple[str, str, str], list[str]]:
    """The drawn edges, branches to one step merged (``rejected / timed_out``): their labels."""
    merged: dict[tuple[str, str, str], list[str]] = {}
    for edge in graph.edges:
        if edge.kind in _DRAWN_EDGES:
            labels = merged.setdefault((edge.source, edge.target, edge.kind), [])
            if edge.label:
                labels.append(edge.label)
    return merged


def _layers(
    graph: StepGraph, edges: Iterable[tuple[str, str, str]], order: Mapping[str, int]
) -> dict[str, int]:
    """A longest-path layering of the edges that do not close a cycle."""
    out: dict[str, list[str]] = {s: [] for s in graph.steps}
    for source, target, kind in edges:
        if kind != "loop_back" and target not in out[source]:
            out[source].append(target)
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
    return layer


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


def _ordered(items: dict[str, _Item]) -> list[list[str]]:
    """Each layer's items, ordered by the barycentre of their neighbours (sweeps down and up)."""
    depth = max((i.layer for i in items.values()), default=0)
    rows: list[list[str]] = [[] for _ in range(depth + 1)]
    for key in sorted(items, key=lambda k: items[k].x):
        rows[items[key].layer].append(key)
    position = {key: float(i) for row in rows for i, key in enumerate(row)}

    def sort(row: list[str], neighbours: str) -> None:
        def centre(key: str) -> float:
            near: list[str] = getattr(items[key], neighbours)
            if not near:
                return position[key]
            return sum(position[n] for n in near) / len(near)

        row.sort(key=lambda k: (centre(k), position[k]))
        for i, key in enumerate(row):
            position[key] = float(i)

    for _ in range(SWEEPS):
        for row in rows[1:]:
            sort(row, "up")
        for row in reversed(rows[:-1]):
            sort(row, "down")
    return rows


def _place(rows: list[list[str]], items: dict[str, _Item]) -> None:
    """Centres: each layer packed in its order, then pulled toward its neighbours' centres."""
    for row in rows:
        x = 0.0
        for key in row:
            item = items[key]
            item.x = x + item.width / 2
            x += item.width + GAP_X
    for _ in range(SWEEPS):
        for row in rows[1:]:
            _pull(row, items, "up")
        for row in reversed(rows[:-1]):
            _pull(row, items, "down")


def _pull(row: list[str], items: dict[str, _Item], neighbours: str) -> None:
    """Move a layer's items toward the mean centre of their neighbours, keeping their order
    and gaps: the left-to-right and right-to-left packings of the wishes, averaged."""
    if not row:
        return
    wish = []
    for key in row:
        near: list[str] = getattr(items[key], neighbours)
        wish.append(sum(items[n].x for n in near) / len(near) if near else items[key].x)
    widths = [items[k].width for k in row]
    lefts = list(wish)
    for i in range(1, len(row)):
        lefts[i] = max(wish[i], lefts[i - 1] + (widths[i - 1] + widths[i]) / 2 + GAP_X)
    rights = list(wish)
    for i in range(len(row) - 2, -1, -1):
        rights[i] = min(wish[i], rights[i + 1] - (widths[i] + widths[i + 1]) / 2 - GAP_X)
    centres = [(a + b) / 2 for a, b in zip(lefts, rights, strict=True)]
    for i in range(1, len(row)):
        centres[i] = max(centres[i], centres[i - 1] + (widths[i - 1] + widths[i]) / 2 + GAP_X)
    for key, centre in zip(row, centres, strict=True):
        items[key].x = centre


def _ports(ends: list[tuple[str, float]]) -> dict[str, int]:
    """Offsets from a side's centre for the edges that meet it, in the order of where they go."""
    ends.sort(key=lambda e: e[1])
    spread = min(PORT_GAP, (NODE_W - 2 * PORT_GAP) // max(len(ends), 1))
    return {key: round((i - (len(ends) - 1) / 2) * spread) for i, (key, _) in enumerate(ends)}


def _lanes(
    far: list[tuple[str, str, str]], layer: Mapping[str, int]
) -> dict[tuple[str, str, str], int]:
    """A left lane for each far edge; edges whose layers do not overlap share one."""
    ends: list[int] = []
    lanes: dict[tuple[str, str, str], int] = {}
    for key in sorted(far, key=lambda k: (layer[k[0]], layer[k[1]])):
        first, last = layer[key[0]], layer[key[1]]
        free = next((i for i, end in enumerate(ends) if end < first), None)
        if free is None:
            free = len(ends)
            ends.append(last)
        ends[free] = last
        lanes[key] = free
    return lanes


def _far_routes(
    far: list[tuple[str, str, str]],
    edges: Mapping[tuple[str, str, str], list[str]],
    nodes: Mapping[str, Placed],
    lanes: Mapping[tuple[str, str, str], int],
) -> list[Route]:
    """Edges that skip many layers: down into the band below the source, left to their lane,
    down to the band above the target, and in from above (left of the forward edges' ends)."""
    routes = []
    for key in far:
        source, target, kind = key
        a, b = nodes[source], nodes[target]
        lane = MARGIN + lanes[key] * LANE_W
        step_in = 8 + (lanes[key] % 4) * 5
        below, above = a.y + NODE_H + step_in, b.y - step_in
        start, end = a.x + 18, b.x + 18
        points = ((start, a.y + NODE_H), (start, below), (lane, below), (lane, above),
                  (end, above), (end, b.y))  # fmt: skip
        label = " / ".join(edges[key]) or None
        routes.append(Route(source, target, kind, label, False, points, lane=True))
    return routes


def _forward_routes(
    edges: Mapping[tuple[str, str, str], list[str]],
    chains: Mapping[tuple[str, str, str], list[str]],
    items: Mapping[str, _Item],
    layer: Mapping[str, int],
) -> list[Route]:
    """Forward edges: out of the source's bottom, down through their slots, into the target's
    top; the ends on one side of a step spread apart in the order their edges go."""
    leaving: dict[str, list[tuple[str, float]]] = {}
    entering: dict[str, list[tuple[str, float]]] = {}
    for key, chain in chains.items():
        name = "\0".join(key)
        leaving.setdefault(chain[0], []).append((name, items[chain[1]].x))
        entering.setdefault(chain[-1], []).append((name, items[chain[-2]].x))
    out_ports = {s: _ports(ends) for s, ends in leaving.items()}
    in_ports = {t: _ports(ends) for t, ends in entering.items()}
    routes = []
    for key, chain in chains.items():
        source, target, kind = key
        name = "\0".join(key)
        points: list[Point] = [
            (round(items[source].x) + out_ports[source][name], _top(layer[source]) + NODE_H)
        ]
        for slot in chain[1:-1]:
            x, top = round(items[slot].x), _top(items[slot].layer)
            points += [(x, top), (x, top + NODE_H)]
        points.append((round(items[target].x) + in_ports[target][name], _top(layer[target])))
        label = " / ".join(edges[key]) or None
        routes.append(Route(source, target, kind, label, False, tuple(points)))
    return routes


def _back_routes(
    backs: list[tuple[str, str, str]],
    edges: Mapping[tuple[str, str, str], list[str]],
    nodes: Mapping[str, Placed],
    right: int,
) -> list[Route]:
    """Edges to the same or an earlier layer: down into the band below the source, right to a
    lane of their own beyond every step, up to the band above the target, and in from above
    (right of the forward edges' ends)."""
    routes = []
    for i, key in enumerate(sorted(backs, key=lambda k: (nodes[k[0]].y, nodes[k[1]].y))):
        source, target, kind = key
        a, b = nodes[source], nodes[target]
        lane = right + GAP_X + i * LANE_W
        step_in = 8 + (i % 4) * 5  # each its own height in the band: they stay apart
        below, above = a.y + NODE_H + step_in, b.y - step_in
        start, end = a.x + NODE_W - 18, b.x + NODE_W - 18
        points = ((start, a.y + NODE_H), (start, below), (lane, below), (lane, above),
                  (end, above), (end, b.y))  # fmt: skip
        label = " / ".join(edges[key]) or None
        routes.append(Route(source, target, kind, label, True, points, lane=True))
    return routes


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
    drawn = arrange(graph)
    taken_set = set(taken)
    width, height = drawn.width, drawn.height
    parts: list[str] = [
        f'<svg class="graph" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="workflow graph of {len(drawn.nodes)} steps">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" '
        'markerUnits="userSpaceOnUse" markerWidth="9" markerHeight="9" '
        'orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" class="arrowhead"/></marker>'
        "</defs>",
    ]
    # Edges first, then the boxes and the labels over them.
    for route in drawn.routes:
        parts.append(_edge(route, (route.source, route.target) in taken_set))
    for step_id, node in graph.steps.items():
        state = "plan" if states is None else states.get(step_id, "pending")
        parts.append(_node(drawn.nodes[step_id], str(node.kind or "step"), state, link_steps))
    parts += _labels(drawn.routes)
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 - every text part is escaped above


def _edge(route: Route, taken: bool) -> str:
    classes = (
        f"edge edge-{route.kind}" + (" taken" if taken else "") + (" back" if route.back else "")
    )
    return f'<g class="{classes}"><path d="{_path(route)}" marker-end="url(#arrow)"/></g>'


def _path(route: Route) -> str:
    """Bands are crossed by curves that leave and arrive vertically (they stay in the band),
    slots and lanes by straight lines; the last point stops short for the arrowhead."""
    points = list(route.points)
    x, y = points[-1]
    points[-1] = (x, y - 2)
    if route.lane:
        return "M" + " L".join(f"{px},{py}" for px, py in points)
    d = [f"M{points[0][0]},{points[0][1]}"]
    for (x1, y1), (x2, y2) in pairwise(points):
        if x1 == x2:
            d.append(f"L{x2},{y2}")
        else:
            mid = (y1 + y2) // 2
            d.append(f"C{x1},{mid} {x2},{mid} {x2},{y2}")
    return " ".join(d)


def _labels(routes: Iterable[Route]) -> list[str]:
    """Each labelled route's label, none over another: one that would cover a label already
    placed moves a line up, else a line down (both stay in the band: :data:`GAP_Y`)."""
    placed: list[tuple[float, float, float, float]] = []
    texts = []
    for route in routes:
        if not route.label:
            continue
        x, y, anchor, text = _label_at(route)
        width = len(text) * LABEL_CHAR_W
        left = x - {"start": 0.0, "middle": width / 2, "end": width}[anchor]
        for dy in (0, -LABEL_LINE, LABEL_LINE, 0):  # the last: nowhere free, where it was
            box = (left, left + width, y + dy - LABEL_ASCENT, y + dy + LABEL_DESCENT)
            if not any(_overlaps(box, other) for other in placed):
                break
        placed.append(box)
        texts.append(
            f'<text class="edge-label" x="{x}" y="{y + dy}" text-anchor="{anchor}">'
            f"{escape(text)}</text>"
        )
    return texts


def _overlaps(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    """Whether two (left, right, top, bottom) boxes share any area."""
    return a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]


def _label_at(route: Route) -> tuple[int, int, str, str]:
    """Where a label goes (x, baseline y, text anchor) and its text: in the band below the
    source, beside its edge's curve (never under a box)."""
    assert route.label is not None
    (x1, y1), (x2, y2) = route.points[0], route.points[1]
    text = _short(route.label, 24)
    if route.lane:
        x, y, anchor = (x1 + 6, y2 + 4, "start") if route.back else (x1 - 6, y2 + 4, "end")
    else:
        x, y = (x1 + x2) // 2, (y1 + y2) // 2 + 4
        anchor = "middle" if abs(x2 - x1) < 8 else ("end" if x2 < x1 else "start")
        x += {"middle": 0, "end": -4, "start": 4}[anchor]
    return x, y, anchor, text


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
    """One timeline bar, as a fraction of the run's duration (``total`` seconds); a redrive, a
    pause or a resume is a marker line at its moment."""
    total = max(total, 1e-6)
    x = max(0.0, min(start / total, 1.0)) * 1000
    if kind in ("redrive", "pause"):
        return Markup(  # noqa: S704 - only numbers and a class name from a fixed set
            f'<svg class="bar" viewBox="0 0 1000 12" preserveAspectRatio="none" '
            f'aria-hidden="true"><rect class="bar-{kind}" x="{max(x - 1.5, 0):.1f}" y="0" '
            'width="3" height="12"/></svg>'
        )
    width = max((max(end, start) - start) / total * 1000, 3.0)
    width = min(width, 1000 - x) if x < 1000 else 3.0
    return Markup(  # noqa: S704 - only numbers and two class names from fixed sets
        f'<svg class="bar" viewBox="0 0 1000 12" preserveAspectRatio="none" aria-hidden="true">'
        f'<rect class="bar-{escape(kind)} state-{escape(state)}" x="{x:.1f}" y="1" '
        f'width="{width:.1f}" height="10" rx="2"/></svg>'
    )
