"""The approval use-cases and the callback handler's mapping, on fakes (no AWS).

Every request goes through the real ``approval_callback`` handler (status codes, pages, HEAD)
and the real use-cases; the approvals store, the run's execution, the runs, the secrets and the
email are the in-memory fakes that pass the same contract suites as the adapters. The moto
wiring of each path is in ``tests/integration/test_approvals.py``.
"""

from __future__ import annotations

import re
import threading
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import pytest

from langorch.app.approvals.decisions import (
    REDELIVERY_GRACE,
    RequestApproval,
    close_for_ended_run,
    decide_approval,
    expire_approval,
    load_signing_keys,
    request_approval,
    resume_after_timeout,
    view_approval,
)
from langorch.app.approvals.requests import ApprovalNotPendingError, reissue_approval
from langorch.domain.approvals.outcomes import (
    AlreadyDecided,
    Decided,
    DecisionNotDeliveredError,
    Shown,
)
from langorch.domain.approvals.record import (
    MAX_CODE_ATTEMPTS,
    ApprovalStatus,
    LinkExpiredError,
    approval_id_for,
    link_url,
    sign_link,
)
from langorch.domain.runs import RunStatus, transition
from tests.unit.approvals_support import (
    ALICE,
    BASE_URL,
    BOB,
    FakeStack,
    Parked,
    call,
    decide_command,
    event,
    nonce,
    open_and_decide,
    read,
    submit,
    tampered,
    view_command,
)


def _record_then_crash(stack: FakeStack, parked: Parked) -> None:
    """Alice's approval is written, then the process dies before SendTaskSuccess."""
    stack.container.approvals.decide(
        parked.approval_id,
        ApprovalStatus.approved,
        ALICE,
        RECORDED["comment"],
        RECORDED["edits"],
        stack.clock(),
    )


RECORDED = {"decision": "approved", "approver": ALICE, "comment": "Looks good", "edits": {"a": 1}}


# --------------------------------------------------------------------------------------------
# Requesting
# --------------------------------------------------------------------------------------------


def test_each_approver_gets_their_own_link_from_the_public_url(stack: FakeStack) -> None:
    # Given a run parked on an approval for alice and bob
    parked = stack.park()
    # Then each got an email with a link built from the public URL, and the approval is pending
    assert set(parked.links) == {ALICE, BOB}
    assert parked.links[ALICE] != parked.links[BOB]
    assert all(link.startswith(f"{BASE_URL}/approvals/apr-") for link in parked.links.values())
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.status is ApprovalStatus.pending
    assert approval.workflow_id == "invoices"
    assert stack.audit(parked) == [
        ("requested", "pending", None),
        ("emailed", "sent", ALICE),
        ("emailed", "sent", BOB),
    ]


def test_a_retried_request_stores_and_emails_nothing_twice(stack: FakeStack) -> None:
    # Given a parked approval whose request is delivered again (at-least-once)
    parked = stack.park()
    approval = stack.approval(parked)
    again_request = {**approval.model_dump(mode="json"), "interrupt_id": approval.interrupt_id}
    mails = len(stack.container.email.sent)
    # When it is requested again
    again = request_approval(
        RequestApproval(run_id=approval.run_id, approval=again_request, task_token=parked.token),
        stack.container,
    )
    # Then nothing new was created or emailed
    assert (again.approval_id, again.created, again.emailed) == (parked.approval_id, False, [])
    assert len(stack.container.email.sent) == mails


def test_a_request_for_a_closed_approval_emails_nobody(stack: FakeStack) -> None:
    parked = stack.park()
    approval = stack.approval(parked)
    assert close_for_ended_run(
        approval.run_id,
        approval.interrupt_id,
        approvals=stack.container.approvals,
        clock=stack.clock,
    )
    again = request_approval(
        RequestApproval(
            run_id=approval.run_id,
            approval={**approval.model_dump(mode="json")},
            task_token="token-2",
        ),
        stack.container,
    )
    assert (again.created, again.emailed, again.status) == (False, [], ApprovalStatus.cancelled)


def test_a_request_for_a_run_that_is_gone_still_parks_without_a_workflow(
    stack: FakeStack,
) -> None:
    token = stack.steps.park("run-gone")
    result = request_approval(
        RequestApproval(
            run_id="run-gone",
            approval={"interrupt_id": "i", "step_id": "s", "approvers": [ALICE]},
            task_token=token,
        ),
        stack.container,
    )
    approval = stack.container.approvals.get(result.approval_id)
    assert approval is not None and approval.workflow_id is None and result.emailed == [ALICE]


# --------------------------------------------------------------------------------------------
# Viewing decides nothing
# --------------------------------------------------------------------------------------------


def test_get_and_head_repeated_decide_nothing(stack: FakeStack, callback: Any) -> None:
    parked = stack.park()
    link = parked.links[ALICE]
    # When its link is opened and probed many times, as mail scanners do
    pages = [call(callback, event(link, method=m)) for m in ("GET", "HEAD", "GET", "HEAD")]
    # Then every answer is the inert page, and nothing was decided or resumed
    assert [p["statusCode"] for p in pages] == [200, 200, 200, 200]
    assert pages[1]["body"] == ""
    assert '<form method="post">' in pages[0]["body"]
    assert "<script" not in pages[0]["body"].lower()
    assert stack.steps.sent == [] and stack.status(parked) == "RUNNING"
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.status is ApprovalStatus.pending


def test_the_page_shows_context_escaped_with_security_headers(
    stack: FakeStack, callback: Any
) -> None:
    parked = stack.park(title="<img src=x onerror=alert(1)>")
    page = call(callback, event(parked.links[ALICE]))
    body = page["body"]
    assert "ACME &amp; Sons" in body and "&lt;b&gt;before&lt;/b&gt;" in body
    assert "<img" not in body
    assert "sig=" not in body and urlsplit(parked.links[ALICE]).query not in body
    headers = {k.lower(): v for k, v in page["headers"].items()}
    assert headers["content-security-policy"] == (
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'"
    )
    assert headers["x-frame-options"] == "DENY"
    assert headers["referrer-policy"] == "no-referrer"
    assert headers["cache-control"] == "no-store"
    assert headers["content-type"].startswith("text/html")


