"""``langorch replay``: recorded runs of a stack (or a local home) re-run on a candidate version,
on this machine, with no side effects.

The recorded runs, their calls and the candidate's definitions are read from the target's
stores; the replays run in a scratch home (the embedded SQLite stores in a temporary folder).
The target's registered tools and agents are registered there without their credentials, and
every call that reaches a port is refused and reported (:mod:`langorch.app.replay`): nothing is
sent to a tool server, an agent, an ``http`` endpoint or a mailbox.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from langorch.app.replay import (
    RefusingTools,
    ReplayHttp,
    ReplayMemory,
    ReplayModels,
    Unrecorded,
    recorded_tasks,
    replay_run,
)
from langorch.app.workflow_tests import VirtualClock
from langorch.composition.embedded import EmbeddedContainer
from langorch.config import Settings
from langorch.domain.errors import NotFoundError
from langorch.domain.replay import FailOn, RunReplay
from langorch.domain.runs import RunRecord


@dataclass
class ReplayReport:
    """Every replayed run, and the gate's verdict."""

    workflow: str
    candidate_version: int
    runs: list[RunReplay]
    fail_on: FailOn = field(default_factory=FailOn)
    emails: int = 0
    """Emails the replays tried to send (none is sent)."""

    def failures(self) -> dict[str, list[str]]:
        """Run id -> why it fails the gate (only the failing runs)."""
        return {r.run_id: why for r in self.runs if (why := self.fail_on.reasons(r))}

    @property
    def passed(self) -> bool:
        """Whether no run fails the gate."""
        return not self.failures()

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON (``--out replay.json``; ``workflows promote --gate`` reads it)."""
        runs = self.runs
        return {
            "workflow": self.workflow,
            "candidate_version": self.candidate_version,
            "fail_on": {
                "kinds": sorted(self.fail_on.kinds),
                "cost_rise": self.fail_on.cost_rise,
            },
            "passed": self.passed,
            "failures": self.failures(),
            "summary": {
                "runs": len(runs),
                "path_changed": sum(r.path_changed for r in runs),
                "outputs_changed": sum(bool(r.outputs_changed) for r in runs),
                "routing_changed": sum(r.routing_changed for r in runs),
                "new_failures": sum(bool(r.new_failure) for r in runs),
                "unrecorded_calls": sum(len(r.unrecorded) for r in runs),
                "live_model_calls": sum(r.live_model_calls for r in runs),
                "emails": self.emails,
            },
            "runs": [r.to_dict() for r in runs],
        }


@dataclass
class _NoEmail:
    sent: list[Any] = field(default_factory=list)

    def send(self, email: Any) -> str:
        self.sent.append(email)
        return "replay-not-sent"


class _ReplayContainer(EmbeddedContainer):
    """The scratch home's stores; definitions read from the target; refusing tools; memory
    reads served from the records, the rest reported."""

    def __init__(
        self,
        settings: Settings,
        *,
        definitions: Any,
        tools: RefusingTools,
        unrecorded: Unrecorded,
        **ports: Any,
    ) -> None:
        super().__init__(settings, **ports)
        self.__dict__["definitions"] = definitions  # runs read definitions, never write them
        scratch_memory = self.memory  # the scratch home's, built now, then wrapped
        self.__dict__["memory"] = ReplayMemory(scratch_memory, unrecorded)
        self._tools = tools

    @property
    def tool_connector(self) -> RefusingTools:  # type: ignore[override]
        return self._tools


def select_runs(
    source: Any,
    workflow: str,
    candidate_version: int,
    *,
    run_ids: list[str] | None = None,
    limit: int = 50,
    since: datetime | None = None,
) -> list[RunRecord]:
    """The recorded runs to replay: those named, else the newest ended runs of ``workflow``
    on other versions than the candidate (since ``since``), at most ``limit``.

    Raises:
        NotFoundError: a named run is not a run of ``workflow``.
    """
    if run_ids:
        runs = [source.runs.get_run(run_id) for run_id in run_ids]
        wrong = [r.run_id for r in runs if r.workflow_id != workflow]
        if wrong:
            raise NotFoundError(f"runs {', '.join(wrong)} are not runs of workflow {workflow}")
        return runs
    found = [
        r
        for r in source.runs.list_runs(workflow_id=workflow, limit=1000)
        if r.is_terminal
        and r.workflow_version != candidate_version
        and (since is None or r.created_at >= since)
    ]
    return found[:limit]


def replay(
    source: Any,
    workflow: str,
    candidate_version: int,
    runs: list[RunRecord],
    *,
    live_models: bool = False,
    unrecorded_answer: str = "approved",
    fail_on: FailOn | None = None,
    progress: Callable[[RunReplay], None] | None = None,
) -> ReplayReport:
    """Replay ``runs`` (read from ``source``) on ``candidate_version``.

    Raises:
        NotFoundError: the candidate version does not exist.
    """
    if source.definitions.get_workflow(workflow, candidate_version) is None:
        raise NotFoundError(
            f"workflow {workflow}@{candidate_version} not found; store the candidate with "
            "`langorch workflows put` first"
        )
    report = ReplayReport(workflow, candidate_version, [], fail_on or FailOn())
    with tempfile.TemporaryDirectory(prefix="langorch-replay-") as home:
        settings = Settings(region=source.settings.region, local_home=home)
        scratch = EmbeddedContainer(settings)
        scratch.ensure_resources()
        _copy_registrations(source, scratch)
        email = _NoEmail()
        for recorded in runs:
            events = source.runs.get_timeline(recorded.run_id)
            tasks = recorded_tasks(source, recorded.run_id, events)
            unrecorded = Unrecorded()
            clock = VirtualClock()
            container = _ReplayContainer(
                settings,
                definitions=source.definitions,
                tools=RefusingTools(unrecorded),
                unrecorded=unrecorded,
                clock=clock,
                llm=ReplayModels(tasks, source.llm if live_models else None, unrecorded),  # type: ignore[arg-type]
                http=ReplayHttp(tasks, unrecorded),
                email=email,
            )
            done = replay_run(
                recorded,
                source,
                container,
                candidate_version=candidate_version,
                unrecorded=unrecorded,
                tasks=tasks,
                unrecorded_answer=unrecorded_answer,
                sleep=clock.sleep,
            )
            report.runs.append(done)
            if progress is not None:
                progress(done)
        report.emails = len(email.sent)
    return report


def _copy_registrations(source: Any, scratch: EmbeddedContainer) -> None:
    """The target's tools and agents, registered in the scratch home without credentials
    (their calls never leave this process)."""
    for server in source.tool_servers.list():
        scratch.tool_servers.put(server.model_copy(update={"headers": {}}))
    for agent in source.agents.list():
        scratch.agents.put(agent.model_copy(update={"headers": {}}))
