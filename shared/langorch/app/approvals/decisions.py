"""Approval use-cases: request one (email signed links), show its page, decide it once, expire it.

``request_approval`` (:mod:`langorch.app.approvals.requests`) is what the state machine's
``AwaitApproval`` task invokes with the task token; ``view_approval`` and ``decide_approval``
answer ``GET|HEAD`` and ``POST /approvals/{id}``; ``resume_after_timeout`` answers a run whose
approval task timed out and ``close_for_ended_run`` closes the approval of a cancelled run
(both in :mod:`langorch.app.approvals.driver`).

Each use-case reads the approval, asks the lifecycle table
(:mod:`langorch.domain.approvals.lifecycle`) what an event does in its state, and performs the
write and the audit line the table names. The page use-cases take plain commands
(:mod:`langorch.app.approvals.commands`: the approval id, the link's values, the form's values,
the visitor for the audit) and answer typed outcomes (:mod:`langorch.domain.approvals.outcomes`)
or raise the named refusals; the web edge's one table (:mod:`langorch.web.errors`) picks each
one's status code and words and ``web.pages`` renders: nothing here speaks HTTP.

A decision is recorded first, then delivered with ``SendTaskSuccess``, then marked delivered. A
crash between the write and the send would leave it recorded but lost, so every later visit that
finds such a decision delivers it again from the record, and a run whose task times out resumes
with it instead of ``timed_out``: the record and the run never disagree. A decision on a run
whose execution ended while it waited (stopped, failed, timed out) is kept, undelivered, and the
approver is told the run is not running; the run's redrive parks on the same approval and gets
that decision (:func:`~langorch.app.approvals.requests.request_approval`), with no second email.

The task token goes from the request into the approvals table and from there only into
``SendTaskSuccess``: never into an email, a URL, a page or a log line.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta
from enum import Enum

from langorch.app.approvals.channels import post_in_threads, show_decided, show_progress
from langorch.app.approvals.checks import (
    Form,
    Opened,
    audit_req,
    check_view,
    form_again,
    open_link,
    read_form,
    reason,
    refusal,
    view_token,
)
from langorch.app.approvals.commands import DecideApproval, PageCommand, ViewApproval
from langorch.app.approvals.driver import (
    apply_event,
    close_for_ended_run,
    expire_approval,
    perform,
    record,
    resume_after_timeout,
)
from langorch.app.approvals.keys import (
    MIN_KEY_BYTES,
    SigningKeys,
    ensure_signing_key,
    load_signing_keys,
    load_signing_keys_fresh,
)
from langorch.app.approvals.ports import ApprovalsStore, EmailSender, PagePorts, RequestPorts
from langorch.app.approvals.requests import (
    ApprovalRequested,
    RequestApproval,
    hand_over_decision,
    request_approval,
)
from langorch.app.approvals.votes import (
    cast_vote,
    delegate_vote,
    email_delegate,
    recount,
)
from langorch.domain.approvals.audit import Visitor
from langorch.domain.approvals.lifecycle import Event, State, TransitionRefusedError, state_of, step
from langorch.domain.approvals.outcomes import (
    AlreadyDecided,
    Decided,
    DecideOutcome,
    DecisionHeld,
    DecisionNotDeliveredError,
    FormAgain,
    Shown,
    ViewOutcome,
    Voted,
)
from langorch.domain.approvals.policy import Vote, VotesChangedError
from langorch.domain.approvals.record import (
    AlreadyDecidedError,
    Approval,
    ApprovalLinkError,
    ApprovalStatus,
    RunEndedError,
    TooLateError,
    decision_output,
    redelivery_due,
)
from langorch.domain.approvals.votes import (
    DelegatedAwayError,
    DelegationRefusedError,
    check_may_vote,
)
from langorch.domain.errors import NotFoundError, StorageError, TaskClosedError
from langorch.domain.runs import RunStatus, current_execution

__all__ = [
    "MIN_KEY_BYTES",
    "REDELIVERY_GRACE",
    "ApprovalRequested",
    "ApprovalsStore",
    "DecideApproval",
    "EmailSender",
    "RequestApproval",
    "SigningKeys",
    "ViewApproval",
    "Visitor",
    "close_for_ended_run",
    "decide_approval",
    "ensure_signing_key",
    "expire_approval",
    "load_signing_keys",
    "load_signing_keys_fresh",
    "request_approval",
    "resume_after_timeout",
    "view_approval",
]

logger = logging.getLogger(__name__)

MAX_RECOUNTS = 64
"""How often a completing vote counts again when other votes keep arriving before its
decision is written (each recount sees more votes; an approval has far fewer approvers)."""
DELEGATE = "delegate"
"""The form's ``decision`` value that hands the vote to ``delegate_to``."""
REDELIVERY_GRACE = timedelta(seconds=30)
"""How old an undelivered decision must be before a later visit delivers it again.

Longer than the approval callback's 29 s Lambda timeout (API Gateway's limit), so the request
that recorded the decision has ended, delivered or crashed. Racing it would not resume the run
twice (Step Functions refuses a second ``SendTaskSuccess`` on a token as ``TaskTimedOut``, our
TaskClosedError), but the slower of the two would then tell its approver "too late"."""

