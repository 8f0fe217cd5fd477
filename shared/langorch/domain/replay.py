"""The replay gate's judgement: a recorded run beside its replay on a candidate version.

``langorch replay`` re-runs recorded runs on a candidate version with everything outside served
from the records (:mod:`langorch.app.replay`); this module reads the recorded decisions from a
timeline, compares each recorded run with its replay (path, outputs, approval routing, cost,
duration, failures, calls that had no record), and says whether the gate passes
(``--fail-on path,failure,cost+20%``). Pure: records in, report out.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from langorch.domain.errors import DefinitionError, Problem
from langorch.domain.run_diff import diff_runs
from langorch.domain.runs import RunRecord, TimelineEvent, TimelineEventType, timeline_cost

REFUSED = "replay: "
"""How a replay's refusal of a call without a record starts (:mod:`langorch.app.replay`)."""

FAIL_ON_CHOICES = ("path", "failure", "outputs", "approvals", "unrecorded")
"""What ``--fail-on`` may name, besides ``cost+N%``."""


class FailOnError(DefinitionError):
    """``--fail-on`` names something the gate does not judge."""


@dataclass(frozen=True)
class RecordedDecision:
    """A person's decision as a recorded run kept it."""

    step_id: str
    decision: str
    comment: str
    approver: str | None
    shown: dict[str, str] | None
    """Digests of what the approval showed (``None``: the timeline's copy was cut)."""
    edits: dict[str, Any] | None = None
    """The values the person edited (``None``: a run recorded before edits were kept)."""
    unkept_edits: tuple[str, ...] = ()
    """Keys edited whose values the timeline did not keep (too large, or secret-looking)."""
    changed_keys: tuple[str, ...] = ()
    """The keys the approval step set, as its finished event's summary names them."""


def recorded_decisions(events: list[TimelineEvent]) -> list[RecordedDecision]:
    """The decisions of a recorded run, in order, each with what it was shown and the edits
    made, when known."""
    waiting: dict[str, list[TimelineEvent]] = {}
    found: list[RecordedDecision] = []
    for event in events:
        step = event.step_id
        if step is None:
            continue
        if event.type in (TimelineEventType.approval_decided, TimelineEventType.approval_timed_out):
            waiting.setdefault(step, []).append(event)
        elif event.type == TimelineEventType.step_finished and waiting.get(step):
            summary = event.outputs_summary or {}
            found.append(
                _decision(
                    waiting[step].pop(0),
                    _shown(summary.get(f"{step}_decision")),
                    tuple(k for k in summary if k != f"{step}_decision"),
                )
            )
    for left in waiting.values():  # decided, but the step never finished (run failed)
        found += [_decision(event, None, ()) for event in left]
    return found


def _decision(
    event: TimelineEvent, shown: dict[str, str] | None, changed: tuple[str, ...]
) -> RecordedDecision:
    detail = event.detail
    edits = detail.get("edits")
    return RecordedDecision(
        step_id=str(event.step_id),
        decision=str(detail.get("decision") or "timed_out"),
        comment=str(detail.get("comment") or ""),
        approver=event.actor,
        shown=shown,
        edits=dict(edits) if isinstance(edits, dict) else None,
        unkept_edits=tuple(str(k) for k in detail.get("edits_unkept") or ()),
        changed_keys=changed,
    )


def _shown(summary: str | None) -> dict[str, str] | None:
    if not summary:
        return None
    try:
        value = json.loads(summary)
        shown = value.get("shown") if isinstance(value, dict) else None
        return dict(shown) if isinstance(shown, dict) else None
    except ValueError:
        # The timeline bounds each value: the decision's start (with ``shown``) usually survives.
        match = re.search(r'"shown": (\{[^{}]*\})', summary)
        return json.loads(match.group(1)) if match else None


@dataclass(frozen=True)
class AskedApproval:
    """One approval a run asked: of whom, under which policy."""

    step_id: str
    approvers: tuple[str, ...]
    title: str | None = None
    policy: str | None = None

    def label(self) -> str:
        """``step (title) -> approvers [policy]`` for a report."""
        title = f" ({self.title})" if self.title else ""
        policy = f" [{self.policy}]" if self.policy else ""
        return f"{self.step_id}{title} -> {', '.join(self.approvers) or '?'}{policy}"


def asked_in(events: list[TimelineEvent]) -> list[AskedApproval]:
    """The approvals a timeline says were asked, in order."""
    return [
        AskedApproval(str(e.step_id), tuple(e.detail.get("approvers") or ()))
        for e in events
        if e.type == TimelineEventType.approval_requested
    ]


@dataclass
class RunReplay:
    """One recorded run and its replay on the candidate."""

    run_id: str
    replay_run_id: str
    recorded_version: int
    recorded_status: str
    status: str
    path_changed: bool
    path_diff: list[str]
    outputs_changed: list[str]
    routing_changed: bool
    approvals_recorded: list[str]
    approvals_replayed: list[str]
    routing_diff: list[str]
    cost_usd: tuple[float, float]
    duration_ms: tuple[int, int]
    new_failure: str | None
    unrecorded: list[str] = field(default_factory=list)
    """Calls the candidate made that no record answered (reported, never made)."""
    live_model_calls: int = 0

    @property
    def cost_change(self) -> float | None:
        """The candidate's cost relative to the recording (``0.2``: 20 % more); ``None`` when
        the recording cost nothing."""
        before, after = self.cost_usd
        return None if before == 0 else (after - before) / before

    def to_dict(self) -> dict[str, Any]:
        """As JSON (``--out``)."""
        return {**asdict(self), "cost_change": self.cost_change}