HOSTILE = '<script>alert(1)</script> & "quotes"'


def test_round_two_shows_the_last_feedback_and_what_changed_escaped(
    stack: FakeStack, callback: Any
) -> None:
    # Given round 2 of a review loop: bob rejected round 1 with hostile text, and the amount
    # (not the vendor) changed since
    previous = {"iteration": 1, "approver": BOB, "comment": HOSTILE, "changed": ["amount"]}
    parked = stack.park(previous=previous)

    # When alice opens her link
    body = call(callback, event(parked.links[ALICE]))["body"]

    # Then the page says who rejected round 1 and what they asked for, escaped, and what changed
    # (before, round 2 showed the new values only)
    assert "Since round 1" in body
    assert f"{BOB} rejected round 1 and" in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &#34;quotes&#34;" in body
    assert "<script>" not in body
    assert "Changed since: amount." in body
    assert 'Amount <span class="note">(changed)</span>' in body
    assert "Vendor <span" not in body


def test_round_two_email_carries_the_last_feedback_and_what_changed(stack: FakeStack) -> None:
    # Given round 2 of a review loop whose first round was rejected with hostile text
    previous = {"iteration": 1, "approver": BOB, "comment": HOSTILE, "changed": []}
    before = len(stack.container.email.sent)
    parked = stack.park(previous=previous)

    # Then each email says so: plain in the text body, escaped in the HTML body
    mail = stack.container.email.sent[before]
    assert f"Round 2: {BOB} rejected round 1 and asked:\n{HOSTILE}" in mail.text
    assert "None of the details shown changed." in mail.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in mail.html
    assert "<script>" not in mail.html
    # And the stored approval keeps it for the page
    stored = stack.container.approvals.get(parked.approval_id)
    assert stored is not None and stored.previous is not None
    assert stored.previous.comment == HOSTILE


def test_round_one_shows_no_previous_round(stack: FakeStack, callback: Any) -> None:
    parked = stack.park()
    body = call(callback, event(parked.links[ALICE]))["body"]
    assert "Since round" not in body and "(changed)" not in body
    assert "rejected round" not in stack.container.email.sent[-1].text


def test_view_answers_shown_with_the_form_nonce(stack: FakeStack) -> None:
    parked = stack.park()
    outcome = view_approval(view_command(parked.links[ALICE]), stack.container)
    assert isinstance(outcome, Shown)
    assert (outcome.approver, outcome.approval.approval_id) == (ALICE, parked.approval_id)
    assert outcome.nonce and outcome.nonce not in parked.links[ALICE]


def test_a_scanner_that_submits_the_form_at_once_decides_nothing(
    stack: FakeStack, callback: Any
) -> None:
    # Failed before: a scanner that parsed the page and submitted its form approved (the
    # nonce was in the page). Now the form decides only a dwell after its page view.
    parked = stack.park()
    page = call(callback, event(parked.links[ALICE]))
    form = {
        "nonce": nonce(page["body"]),
        "decision": "approved",
        "comment": "Checked <b>twice</b>",
        "edit.amount": "1100",
    }
    fast = call(callback, event(parked.links[ALICE], method="POST", form=form))
    assert fast["statusCode"] == 409 and "press your button again" in fast["body"]
    assert stack.steps.sent == []
    assert stack.audit(parked)[-1] == ("refused", "suspected_automated_submit", ALICE)
    # What the person typed is kept, with a fresh token
    assert "Checked &lt;b&gt;twice&lt;/b&gt;</textarea>" in fast["body"]
    assert 'name="edit.amount" type="number"\nstep="any" value="1100"' in fast["body"]
    fresh = nonce(fast["body"])
    assert fresh != form["nonce"]
    # The same token later still is good for one submit only after the dwell: pressing the
    # re-shown form after reading it decides
    form["nonce"] = read(callback, fast["body"])
    answer = call(callback, event(parked.links[ALICE], method="POST", form=form))
    assert answer["statusCode"] == 200 and "You approved" in answer["body"]
    assert stack.output(parked)["edits"] == {"amount": 1100}


def test_a_view_token_decides_once_and_only_for_its_approver(
    stack: FakeStack, callback: Any
) -> None:
    parked = stack.park(require_code=True)
    bobs = read(callback, call(callback, event(parked.links[BOB]))["body"])
    form = {"nonce": bobs, "decision": "approved", "code": parked.codes[ALICE]}
    stolen = call(callback, event(parked.links[ALICE], method="POST", form=form))
    assert stolen["statusCode"] == 400 and '<form method="post">' not in stolen["body"]
    form = {"nonce": bobs, "decision": "approved", "code": "000000"}
    wrong = call(callback, event(parked.links[BOB], method="POST", form=form))
    assert wrong["statusCode"] == 403
    replayed = call(callback, event(parked.links[BOB], method="POST", form=form))
    assert replayed["statusCode"] == 409 and "already sent once" in replayed["body"]
    assert stack.audit(parked)[-1] == ("refused", "view_token_reused", BOB)
    assert stack.steps.sent == []


# --------------------------------------------------------------------------------------------
# Deciding
# --------------------------------------------------------------------------------------------


