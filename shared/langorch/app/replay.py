"""Replay recorded runs on a candidate version, with the outside world served from the records.

For each recorded run, a new run of the candidate version starts (in a scratch store) with the
recorded input. Its recorded calls — every LLM answer, model round, tool, agent and ``http``
response the original recorded (:mod:`langorch.app.tasks`) — are put in the new run's task
records, so the engine's own recorder serves each call the candidate makes with the same
question at the same place. What no record answers reaches the replay ports below, never a
server: a model call is looked up by its prompt anywhere in the step's records, else made live
(``live_models``) or refused; a tool, agent or ``http`` call is refused. Every refusal is
reported. What the run read from memory is served from its records too (a read without one is
reported and answered from the replay's own, empty, memory). People's decisions are served
from the recorded timeline, with the values they edited: the decision about the same thing
(the digests of what the approval showed), else the step's next one; an approval the original
never asked is a routing change, answered with ``unrecorded_approvals``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from langorch.app.runs import SegmentDeps, StartDeps, StartRun, drive, start_run
from langorch.app.tasks import TaskStore
from langorch.domain.errors import LangorchError
from langorch.domain.replay import (
    AskedApproval,
    RecordedDecision,
    RunReplay,
    compare,
    recorded_decisions,
)
from langorch.domain.runs import RunRecord, TimelineEvent, TimelineEventType
from langorch.domain.tasks import MEMORY_LOAD_STEP, TaskRecord, fingerprint
from langorch.engine.context import LLMInvoker, Memory
from langorch.llm.base import LLMCallError, LLMRequest, LLMResult


class NoRecordError(LangorchError):
    """A call the candidate made that no record answers: reported, never made."""


@dataclass
class Unrecorded:
    """The calls of one replay that had no record (thread-safe: tools run in threads)."""

    calls: list[str] = field(default_factory=list)
    live: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, call: str) -> None:
        """Report ``call``."""
        with self._lock:
            self.calls.append(call)


class ReplayModels:
    """The ``llm`` port of a replay: an answer recorded for the same prompt at the same step,
    else the live model (when allowed), else a refusal."""

    def __init__(
        self, records: list[TaskRecord], live: LLMInvoker | None, unrecorded: Unrecorded
    ) -> None:
        self._answers = {(r.step_id, r.fingerprint): r.result for r in records if r.kind == "llm"}
        self._live = live
        self._unrecorded = unrecorded

    def prepare(self, name: str, seconds: float | None = None) -> None:
        """Nothing to load unless a live model answers (it loads on its first call)."""

    def invoke(self, request: LLMRequest) -> LLMResult:
        """Replay, else live, else refuse (see the class)."""
        from langorch.engine.kinds.llm import request_digest

        recorded = self._answers.get((request.step_id, request_digest(request)))
        if recorded is not None:
            return LLMResult(**recorded)
        return self._unanswered(request)

    async def ainvoke(self, request: LLMRequest) -> LLMResult:
        """:meth:`invoke`; a live model answers asynchronously (its tool calls are replayed
        or refused like any other)."""
        from langorch.engine.kinds.llm import request_digest

        recorded = self._answers.get((request.step_id, request_digest(request)))
        if recorded is not None:
            return LLMResult(**recorded)
        if self._live is not None:
            self._unrecorded.live += 1
            ainvoke = getattr(self._live, "ainvoke", None)
            if ainvoke is not None:
                result: LLMResult = await ainvoke(request)
                return result
        return self._unanswered(request)

    def _unanswered(self, request: LLMRequest) -> LLMResult:
        if self._live is not None:
            self._unrecorded.live += 1
            return self._live.invoke(request)
        self._unrecorded.add(f"model call at step {request.step_id} (its prompt changed)")
        raise LLMCallError(
            f"replay: step {request.step_id}'s prompt is not the recorded one, so no recorded "
            "answer fits; replay with --live-models to ask the model",
            retryable=False,
        )


class _RefusedConnection:
    def __init__(self, name: str, unrecorded: Unrecorded) -> None:
        self.name = name
        self._unrecorded = unrecorded

    async def list_tools(self) -> list[Any]:
        from langorch.llm.toolbox import ToolSpec

        # Names only: the recorded calls are served before a server would be asked.
        return [ToolSpec(name=self.name, description="(replay: recorded calls only)")]

    async def call(
        self, tool: str, args: dict[str, Any], *, timeout: float, key: str | None = None
    ) -> tuple[str, bool]:
        self._unrecorded.add(f"tool call {tool}({args})")
        raise NoRecordError(f"replay: tool {tool} was called with arguments no record answers")

    async def aclose(self) -> None:
        return None


class RefusingTools:
    """The ``tool_connector`` port of a replay: any call that reaches it had no record."""

    def __init__(self, unrecorded: Unrecorded) -> None:
        self._unrecorded = unrecorded

    def __call__(
        self, name: str, url: str, headers: dict[str, str], *, call_timeout: float = 30.0
    ) -> _RefusedConnection:
        return _RefusedConnection(name, self._unrecorded)


class ReplayHttp:
    """The ``http`` port of a replay: the response an ``http`` step recorded for the same
    request anywhere in the run (a changed path may make it at another visit), else refused
    and reported; never sent."""

    def __init__(self, records: list[TaskRecord], unrecorded: Unrecorded) -> None:
        self._responses = {r.fingerprint: r.result for r in records if r.kind == "http"}
        self._unrecorded = unrecorded

    def __call__(
        self, method: str, url: str, *, headers: dict[str, str], body: Any, timeout: float
    ) -> tuple[int, Any]:
        # What the http step fingerprints its request by (engine/kinds/http.py: ``tried``).
        recorded = self._responses.get(fingerprint({"method": method, "url": url, "body": body}))
        if recorded is not None:
            return int(recorded.get("status") or 200), recorded.get("body")
        self._unrecorded.add(f"HTTP {method} {url.split('?')[0]}")
        raise NoRecordError(f"replay: {method} {url.split('?')[0]} has no record; not sent")


class ReplayMemory:
    """The ``memory`` port of a replay. What the recorded run's ``query_memory`` steps read is
    served from their records before this port is asked; a read that reaches it had no record
    (the run was recorded before memory reads were kept, or the candidate asks something
    else) and is reported, then answered from the scratch store: what the replay itself saved,
    else nothing. Saves stay in the scratch store."""

    def __init__(self, inner: Memory, unrecorded: Unrecorded) -> None:
        self._inner = inner
        self._unrecorded = unrecorded

    def _unserved(self, what: str) -> None:
        self._unrecorded.add(
            f"memory read ({what}) with no record; read from the replay's own memory"
        )

    def get_preferences(self, user_id: str) -> dict[str, Any]:
        """Reported, then the scratch store's."""
        self._unserved("preferences")
        return self._inner.get_preferences(user_id)

    def update_preferences(self, user_id: str, values: dict[str, Any]) -> None:
        """Kept in the scratch store."""
        self._inner.update_preferences(user_id, values)

    def get_history(self, user_id: str, workflow_id: str, limit: int = 10) -> list[dict[str, Any]]:
        """Reported, then the scratch store's."""
        self._unserved("history")
        return self._inner.get_history(user_id, workflow_id, limit)

    def save_history(
        self, user_id: str, workflow_id: str, run_id: str, summary: dict[str, Any]
    ) -> None:
        """Kept in the scratch store."""
        self._inner.save_history(user_id, workflow_id, run_id, summary)

    def search_preferences(
        self, user_id: str, query: str, keys: Sequence[str] = ()
    ) -> dict[str, Any]:
        """Reported, then the scratch store's."""
        self._unserved("preferences search")
        return self._inner.search_preferences(user_id, query, keys)

    def search_history(
        self, user_id: str, workflow_id: str, query: str, limit: int = 10
    ) -> list[dict[str, Any]]:
        """Reported, then the scratch store's."""
        self._unserved("history search")
        return self._inner.search_history(user_id, workflow_id, query, limit)