# --------------------------------------------------------------------------------------------
# The approval page: GET/HEAD show, POST decides
# --------------------------------------------------------------------------------------------


def view_approval(cmd: ViewApproval, ports: PagePorts) -> ViewOutcome:
    """A page view: verify the link, audit the view, show the page. Decides nothing.

    Returns:
        :class:`Shown` for a pending approval, :class:`AlreadyDecided` (by whom and when) for a
        decided one — delivering it again if it was lost (see :data:`REDELIVERY_GRACE`).

    Raises:
        ApprovalLinkError: the refusal to show (forged or expired link, not an approver, the
            run ended).
        ApprovalNotFoundError: a valid link to an approval that no longer exists.
    """
    opened = open_link(cmd, ports, refused_action="view")
    approval = opened.approval
    record(
        ports.approvals,
        approval,
        step(opened.state, Event.view),
        at=ports.clock(),
        actor=opened.approver,
        visitor=cmd.visitor,
    )
    if opened.state in (State.decided, State.delivered):
        _redeliver_if_lost(cmd, ports, approval, opened.approver)
        return AlreadyDecided.of(approval)
    if opened.state is not State.pending:
        raise refusal(approval.approval_id, opened.state)
    approver, claims, key = opened.form_key()
    if approval.policy is not None and approval.policy.counts_votes:
        # The page shows the votes so far ("1 of 3 approvals; waiting for …").
        approval = approval.model_copy(
            update={"votes": ports.approvals.votes(approval.approval_id)}
        )
    return Shown(approval, approver, view_token(ports, claims, key))


def decide_approval(cmd: DecideApproval, ports: RequestPorts) -> DecideOutcome:
    """A form sent from the page: check link, view token, approver and code; decide once; resume.

    The decision is one conditional write; only its winner calls ``SendTaskSuccess`` with
    ``{"decision", "approver", "comment", "edits"}`` read back from the record, then marks it
    delivered. A closed task (timed out) turns the approval ``timed_out``: "too late", nothing
    resumes — unless the run's execution ended while it waited: then the decision is kept for
    the run's redrive (:class:`DecisionHeld`). A visit to an approval decided earlier delivers
    that decision again if it never reached the run (see :data:`REDELIVERY_GRACE`).

    Returns:
        :class:`Decided`, :class:`DecisionHeld` (recorded; the run is not running),
        :class:`AlreadyDecided` (by whom and when) or :class:`FormAgain` (an edit that is not
        JSON, a wrong code).

    Raises:
        ApprovalLinkError: the refusal (forged or expired link, not an approver, no view token,
            codes locked, the run ended, too late).
        ApprovalNotFoundError: a valid link to an approval that no longer exists.
        DecisionNotDeliveredError: recorded but not delivered (reopened: press again).
    """
    opened = open_link(cmd, ports, refused_action="refused")
    approval = opened.approval
    if opened.state in (State.decided, State.delivered):
        audit_req(ports, cmd, approval, "refused", "already_decided", opened.approver)
        _redeliver_if_lost(cmd, ports, approval, opened.approver)
        return AlreadyDecided.of(approval)
    try:
        step(opened.state, Event.decide)
    except TransitionRefusedError as refused:
        audit_req(ports, cmd, approval, "refused", refused.reason, opened.approver)
        raise refusal(approval.approval_id, refused.state) from None
    if cmd.form.get("decision") == DELEGATE and approval.policy is not None:
        return _delegate(cmd, ports, opened)
    form = read_form(cmd, ports, opened)
    if isinstance(form, FormAgain):
        return form
    _check_run(cmd, ports, opened)
    if approval.policy is not None:
        _check_may_vote(cmd, ports, opened, form)
        if approval.policy.counts_votes:
            return _counted(cmd, ports, opened, form)
    return _record_and_deliver(cmd, ports, opened, form)


