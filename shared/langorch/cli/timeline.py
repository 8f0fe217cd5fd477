"""A run's timeline as a person reads it: steps, durations, approvals and who decided, errors."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from langorch.domain.model_limits import describe_wait
from langorch.domain.prices import format_usd
from langorch.domain.runs import RunRecord, TimelineEvent, TimelineEventType
from langorch.domain.tool_policies import WORKFLOW, rule_label

_MARK = {
    TimelineEventType.run_started: "start",
    TimelineEventType.segment_started: "segment",
    TimelineEventType.step_finished: "ok",
    TimelineEventType.step_failed: "FAILED",
    TimelineEventType.step_retried: "retry",
    TimelineEventType.tool_called: "tool",
    TimelineEventType.tool_call_denied: "denied",
    TimelineEventType.tool_policy_shadow: "shadow",
    TimelineEventType.approval_requested: "approval?",
    TimelineEventType.approval_decided: "decided",
    TimelineEventType.approval_timed_out: "timed out",
    TimelineEventType.wait_started: "sleep",
    TimelineEventType.wait_finished: "woke",
    TimelineEventType.resource_waiting: "queued",
    TimelineEventType.resource_acquired: "acquired",
    TimelineEventType.resource_released: "released",
    TimelineEventType.loop_limit_reached: "limit",
    TimelineEventType.run_finished: "end",
    TimelineEventType.run_cancelled: "cancelled",
    TimelineEventType.run_paused: "paused",
    TimelineEventType.run_resumed: "resumed",
    TimelineEventType.run_redriven: "redrive",
    TimelineEventType.run_forked: "fork",
    TimelineEventType.run_continued: "continued",
}


_FIXED_BY = (TimelineEventType.step_finished, TimelineEventType.step_failed)
"""Events a person's fix may end a step with (a skip, a fail): they say by whom."""


def _duration(ms: int | None) -> str:
    if ms is None:
        return ""
    return f"{ms} ms" if ms < 10_000 else f"{ms / 1000:.1f} s"


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cost(detail: dict[str, Any]) -> str:
    cost = detail.get("cost_usd")
    return format_usd(cost) if isinstance(cost, int | float) and cost > 0 else ""


class AskedAt(dict[str, datetime]):
    """When each step last asked for an approval: a timeout is told as the time it waited."""

    def note(self, event: TimelineEvent) -> None:
        """Remember an ``approval_requested`` event's time (other events are ignored)."""
        if event.type == TimelineEventType.approval_requested and event.step_id:
            self[event.step_id] = event.at


