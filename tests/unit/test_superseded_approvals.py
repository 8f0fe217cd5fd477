"""Superseded approvals (issue 29, item 4): a run redriven onto a new workflow version asks its
pending approval's question again; the old request is closed as superseded, its link's page
says so and decides nothing. On fakes: the real segment, redrive, request and page use-cases.
"""

from __future__ import annotations

from langorch.app.approvals.driver import current_approval_id, expire_approval
from langorch.app.approvals.requests import RequestApproval, request_approval
from langorch.app.recovery.redrive import redrive
from langorch.domain.approvals.record import ApprovalStatus, approval_id_for
from tests.fakes import Fakes
from tests.integration.conftest import register_text
from tests.support.parking import (
    OnApproval,
    ask_for_approval,
    parked_on_approval,
    with_approvals,
)
from tests.unit.approvals_support import call, event
from tests.workflows import pay_after_approval

BOSS = "boss@example.com"
GATED = pay_after_approval(BOSS, timeout_seconds=3600)
# Version 2 changes only the step after the approval: the question itself is the same.
GATED_V2 = GATED.replace('paid: "amount"', 'paid: "amount + 0"')


def _redriven_onto_version_2() -> tuple[Fakes, str, str]:
    """A run parked on its approval (link emailed), its execution lost, then redriven onto
    version 2 and parked again: the deps, the old approval's id and its link."""
    deps = with_approvals(Fakes(public_base_url="https://approve.example.com"), GATED)
    parked = parked_on_approval(deps)
    [mail] = deps.email.sent
    deps.executions.end(parked.run_id, "FAILED", error="States.Runtime")
    register_text(deps, GATED_V2)  # type: ignore[arg-type]
    done = redrive(deps, parked.run_id, version="latest", reason="fixed the payout")
    assert done.to_version == 2
    ask_for_approval(deps, parked.run_id, done.execution_name)
    return deps, parked.requested.approval_id, mail.link


def test_a_redrive_onto_a_new_version_supersedes_the_pending_approval_and_asks_again() -> None:
    # Given a run parked on an approval, redriven onto a new version
    deps, old_id, _ = _redriven_onto_version_2()
    # Then the old approval is closed as superseded
    old = deps.approvals.get(old_id)
    assert old is not None and old.status is ApprovalStatus.superseded
    assert old.asked is not None and old.asked.workflow_version == 1
    # ... and a new one, asked on version 2, is pending and was emailed
    [new] = [a for a in deps.approvals.list() if a.approval_id != old_id]
    assert new.status is ApprovalStatus.pending
    assert new.asked is not None and new.asked.workflow_version == 2
    assert [mail.to for mail in deps.email.sent] == [BOSS, BOSS]


def test_the_superseded_link_says_so_and_its_post_decides_nothing() -> None:
    from functions.approval_callback import handler

    # Given a run redriven onto a new version after its approval's link went out
    deps, old_id, old_link = _redriven_onto_version_2()
    previous = handler.container.use(deps)
    try:
        # When the approver opens the old link, and a form is posted to it anyway
        page = call(handler, event(old_link))
        form = {"nonce": "any", "decision": "approved"}
        answer = call(handler, event(old_link, method="POST", form=form))
    finally:
        handler.container.use(previous)
    # Then the page says the request was superseded by a newer one
    assert page["statusCode"] == 410 and "superseded by a newer one" in page["body"]
    assert answer["statusCode"] == 410 and "superseded by a newer one" in answer["body"]
    # ... and nothing was decided: the old one stays superseded, the new one pending
    statuses = {a.approval_id: a.status for a in deps.approvals.list()}
    assert statuses.pop(old_id) is ApprovalStatus.superseded
    assert list(statuses.values()) == [ApprovalStatus.pending]


# --- asked again at the same pause point, showing something else ------------------------------