class ReplayApprovals:
    """``drive``'s ``on_approval`` for a replay: the recorded people decide again, with the
    edits they made. An edit the replay cannot make again is reported: one the record did not
    keep, or of a key the candidate no longer lets the approver edit."""

    def __init__(
        self,
        decisions: list[RecordedDecision],
        unrecorded_answer: str,
        unrecorded: Unrecorded | None = None,
    ) -> None:
        self._left = list(decisions)
        self._answer = unrecorded_answer
        self._unrecorded = unrecorded or Unrecorded()
        self.asked: list[AskedApproval] = []

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        from langorch.app.workflow_tests import answer_for
        from langorch.domain.workflow_tests import Decision
        from langorch.engine.kinds.approval import shown_digest

        step = str(request.get("step_id"))
        policy = request.get("policy")
        self.asked.append(
            AskedApproval(
                step,
                tuple(request.get("approvers") or ()),
                title=request.get("title"),
                policy=", ".join(sorted(policy)) if isinstance(policy, dict) else None,
            )
        )
        shown = {k: shown_digest(v) for k, v in (request.get("context") or {}).items()}
        same = [d for d in self._left if d.step_id == step and d.shown == shown]
        mine = same or [d for d in self._left if d.step_id == step and d.shown is None]
        if not mine:
            said = Decision(decision=self._answer)  # type: ignore[arg-type]
            return answer_for(request, said)
        decision = mine[0]
        self._left.remove(decision)
        said = Decision(
            decision=decision.decision,  # type: ignore[arg-type]
            comment=decision.comment,
            approver=decision.approver,
            edits=self._edits(step, decision, set(request.get("editable") or {})),
        )
        return answer_for(request, said)

    def _edits(self, step: str, decision: RecordedDecision, editable: set[str]) -> dict[str, Any]:
        """The recorded edits the candidate's approval accepts; the rest reported."""
        edits = decision.edits or {}
        # A run recorded before edits were kept: the keys its approval set that are editable
        # were edited, but their values are unknown.
        unknown = set(decision.unkept_edits)
        if decision.edits is None:
            unknown |= set(decision.changed_keys) & editable
        if unknown:
            self._unrecorded.add(
                f"approval {step}: edits of {', '.join(sorted(unknown))} were not recorded; "
                "replayed without them"
            )
        dropped = sorted(set(edits) - editable)
        if dropped:
            self._unrecorded.add(
                f"approval {step}: edits of {', '.join(dropped)} not applied (not editable in "
                "the candidate)"
            )
        return {k: v for k, v in edits.items() if k in editable}