def event_line(event: TimelineEvent, asked: AskedAt | None = None) -> str | None:
    """One line for an event (``None`` for events the text view leaves out).

    Args:
        event: the event.
        asked: the approvals asked so far in this timeline (updated with this event); tells
            how long a timed-out approval waited.
    """
    if asked is not None:
        asked.note(event)
    kind = event.type
    if kind == TimelineEventType.step_started:
        return None  # the finish line carries the duration
    at = event.at.strftime("%H:%M:%S.%f")[:-3]
    mark = _MARK.get(kind, kind.value)
    step = event.step_id or ""
    detail = event.detail
    fix = detail.get("fix")
    if isinstance(fix, dict) and kind is TimelineEventType.approval_requested:
        mark = "fix?"  # a failed step asks a person (on_error: ask)
    parts: list[str] = []
    if kind == TimelineEventType.step_finished:
        parts.append(_duration(event.duration_ms))
        if detail.get("branch"):
            parts.append(f"-> {detail['branch']}")
        if event.tokens and (event.tokens.input or event.tokens.output):
            parts.append(f"{event.tokens.input}+{event.tokens.output} tokens")
        parts.append(_cost(detail))
        if event.outputs_summary:
            parts.append(
                ", ".join(
                    f"{k}={_short(v, 40)}" for k, v in list(event.outputs_summary.items())[:3]
                )
            )
    elif kind in (TimelineEventType.step_failed, TimelineEventType.step_retried):
        if event.error:
            parts.append(f"{event.error.type}: {_short(event.error.message, 80)}")
        parts.append(f"attempt {detail.get('attempt', '?')}")
        parts.append(_cost(detail))
        if detail.get("routed_to"):
            parts.append(f"-> {detail['routed_to']}")
    elif kind == TimelineEventType.tool_called:
        parts.append(f"{detail.get('tool', '?')}({_short(detail.get('args', ''), 50)})")
        parts.append(_duration(event.duration_ms))
        outcome = str(detail.get("outcome", ""))
        parts.append(outcome + (" (recorded)" if detail.get("replayed") else ""))
        if detail.get("batch"):
            parts.append(f"batch of {detail['batch']}")
        if detail.get("tool_error"):
            parts.append(_short(detail["tool_error"], 80))
    elif kind in (TimelineEventType.tool_call_denied, TimelineEventType.tool_policy_shadow):
        parts.append(f"{detail.get('tool', '?')}({_short(detail.get('args', ''), 50)})")
        verb = "would " if kind == TimelineEventType.tool_policy_shadow else ""
        rule = rule_label(str(detail.get("policy_of") or WORKFLOW), detail.get("rule"))
        parts.append(f"{verb}{detail.get('outcome', '')} by {rule}")
        if detail.get("decided_by"):
            parts.append(f"({detail['decided_by']})")
    elif kind == TimelineEventType.approval_requested:
        who = ", ".join(detail.get("approvers") or ["(default approvers)"])
        parts.append(f"asked {who} for a fix" if isinstance(fix, dict) else f"asked {who}")
        if detail.get("iteration"):
            parts.append(f"round {detail['iteration']}")
    elif kind == TimelineEventType.approval_timed_out:
        parts.append(_timed_out(event, asked))
    elif kind == TimelineEventType.approval_decided:
        decision = detail.get("decision") or "decided"
        if isinstance(fix, dict):
            decision = f"fix: {fix.get('choice', decision)}"
        parts.append(f"{decision} by {event.actor}" if event.actor else str(decision))
        if isinstance(fix, dict) and fix.get("via"):
            parts[-1] += f" ({fix['via']})"
        if detail.get("comment"):
            parts.append(f'"{_short(detail["comment"], 60)}"')
    elif kind == TimelineEventType.loop_limit_reached:
        parts.extend(_limit_parts(detail))
    elif kind == TimelineEventType.wait_started:
        parts.append(f"{detail.get('seconds')} s")
    elif kind == TimelineEventType.resource_waiting:
        parts.append(
            describe_wait(
                str(detail.get("resource")), detail.get("position"), detail.get("parked_seconds")
            )
        )
    elif kind in (TimelineEventType.resource_acquired, TimelineEventType.resource_released):
        parts.append(f"{detail.get('resource')}")
        if detail.get("lease"):
            parts.append(f"lease #{detail['lease']}")
    elif kind == TimelineEventType.run_started:
        parts.append(f"{detail.get('workflow', '')} ({detail.get('trigger', '')})")
    elif kind == TimelineEventType.run_finished:
        parts.append(str(detail.get("status", "")))
        if event.error:
            parts.append(f"{event.error.type}: {_short(event.error.message, 80)}")
    elif kind == TimelineEventType.segment_started:
        parts.append(f"#{event.segment}")
    elif kind in (TimelineEventType.run_redriven, TimelineEventType.run_forked):
        parts.extend(_recovery_parts(event))
    elif kind in (TimelineEventType.run_paused, TimelineEventType.run_resumed):
        parts.extend(_pause_parts(event))
    elif kind == TimelineEventType.run_continued:
        parts.append(f"in execution {detail.get('to')} (history at {detail.get('events')} events)")
    if isinstance(fix, dict) and kind in _FIXED_BY and fix.get("choice") in ("skip", "fail"):
        verb = "skipped" if fix["choice"] == "skip" else "failed"
        parts.append(f"{verb} by {fix.get('by') or 'nobody in time'}")
    body = "  ".join(p for p in parts if p)
    return f"  {at}  {mark:<10} {step:<22} {body}".rstrip()


def _limit_parts(detail: dict[str, Any]) -> list[str]:
    """A bound that stopped a step or a loop: which bound, what it left out, where it went."""
    parts = [str(detail.get("outcome") or "LoopLimitReached")]
    if detail.get("max_iterations") is not None:
        parts.append(f"max_iterations {detail['max_iterations']}")
    if detail.get("max_loops") is not None:
        parts.append(f"max_loops {detail['max_loops']}, after {detail.get('ran', '?')} rounds")
    if detail.get("dropped"):
        parts.append(f"{detail['dropped']} of {detail.get('total', '?')} items left out")
    if detail.get("routed_to"):
        parts.append(f"-> {detail['routed_to']}")
    return parts


def _recovery_parts(event: TimelineEvent) -> list[str]:
    """A redrive's or a fork's line: the other run, the version move, who and why."""
    detail = event.detail
    parts = []
    if detail.get("attempt"):
        parts.append(f"attempt {detail['attempt']}")
    if detail.get("into_run"):
        parts.append(f"into {detail['into_run']}")
    if detail.get("from_run"):
        parts.append(f"from {detail['from_run']}")
    if detail.get("version"):
        parts.append(f"version {detail['version']}")
    if detail.get("edited"):
        parts.append("edited " + ", ".join(detail["edited"]))
    if detail.get("forced"):
        parts.append("FORCED")
    if event.actor:
        parts.append(f"by {event.actor}")
    if detail.get("reason"):
        parts.append(f'"{_short(detail["reason"], 60)}"')
    return parts


