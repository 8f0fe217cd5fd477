"""The run page's model: the run, each step's state, timeline spans, path taken, approvals.

Built from what the stores keep (the run record, its timeline, the pinned workflow version and
the run's approvals), with every value the page shows redacted (:mod:`.redact`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from markupsafe import Markup

from langorch.console.drawing import bar_svg, graph_svg
from langorch.console.redact import redact, shown
from langorch.domain.plan.graph import StepGraph
from langorch.domain.runs import RunRecord, TimelineEvent, TimelineEventType
from langorch.web.look import human_label

_T = TimelineEventType
MAX_SPANS = 2_000


@dataclass
class StepView:
    """One step as the run page shows it."""

    step_id: str
    kind: str
    state: str = "pending"
    runs: int = 0
    retries: int = 0
    started: datetime | None = None
    duration_ms: int | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float | None = None
    branch: str | None = None
    inputs: list[tuple[str, str]] = field(default_factory=list)
    outputs: list[tuple[str, str]] = field(default_factory=list)
    error: str | None = None


@dataclass(frozen=True)
class Span:
    """A bar of the waterfall: a step's attempt, an approval or a wait."""

    label: str
    kind: str
    state: str
    start_s: float
    end_s: float
    note: str
    anchor: str | None

    def bar(self, total: float) -> Markup:
        """The bar, scaled to the run's ``total`` seconds."""
        return bar_svg(self.start_s, self.end_s, total, self.kind, self.state)


@dataclass
class RunView:
    """Everything the run page renders."""

    run: RunRecord
    steps: list[StepView]
    spans: list[Span]
    total_s: float
    graph: Markup | None
    taken: list[tuple[str, str]]
    input: list[tuple[str, str]]
    outputs: list[tuple[str, str]]
    tokens: tuple[int, int]
    spans_cut: int = 0


def build_run_view(
    run: RunRecord, events: list[TimelineEvent], graph: StepGraph | None, now: datetime
) -> RunView:
    """The run page's model (pure: the stores are read by the caller)."""
    steps: dict[str, StepView] = {}
    if graph is not None:
        for step_id, node in graph.steps.items():
            steps[step_id] = StepView(step_id, str(node.kind or "step"))
    origin = run.created_at
    end = run.ended_at or now
    spans = _spans(events, steps, origin, end)
    _inputs(run, events, graph, steps)
    taken = _taken(graph, steps) if graph is not None else []
    states = {s.step_id: s.state for s in steps.values()}
    total = max((end - origin).total_seconds(), max((s.end_s for s in spans), default=0.0))
    return RunView(
        run=run,
        steps=list(steps.values()),
        spans=spans[:MAX_SPANS],
        spans_cut=max(len(spans) - MAX_SPANS, 0),
        total_s=total,
        graph=graph_svg(graph, states, taken, link_steps=True) if graph is not None else None,
        taken=taken,
        input=[(human_label(k), shown(v, key=k)) for k, v in run.input.items()],
        outputs=[(human_label(k), shown(v, key=k)) for k, v in run.outputs.items()],
        tokens=(
            sum(s.tokens_in for s in steps.values()),
            sum(s.tokens_out for s in steps.values()),
        ),
    )


def _step(steps: dict[str, StepView], step_id: str | None) -> StepView | None:
    if step_id is None:
        return None
    if step_id not in steps:
        steps[step_id] = StepView(step_id, "step")
    return steps[step_id]