def test_post_approve_resumes_the_run_with_the_decision(stack: FakeStack, callback: Any) -> None:
    parked = stack.park()
    _, answer = open_and_decide(
        callback,
        parked.links[ALICE],
        "approved",
        comment="Looks good",
        **{"edit.amount": "1100", "edit.note": "ok"},
    )
    assert answer["statusCode"] == 200 and "You approved" in answer["body"]
    assert stack.output(parked) == {
        "decision": "approved",
        "approver": ALICE,
        "comment": "Looks good",
        "edits": {"amount": 1100},
    }
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.delivered_at is not None
    assert (approval.status, approval.decided_by) == (ApprovalStatus.approved, ALICE)
    assert stack.container.approvals.list(pending_only=True) == []


def test_a_rejection_carries_the_comment(stack: FakeStack, callback: Any) -> None:
    parked = stack.park()
    _, answer = open_and_decide(callback, parked.links[BOB], "rejected", comment="Too much")
    assert "You rejected" in answer["body"]
    output = stack.output(parked)
    assert (output["decision"], output["approver"], output["comment"]) == (
        "rejected",
        BOB,
        "Too much",
    )


def test_a_second_click_says_already_approved_and_resumes_nothing(
    stack: FakeStack, callback: Any
) -> None:
    parked = stack.park()
    open_and_decide(callback, parked.links[ALICE], "approved")
    again = call(callback, event(parked.links[ALICE]))
    bob_page = call(callback, event(parked.links[BOB]))
    bob_post = call(
        callback,
        event(parked.links[BOB], method="POST", form={"nonce": "whatever", "decision": "rejected"}),
    )
    for page in (again, bob_page, bob_post):
        assert page["statusCode"] == 200
        assert re.search(
            r"already approved by alice@example\.com at \d{4}-\d\d-\d\d \d\d:\d\d UTC",
            page["body"],
        )
    assert len(stack.steps.sent) == 1


def test_concurrent_approve_and_reject_have_one_winner(stack: FakeStack) -> None:
    parked = stack.park()
    forms: dict[str, dict[str, str]] = {}
    for who in (ALICE, BOB):
        shown = view_approval(view_command(parked.links[who]), stack.container)
        assert isinstance(shown, Shown)
        forms[who] = {"nonce": shown.nonce}
    stack.read_pages()
    forms[ALICE]["decision"] = "approved"
    forms[BOB]["decision"] = "rejected"
    results: dict[str, Any] = {}
    start = threading.Barrier(2)

    def press(who: str) -> None:
        start.wait()
        results[who] = decide_approval(
            decide_command(parked.links[who], forms[who]), stack.container
        )

    threads = [threading.Thread(target=press, args=(who,)) for who in (ALICE, BOB)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(stack.steps.sent) == 1
    winner = stack.steps.sent[0]["approver"]
    loser = BOB if winner == ALICE else ALICE
    assert isinstance(results[winner], Decided)
    lost = results[loser]
    assert isinstance(lost, AlreadyDecided) and lost.notice.decided_by == winner
    assert stack.output(parked)["approver"] == winner


# --------------------------------------------------------------------------------------------
# Refusals: nothing resumes
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [("sig", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), ("kid", "k9"), ("exp", "9999999999")],
)
def test_a_tampered_link_is_refused_and_resumes_nothing(
    stack: FakeStack, callback: Any, name: str, value: str
) -> None:
    parked = stack.park()
    link = tampered(parked.links[ALICE], name, value)
    page = call(callback, event(link))
    post = call(callback, event(link, method="POST", form={"decision": "approved"}))
    for answer in (page, post):
        assert answer["statusCode"] == 403
        assert "This link is not valid" in answer["body"]
    assert stack.steps.sent == [] and stack.status(parked) == "RUNNING"
    assert ("view", "forged_link", None) in stack.audit(parked)


def test_a_forged_link_to_an_unknown_approval_writes_no_audit(
    stack: FakeStack, callback: Any
) -> None:
    parked = stack.park()
    moved = parked.links[ALICE].replace(parked.approval_id, "apr-unknown")
    assert call(callback, event(moved))["statusCode"] == 403
    assert stack.container.approvals.audit("apr-unknown") == []


def test_a_link_without_a_signature_is_refused(stack: FakeStack, callback: Any) -> None:
    parked = stack.park()
    bare = parked.links[ALICE].split("?")[0]
    assert call(callback, event(bare))["statusCode"] == 403
    assert stack.steps.sent == []


def test_one_approvers_link_cannot_be_moved_to_another_approval(
    stack: FakeStack, callback: Any
) -> None:
    first, second = stack.park(), stack.park()
    query = urlsplit(first.links[ALICE]).query
    moved = f"{BASE_URL}/approvals/{second.approval_id}?{query}"
    assert call(callback, event(moved))["statusCode"] == 403


def test_a_valid_link_to_an_approval_that_is_gone_is_not_found(
    stack: FakeStack, callback: Any
) -> None:
    keys = load_signing_keys(stack.container.secrets, stack.container.settings.link_signing_secret)
    expires = stack.clock() + timedelta(hours=1)
    params = sign_link("apr-gone", ALICE, expires, keys.current, keys.current_key)
    page = call(callback, event(link_url(BASE_URL, "apr-gone", params)))
    assert page["statusCode"] == 404 and "Approval not found" in page["body"]


def test_an_expired_link_shows_the_expired_page(stack: FakeStack, callback: Any) -> None:
    parked = stack.park(timeout=300)
    page = call(callback, event(parked.links[ALICE]))
    stack.clock.advance(301)
    form = {"nonce": read(callback, page["body"]), "decision": "approved"}
    answer = call(callback, event(parked.links[ALICE], method="POST", form=form))
    later = call(callback, event(parked.links[BOB]))
    for refused in (answer, later):
        assert refused["statusCode"] == 410
        assert "This approval has expired" in refused["body"]
    assert stack.steps.sent == [] and stack.status(parked) == "RUNNING"
    assert stack.audit(parked)[-2:] == [
        ("refused", "link_expired", ALICE),
        ("view", "link_expired", BOB),
    ]


