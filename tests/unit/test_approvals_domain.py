"""Approval rules without AWS: signed links, nonces, one-time codes, decide-once, rendering."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from langorch.domain.approvals.codes import check_code, code_hash, new_code
from langorch.domain.approvals.lifecycle import (
    Event,
    State,
    TransitionRefusedError,
    state_of,
    step,
)
from langorch.domain.approvals.outcomes import AlreadyDecided
from langorch.domain.approvals.record import (
    P_APPROVER,
    P_EXPIRES,
    P_KEY_ID,
    P_SIGNATURE,
    Approval,
    ApprovalStatus,
    CodeMismatchError,
    CodeMissingError,
    FormExpiredError,
    LinkClaims,
    LinkExpiredError,
    LinkForgedError,
    approval_id_for,
    approver_for,
    approver_ref,
    decision_output,
    link_url,
    new_approval,
    redelivery_due,
    sign_link,
    verify_link,
)
from langorch.domain.approvals.views import (
    SubmittedTooSoonError,
    check_view_token,
    issue_view_token,
)
from langorch.web.emails import clean_subject, render_approval_email
from langorch.web.errors import sentence_of
from langorch.web.pages import SECURITY_HEADERS, approval_page, result_page

NOW = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
KEY = b"k" * 32
OLD_KEY = b"o" * 32
ALICE = "alice@example.com"


def _approval(**changes: object) -> Approval:
    approval = new_approval(
        run_id="run-1",
        workflow_id="wf",
        request={
            "kind": "approval",
            "step_id": "review",
            "interrupt_id": "int-1",
            "title": "Pay invoice",
            "message": "Please check",
            "context": {"amount": 120},
            "editable": {"amount": 120, "note": "n"},
            "approvers": [ALICE, "bob@example.com"],
            "timeout_seconds": 3600,
        },
        now=NOW,
    )
    return approval.model_copy(update=changes)


def _link(approval: Approval, approver: str = ALICE, key_id: str = "k1", key: bytes = KEY):
    return sign_link(approval.approval_id, approver, approval.expires_at, key_id, key)


# --- ids -------------------------------------------------------------------------------------


def test_approval_id_is_the_same_for_a_retried_request() -> None:
    # Given the same run and interrupt / When the id is derived twice / Then it is the same
    assert approval_id_for("run-1", "int-1") == approval_id_for("run-1", "int-1")
    assert approval_id_for("run-1", "int-1") != approval_id_for("run-1", "int-2")


def test_new_approval_expires_after_its_timeout() -> None:
    assert _approval().expires_at == NOW + timedelta(seconds=3600)


def test_new_approval_without_approvers_is_refused() -> None:
    with pytest.raises(ValueError, match="no approvers"):
        new_approval(
            run_id="r", workflow_id=None, request={"interrupt_id": "i", "approvers": []}, now=NOW
        )


# --- signed links ----------------------------------------------------------------------------


def test_a_signed_link_verifies_and_names_its_approver() -> None:
    # Given alice's link
    approval = _approval()
    params = _link(approval)
    # When it is verified
    claims = verify_link(approval.approval_id, params, {"k1": KEY}, now=NOW)
    # Then it stands for alice, until the approval expires
    assert approver_for(approval, claims.approver_ref) == ALICE
    assert claims.expires_at == approval.expires_at


def test_the_link_carries_no_address_and_is_built_from_the_public_url() -> None:
    approval = _approval()
    url = link_url("https://approve.example.com/", approval.approval_id, _link(approval))
    assert url.startswith(f"https://approve.example.com/approvals/{approval.approval_id}?")
    assert "alice" not in url and "%40" not in url and "@" not in url


@pytest.mark.parametrize("field", [P_APPROVER, P_EXPIRES, P_KEY_ID, P_SIGNATURE])
def test_tampering_with_any_parameter_is_refused(field: str) -> None:
    # Given a valid link with one parameter changed
    approval = _approval()
    params = _link(approval)
    original = params[field]
    if field == P_APPROVER:
        params[field] = approver_ref(approval.approval_id, "mallory@example.com")
    elif field == P_EXPIRES:
        params[field] = str(int(original) + 86_400)
    elif field == P_KEY_ID:
        params[field] = "k2"
    else:
        params[field] = ("A" if original[0] != "A" else "B") + original[1:]
    # When it is verified / Then it is refused as forged
    with pytest.raises(LinkForgedError):
        verify_link(approval.approval_id, params, {"k1": KEY, "k2": OLD_KEY}, now=NOW)


def test_a_link_for_another_approval_is_refused() -> None:
    approval = _approval()
    with pytest.raises(LinkForgedError):
        verify_link("apr-other", _link(approval), {"k1": KEY}, now=NOW)


@pytest.mark.parametrize("missing", [P_APPROVER, P_EXPIRES, P_KEY_ID, P_SIGNATURE])
def test_a_link_missing_a_parameter_is_refused(missing: str) -> None:
    approval = _approval()
    params = _link(approval)
    del params[missing]
    with pytest.raises(LinkForgedError):
        verify_link(approval.approval_id, params, {"k1": KEY}, now=NOW)


def test_an_expired_link_is_refused_as_expired() -> None:
    approval = _approval()
    with pytest.raises(LinkExpiredError):
        verify_link(approval.approval_id, _link(approval), {"k1": KEY}, now=approval.expires_at)


def test_a_forged_expired_link_is_refused_as_forged_not_expired() -> None:
    # The expiry is checked only after the signature: nothing is said about a forged link.
    approval = _approval()
    params = _link(approval, key=b"x" * 32)
    with pytest.raises(LinkForgedError):
        verify_link(approval.approval_id, params, {"k1": KEY}, now=approval.expires_at)


def test_a_link_signed_with_a_rotated_key_still_verifies() -> None:
    # Given a link signed with the previous key "k0", after "k1" became current
    approval = _approval()
    params = _link(approval, key_id="k0", key=OLD_KEY)
    # When verified with both keys / Then it verifies
    claims = verify_link(approval.approval_id, params, {"k1": KEY, "k0": OLD_KEY}, now=NOW)
    assert claims.key_id == "k0"


def test_a_link_with_an_unknown_key_id_is_refused() -> None:
    approval = _approval()
    params = _link(approval, key_id="gone", key=OLD_KEY)
    with pytest.raises(LinkForgedError):
        verify_link(approval.approval_id, params, {"k1": KEY}, now=NOW)


# --- nonce and code --------------------------------------------------------------------------


def test_a_view_token_is_bound_to_approval_approver_and_view_and_is_not_the_signature() -> None:
    approval = _approval()
    alice = verify_link(approval.approval_id, _link(approval), {"k1": KEY}, now=NOW)
    bob = verify_link(
        approval.approval_id, _link(approval, "bob@example.com"), {"k1": KEY}, now=NOW
    )
    token = issue_view_token(alice, KEY, now=NOW, view_id="view-0001")
    later = NOW + timedelta(seconds=2)
    dwell = timedelta(seconds=2)
    assert check_view_token(alice, KEY, token, now=later, dwell=dwell).view_id == "view-0001"
    assert _link(approval)[P_SIGNATURE] not in token
    assert token != issue_view_token(alice, KEY, now=NOW, view_id="view-0002")
    tampered = token.replace("view-0001", "view-0002")
    for other, bad in ((bob, token), (alice, ""), (alice, tampered), (alice, "1.x.y")):
        with pytest.raises(FormExpiredError):
            check_view_token(other, KEY, bad, now=later, dwell=dwell)


def test_a_view_token_decides_only_after_the_dwell() -> None:
    approval = _approval()
    alice = verify_link(approval.approval_id, _link(approval), {"k1": KEY}, now=NOW)
    token = issue_view_token(alice, KEY, now=NOW, view_id="view-0001")
    dwell = timedelta(seconds=2)
    for too_soon in (NOW, NOW + timedelta(seconds=1.999)):
        with pytest.raises(SubmittedTooSoonError):
            check_view_token(alice, KEY, token, now=too_soon, dwell=dwell)
    with pytest.raises(FormExpiredError):  # issued far in the future: forged clock
        check_view_token(alice, KEY, token, now=NOW - timedelta(minutes=1), dwell=dwell)
    check_view_token(alice, KEY, token, now=NOW, dwell=timedelta(0))


def test_a_one_time_code_has_six_digits_and_only_its_hash_is_kept() -> None:
    code = new_code(lambda n: 4242)
    assert code == "004242"
    approval = _approval(require_code=True)
    claims = verify_link(approval.approval_id, _link(approval), {"k1": KEY}, now=NOW)
    stored = code_hash(approval.approval_id, claims.approver_ref, code, KEY)
    assert code not in stored
    check_code(approval, claims, "004242", stored, KEY)
    check_code(approval, claims, " 004 242 ", stored, KEY)


def _asking_for_004242() -> tuple[Approval, LinkClaims, str]:
    """An approval that asks for a code, alice's verified link to it, and the stored hash of
    the code she was sent, 004242."""
    approval = _approval(require_code=True)
    claims = verify_link(approval.approval_id, _link(approval), {"k1": KEY}, now=NOW)
    return approval, claims, code_hash(approval.approval_id, claims.approver_ref, "004242", KEY)


@pytest.mark.parametrize("typed", ["123456", "00424", "abcdef"])
def test_a_wrong_code_is_refused(typed: str) -> None:
    approval, claims, stored = _asking_for_004242()
    with pytest.raises(CodeMismatchError):
        check_code(approval, claims, typed, stored, KEY)


@pytest.mark.parametrize("typed", ["", "  ", "\t"])
def test_an_empty_code_is_missing_not_wrong(typed: str) -> None:
    approval, claims, stored = _asking_for_004242()
    with pytest.raises(CodeMissingError):
        check_code(approval, claims, typed, stored, KEY)
    check_code(approval, claims, "004 242", stored, KEY)


# --- decide once -----------------------------------------------------------------------------


def test_a_pending_approval_can_be_decided() -> None:
    assert step(state_of(_approval(), now=NOW), Event.decide).target is State.decided


def test_a_decided_approval_says_who_decided_and_when() -> None:
    approval = _approval(status=ApprovalStatus.approved, decided_by=ALICE, decided_at=NOW)
    later = NOW + timedelta(days=9)
    with pytest.raises(TransitionRefusedError) as refused:
        step(state_of(approval, now=later), Event.decide)
    assert refused.value.reason == "already_decided"
    assert sentence_of(AlreadyDecided.of(approval).notice) == (
        "This approval was already approved by alice@example.com at 2025-03-01 09:00 UTC."
    )


def test_an_expired_or_timed_out_approval_cannot_be_decided() -> None:
    for approval, now in (
        (_approval(), NOW + timedelta(hours=1)),
        (_approval(status=ApprovalStatus.timed_out), NOW),
    ):
        with pytest.raises(TransitionRefusedError) as refused:
            step(state_of(approval, now=now), Event.decide)
        assert refused.value.reason == "link_expired"


def test_a_cancelled_approval_says_the_run_ended() -> None:
    with pytest.raises(TransitionRefusedError) as refused:
        step(state_of(_approval(status=ApprovalStatus.cancelled), now=NOW), Event.decide)
    assert refused.value.reason == "run_ended"


# --- redelivery of a recorded decision ------------------------------------------------------

GRACE = timedelta(seconds=30)


def test_a_decision_never_delivered_is_due_again_only_after_the_grace() -> None:
    # Given a decision recorded at NOW and never marked delivered
    approval = _approval(status=ApprovalStatus.approved, decided_by=ALICE, decided_at=NOW)
    # When asked before and after the grace / Then only after is it due
    assert not redelivery_due(approval, now=NOW + GRACE - timedelta(seconds=1), grace=GRACE)
    assert redelivery_due(approval, now=NOW + GRACE, grace=GRACE)


def test_a_delivered_pending_or_closed_approval_is_never_due() -> None:
    later = NOW + timedelta(hours=1)
    delivered = _approval(
        status=ApprovalStatus.rejected, decided_by=ALICE, decided_at=NOW, delivered_at=NOW
    )
    for approval in (delivered, _approval(), _approval(status=ApprovalStatus.timed_out)):
        assert not redelivery_due(approval, now=later, grace=GRACE)


def test_the_output_is_the_recorded_decision() -> None:
    # Given a recorded rejection with no comment and an edit
    approval = _approval(
        status=ApprovalStatus.rejected, decided_by=ALICE, decided_at=NOW, edits={"amount": 99}
    )
    # When its output is built / Then it is what the run resumes with, taken from the record
    assert decision_output(approval) == {
        "decision": "rejected",
        "approver": ALICE,
        "comment": "",
        "edits": {"amount": 99},
    }


# --- rendering -------------------------------------------------------------------------------


def test_the_subject_cannot_inject_headers_and_is_bounded() -> None:
    subject = clean_subject("Pay\r\nBcc: victim@example.com\n" + "x" * 500)
    assert "\r" not in subject and "\n" not in subject
    assert subject.startswith("Pay Bcc: victim@example.com")
    assert len(subject) <= 120


def test_the_email_escapes_html_and_carries_link_and_code() -> None:
    approval = _approval(title="<script>alert(1)</script>", message="a & b")
    email = render_approval_email(
        approval, to=ALICE, link="https://x/approvals/a?ap=1&sig=2", code="123456"
    )
    assert "<script>" not in email.html and "&lt;script&gt;" in email.html
    assert "https://x/approvals/a?ap=1&amp;sig=2" in email.html
    assert "https://x/approvals/a?ap=1&sig=2" in email.text
    assert "123456" in email.text and "123456" in email.html
    assert "a & b" in email.text
    assert "sig=2" not in repr(email)


def test_the_page_is_inert_escaped_and_posts_to_itself() -> None:
    approval = _approval(
        title="<b>Pay</b>",
        message="<img src=x onerror=alert(1)>",
        context={"vendor": "</td><script>x()</script>"},
        require_code=True,
    )
    page = approval_page(approval, approver=ALICE, nonce="NONCE123")
    body = page.body.lower()
    assert "<script" not in body and "<img" not in body and "http-equiv" not in body
    assert "&lt;img src=x onerror=alert(1)&gt;" in body
    assert '<form method="post">' in body and "action=" not in body
    assert 'name="nonce" value="nonce123"' in body
    assert 'name="code"' in body
    assert 'name="edit.amount"' in body and 'name="edit.note"' in body
    assert page.headers == SECURITY_HEADERS


def test_long_content_is_bounded_on_the_page() -> None:
    approval = _approval(message="m" * 50_000, context={"big": "v" * 50_000})
    page = approval_page(approval, approver=ALICE, nonce="n")
    assert len(page.body) < 30_000


def test_result_pages_carry_the_security_headers() -> None:
    page = result_page("Done", "ok", status=200)
    assert page.headers["Content-Security-Policy"] == (
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'"
    )
    assert page.headers["X-Frame-Options"] == "DENY"
    assert page.headers["Referrer-Policy"] == "no-referrer"
    assert page.headers["Cache-Control"] == "no-store"