_WHILE = {
    "waiting_approval": "while waiting on its approval (still open)",
    "sleeping": "while sleeping (the wait goes on)",
    "waiting_resource": "while queued for a resource",
}


def _pause_parts(event: TimelineEvent) -> list[str]:
    """A pause's or a resume's line: who, why, and where the run stood."""
    detail = event.detail
    parts = [f"by {event.actor}" if event.actor else ""]
    if detail.get("reason"):
        parts.append(f'"{_short(detail["reason"], 60)}"')
    if detail.get("while"):
        parts.append(_WHILE.get(str(detail["while"]), str(detail["while"])))
    if detail.get("before_it_paused"):
        parts.append("(before its step finished: it never stopped)")
    return parts


def pause_line(run: RunRecord) -> str | None:
    """Where a pause stands, for the run's header (``None``: nobody asked one)."""
    pause = run.pause
    if run.status.value == "paused" and pause is None:
        return "resumed: going on"
    if pause is None or run.is_terminal:
        return None
    who = f"{pause.by}" + (f' ("{_short(pause.reason, 60)}")' if pause.reason else "")
    if run.status.value == "paused":
        return (
            f"paused by {who} at {pause.at:%Y-%m-%d %H:%M:%S} UTC; "
            f"resume with `langorch runs resume {run.run_id}`"
        )
    return f"pause asked by {who}: pauses when its current step finishes"


def lineage(run: RunRecord) -> list[str]:
    """The run's lineage for people: what it was forked from, its redrives, its forks."""
    lines = []
    if run.forked_from is not None:
        link = run.forked_from
        lines.append(f"  forked from {link.run_id} at {link.at_step}")
    for note in run.redrives:
        where = f"from {note.from_step}" if note.from_step else "from its last checkpoint"
        who = f" by {note.actor}" if note.actor else ""
        forced = " (forced)" if note.forced else ""
        lines.append(
            f"  redrive #{note.attempt} {note.at:%Y-%m-%d %H:%M:%S}{who} {where}, "
            f"version {note.from_version} -> {note.to_version}{forced}"
            + (f': "{_short(note.reason, 60)}"' if note.reason else "")
        )
    for link in run.forks:
        lines.append(f"  forked into {link.run_id} at {link.at_step}")
    return (["lineage:", *lines]) if lines else []


def _timed_out(event: TimelineEvent, asked: AskedAt | None) -> str:
    since = asked.get(event.step_id or "") if asked is not None else None
    if since is None or event.at < since:
        return "no decision before the timeout"
    waited = (event.at - since).total_seconds()
    if waited < 120:
        span = f"{waited:.0f} s"
    elif waited < 7200:
        span = f"{waited / 60:.0f} min"
    else:
        span = f"{waited / 3600:.1f} h"
    return f"no decision: timed out after {span}"


def render_run(run: RunRecord, events: list[TimelineEvent], *, timeline: bool = True) -> str:
    """The run's header, its timeline and its outcome.

    Args:
        run: the run record.
        events: its timeline.
        timeline: include the events (``False`` when they were already shown as they
            happened, e.g. by ``runs start --wait``).
    """
    took = ""
    if run.started_at and run.ended_at:
        took = f", took {(run.ended_at - run.started_at).total_seconds():.1f} s"
    lines = [
        f"run {run.run_id}  {run.workflow_id}@{run.workflow_version}  {run.status.value}",
        f"  trigger {run.trigger.type}, created {run.created_at:%Y-%m-%d %H:%M:%S} UTC, "
        f"{run.segment} segment(s){took}"
        + (f", cost {format_usd(run.cost_usd)}" if run.cost_usd else ""),
        "",
    ]
    paused = pause_line(run)
    if paused is not None:
        lines.insert(2, f"  {paused}")
    if timeline:
        asked = AskedAt()
        lines += [line for line in (event_line(e, asked) for e in events) if line]
    else:
        lines.pop()  # the blank line before the events
    if lineage(run):
        lines += ["", *lineage(run)]
    if run.pending is not None and run.pending.kind == "resource":
        request = run.pending.request
        said = describe_wait(str(request.get("resource")), request.get("position"))
        lines += ["", f"{said} at {request.get('step_id', '')}"]
    elif run.pending is not None:
        lines += ["", f"waiting on {run.pending.kind} {run.pending.request.get('step_id', '')}"]
    if run.held is not None and run.pending is not None:
        answer = run.held.get("decision") or ("woke" if run.held.get("woke") else "an answer")
        lines += [f"  held while paused: {answer} (given to the run when it is resumed)"]
    if run.error is not None:
        where = f" at {run.error.step_id}" if run.error.step_id else ""
        lines += ["", f"error{where}: {run.error.type}: {run.error.message}"]
    if run.outputs:
        lines += ["", "outputs:"]
        lines += [f"  {k}: {_short(v, 100)}" for k, v in run.outputs.items()]
    return "\n".join(lines)