def test_a_click_after_the_task_timed_out_is_taken_by_the_timeouts_segment(
    stack: FakeStack, callback: Any
) -> None:
    # Given an approval whose task stopped waiting (its timeout), the execution heading for
    # the timeout's segment
    parked = stack.park()
    page = call(callback, event(parked.links[ALICE]))
    stack.time_out(parked)
    # When alice approves before that segment ran
    form = {"nonce": read(callback, page["body"]), "decision": "approved"}
    answer = call(callback, event(parked.links[ALICE], method="POST", form=form))
    # Then her decision is recorded, not "too late", and the closed task got nothing
    assert answer["statusCode"] == 200 and "You approved" in answer["body"]
    assert stack.steps.sent == []
    # ... and the timeout's segment resumes the run with it, not with timed_out
    resumed = resume_after_timeout(parked.run_id, "int-1", **_ports(stack))
    assert (resumed["decision"], resumed["approver"]) == ("approved", ALICE)


def test_a_click_while_a_restarted_run_parks_again_is_delivered_to_its_new_task(
    stack: FakeStack, callback: Any
) -> None:
    # Given a parked run whose page alice opened, and the local stack killed: its execution
    # and task are gone until the restart starts the run again
    parked = stack.park()
    page = call(callback, event(parked.links[ALICE]))
    stack.read_pages()
    stack.steps.lose_all()
    # When alice approves through the link emailed before the crash
    form = {"nonce": read(callback, page["body"]), "decision": "approved"}
    answer = call(callback, event(parked.links[ALICE], method="POST", form=form))
    # Then her decision is recorded, not "too late", and nothing resumed yet
    assert answer["statusCode"] == 200 and "You approved" in answer["body"], answer["body"]
    assert stack.steps.sent == []
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.status is ApprovalStatus.approved
    assert approval.delivered_at is None
    # And when the restarted run parks on the approval again, its new task gets her decision
    # at once, and nobody is emailed twice
    emails = len(stack.container.email.sent)
    again = stack.park_again(parked)
    assert again.emailed == [] and len(stack.container.email.sent) == emails
    assert [(o["decision"], o["approver"]) for o in stack.steps.sent] == [("approved", ALICE)]
    assert stack.status(parked) == "SUCCEEDED"
    delivered = stack.container.approvals.get(parked.approval_id)
    assert delivered is not None and delivered.delivered_at is not None
    # And parking again once more (a retried request) delivers nothing twice
    stack.park_again(parked)
    assert len(stack.steps.sent) == 1


def test_a_decision_whose_task_the_timeout_took_stands(stack: FakeStack) -> None:
    # Given alice's POST got past its checks and recorded, and meanwhile the task timed out
    # and the run's timeout took the recorded decision (it is marked delivered)
    parked = stack.park()
    shown = view_approval(view_command(parked.links[ALICE]), stack.container)
    assert isinstance(shown, Shown)
    stack.read_pages()
    stack.time_out(parked)
    store = stack.container.approvals
    original_decide = store.decide

    def decide_then_timeout_takes_it(*args: Any) -> Any:
        decided = original_decide(*args)
        store.mark_delivered(parked.approval_id, stack.clock())
        # ... and resumed the run past the approval
        runs = stack.container.runs
        runs.save_run(transition(runs.get_run(parked.run_id), RunStatus.running, now=stack.clock()))
        return decided

    store.decide = decide_then_timeout_takes_it  # type: ignore[method-assign]
    # When her SendTaskSuccess finds the task closed
    outcome = decide_approval(
        decide_command(parked.links[ALICE], {"nonce": shown.nonce, "decision": "approved"}),
        stack.container,
    )
    # Then her decision stands (the run got it), not "too late"
    assert isinstance(outcome, Decided) and outcome.approval.decided_by == ALICE
    approval = store.get(parked.approval_id)
    assert approval is not None and approval.status is ApprovalStatus.approved
    assert stack.audit(parked)[-1] == ("decide", "approved", ALICE)


def _run_is_now(stack: FakeStack, parked: Parked, status: RunStatus) -> None:
    """The parked run moves to ``status`` behind its approval's back (cancelled, resumed)."""
    run = stack.container.runs.get_run(parked.run_id)
    stack.container.runs.save_run(transition(run, status, now=stack.clock()))


def test_a_click_after_the_run_ended_is_refused(stack: FakeStack, callback: Any) -> None:
    parked = stack.park()
    _run_is_now(stack, parked, RunStatus.cancelled)
    _, answer = open_and_decide(callback, parked.links[ALICE], "approved")
    assert answer["statusCode"] == 410 and "This run has ended" in answer["body"]
    assert stack.steps.sent == [] and stack.status(parked) == "RUNNING"
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.status is ApprovalStatus.cancelled
    assert ("refused", "run_ended", ALICE) in stack.audit(parked)
    # And a later visit reads that the run ended
    later = call(callback, event(parked.links[BOB]))
    assert later["statusCode"] == 410 and "This run has ended" in later["body"]


def test_an_approval_expiring_during_the_click_of_an_ended_run_is_closed(
    stack: FakeStack, callback: Any
) -> None:
    # Given a cancelled run, and a click whose approval expires between the link check and
    # the run check
    parked = stack.park(timeout=60)
    page = call(callback, event(parked.links[ALICE]))
    _run_is_now(stack, parked, RunStatus.cancelled)
    stack.clock.advance(59)
    runs = stack.container.runs
    original_get_run = runs.get_run

    def get_run_a_bit_later(run_id: str) -> Any:
        stack.clock.advance(2)
        return original_get_run(run_id)

    runs.get_run = get_run_a_bit_later  # type: ignore[method-assign]
    # When alice posts / Then she reads that the run ended (not a server error)
    form = {"nonce": nonce(page["body"]), "decision": "approved"}
    answer = call(callback, event(parked.links[ALICE], method="POST", form=form))
    assert answer["statusCode"] == 410 and "This run has ended" in answer["body"]
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.status is ApprovalStatus.cancelled