def _check_may_vote(cmd: DecideApproval, ports: PagePorts, opened: Opened, form: Form) -> None:
    """Separation of duties and delegated-away links: refused (audited) before any write."""
    approver = opened.form_key()[0]
    approval = opened.approval
    try:
        check_may_vote(
            approval, approver, "approved" if form.decision.value == "approved" else "rejected"
        )
        if approval.has_delegated(approver):
            raise DelegatedAwayError(f"approval {approval.approval_id}: {approver} delegated")
    except ApprovalLinkError as exc:
        audit_req(ports, cmd, approval, "refused", reason(exc), approver)
        raise


def _counted(cmd: DecideApproval, ports: RequestPorts, opened: Opened, form: Form) -> DecideOutcome:
    """A policy that counts votes: record this vote; decide once the votes complete it.

    Of concurrent votes that each complete the policy, exactly one decision is written (the
    decide-once write); the decision carries every vote accepted before it (its write needs
    the vote count it read: a vote arriving meanwhile makes it count again).
    """
    approver = opened.form_key()[0]
    try:
        tallied = cast_vote(
            ports.approvals,
            opened.approval,
            approver,
            form.decision,
            form.comment,
            now=ports.clock(),
            visitor=cmd.visitor,
        )
    except AlreadyDecidedError as exc:
        audit_req(ports, cmd, opened.approval, "refused", "already_decided", approver)
        return AlreadyDecided(exc)
    except ApprovalLinkError as exc:
        audit_req(ports, cmd, opened.approval, "refused", reason(exc), approver)
        raise
    for _ in range(MAX_RECOUNTS):
        outcome, deciding = tallied.progress.outcome, tallied.progress.deciding
        if outcome is None or deciding is None:
            if tallied.recorded:
                _tell_vote(ports, tallied.approval, approver, form, tallied.progress.summary)
            return Voted(tallied.approval, tallied.progress.summary, tallied.recorded)
        final = Form(ApprovalStatus(outcome), {}, deciding.comment or None)
        try:
            return _record_and_deliver(
                cmd, ports, opened, final, decider=deciding.approver, votes=tallied.votes
            )
        except VotesChangedError:
            tallied = recount(ports.approvals, opened.approval.approval_id)
    raise DecisionNotDeliveredError(
        f"approval {opened.approval.approval_id}: votes kept arriving; press again"
    )


def _tell_vote(
    ports: RequestPorts, approval: Approval, approver: str, form: Form, summary: str
) -> None:
    """A vote that did not decide yet: the chat messages show the progress, their threads
    who voted how."""
    show_progress(approval, summary, ports)
    said = f" ({form.comment})" if form.comment else ""
    post_in_threads(approval, f"{approver} {form.decision.value}{said}: {summary}.", ports)


def _delegate(cmd: DecideApproval, ports: RequestPorts, opened: Opened) -> DecideOutcome:
    """Hand this approver's vote to the person named on the page (who gets a link)."""
    again = check_view(cmd, ports, opened)
    if again is not None:
        return again
    _check_run(cmd, ports, opened)
    approver = opened.form_key()[0]
    to = cmd.form.get("delegate_to", "").strip()
    try:
        after = delegate_vote(
            ports.approvals, opened.approval, approver, to, now=ports.clock(), visitor=cmd.visitor
        )
    except AlreadyDecidedError as exc:
        return AlreadyDecided(exc)
    except DelegationRefusedError as exc:
        audit_req(ports, cmd, opened.approval, "refused", "delegation_refused", approver)
        return form_again(cmd, ports, opened, exc)
    email_delegate(after, approver, to, ports)
    tallied = recount(ports.approvals, after.approval_id)
    post_in_threads(
        tallied.approval,
        f"{approver} handed their vote to {to} ({tallied.progress.summary}).",
        ports,
    )
    return Voted(tallied.approval, tallied.progress.summary, False, delegated_to=to)


