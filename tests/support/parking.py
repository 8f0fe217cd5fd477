"""Runs parked on an approval on the fakes, as the pipeline parks them: the real segment runs to
the approval step, the execution waits on its task token, and the real use-case asks for the
approval (its emails go to the fake mailbox)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langorch.app.approvals.decisions import RequestApproval, ensure_signing_key, request_approval
from langorch.app.approvals.requests import ApprovalRequested
from langorch.app.runs import RunSegment, StartRun, launch_run, run_segment
from tests.fakes import Fakes
from tests.fakes.approvals import InMemoryApprovals
from tests.integration.conftest import register_text


@dataclass
class OnApproval:
    """A run waiting on its approval."""

    run_id: str
    approval: dict[str, Any]
    """What the segment parked on (its ``interrupt_id``, its request)."""
    requested: ApprovalRequested
    """What asking for it answered (the approval's id, who was emailed)."""


def with_approvals(deps: Fakes, workflows: str | None = None) -> Fakes:
    """``deps`` with an approvals store and a link-signing key, and ``workflows`` registered."""
    deps.approvals = InMemoryApprovals()  # type: ignore[attr-defined]
    ensure_signing_key(deps.secrets, deps.settings.link_signing_secret)
    if workflows is not None:
        register_text(deps, workflows)  # type: ignore[arg-type]
    return deps


def ask_for_approval(deps: Fakes, run_id: str, execution: str | None = None) -> OnApproval:
    """Run the run's next segment, which must park on an approval; its execution (``run_id``'s
    first unless named) waits on a task token while the approval is asked for."""
    parked = run_segment(RunSegment(run_id), deps)  # type: ignore[arg-type]
    assert parked.status == "waiting_approval" and parked.approval is not None, parked.status
    token = deps.executions.park(execution or run_id)
    requested = request_approval(
        RequestApproval(run_id, parked.approval, task_token=token),
        deps,  # type: ignore[arg-type]
    )
    return OnApproval(run_id, parked.approval, requested)


def parked_on_approval(deps: Fakes, workflow: str = "gated") -> OnApproval:
    """Launch a run of ``workflow`` and run it to its approval."""
    run, _ = launch_run(StartRun(workflow), deps)
    return ask_for_approval(deps, run.run_id)