def test_a_click_after_the_run_moved_on_is_too_late(stack: FakeStack, callback: Any) -> None:
    # Given a run that no longer waits on this approval (it resumed otherwise)
    parked = stack.park()
    _run_is_now(stack, parked, RunStatus.running)
    # When alice approves / Then it is too late, and the approval timed out
    _, answer = open_and_decide(callback, parked.links[ALICE], "approved")
    assert answer["statusCode"] == 410 and "Too late" in answer["body"]
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.status is ApprovalStatus.timed_out
    assert ("too_late", "run_moved_on", ALICE) in stack.audit(parked)
    assert stack.steps.sent == []


def test_a_validly_signed_link_for_someone_not_an_approver_is_refused(
    stack: FakeStack, callback: Any
) -> None:
    parked = stack.park()
    approval = stack.approval(parked)
    keys = load_signing_keys(stack.container.secrets, stack.container.settings.link_signing_secret)
    params = sign_link(
        approval.approval_id,
        "carol@example.com",
        approval.expires_at,
        keys.current,
        keys.current_key,
    )
    link = link_url(BASE_URL, approval.approval_id, params)
    assert call(callback, event(link))["statusCode"] == 403
    post = call(callback, event(link, method="POST", form={"decision": "approved"}))
    assert post["statusCode"] == 403 and "not an approver" in post["body"]
    assert stack.steps.sent == []
    assert [a for a in stack.audit(parked) if a[1] == "not_an_approver"] == [
        ("view", "not_an_approver", params["ap"]),
        ("refused", "not_an_approver", params["ap"]),
    ]


def test_a_post_without_the_page_nonce_decides_nothing(stack: FakeStack, callback: Any) -> None:
    parked = stack.park()
    answer = call(
        callback, event(parked.links[ALICE], method="POST", form={"decision": "approved"})
    )
    assert answer["statusCode"] == 400
    assert "Please use the buttons on the page" in answer["body"]
    assert stack.steps.sent == []
    assert stack.audit(parked)[-1] == ("refused", "form_expired", ALICE)


def test_a_post_that_is_not_a_form_is_refused(stack: FakeStack, callback: Any) -> None:
    parked = stack.park()
    built = event(parked.links[ALICE], method="POST", form={"decision": "approved"})
    built["headers"]["content-type"] = "application/json"
    answer = call(callback, built)
    assert answer["statusCode"] == 415 and "The form could not be read" in answer["body"]
    assert stack.steps.sent == []


def test_a_post_too_large_is_refused(stack: FakeStack, callback: Any) -> None:
    parked = stack.park()
    built = event(parked.links[ALICE], method="POST", form={"comment": "x" * (600 * 1024)})
    answer = call(callback, built)
    assert answer["statusCode"] == 413 and "too large" in answer["body"]
    assert stack.steps.sent == []


@pytest.mark.parametrize(
    "body",
    [b"\xff\xfe{not utf-8", "&".join(f"f{i}=x" for i in range(600)).encode()],
    ids=["not-utf-8", "too-many-fields"],
)
def test_a_form_body_no_page_sends_is_a_400(stack: FakeStack, callback: Any, body: bytes) -> None:
    import base64

    parked = stack.park()
    built = event(parked.links[ALICE], method="POST", form={})
    built["body"] = base64.b64encode(body).decode()
    built["isBase64Encoded"] = True
    answer = call(callback, built)
    assert answer["statusCode"] == 400 and "The form could not be read" in answer["body"]
    assert stack.steps.sent == []


TYPED = {
    "restaurant": None,
    "note": "ok",
    "amount": 1200,
    "urgent": False,
    "tags": ["a", "b"],
    "address": {"city": "Oslo"},
}


def test_editable_fields_are_typed_inputs_and_read_back_typed(
    stack: FakeStack, callback: Any
) -> None:
    # Failed before: typing Chipotle into an editable field (empty so far) was refused as
    # "not JSON" and everything typed was reset to null.
    parked = stack.park(editable=TYPED)
    typed = {
        "edit.restaurant": "Chipotle",
        "edit.note": "ok",
        "edit.amount": "1100",
        "edit.urgent": "yes",
        "edit.tags": "a\r\nc\r\n",
        "edit.address": '{"city": "Bergen"}',
    }
    page, answer = open_and_decide(callback, parked.links[ALICE], "approved", **typed)
    body = page["body"]
    assert 'name="edit.amount" type="number"' in body
    assert '<select id="f4" name="edit.urgent">' in body and "(one per line)" in body
    assert "(JSON)" in body and body.count("(JSON)") == 1
    assert answer["statusCode"] == 200, answer["body"]
    assert stack.output(parked)["edits"] == {
        "restaurant": "Chipotle",
        "amount": 1100,
        "urgent": True,
        "tags": ["a", "c"],
        "address": {"city": "Bergen"},
    }


@pytest.mark.parametrize(
    ("field", "typed", "problem"),
    [
        ("amount", "Chipotle", "must be a number"),
        ("urgent", "maybe", "must be yes or no"),
        ("address", "{not json", "must be JSON"),
        ("address", "[1, 2]", "must be JSON an object"),
        ("note", "x" * 300_000, "is larger than 32 KB"),
    ],
)
def test_a_bad_edit_shows_the_form_again_with_what_was_typed(
    stack: FakeStack, callback: Any, field: str, typed: str, problem: str
) -> None:
    # Failed before: a 300 KB edit was accepted, then broke the run.
    parked = stack.park(editable=TYPED)
    _, answer = open_and_decide(
        callback,
        parked.links[ALICE],
        "approved",
        comment="see edits",
        **{f"edit.{field}": typed, "edit.restaurant": "Chipotle"},
    )
    assert answer["statusCode"] == 422
    assert f"The field {field} {problem}" in answer["body"]
    assert '<form method="post">' in answer["body"] and "Chipotle" in answer["body"]
    assert "see edits</textarea>" in answer["body"]
    assert stack.steps.sent == []
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.is_pending and approval.edits == {}
    assert stack.audit(parked)[-1] == ("refused", "invalid_edit", ALICE)