def _spans(
    events: list[TimelineEvent], steps: dict[str, StepView], origin: datetime, end: datetime
) -> list[Span]:
    """Walk the timeline: each step's state, and a span per attempt, approval and wait."""
    spans: list[Span] = []
    opened: dict[tuple[str, str], datetime] = {}

    def seconds(at: datetime) -> float:
        return (at - origin).total_seconds()

    for event in events:
        step = _step(steps, event.step_id)
        if step is None:
            continue
        key = event.step_id or ""
        if event.type is _T.step_started:
            step.state, step.runs, step.started = "running", step.runs + 1, event.at
            opened[("step", key)] = event.at
        elif event.type is _T.step_retried:
            step.retries += 1
        elif event.type in (_T.step_finished, _T.step_failed):
            _ended(step, event)
            began = opened.pop(("step", key), None)
            if began is None and event.duration_ms is not None:
                began = event.at - _ms(event.duration_ms)
            began = began or event.at
            spans.append(
                Span(
                    key,
                    "step",
                    step.state,
                    seconds(began),
                    seconds(event.at),
                    _note(step, event),
                    f"step-{key}",
                )
            )
        elif event.type is _T.step_skipped:
            step.state = "skipped"
        elif event.type in (_T.approval_requested, _T.wait_started):
            step.state = "waiting"
            opened[("wait", key)] = event.at
        elif event.type in (_T.approval_decided, _T.approval_timed_out, _T.wait_finished):
            began = opened.pop(("wait", key), event.at)
            kind = "wait" if event.type is _T.wait_finished else "approval"
            decision = event.detail.get("decision") or (
                "timed out" if kind == "approval" and event.type is _T.approval_timed_out else ""
            )
            who = f" by {event.actor}" if event.actor else ""
            spans.append(
                Span(
                    f"{key} ({kind})",
                    kind,
                    "succeeded",
                    seconds(began),
                    seconds(event.at),
                    f"{decision}{who}".strip(),
                    f"step-{key}",
                )
            )
            if step.state == "waiting":
                step.state = "running"
    for (kind, key), began in opened.items():
        if kind == "step" and ("wait", key) in opened:
            continue  # parked: its approval or wait span says so
        # Still open: a step running now, an approval or a wait not answered yet.
        state = "running" if kind == "step" else "waiting"
        spans.append(
            Span(
                key if kind == "step" else f"{key} (waiting)",
                "step" if kind == "step" else "approval",
                state,
                seconds(began),
                seconds(end),
                "in progress",
                f"step-{key}",
            )
        )
    spans.sort(key=lambda s: s.start_s)
    return spans


def _ended(step: StepView, event: TimelineEvent) -> None:
    """A step's attempt ended: its state, duration, tokens, cost, branch, outputs, error."""
    step.state = "failed" if event.type is _T.step_failed else "succeeded"
    step.duration_ms = event.duration_ms
    if event.tokens is not None:
        step.tokens_in += event.tokens.input
        step.tokens_out += event.tokens.output
    cost = event.detail.get("cost_usd")
    if isinstance(cost, int | float):
        step.cost = (step.cost or 0.0) + float(cost)
    step.branch = event.detail.get("branch") or step.branch
    if event.outputs_summary:
        step.outputs = [(human_label(k), shown(v, key=k)) for k, v in event.outputs_summary.items()]
    if event.error is not None:
        step.error = shown(f"{event.error.type}: {event.error.message}")


def _ms(ms: int) -> Any:
    from datetime import timedelta

    return timedelta(milliseconds=ms)


def _note(step: StepView, event: TimelineEvent) -> str:
    parts = []
    if event.duration_ms is not None:
        parts.append(f"{event.duration_ms / 1000:.2f} s")
    attempt = event.detail.get("attempt")
    if isinstance(attempt, int) and attempt > 1:
        parts.append(f"attempt {attempt}")
    if event.tokens is not None and (event.tokens.input or event.tokens.output):
        parts.append(f"{event.tokens.input}→{event.tokens.output} tokens")
    cost = event.detail.get("cost_usd")
    if isinstance(cost, int | float):
        parts.append(f"${cost:.4f}")
    if step.branch:
        parts.append(f"→ {step.branch}")
    if event.error is not None:
        parts.append(event.error.type)
    return " · ".join(parts)


def _inputs(
    run: RunRecord, events: list[TimelineEvent], graph: StepGraph | None, steps: dict[str, StepView]
) -> None:
    """Each step's inputs as the run had them: the run's input, then earlier steps' outputs."""
    if graph is None:
        return
    known: dict[str, Any] = dict(redact(run.input))
    for event in events:
        if event.step_id is None or event.step_id not in graph.steps:
            continue
        if event.type is _T.step_started:
            node = graph.steps[event.step_id]
            keys = list(node.block.input_keys) if node.block is not None else []
            keys += [k for k in (node.step.input_mappings or {}) if k not in keys]
            steps[event.step_id].inputs = [
                (human_label(k), shown(known[k], key=k) if k in known else "(not recorded)")
                for k in keys
            ]
        elif event.type is _T.step_finished and event.outputs_summary:
            known.update(event.outputs_summary)


def _taken(graph: StepGraph, steps: dict[str, StepView]) -> list[tuple[str, str]]:
    """Edges the run went along: both ends ran, and a branch edge only for the branch chosen."""
    ran = {s.step_id for s in steps.values() if s.runs or s.state in ("succeeded", "failed")}
    taken = []
    for edge in graph.edges:
        if edge.source not in ran or edge.target not in ran:
            continue
        if edge.kind == "branch" and steps[edge.source].branch not in (None, edge.label):
            continue
        if edge.kind in ("on_error", "on_failure") and steps[edge.source].state != "failed":
            continue
        taken.append((edge.source, edge.target))
    return taken
