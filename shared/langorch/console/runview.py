"""The run page's model: the run, each step's state, timeline spans, path taken, approvals.

Built from what the stores keep (the run record, its timeline, the pinned workflow version and
the run's approvals), with every value the page shows redacted (:mod:`.redact`).

Attempts read as attempts: each attempt of a step is its own span (a retry ends one, the next
begins after its backoff), a redrive is a marker row in the waterfall and the spans after it say
so, every row says which visit, attempt and redrive it is when the step has more than one, and a
step that failed and later succeeded shows its earlier failures as history, not as its error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from markupsafe import Markup

from langorch.console.drawing import bar_svg, graph_svg
from langorch.console.redact import redact, redacted_url, shown
from langorch.domain.plan.graph import StepGraph
from langorch.domain.runs import RunRecord, TimelineEvent, TimelineEventType
from langorch.web.look import human_label

_T = TimelineEventType
MAX_SPANS = 2_000
_MARKERS = frozenset({"redrive", "pause"})
"""Span kinds that mark a moment (a row of their own in the waterfall), not a step's time."""


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
    """The error of its last attempt, if that attempt failed."""
    earlier: list[str] = field(default_factory=list)
    """Failures of earlier attempts (retried, or redriven past): its history."""
    sent: list[tuple[str, str]] = field(default_factory=list)
    """What its last failed call sent (an ``http`` step's method, URL and body), redacted."""


@dataclass(frozen=True)
class Span:
    """A row of the waterfall: a step's attempt, an approval, a wait, or a redrive or an
    operator's pause or resume (markers).

    ``which`` says which of a step's rows it is, where it has several: ``visit 2 · attempt 3``,
    ``after redrive #1``, ``approval``.
    """

    label: str
    kind: str
    state: str
    start_s: float
    end_s: float
    note: str
    anchor: str | None
    which: str = ""

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


@dataclass
class _Row:
    """A waterfall row before its ``which`` is known (that needs all of a step's rows)."""

    step: str
    kind: str
    state: str
    start: datetime
    end: datetime
    note: str
    visit: int
    attempt: int
    redrive: int


def _spans(
    events: list[TimelineEvent], steps: dict[str, StepView], origin: datetime, end: datetime
) -> list[Span]:
    """Walk the timeline: each step's state, and a row per attempt, approval, wait and redrive."""
    rows: list[_Row] = []
    markers: list[Span] = []
    opened: dict[tuple[str, str], datetime] = {}
    visits: dict[tuple[str, int], int] = {}
    """(step, redrive) -> the step's visits since that redrive (a redrive rewinds them)."""
    redrives = 0
    fixing: set[str] = set()
    """Steps whose open approval asks a person to fix their failure (``on_error: ask``)."""

    def seconds(at: datetime) -> float:
        return (at - origin).total_seconds()

    for event in events:
        if event.type is _T.run_redriven:
            redrives = int(event.detail.get("attempt") or redrives + 1)
            markers.append(_redrive_marker(event, redrives, seconds(event.at)))
            continue
        if event.type in (_T.run_paused, _T.run_resumed):
            markers.append(_pause_marker(event, seconds(event.at)))
            continue
        step = _step(steps, event.step_id)
        if step is None:
            continue
        key = event.step_id or ""
        attempt = int(event.detail.get("attempt") or 1)
        visit = visits.get((key, redrives), 1)
        if event.type is _T.step_started:
            if ("step", key) not in opened:
                # A new visit; a start while one is open is that visit resumed (after its
                # approval, its wait, or a crash), not another.
                _history(step, f"before redrive #{redrives}" if redrives else f"visit {visit}")
                step.runs += 1
                visit = visits[key, redrives] = visits.get((key, redrives), 0) + 1
            step.state, step.started = "running", event.at
            opened[("step", key)] = event.at
        elif event.type in (_T.step_retried, _T.step_finished, _T.step_failed):
            first = opened.pop(("step", key), None)
            # A retry's attempt began after its backoff: its start is its end less its time.
            began = first if attempt == 1 else None
            if began is None and event.duration_ms is not None:
                began = event.at - _ms(event.duration_ms)
            retried = event.type is _T.step_retried
            if retried:
                step.retries += 1
                _sent(step, event)
                if event.error is not None:
                    step.earlier.append(f"attempt {attempt}: {_error(event)}")
            else:
                _ended(step, event)
            rows.append(
                _Row(key, "step", "failed" if retried else step.state, began or event.at,
                     event.at, _note(step, event, retried), visit, attempt, redrives)
            )  # fmt: skip
        elif event.type is _T.step_skipped:
            step.state = "skipped"
        elif event.type in (_T.approval_requested, _T.wait_started):
            step.state = "waiting"
            opened[("wait", key)] = event.at
            if event.detail.get("fix"):
                fixing.add(key)
        elif event.type in (_T.approval_decided, _T.approval_timed_out, _T.wait_finished):
            began = opened.pop(("wait", key), event.at)
            fixing.discard(key)
            kind = "wait" if event.type is _T.wait_finished else "approval"
            decision = event.detail.get("decision") or (
                "timed out" if kind == "approval" and event.type is _T.approval_timed_out else ""
            )
            rows.append(
                _Row(key, kind, "succeeded", began, event.at, _decided(event, str(decision)),
                     visit, 0, redrives)
            )  # fmt: skip
            if step.state == "waiting":
                step.state = "running"
    for (kind, key), began in opened.items():
        if kind == "step" and ("wait", key) in opened:
            continue  # parked: its approval or wait row says so
        # Still open: a step running now, an approval or a wait not answered yet.
        waiting = "asked for a fix" if kind == "wait" and key in fixing else "in progress"
        rows.append(
            _Row(key, "step" if kind == "step" else "approval",
                 "running" if kind == "step" else "waiting", began, end, waiting,
                 visits.get((key, redrives), 1), 0, redrives)
        )  # fmt: skip
    spans = [
        Span(r.step, r.kind, r.state, seconds(r.start), seconds(r.end), r.note, f"step-{r.step}",
             which)
        for r, which in zip(rows, _which(rows), strict=True)
    ]  # fmt: skip
    spans += markers
    spans.sort(key=lambda s: (s.start_s, s.kind not in _MARKERS))
    return spans