def test_all_edits_together_are_bounded(stack: FakeStack, callback: Any) -> None:
    fields = {f"k{i}": "" for i in range(5)}
    parked = stack.park(editable=fields)
    typed = {f"edit.k{i}": "y" * 30_000 for i in range(5)}
    _, answer = open_and_decide(callback, parked.links[ALICE], "approved", **typed)
    assert answer["statusCode"] == 422 and "larger than 128 KB in all" in answer["body"]
    assert stack.steps.sent == []


def test_a_form_without_a_valid_decision_shows_the_form_again(
    stack: FakeStack, callback: Any
) -> None:
    parked = stack.park()
    _, answer = open_and_decide(callback, parked.links[ALICE], "maybe")
    assert answer["statusCode"] == 400 and '<form method="post">' in answer["body"]
    assert stack.audit(parked)[-1] == ("refused", "invalid_form", ALICE)


# --------------------------------------------------------------------------------------------
# One-time code
# --------------------------------------------------------------------------------------------


def test_a_step_requiring_a_code_refuses_a_missing_or_wrong_code(
    stack: FakeStack, callback: Any
) -> None:
    parked = stack.park(require_code=True)
    assert set(parked.codes) == {ALICE, BOB}
    page = call(callback, event(parked.links[ALICE]))
    assert 'name="code"' in page["body"]
    missing = submit(callback, parked.links[ALICE], page, decision="approved")
    wrong = submit(
        callback, parked.links[ALICE], missing, decision="approved", code=parked.codes[BOB]
    )
    # An empty code is not a guess: "enter the code", and no attempt is spent.
    assert missing["statusCode"] == 400 and "Enter the six-digit code" in missing["body"]
    assert wrong["statusCode"] == 403 and "does not match" in wrong["body"]
    for answer in (missing, wrong):
        assert '<form method="post">' in answer["body"]
    assert "(4 attempts left.)" in wrong["body"]
    assert stack.steps.sent == []
    right = submit(
        callback, parked.links[ALICE], wrong, decision="approved", code=parked.codes[ALICE]
    )
    assert len(stack.steps.sent) == 1
    assert right["statusCode"] == 200 and "You approved" in right["body"]


def test_too_many_wrong_codes_lock_only_that_approvers_link(
    stack: FakeStack, callback: Any
) -> None:
    # Failed before: five code-less submits from any mailbox locked the approval for everyone.
    parked = stack.park(require_code=True)
    answer = call(callback, event(parked.links[ALICE]))
    for _ in range(MAX_CODE_ATTEMPTS + 2):
        answer = submit(callback, parked.links[ALICE], answer, decision="approved")
        assert answer["statusCode"] == 400 and "Enter the six-digit code" in answer["body"]
    form = {"nonce": read(callback, answer["body"]), "decision": "approved"}
    form["code"] = "000000"
    answers = []
    for _ in range(MAX_CODE_ATTEMPTS):
        answers.append(call(callback, event(parked.links[ALICE], method="POST", form=form)))
        if answers[-1]["statusCode"] == 403 and "attempts left" in answers[-1]["body"]:
            form["nonce"] = read(callback, answers[-1]["body"])
    assert "(1 attempts left.)" in answers[-2]["body"]
    assert "Too many wrong codes" in answers[-1]["body"]
    form["code"] = parked.codes[ALICE]
    form["nonce"] = read(callback, call(callback, event(parked.links[ALICE]))["body"])
    locked = call(callback, event(parked.links[ALICE], method="POST", form=form))
    assert locked["statusCode"] == 403 and "Too many wrong codes" in locked["body"]
    assert stack.steps.sent == []
    assert stack.audit(parked)[-1] == ("refused", "code_locked", ALICE)
    # Bob's link is untouched by alice's lockout.
    bob_nonce = read(callback, call(callback, event(parked.links[BOB]))["body"])
    bob_form = {"nonce": bob_nonce, "decision": "approved", "code": parked.codes[BOB]}
    bob = call(callback, event(parked.links[BOB], method="POST", form=bob_form))
    assert bob["statusCode"] == 200 and "You approved" in bob["body"]
    assert len(stack.steps.sent) == 1


def test_reissue_sends_fresh_links_and_codes_and_refuses_the_old_links(
    stack: FakeStack, callback: Any
) -> None:
    # Failed before: nothing could unlock an approval locked by wrong codes.
    parked = stack.park(require_code=True)
    form = {"nonce": read(callback, call(callback, event(parked.links[ALICE]))["body"])}
    form.update(decision="approved", code="000000")
    for _ in range(MAX_CODE_ATTEMPTS):
        answer = call(callback, event(parked.links[ALICE], method="POST", form=form))
        if "attempts left" in answer["body"]:
            form["nonce"] = read(callback, answer["body"])
    assert "Too many wrong codes" in answer["body"]
    before = len(stack.container.email.sent)
    done = reissue_approval(parked.approval_id, stack.container, randbelow=lambda n: 424242)
    mails = {m.to: m for m in stack.container.email.sent[before:]}
    assert sorted(done.emailed) == sorted(mails) == sorted([ALICE, BOB])
    assert stack.audit(parked)[-3][:2] == ("reissued", "generation 1")
    # The old links are refused with a clear page, and audited
    for old in (parked.links[ALICE], parked.links[BOB]):
        refused = call(callback, event(old))
        assert refused["statusCode"] == 410 and "New links were sent" in refused["body"]
    assert stack.audit(parked)[-1] == ("view", "replaced_link", None)
    # The new link and code decide (alice's attempts start again)
    link = mails[ALICE].link
    assert link != parked.links[ALICE] and "one-time code: 424242" in mails[ALICE].text
    fresh = {"nonce": read(callback, call(callback, event(link))["body"])}
    fresh.update(decision="approved", code="424242")
    decided = call(callback, event(link, method="POST", form=fresh))
    assert decided["statusCode"] == 200 and stack.output(parked)["approver"] == ALICE
    with pytest.raises(ApprovalNotPendingError):
        reissue_approval(parked.approval_id, stack.container)


