"""Two runs side by side (``langorch runs diff RUN_A RUN_B``): steps, outputs, tokens, cost and
decisions, from what each run recorded (its record and timeline).

Steps are lined up by step id and visit (the third visit of ``draft`` in A beside the third in
B), so a run and its fork, or a run and its replay on another version, line up where they did
the same thing and show where they parted. Nothing here reads a store.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from langorch.domain.runs import RunRecord, TimelineEvent, TimelineEventType, timeline_cost

_ENDED = {
    TimelineEventType.step_finished: "finished",
    TimelineEventType.step_failed: "failed",
    TimelineEventType.step_skipped: "skipped",
}


@dataclass(frozen=True)
class StepSide:
    """One visit of one step in one run."""

    status: str
    outputs: dict[str, str] = field(default_factory=dict)
    """The step's outputs as the timeline keeps them (bounded JSON text per key)."""
    tokens: int = 0
    cost_usd: float = 0.0
    decision: str | None = None
    """An approval's ``decision by actor`` (or a step's chosen branch)."""
    error: str | None = None

    def same_as(self, other: StepSide) -> bool:
        """Whether the two visits did the same (tokens and cost aside)."""
        return (self.status, self.outputs, self.decision, self.error) == (
            other.status,
            other.outputs,
            other.decision,
            other.error,
        )


@dataclass(frozen=True)
class StepRow:
    """A step's visit in A beside the same visit in B (``None``: that run did not make it)."""

    step_id: str
    visit: int
    a: StepSide | None
    b: StepSide | None

    @property
    def changed(self) -> bool:
        """Whether the two runs differ at this visit."""
        if self.a is None or self.b is None:
            return True
        return not self.a.same_as(self.b)

    def changed_keys(self) -> list[str]:
        """The output keys whose values differ (all keys of a visit only one run made)."""
        a = self.a.outputs if self.a else {}
        b = self.b.outputs if self.b else {}
        return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


@dataclass(frozen=True)
class RunSide:
    """A run's header: what it was and what it cost."""

    run_id: str
    workflow: str
    status: str
    cost_usd: float
    tokens: int
    error: str | None


@dataclass(frozen=True)
class RunDiff:
    """Two runs compared."""

    a: RunSide
    b: RunSide
    rows: list[StepRow]
    outputs: list[tuple[str, Any, Any]]
    """The final outputs that differ: ``(key, A's value, B's value)`` (missing: ``None``)."""
    fork: dict[str, Any] | None = None
    """B forked from A (or A from B): ``{at_step, edited, from}``."""

    @property
    def changed_steps(self) -> list[StepRow]:
        """The rows where the runs differ."""
        return [r for r in self.rows if r.changed]

    def to_dict(self) -> dict[str, Any]:
        """The comparison as JSON (``--json``)."""

        def side(s: StepSide | None) -> dict[str, Any] | None:
            return None if s is None else s.__dict__.copy()

        return {
            "a": self.a.__dict__.copy(),
            "b": self.b.__dict__.copy(),
            "fork": self.fork,
            "steps": [
                {
                    "step_id": r.step_id,
                    "visit": r.visit,
                    "changed": r.changed,
                    "changed_keys": r.changed_keys(),
                    "a": side(r.a),
                    "b": side(r.b),
                }
                for r in self.rows
            ],
            "outputs": [{"key": k, "a": a, "b": b} for k, a, b in self.outputs],
        }


def steps_of(events: list[TimelineEvent]) -> list[tuple[str, int, StepSide]]:
    """Each step visit a timeline records: ``(step_id, visit, side)``, in order."""
    visits: dict[str, int] = {}
    decisions: dict[str, list[str]] = {}
    found: list[tuple[str, int, StepSide]] = []
    for event in events:
        step = event.step_id
        if step is None:
            continue
        if event.type in (TimelineEventType.approval_decided, TimelineEventType.approval_timed_out):
            said = str(event.detail.get("decision") or "timed_out")
            decisions.setdefault(step, []).append(f"{said} by {event.actor or '?'}")
            continue
        status = _ENDED.get(event.type)
        if status is None:
            continue
        visit = visits.get(step, 0)
        visits[step] = visit + 1
        pending = decisions.get(step) or []
        decision = pending.pop(0) if pending else event.detail.get("branch")
        tokens = event.tokens.input + event.tokens.output if event.tokens else 0
        cost = event.detail.get("cost_usd")
        side = StepSide(
            status=status,
            outputs=dict(event.outputs_summary or {}),
            tokens=tokens,
            cost_usd=float(cost) if isinstance(cost, int | float) else 0.0,
            decision=str(decision) if decision is not None else None,
            error=event.error.message if event.error else None,
        )
        found.append((step, visit, side))
    return found