def _which(rows: list[_Row]) -> list[str]:
    """Each row's ``which``: only what tells a step's rows apart (visit, attempt, redrive)."""
    visits: dict[str, set[int]] = {}
    attempts: dict[tuple[str, int, int], int] = {}
    redriven: dict[str, set[int]] = {}
    for r in rows:
        visits.setdefault(r.step, set()).add(r.visit)
        redriven.setdefault(r.step, set()).add(r.redrive)
        if r.kind == "step":
            slot = (r.step, r.visit, r.redrive)
            attempts[slot] = max(attempts.get(slot, 0), r.attempt)
    labels = []
    for r in rows:
        parts = []
        if len(redriven[r.step]) > 1 or r.redrive:
            parts.append(f"after redrive #{r.redrive}" if r.redrive else "before the redrive")
        if len(visits[r.step]) > 1:
            parts.append(f"visit {r.visit}")
        if r.kind != "step":
            parts.append("waiting" if r.state == "waiting" else r.kind)
        elif attempts.get((r.step, r.visit, r.redrive), 1) > 1:
            parts.append(f"attempt {r.attempt}")
        labels.append(" · ".join(parts))
    return labels


def _pause_marker(event: TimelineEvent, at: float) -> Span:
    """The waterfall's marker of an operator's pause or resume: who and why."""
    paused = event.type is _T.run_paused
    parts = [f"by {event.actor}" if event.actor else "", str(event.detail.get("reason") or "")]
    if paused and event.step_id:
        parts.append(f"while waiting at {event.step_id}")
    return Span("Paused" if paused else "Resumed", "pause", "paused" if paused else "resumed",
                at, at, " · ".join(p for p in parts if p), None)  # fmt: skip


def _redrive_marker(event: TimelineEvent, number: int, at: float) -> Span:
    """The waterfall's marker of a redrive: who, from where, why."""
    start = event.detail.get("from_step") or event.step_id
    parts = [f"by {event.actor}" if event.actor else "", f"from step {start}" if start else
             "from the last good checkpoint", str(event.detail.get("reason") or "")]  # fmt: skip
    return Span(f"Redrive #{number}", "redrive", "redrive", at, at,
                " · ".join(p for p in parts if p), None)  # fmt: skip


def _history(step: StepView, when: str) -> None:
    """A new visit begins: the last one's error becomes history (it is no longer the step's)."""
    if step.error is not None:
        step.earlier.append(f"{when}: {step.error}")
        step.error = None


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
    if event.type is _T.step_failed:
        step.error = shown(_error(event)) if event.error is not None else step.error
        _sent(step, event)
    else:
        # It succeeded after all: an earlier failure is history, not its error.
        _history(step, "an earlier attempt")
        step.sent = []


def _error(event: TimelineEvent) -> str:
    assert event.error is not None
    return f"{event.error.type}: {event.error.message}"


def _sent(step: StepView, event: TimelineEvent) -> None:
    """What a failed attempt sent (an ``http`` step's request), redacted as inputs are."""
    request = event.detail.get("request")
    if not isinstance(request, dict):
        return
    step.sent = [
        (
            "Request",
            f"{request.get('method', '')} {redacted_url(str(request.get('url', '')))}".strip(),
        )
    ]
    if request.get("body") is not None:
        step.sent.append(("Body", shown(request["body"])))


def _ms(ms: int) -> Any:
    from datetime import timedelta

    return timedelta(milliseconds=ms)


def _decided(event: TimelineEvent, decision: str) -> str:
    """An approval's outcome and who decided; a fix's choice, who made it and where."""
    who = f" by {event.actor}" if event.actor else ""
    fix = event.detail.get("fix")
    if not isinstance(fix, dict):
        return f"{decision}{who}".strip()
    via = f" ({fix['via']})" if fix.get("via") else ""
    return f"fix: {fix.get('choice', decision)}{who}{via}"


def _fixed(fix: dict[str, Any]) -> str:
    """What a person's fix did to the step, and who: ``skipped by ana@…``."""
    if fix.get("via") == "timeout":
        return "nobody fixed it in time"
    verb = {"retry": "retried", "skip": "skipped", "fail": "failed"}.get(str(fix.get("choice")))
    return f"{verb or 'fixed'} by {fix.get('by') or 'a person'}"


def _note(step: StepView, event: TimelineEvent, retried: bool = False) -> str:
    parts = []
    fix = event.detail.get("fix")
    if isinstance(fix, dict):
        parts.append(_fixed(fix))
    elif event.detail.get("routed_to") == "ask":
        parts.append("asked for a fix")
    if event.duration_ms is not None:
        parts.append(f"{event.duration_ms / 1000:.2f} s")
    if event.tokens is not None and (event.tokens.input or event.tokens.output):
        parts.append(f"{event.tokens.input}→{event.tokens.output} tokens")
    cost = event.detail.get("cost_usd")
    if isinstance(cost, int | float):
        parts.append(f"${cost:.4f}")
    if step.branch and not retried:
        parts.append(f"→ {step.branch}")
    if event.error is not None:
        parts.append(f"{event.error.type}, retried" if retried else event.error.type)
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