def _check_run(cmd: DecideApproval, ports: PagePorts, opened: Opened) -> None:
    """Refuse (and close the approval) when the run ended or no longer waits on it.

    Raises:
        RunEndedError: the run ended (the approval is cancelled).
        TooLateError: the run moved on (the approval timed out).
    """
    approval = opened.approval
    try:
        run = ports.runs.get_run(approval.run_id)
    except NotFoundError:
        run = None
    if run is None or run.is_terminal:
        apply_event(
            ports.approvals, approval, Event.run_ended, ports.clock(), opened.approver, cmd.visitor
        )
        raise RunEndedError("the run has ended")
    if run.pending is None or run.pending.interrupt_id != approval.interrupt_id:
        apply_event(
            ports.approvals,
            approval,
            Event.run_moved_on,
            ports.clock(),
            opened.approver,
            cmd.visitor,
        )
        raise TooLateError("the run no longer waits on this approval")


def _record_and_deliver(
    cmd: DecideApproval,
    ports: RequestPorts,
    opened: Opened,
    form: Form,
    *,
    decider: str | None = None,
    votes: Sequence[Vote] = (),
) -> DecideOutcome:
    """Record the decision (one conditional write), then hand it to the run.

    ``decider`` and ``votes``: a counted decision is recorded as made by the vote that
    completed the policy, with every vote.

    Raises:
        VotesChangedError: a vote arrived after ``votes`` were read (count again).
    """
    approval = opened.approval
    approver = decider or opened.form_key()[0]
    now = ports.clock()
    try:
        decided = ports.approvals.decide(
            approval.approval_id, form.decision, approver, form.comment, form.edits, now, votes
        )
    except AlreadyDecidedError as exc:
        audit_req(ports, cmd, approval, "refused", "already_decided", approver)
        return AlreadyDecided(exc)
    except ApprovalLinkError as exc:
        audit_req(ports, cmd, approval, "refused", reason(exc), approver)
        raise
    try:
        ports.executions.send_success(
            ports.approvals.task_token(approval.approval_id), decision_output(decided)
        )
    except TaskClosedError:
        return _task_closed(cmd, ports, decided, approver)
    except StorageError:
        # Recorded but not delivered: undo it so pressing again works, instead of leaving a
        # decision that never reaches the run.
        apply_event(
            ports.approvals, decided, Event.delivery_failed, ports.clock(), approver, cmd.visitor
        )
        logger.warning(
            "approval decision could not be delivered; reopened",
            extra={"approval_id": approval.approval_id, "run_id": approval.run_id},
        )
        raise DecisionNotDeliveredError(
            f"approval {approval.approval_id}: the decision could not be delivered; reopened"
        ) from None
    apply_event(
        ports.approvals, decided, Event.deliver, ports.clock(), approver, cmd.visitor, tolerant=True
    )
    if approval.policy is not None:
        # The decision is reached: no reminder or escalation may follow it.
        ports.approval_timers.cancel(approval.approval_id)
    # Whichever channel decided, the chat messages posted for it now say who and when.
    show_decided(decided, ports)
    logger.info(
        "approval decided",
        extra={
            "approval_id": approval.approval_id,
            "run_id": approval.run_id,
            "workflow_id": approval.workflow_id,
            "step_id": approval.step_id,
            "decision": decided.status.value,
            "wait_seconds": int((now - approval.created_at).total_seconds()),
        },
    )
    return Decided(decided)


def _task_closed(
    cmd: DecideApproval, ports: RequestPorts, decided: Approval, approver: str
) -> Decided:
    """The task stopped waiting before the decision reached it: "too late", unless

    - the run's timeout took this recorded decision meanwhile (:func:`resume_after_timeout`);
    - the run still waits on this approval under an execution that goes on or has not parked
      yet (recovery after a restart, a redrive): that park delivers the recorded decision
      (:func:`~langorch.app.approvals.requests.request_approval`);
    - the run is stranded (its execution ended while it waited on this approval): the decision
      is kept for the park after a redrive, and the approver is told so (:class:`DecisionHeld`).
    """
    where = _run_now(ports, decided)
    if where is _RunNow.waiting:
        logger.info(
            "approval decided while its run parks again; its new task gets the decision",
            extra={"approval_id": decided.approval_id, "run_id": decided.run_id},
        )
        return Decided(decided)
    if where is _RunNow.stranded:
        _hold(cmd.visitor, ports, decided, approver)
        if decided.policy is not None:
            # The decision is reached: no reminder or escalation may follow it.
            ports.approval_timers.cancel(decided.approval_id)
        return DecisionHeld(decided)
    store, now = ports.approvals, ports.clock()
    closing = step(state_of(decided, now=now), Event.task_closed)
    if perform(store, decided, closing, now) is None:
        current = store.get(decided.approval_id)
        if current is not None and current.delivered_at is not None:
            record(store, current, step(State.decided, Event.deliver), at=now, actor=approver)
            return Decided(current)
    record(store, decided, closing, at=now, actor=approver, visitor=cmd.visitor)
    logger.info(
        "approval decided after its task closed",
        extra={"approval_id": decided.approval_id, "run_id": decided.run_id},
    )
    raise TooLateError("the approval's task is closed")