# --------------------------------------------------------------------------------------------
# Delivery: reopened when it fails, redelivered when it was lost
# --------------------------------------------------------------------------------------------


def test_a_decision_that_cannot_be_delivered_is_reopened(stack: FakeStack, callback: Any) -> None:
    # Given Step Functions is unavailable when alice approves
    parked = stack.park()
    page = call(callback, event(parked.links[ALICE]))
    form = {"nonce": read(callback, page["body"]), "decision": "approved"}
    stack.steps.unavailable = True
    with pytest.raises(DecisionNotDeliveredError):
        decide_approval(decide_command(parked.links[ALICE], form), stack.container)
    # A form is good for one submit: the same one again is asked to press again
    same = call(callback, event(parked.links[ALICE], method="POST", form=form))
    assert same["statusCode"] == 409 and "already sent once" in same["body"]
    form["nonce"] = read(callback, same["body"])
    answer = call(callback, event(parked.links[ALICE], method="POST", form=form))
    # Then she is asked to press again, and the approval is pending again
    assert answer["statusCode"] == 503 and "Please try again" in answer["body"]
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.is_pending
    assert stack.audit(parked)[-1] == ("refused", "delivery_failed", ALICE)
    # And pressing again once it is back decides
    stack.steps.unavailable = False
    form["nonce"] = read(callback, call(callback, event(parked.links[ALICE]))["body"])
    again = call(callback, event(parked.links[ALICE], method="POST", form=form))
    assert again["statusCode"] == 200 and stack.output(parked)["approver"] == ALICE


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_later_visit_delivers_a_lost_decision_once_as_recorded(
    stack: FakeStack, callback: Any, method: str
) -> None:
    parked = stack.park()
    _record_then_crash(stack, parked)
    stack.clock.advance((REDELIVERY_GRACE + timedelta(seconds=1)).total_seconds())
    form = {"nonce": "whatever", "decision": "rejected", "comment": "No"}
    first = call(
        callback, event(parked.links[BOB], method=method, form=form if method == "POST" else None)
    )
    later = call(callback, event(parked.links[ALICE]))
    assert stack.output(parked) == RECORDED
    assert stack.steps.sent == [RECORDED]
    for page in (first, later):
        assert page["statusCode"] == 200
        assert "already approved by alice@example.com" in page["body"]
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.status is ApprovalStatus.approved
    assert approval.delivered_at is not None
    assert [a for a in stack.audit(parked) if a[0] == "redeliver"] == [
        ("redeliver", "delivered", BOB)
    ]


def test_a_decision_that_may_still_be_on_its_way_is_not_sent_again(
    stack: FakeStack, callback: Any
) -> None:
    parked = stack.park()
    _record_then_crash(stack, parked)
    stack.clock.advance((REDELIVERY_GRACE - timedelta(seconds=1)).total_seconds())
    page = call(callback, event(parked.links[BOB]))
    assert page["statusCode"] == 200 and "already approved by alice" in page["body"]
    assert stack.steps.attempts == 0
    assert stack.status(parked) == "RUNNING"


def test_a_delivered_approval_opened_again_sends_nothing(stack: FakeStack, callback: Any) -> None:
    parked = stack.park()
    open_and_decide(callback, parked.links[ALICE], "approved")
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.delivered_at is not None
    stack.clock.advance(120)
    attempts = stack.steps.attempts
    pages = [
        call(callback, event(parked.links[ALICE])),
        call(callback, event(parked.links[BOB])),
        call(
            callback,
            event(parked.links[BOB], method="POST", form={"nonce": "x", "decision": "rejected"}),
        ),
    ]
    assert [p["statusCode"] for p in pages] == [200, 200, 200]
    assert stack.steps.attempts == attempts and len(stack.steps.sent) == 1
    assert "redeliver" not in [a[0] for a in stack.audit(parked)]


def test_a_lost_decision_whose_task_closed_is_marked_delivered_and_left(
    stack: FakeStack, callback: Any
) -> None:
    # Given alice's approval was recorded and lost, the task then timed out, and the link
    # expired with the approval
    parked = stack.park(timeout=60)
    _record_then_crash(stack, parked)
    stack.time_out(parked)
    stack.clock.advance(61)
    # When bob opens his (now expired) link twice
    pages = [call(callback, event(parked.links[BOB])) for _ in range(2)]
    # Then one send found the task closed, the decision stands and is marked delivered, and
    # the second visit sent nothing
    assert stack.steps.attempts == 1
    for page in pages:
        assert page["statusCode"] == 200
        assert "already approved by alice@example.com" in page["body"]
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.status is ApprovalStatus.approved
    assert approval.delivered_at is not None
    assert ("redeliver", "task_closed", BOB) in stack.audit(parked)


def test_a_redelivery_that_fails_is_left_for_the_next_visit(
    stack: FakeStack, callback: Any
) -> None:
    parked = stack.park()
    _record_then_crash(stack, parked)
    stack.clock.advance((REDELIVERY_GRACE + timedelta(seconds=1)).total_seconds())
    stack.steps.unavailable = True
    page = call(callback, event(parked.links[BOB]))
    assert page["statusCode"] == 200 and "already approved by alice" in page["body"]
    assert ("redeliver", "failed", BOB) in stack.audit(parked)
    stack.steps.unavailable = False
    call(callback, event(parked.links[BOB]))
    assert stack.output(parked) == RECORDED