def _asked_again_showing_otherwise() -> tuple[Fakes, OnApproval, str]:
    """A run parked on its approval (link emailed); then the same pause point asks again with
    other shown inputs (its state changed before the decision): the deps, the first
    request and the first link."""
    deps = with_approvals(Fakes(public_base_url="https://approve.example.com"), GATED)
    parked = parked_on_approval(deps)
    [mail] = deps.email.sent
    changed = {**parked.approval, "context": {**parked.approval.get("context", {}), "x": 2}}
    token = deps.executions.park(parked.run_id)
    request_approval(RequestApproval(parked.run_id, changed, task_token=token), deps)  # type: ignore[arg-type]
    return deps, parked, mail.link


def test_a_question_asked_again_showing_other_inputs_supersedes_the_open_one() -> None:
    # Given a pending approval, asked again at the same pause point with other shown inputs
    deps, parked, _ = _asked_again_showing_otherwise()
    run_id, interrupt_id = parked.run_id, parked.approval["interrupt_id"]
    # Then the first is superseded and the next generation is pending and emailed anew
    old = deps.approvals.get(parked.requested.approval_id)
    assert old is not None and old.status is ApprovalStatus.superseded
    new = deps.approvals.get(approval_id_for(run_id, interrupt_id, 2))
    assert new is not None and new.status is ApprovalStatus.pending
    assert new.context.get("x") == 2
    assert [mail.to for mail in deps.email.sent] == [BOSS, BOSS]
    # And the lookup by pause point finds the newest
    assert current_approval_id(deps.approvals, run_id, interrupt_id) == new.approval_id


def test_the_first_link_says_superseded_after_the_inputs_changed() -> None:
    from functions.approval_callback import handler

    deps, _, old_link = _asked_again_showing_otherwise()
    previous = handler.container.use(deps)
    try:
        page = call(handler, event(old_link))
    finally:
        handler.container.use(previous)
    assert page["statusCode"] == 410 and "superseded by a newer one" in page["body"]


def test_a_retried_request_showing_the_same_inputs_asks_nothing_new() -> None:
    # Given a run parked on its approval
    deps = with_approvals(Fakes(public_base_url="https://approve.example.com"), GATED)
    parked = parked_on_approval(deps)
    # When the same request is delivered again (a retried task)
    token = deps.executions.park(parked.run_id)
    again = request_approval(
        RequestApproval(parked.run_id, parked.approval, task_token=token),
        deps,  # type: ignore[arg-type]
    )
    # Then it is the same approval, still pending, not emailed twice
    assert again.approval_id == parked.requested.approval_id and not again.created
    assert [a.status for a in deps.approvals.list()] == [ApprovalStatus.pending]
    assert len(deps.email.sent) == 1


def test_the_run_ending_closes_the_newest_question_at_its_pause_point() -> None:
    # Given a question asked again after its inputs changed
    deps, parked, _ = _asked_again_showing_otherwise()
    run_id, interrupt_id = parked.run_id, parked.approval["interrupt_id"]
    # When the approval at that pause point times out (looked up by run and pause point)
    assert expire_approval(run_id, interrupt_id, approvals=deps.approvals, clock=deps.clock)
    # Then it is the newest that closed
    newest = deps.approvals.get(approval_id_for(run_id, interrupt_id, 2))
    assert newest is not None and newest.status is ApprovalStatus.timed_out


# --- a fork ------------------------------------------------------------------------------------


def test_a_fork_leaves_the_original_runs_pending_approval_open() -> None:
    from langorch.app.recovery.forks import fork

    # Given a run parked on its approval
    deps = with_approvals(Fakes(public_base_url="https://approve.example.com"), GATED)
    parked = parked_on_approval(deps)
    # When it is forked before its approval (a new run; the original goes on waiting)
    forked = fork(deps, parked.run_id, at_step="gate", edits={"note": "try"})
    # Then the original's question still stands: a fork neither ends nor replaces the run
    original = deps.approvals.get(parked.requested.approval_id)
    assert original is not None and original.status is ApprovalStatus.pending
    assert forked.run_id != parked.run_id