class _RunNow(Enum):
    """Where an approval's run is, for a recorded decision its task no longer takes."""

    waiting = "waiting"
    """Waits on the approval with an execution that goes on, or is not there yet (the local
    stack starts it again): its next park, or its timeout's segment, takes the decision."""
    stranded = "stranded"
    """Only a redrive can hand the run the decision: it waits on the approval but its execution
    ended (stopped, failed, timed out), or ``runs reconcile`` ended it ``failed`` meanwhile."""
    elsewhere = "elsewhere"
    """Gone, cancelled, succeeded, past this approval, or unknown (Step Functions failed)."""


def _run_now(ports: PagePorts, approval: Approval) -> _RunNow:
    try:
        run = ports.runs.get_run(approval.run_id)
    except NotFoundError:
        return _RunNow.elsewhere
    if run.status is RunStatus.failed:
        # Its execution has ended, and only a redrive goes on from here; a redrive that does
        # not park on this approval leaves the kept decision unused, which costs nothing.
        return _RunNow.stranded
    waits_on = None if run.pending is None else run.pending.interrupt_id
    if run.is_terminal or waits_on != approval.interrupt_id:
        return _RunNow.elsewhere
    try:
        status = ports.executions.describe(current_execution(run))["status"]
    except NotFoundError:
        return _RunNow.waiting
    except StorageError:
        return _RunNow.elsewhere  # unknown: "too late", as before, is the safe answer
    return _RunNow.waiting if status == "RUNNING" else _RunNow.stranded


def _hold(visitor: Visitor | None, ports: PagePorts, approval: Approval, actor: str | None) -> None:
    """Keep a recorded decision for the run's park after a redrive (audited)."""
    apply_event(ports.approvals, approval, Event.hold, ports.clock(), actor, visitor)
    logger.warning(
        "approval decided while its run is not running; kept for the run's redrive",
        extra={
            "approval_id": approval.approval_id,
            "run_id": approval.run_id,
            "decision": approval.status.value,
        },
    )


def _redeliver_if_lost(
    cmd: PageCommand, ports: PagePorts, approval: Approval, actor: str | None
) -> None:
    """Deliver a decision again that was recorded but never reached the run.

    That happens when the request that recorded it died between the write and
    ``SendTaskSuccess``. Any valid link holder's visit (even a GET: this decides nothing, it
    delivers what a POST decided) re-sends the recorded decision, never the visitor's. A closed
    task means it was delivered after all, or timed out, and then the run's timeout resumes
    with this same decision (:func:`resume_after_timeout`): either way nothing is left to send.
    A run whose execution ended while it waited gets nothing now: the decision is kept for the
    park after its redrive. A storage failure leaves it for the next visit.
    """
    now = ports.clock()
    if not redelivery_due(approval, now=now, grace=REDELIVERY_GRACE):
        return
    if _run_now(ports, approval) is _RunNow.stranded:
        # Its token died with the execution: sending to it would only mark the decision
        # delivered, and the run's redrive would then ask again. Keep it for that park.
        _hold(cmd.visitor, ports, approval, actor)
        return
    ids = {"approval_id": approval.approval_id, "run_id": approval.run_id}
    try:
        token = ports.approvals.task_token(approval.approval_id)
        event = hand_over_decision(approval, token, ports, actor, cmd.visitor)
    except (StorageError, NotFoundError):
        apply_event(ports.approvals, approval, Event.redeliver_failed, now, actor, cmd.visitor)
        logger.warning("recorded approval decision could not be redelivered", extra=ids)
        return
    logger.warning(
        "lost approval decision redelivered",
        extra={**ids, "decision": approval.status.value, "outcome": event.value},
    )
