"""Run a workflow test case offline: the engine's ports answered from the case's script.

Nothing of langorch is replaced: the run is started and driven by the same use-cases as
``runs start --local`` (:func:`langorch.app.runs.start_run`, :func:`langorch.app.runs.drive`).
Only what stands outside is scripted — the model (:class:`ScriptedModels`, the ``llm`` port),
registered tools (:class:`ScriptedTools`, the ``tool_connector`` port), ``http`` steps and HTTP
agents (:class:`ScriptedHttp`, the ``http`` port), the people deciding approvals
(:class:`ScriptedApprovals`, ``drive``'s ``on_approval``) and time (:class:`VirtualClock`: a
wait passes at once). A call the script does not answer is a note in the report, never a
request to anything real.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from langorch.app.runs import SegmentDeps, StartDeps
from langorch.domain.errors import LangorchError
from langorch.domain.runs import TimelineEventType, timeline_cost
from langorch.domain.workflow_tests import (
    Decision,
    HttpAnswer,
    Observed,
    PromptAnswer,
    TestCase,
    ToolAnswer,
)

if TYPE_CHECKING:
    from langorch.domain.runs import RunRecord, TimelineEvent
    from langorch.llm.base import LLMRequest, LLMResult
    from langorch.llm.toolbox import ToolSpec


class UnscriptedApprovalError(LangorchError):
    """The run asked for an approval the case scripts no (further) decision for."""


class UnscriptedCallError(LangorchError):
    """A tool or HTTP call the script has no answer for: not made, reported."""


@dataclass
class Notes:
    """What the scripted world noticed during a case (shared by its ports, thread-safe)."""

    lines: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, line: str) -> None:
        """Note ``line`` once."""
        with self._lock:
            if line not in self.lines:
                self.lines.append(line)


class VirtualClock:
    """Wall-clock time plus what the run slept: a case's waits pass without waiting."""

    def __init__(self) -> None:
        self._offset = timedelta()

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self._offset

    def sleep(self, seconds: float) -> None:
        """Move time ``seconds`` forward (``drive``'s ``sleep``)."""
        self._offset += timedelta(seconds=max(seconds, 0.0))


class ScriptedModels:
    """The ``llm`` port: answers by prompt matcher, else by step or block id (the offline
    provider's script), else the offline provider's deterministic defaults (noted).

    Every call is answered offline whatever provider the block names: no key, no network.
    """

    def __init__(self, models: dict[str, Any], prompts: list[PromptAnswer], notes: Notes) -> None:
        from langorch.llm import LLMRegistry

        self._registry = LLMRegistry(default_provider="offline", offline_script=models)
        self._scripted = set(models)
        self._prompts = prompts
        self._notes = notes

    def prepare(self, name: str, seconds: float | None = None) -> None:
        """Nothing to load: every provider is answered offline."""

    def invoke(self, request: LLMRequest) -> LLMResult:
        """See :meth:`ainvoke` (no scripted tool calls are made from synchronous code)."""
        result: LLMResult = self._pick(request).invoke(self._offline(request))
        return result

    async def ainvoke(self, request: LLMRequest) -> LLMResult:
        """Answer ``request`` from the script (scripted tool calls go through its toolbox)."""
        result: LLMResult = await self._pick(request).ainvoke(self._offline(request))
        return result

    @staticmethod
    def _offline(request: LLMRequest) -> LLMRequest:
        return replace(request, provider="offline")

    def _pick(self, request: LLMRequest) -> Any:
        for matcher in self._prompts:
            if matcher.hits(request.step_id, request.prompt):
                from langorch.llm import LLMRegistry

                return LLMRegistry(
                    default_provider="offline", offline_script={request.step_id: matcher.answer}
                )
        if request.step_id not in self._scripted and request.block_id not in self._scripted:
            self._notes.add(
                f"model call at step {request.step_id} matched no scripted answer: answered "
                "with the offline defaults"
            )
        return self._registry


class _ScriptedConnection:
    """One registered tool server, answered from the script."""

    def __init__(self, name: str, tools: ScriptedTools) -> None:
        self.name = name
        self._tools = tools

    async def list_tools(self) -> list[ToolSpec]:
        from langorch.llm.toolbox import ToolSpec

        names = self._tools.offered(self.name)
        return [ToolSpec(name=n, description=f"{n} (scripted)") for n in names]

    async def call(
        self, tool: str, args: dict[str, Any], *, timeout: float, key: str | None = None
    ) -> tuple[str, bool]:
        return self._tools.answer(tool, args)

    async def aclose(self) -> None:
        return None