class SourceDeps(Protocol):
    """Where the recorded runs are read from."""

    @property
    def runs(self) -> Any: ...
    @property
    def tasks(self) -> TaskStore: ...


class ReplayDeps(SegmentDeps, StartDeps, Protocol):
    """The scratch stores a replay runs in, with the replay ports."""


def recorded_tasks(
    source: SourceDeps, run_id: str, events: list[TimelineEvent]
) -> list[TaskRecord]:
    """Every call the run recorded: each step's records for each visit it made, and what it
    loaded from memory before its first step."""
    visits: dict[str, int] = {}
    for event in events:
        if event.type == TimelineEventType.step_started and event.step_id:
            visits[event.step_id] = visits.get(event.step_id, 0) + 1
    found: list[TaskRecord] = list(source.tasks.load(run_id, MEMORY_LOAD_STEP, 0))
    for step, count in visits.items():
        for visit in range(count):
            found += source.tasks.load(run_id, step, visit)
    return found


def replay_run(
    recorded: RunRecord,
    source: SourceDeps,
    scratch: ReplayDeps,
    *,
    candidate_version: int,
    unrecorded: Unrecorded,
    tasks: Iterable[TaskRecord],
    unrecorded_answer: str = "approved",
    sleep: Callable[[float], None] = lambda _seconds: None,
) -> RunReplay:
    """Replay ``recorded`` on ``candidate_version`` in ``scratch`` (whose ports serve the
    records in ``tasks`` and report ``unrecorded`` calls) and compare the two."""
    events = source.runs.get_timeline(recorded.run_id)
    run, _ = start_run(
        StartRun(
            recorded.workflow_id,
            input=recorded.input,
            version=candidate_version,
            trigger="manual",
            trigger_detail={"replay_of": recorded.run_id},
            user_id=recorded.user_id or "default",
        ),
        scratch,
    )
    for record in tasks:
        scratch.tasks.put(run.run_id, record)
    approvals = ReplayApprovals(recorded_decisions(events), unrecorded_answer, unrecorded)
    drive(run.run_id, scratch, on_approval=approvals, sleep=sleep)
    return compare(
        recorded,
        events,
        scratch.runs.get_run(run.run_id),
        scratch.runs.get_timeline(run.run_id),
        asked=approvals.asked,
        unrecorded=unrecorded.calls,
        live_model_calls=unrecorded.live,
    )