# --------------------------------------------------------------------------------------------
# The run's side: timeout and cancel
# --------------------------------------------------------------------------------------------


def _ports(stack: FakeStack) -> dict[str, Any]:
    return {"approvals": stack.container.approvals, "clock": stack.clock}


def test_expire_approval_closes_it_once_and_later_clicks_read_expired(
    stack: FakeStack, callback: Any
) -> None:
    parked = stack.park()
    approval = stack.approval(parked)
    assert approval_id_for(approval.run_id, approval.interrupt_id) == parked.approval_id
    assert expire_approval(approval.run_id, approval.interrupt_id, **_ports(stack)) is True
    assert expire_approval(approval.run_id, approval.interrupt_id, **_ports(stack)) is False
    page = call(callback, event(parked.links[ALICE]))
    assert page["statusCode"] == 410 and "expired" in page["body"]
    assert stack.steps.sent == []


def test_expire_approval_leaves_a_recorded_decision(stack: FakeStack) -> None:
    parked = stack.park()
    _record_then_crash(stack, parked)
    assert expire_approval(parked.run_id, "int-1", **_ports(stack)) is False
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.status is ApprovalStatus.approved


def test_a_timed_out_run_without_a_decision_expires_its_approval(stack: FakeStack) -> None:
    parked = stack.park()
    answer = resume_after_timeout(parked.run_id, "int-1", **_ports(stack))
    assert answer == {"decision": "timed_out"}
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.status is ApprovalStatus.timed_out
    assert stack.audit(parked)[-1] == ("expired", "timed_out", None)
    with pytest.raises(LinkExpiredError):
        view_approval(view_command(parked.links[ALICE]), stack.container)


def test_a_timed_out_run_resumes_with_a_recorded_but_lost_decision(stack: FakeStack) -> None:
    parked = stack.park()
    _record_then_crash(stack, parked)
    answer = resume_after_timeout(parked.run_id, "int-1", **_ports(stack))
    assert answer == RECORDED
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.delivered_at is not None
    assert stack.audit(parked)[-1] == ("redeliver", "at_timeout", ALICE)


def test_a_timeout_after_a_visit_found_the_task_closed_still_takes_the_decision(
    stack: FakeStack,
) -> None:
    # Given a lost decision that a visit already marked delivered (the task was closed)
    parked = stack.park()
    _record_then_crash(stack, parked)
    stack.container.approvals.mark_delivered(parked.approval_id, stack.clock())
    # When the run's timeout resumes it / Then it resumes with that decision
    assert resume_after_timeout(parked.run_id, "int-1", **_ports(stack)) == RECORDED


def test_a_timeout_of_a_run_without_an_approval_is_timed_out(stack: FakeStack) -> None:
    assert resume_after_timeout("run-x", "int-x", **_ports(stack)) == {"decision": "timed_out"}


def test_a_timeout_racing_a_decision_takes_the_decision(stack: FakeStack) -> None:
    # Given the timeout reads a pending approval, and alice's decision lands before its write
    parked = stack.park()
    store = stack.container.approvals
    original_mark = store.mark
    raced: list[bool] = []

    def decision_lands_first(approval_id: str, status: ApprovalStatus) -> bool:
        if not raced:
            raced.append(True)
            _record_then_crash(stack, parked)
            # DynamoDB would refuse nothing here (an undelivered decision can be closed), so
            # the race is the one where the timeout's write loses: mark it delivered first.
            store.mark_delivered(parked.approval_id, stack.clock())
        return original_mark(approval_id, status)

    store.mark = decision_lands_first  # type: ignore[method-assign]
    # When the run's timeout resumes it / Then the driver retries from a fresh read
    assert resume_after_timeout(parked.run_id, "int-1", **_ports(stack)) == RECORDED


def test_cancel_closes_a_pending_approval_once_and_audits_it(
    stack: FakeStack, callback: Any
) -> None:
    parked = stack.park()
    assert close_for_ended_run(parked.run_id, "int-1", **_ports(stack), actor="ops@example.com")
    assert not close_for_ended_run(parked.run_id, "int-1", **_ports(stack))
    assert stack.audit(parked)[-1] == ("cancelled", "run_cancelled", "ops@example.com")
    page = call(callback, event(parked.links[ALICE]))
    assert page["statusCode"] == 410 and "This run has ended" in page["body"]


def test_cancel_leaves_a_delivered_decision(stack: FakeStack, callback: Any) -> None:
    parked = stack.park()
    open_and_decide(callback, parked.links[ALICE], "approved")
    assert not close_for_ended_run(parked.run_id, "int-1", **_ports(stack))
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.status is ApprovalStatus.approved


# --------------------------------------------------------------------------------------------
# Audit
# --------------------------------------------------------------------------------------------


def test_the_audit_trail_has_every_view_and_decision(stack: FakeStack, callback: Any) -> None:
    parked = stack.park()
    call(callback, event(parked.links[BOB], method="HEAD", source_ip="198.51.100.1"))
    open_and_decide(callback, parked.links[ALICE], "approved")
    call(callback, event(parked.links[BOB], source_ip="198.51.100.1"))
    trail = stack.container.approvals.audit(parked.approval_id)
    seen = [(e.action, e.outcome, e.actor, e.method) for e in trail]
    assert seen == [
        ("requested", "pending", None, None),
        ("emailed", "sent", ALICE, None),
        ("emailed", "sent", BOB, None),
        ("view", "shown", BOB, "HEAD"),
        ("view", "shown", ALICE, "GET"),
        ("decide", "approved", ALICE, "POST"),
        ("view", "already_decided", BOB, "GET"),
    ]
    assert trail[3].source_ip == "198.51.100.1" and trail[5].source_ip == "203.0.113.7"
    assert trail[5].user_agent and "Safari" in trail[5].user_agent