class ScriptedTools:
    """The ``tool_connector`` port: registered tools answer from the script.

    Args:
        answers: Tool name -> its answers (the first whose ``args`` match is used).
        allowed: Server name -> the tools its registration allows (offered as listed).
        notes: Where an unanswered call is noted.
    """

    def __init__(
        self, answers: dict[str, list[ToolAnswer]], allowed: dict[str, list[str]], notes: Notes
    ) -> None:
        self._answers = answers
        self._allowed = allowed
        self._notes = notes
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(
        self, name: str, url: str, headers: dict[str, str], *, call_timeout: float = 30.0
    ) -> _ScriptedConnection:
        return _ScriptedConnection(name, self)

    def offered(self, server: str) -> list[str]:
        """The tools ``server`` lists: those its registration allows, else the scripted ones."""
        return self._allowed.get(server) or sorted(self._answers)

    def answer(self, tool: str, args: dict[str, Any]) -> tuple[str, bool]:
        """The scripted output of ``tool(args)`` and whether it is an error.

        Raises:
            UnscriptedCallError: nothing answers this call (the step sees a failed call).
        """
        self.calls.append((tool, args))
        for answer in self._answers.get(tool, []):
            if answer.hits(args):
                output = answer.output
                text = output if isinstance(output, str) else json.dumps(output, default=str)
                return text, answer.error
        self._notes.add(f"tool call {tool}({json.dumps(args, default=str)}) has no scripted answer")
        raise UnscriptedCallError(f"tool {tool}: no scripted answer for {args}")


class ScriptedHttp:
    """The ``http`` port: ``http`` steps and HTTP agents answer from the script."""

    def __init__(self, answers: list[HttpAnswer], notes: Notes) -> None:
        self._answers = answers
        self._notes = notes
        self.calls: list[tuple[str, str, Any]] = []

    def __call__(
        self, method: str, url: str, *, headers: dict[str, str], body: Any, timeout: float
    ) -> tuple[int, Any]:
        """The first scripted answer for ``method url``.

        Raises:
            UnscriptedCallError: nothing answers this request (not sent anywhere).
        """
        self.calls.append((method, url, body))
        for answer in self._answers:
            if answer.hits(method, url):
                return answer.status, answer.body
        self._notes.add(f"HTTP {method} {url} has no scripted answer")
        raise UnscriptedCallError(f"HTTP {method} {url}: no scripted answer (not sent)")


class ScriptedApprovals:
    """``drive``'s ``on_approval``: each step's decisions, in the order it asks."""

    def __init__(self, decisions: dict[str, list[Decision]]) -> None:
        self._decisions = decisions
        self._asked: dict[str, int] = {}

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        step = str(request.get("step_id"))
        count = self._asked.get(step, 0)
        self._asked[step] = count + 1
        scripted = self._decisions.get(step, [])
        if count >= len(scripted):
            raise UnscriptedApprovalError(
                f"approval {step} asked {count + 1} time(s); the case scripts "
                f"{len(scripted)} decision(s) for it (add them under approvals.{step})"
            )
        return answer_for(request, scripted[count])


def answer_for(request: dict[str, Any], decision: Decision) -> dict[str, Any]:
    """What a person deciding ``decision`` resumes the run with (every vote a policy needs)."""
    approvers = request.get("approvers") or []
    answer: dict[str, Any] = {
        "decision": decision.decision,
        "approver": decision.approver or (approvers[0] if approvers else "tester"),
        "comment": decision.comment,
        "edits": dict(decision.edits),
    }
    if request.get("policy") and decision.decision != "timed_out":
        from langorch.domain.approvals.votes import votes_answering

        votes = votes_answering(request, decision.decision, datetime.now(UTC))  # type: ignore[arg-type]
        answer["votes"] = [v.model_dump(mode="json", exclude_none=True) for v in votes]
        answer["approver"] = votes[-1].approver if votes else answer["approver"]
    return answer


class CaseDeps(SegmentDeps, StartDeps, Protocol):
    """What a case's run needs: the segment's ports and the definitions to start it from."""


def run_case(
    case: TestCase, workflow_id: str, deps: CaseDeps, notes: Notes, clock: VirtualClock
) -> Observed:
    """Start a run of ``workflow_id`` with the case's input, drive it to its end, observe it.

    ``deps`` are the ports wired with the case's scripted world (and ``clock``); what it
    noticed lands in ``notes``.
    """
    from langorch.app.runs import StartRun, drive, start_run

    run, _ = start_run(
        StartRun(workflow_id, input=case.input, trigger_detail={"test": case.name}), deps
    )
    try:
        drive(run.run_id, deps, on_approval=ScriptedApprovals(case.approvals), sleep=clock.sleep)
    except UnscriptedApprovalError as exc:
        notes.add(str(exc))
    return observe(deps.runs.get_run(run.run_id), deps.runs.get_timeline(run.run_id), notes)


def observe(run: RunRecord, events: list[TimelineEvent], notes: Notes | None = None) -> Observed:
    """What ``run`` did, from its record and timeline."""
    ended = (TimelineEventType.step_finished, TimelineEventType.step_failed)
    path = [str(e.step_id) for e in events if e.type in ended and e.step_id is not None]
    asked = sum(1 for e in events if e.type == TimelineEventType.approval_requested)
    error = run.error.message if run.error else None
    return Observed(
        status=run.status.value,
        path=path,
        outputs=dict(run.outputs),
        cost_usd=max(run.cost_usd, timeline_cost(events)),
        approvals=asked,
        error=error,
        notes=list(notes.lines) if notes else [],
    )