def diff_runs(
    run_a: RunRecord, events_a: list[TimelineEvent], run_b: RunRecord, events_b: list[TimelineEvent]
) -> RunDiff:
    """Compare two runs' records and timelines."""
    fork = _fork(run_a, events_a, run_b, events_b)
    steps_a, steps_b = steps_of(events_a), steps_of(events_b)
    if fork is not None:
        # The child carries the parent's steps before the fork point in its checkpoint, not in
        # its timeline: they are the same visits, done once, in the parent.
        if fork["child"] == run_b.run_id:
            steps_b = _inherited(steps_a, fork["at_step"]) + _after(steps_b, steps_a, fork)
        else:
            steps_a = _inherited(steps_b, fork["at_step"]) + _after(steps_a, steps_b, fork)
    by_b = {(s, v): side for s, v, side in steps_b}
    by_a = {(s, v): side for s, v, side in steps_a}
    rows = [StepRow(s, v, side, by_b.get((s, v))) for s, v, side in steps_a]
    rows += [StepRow(s, v, None, side) for s, v, side in steps_b if (s, v) not in by_a]
    outputs = [
        (key, run_a.outputs.get(key), run_b.outputs.get(key))
        for key in sorted(run_a.outputs.keys() | run_b.outputs.keys())
        if _canonical(run_a.outputs.get(key)) != _canonical(run_b.outputs.get(key))
    ]
    return RunDiff(
        a=_side(run_a, events_a),
        b=_side(run_b, events_b),
        rows=rows,
        outputs=outputs,
        fork=fork,
    )


Visits = list[tuple[str, int, StepSide]]


def _inherited(parent: Visits, at_step: str) -> Visits:
    """The parent's visits before its first visit of ``at_step``."""
    for index, (step, _, _) in enumerate(parent):
        if step == at_step:
            return parent[:index]
    return list(parent)


def _after(child: Visits, parent: Visits, fork: dict[str, Any]) -> Visits:
    """The child's own visits, numbered on from the visits it inherited."""
    before: dict[str, int] = {}
    for step, _, _ in _inherited(parent, fork["at_step"]):
        before[step] = before.get(step, 0) + 1
    return [(step, visit + before.get(step, 0), side) for step, visit, side in child]


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _side(run: RunRecord, events: list[TimelineEvent]) -> RunSide:
    tokens = sum(e.tokens.input + e.tokens.output for e in events if e.tokens)
    return RunSide(
        run_id=run.run_id,
        workflow=f"{run.workflow_id}@{run.workflow_version}",
        status=run.status.value,
        cost_usd=max(run.cost_usd, timeline_cost(events)),
        tokens=tokens,
        error=run.error.message if run.error else None,
    )


def _fork(
    run_a: RunRecord, events_a: list[TimelineEvent], run_b: RunRecord, events_b: list[TimelineEvent]
) -> dict[str, Any] | None:
    """The fork linking the two runs, as the child's ``run_forked`` event tells it."""
    for child, events, parent in ((run_b, events_b, run_a), (run_a, events_a, run_b)):
        link = child.forked_from
        if link is None or link.run_id != parent.run_id:
            continue
        forked = next((e for e in events if e.type == TimelineEventType.run_forked), None)
        edited = list(forked.detail.get("edited") or []) if forked else []
        return {
            "child": child.run_id,
            "from": parent.run_id,
            "at_step": link.at_step,
            "edited": edited,
            "edited_values": {k: child.outputs.get(k) for k in edited},
        }
    return None