def compare(
    recorded: RunRecord,
    recorded_events: list[TimelineEvent],
    replayed: RunRecord,
    replayed_events: list[TimelineEvent],
    *,
    asked: list[AskedApproval],
    unrecorded: list[str],
    live_model_calls: int = 0,
) -> RunReplay:
    """Compare a recorded run with its replay; ``asked`` are the replay's approval requests
    as the candidate made them (with titles and policies)."""
    found = diff_runs(recorded, recorded_events, replayed, replayed_events)
    path_a, path_b = _path(recorded_events), _path(replayed_events)
    # Who was asked at which step, compared; a new request is shown with its title (what it
    # is about), which the recorded timeline does not keep.
    before = [a.label() for a in asked_in(recorded_events)]
    plain = [AskedApproval(a.step_id, a.approvers).label() for a in asked]
    after = [a.label() for a in asked]
    routing: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=before, b=plain).get_opcodes():
        if op in ("delete", "replace"):
            routing += [f"- {line}" for line in before[i1:i2]]
        if op in ("insert", "replace"):
            routing += [f"+ {line}" for line in after[j1:j2]]
    failure = None
    if replayed.status.value == "failed" and recorded.status.value != "failed":
        failure = replayed.error.message if replayed.error else "failed"
        if unrecorded and REFUSED in failure:
            failure = None  # not the candidate's failure: a call it made had no record
    # A run that ended without outputs (failed) is not compared key by key.
    compared = bool(recorded.outputs) and bool(replayed.outputs)
    return RunReplay(
        run_id=recorded.run_id,
        replay_run_id=replayed.run_id,
        recorded_version=recorded.workflow_version,
        recorded_status=recorded.status.value,
        status=replayed.status.value,
        path_changed=path_a != path_b,
        path_diff=[line for line in difflib.unified_diff(path_a, path_b, lineterm="", n=1)][2:],
        outputs_changed=[key for key, _, _ in found.outputs] if compared else [],
        routing_changed=bool(routing),
        approvals_recorded=before,
        approvals_replayed=after,
        routing_diff=routing,
        cost_usd=(
            max(recorded.cost_usd, timeline_cost(recorded_events)),
            max(replayed.cost_usd, timeline_cost(replayed_events)),
        ),
        duration_ms=(_duration(recorded_events), _duration(replayed_events)),
        new_failure=failure,
        unrecorded=list(unrecorded),
        live_model_calls=live_model_calls,
    )


def _path(events: list[TimelineEvent]) -> list[str]:
    ended = (TimelineEventType.step_finished, TimelineEventType.step_failed)
    return [str(e.step_id) for e in events if e.type in ended and e.step_id is not None]


def _duration(events: list[TimelineEvent]) -> int:
    """The time the run's steps took (not the time it waited for people)."""
    ended = (TimelineEventType.step_finished, TimelineEventType.step_failed)
    return sum(e.duration_ms or 0 for e in events if e.type in ended)


# --------------------------------------------------------------------------------------------
# The gate
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FailOn:
    """What fails the gate: any of ``kinds`` in any run, or a cost rise past ``cost_rise``."""

    kinds: frozenset[str] = frozenset()
    cost_rise: float | None = None
    """``0.2`` for ``cost+20%``."""

    @classmethod
    def parse(cls, text: str | None) -> FailOn:
        """``path,failure,cost+20%`` -> :class:`FailOn`.

        Raises:
            FailOnError: an unknown item, or a cost rise that is not ``cost+N%``.
        """
        kinds: set[str] = set()
        rise: float | None = None
        problems: list[Problem] = []
        for item in (text or "").split(","):
            item = item.strip()
            if not item:
                continue
            match = re.fullmatch(r"cost\+(\d+(?:\.\d+)?)%", item)
            if match:
                rise = float(match.group(1)) / 100
            elif item in FAIL_ON_CHOICES:
                kinds.add(item)
            else:
                problems.append(
                    Problem(
                        f"--fail-on {item}",
                        "is not something the gate judges",
                        f"use {', '.join(FAIL_ON_CHOICES)} or cost+N% (e.g. cost+20%)",
                    )
                )
        if problems:
            raise FailOnError("--fail-on", problems)
        return cls(frozenset(kinds), rise)

    def reasons(self, run: RunReplay) -> list[str]:
        """Why ``run`` fails the gate (empty: it passes)."""
        found: list[str] = []
        if "path" in self.kinds and run.path_changed:
            found.append("path changed")
        if "failure" in self.kinds and run.new_failure:
            found.append(f"new failure: {run.new_failure}")
        if "outputs" in self.kinds and run.outputs_changed:
            found.append(f"outputs changed: {', '.join(run.outputs_changed)}")
        if "approvals" in self.kinds and run.routing_changed:
            found.append("approval routing changed")
        if "unrecorded" in self.kinds and run.unrecorded:
            found.append(f"{len(run.unrecorded)} call(s) without a record")
        change = run.cost_change
        if self.cost_rise is not None and change is not None and change > self.cost_rise:
            found.append(f"cost +{change:.0%} (limit +{self.cost_rise:.0%})")
        return found
