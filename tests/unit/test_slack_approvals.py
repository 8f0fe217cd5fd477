"""Approvals in Slack (issue 30), offline: the real ``slack_sdk`` WebClient against the fake Slack
of ``langorch.local.fake_slack`` on loopback, the real approval_callback handler, the fakes.

A press is the request Slack sends, signed with the app's signing secret, posted to the
callback's ``POST /slack/interactions`` (or, for the concurrency test, handed to the use-case
directly: Powertools' resolver keeps the current event in a module global).
"""

from __future__ import annotations

import base64
import copy
import json
import logging
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlencode

import pytest

from langorch.adapters.handoff import LambdaHandoff, ThreadHandoff
from langorch.adapters.slack import SlackNotifier, SlackRequestVerifier, web_client
from langorch.app.approvals.channels import ChannelNotConfiguredError
from langorch.app.approvals.chat import ChatAnswer, DecideInChat, decide_in_chat
from langorch.app.approvals.decisions import REDELIVERY_GRACE
from langorch.app.approvals.votes import fire_timers
from langorch.domain.approvals.channels import PostedMessage, posted_messages
from langorch.domain.approvals.record import ApprovalStatus
from langorch.domain.errors import StorageError
from langorch.local.fake_slack import (
    FakeSlack,
    RunningFakeSlack,
    serve,
    signed_form_opening,
    signed_form_submission,
    signed_headers,
    signed_interaction,
)
from tests.support.definitions import workflow
from tests.support.polling import PATIENCE
from tests.unit.approvals_support import (
    ALICE,
    BOB,
    EVENTS,
    FakeStack,
    Parked,
    call,
    event,
    open_and_decide,
)

SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
BOT_TOKEN = "xoxb-test-0000-bot-token"
MALLORY = "mallory@example.com"
USERS = {"UALICE": ALICE, "UBOB": BOB, "UMALLORY": MALLORY}


class SlackStack(FakeStack):
    """The fake stack with Slack as a channel: the fake Slack serving, the real adapter."""

    def __init__(self, fake: RunningFakeSlack, *, conversation: str | None = None) -> None:
        super().__init__()
        self.fake = fake
        self.slack: FakeSlack = fake.slack
        container = self.container
        container.settings = container.settings.model_copy(
            update={"approval_channels": ["email", "slack"], "console_url": "http://console"}
        )
        container.notifiers = {
            "slack": SlackNotifier(
                lambda: web_client(BOT_TOKEN, fake.base_url), conversation=conversation
            )
        }
        container.slack_requests = SlackRequestVerifier(
            lambda: SIGNING_SECRET, lambda: self.clock().timestamp()
        )

    def message(self, parked: Parked, to: str | None = ALICE) -> PostedMessage:
        """The Slack message posted for ``parked`` to ``to``."""
        trail = self.container.approvals.audit(parked.approval_id)
        return next(m for m in posted_messages(trail, "slack") if m.to == to)

    def press(
        self,
        parked: Parked,
        user: str,
        decision: str = "approved",
        *,
        to: str | None = ALICE,
        age: int = 0,
        action_ts: str = "1700000001.000001",
    ) -> tuple[bytes, dict[str, str]]:
        """The signed request of ``user`` pressing a button on the message sent to ``to``."""
        message = self.message(parked, to)
        return signed_interaction(
            SIGNING_SECRET,
            user_id=user,
            approval_id=parked.approval_id,
            decision=decision,
            conversation=message.conversation,
            message_ts=message.message_id,
            timestamp=int(self.clock().timestamp()) - age,
            action_ts=action_ts,
        )


def slack_event(body: bytes, headers: dict[str, str]) -> dict[str, Any]:
    """API Gateway's v2 event of Slack's POST to ``/slack/interactions``."""
    built: dict[str, Any] = copy.deepcopy(json.loads((EVENTS / "approval_post.json").read_text()))
    built["rawPath"] = built["requestContext"]["http"]["path"] = "/slack/interactions"
    built["rawQueryString"] = ""
    built["queryStringParameters"] = None
    built["pathParameters"] = None
    built["routeKey"] = built["requestContext"]["routeKey"] = "POST /slack/interactions"
    built["headers"] = {k.lower(): v for k, v in headers.items()}
    built["body"] = base64.b64encode(body).decode()
    built["isBase64Encoded"] = True
    return built


@pytest.fixture
def fake_slack() -> Iterator[RunningFakeSlack]:
    running = serve(FakeSlack(users=dict(USERS)))
    yield running
    running.stop()


@pytest.fixture
def stack(fake_slack: RunningFakeSlack) -> SlackStack:
    return SlackStack(fake_slack)


@pytest.fixture
def callback(stack: SlackStack) -> Iterator[Any]:
    from functions.approval_callback import handler

    previous = handler.container.use(stack.container)
    yield handler
    handler.container.use(previous)


def _ephemeral_to(stack: SlackStack, user: str) -> list[str]:
    return [str(m["text"]) for m in stack.slack.ephemeral if m["user"] == user]


# --------------------------------------------------------------------------------------------
# Posting
# --------------------------------------------------------------------------------------------


def test_a_request_is_posted_as_a_dm_to_each_approver_without_a_link_or_token(
    stack: SlackStack,
) -> None:
    # Given a run parked on an approval whose channels are email and slack
    parked = stack.park()
    # Then each approver got one DM with Approve / Reject / Details
    posts = stack.slack.called("chat.postMessage")
    assert sorted(p["channel"] for p in posts) == ["UALICE", "UBOB"]
    shown = json.dumps(posts)
    assert "langorch.approve" in shown and "langorch.reject" in shown
    assert f"http://console/approvals/{parked.approval_id}" in shown
    # And no message carries a signed link, its signature or the task token
    assert "sig=" not in shown and parked.token not in shown
    # And the emails went out as well
    assert sorted(parked.links) == [ALICE, BOB]


def test_without_a_console_the_message_has_no_details_button_to_an_unusable_page(
    fake_slack: RunningFakeSlack,
) -> None:
    # Given a stack with no console configured (the approval page needs a signed link)
    stack = SlackStack(fake_slack)
    stack.container.settings = stack.container.settings.model_copy(update={"console_url": None})
    # When a request is posted
    parked = stack.park()
    # Then its buttons are Approve, Reject and "Comment or edit…", and no link at all
    message = stack.message(parked)
    blocks = stack.slack.messages[message.conversation, message.message_id]["blocks"]
    (actions,) = [b for b in blocks if b["type"] == "actions"]
    assert [e["action_id"] for e in actions["elements"]] == [
        "langorch.approve",
        "langorch.reject",
        "langorch.review",
    ]
    assert "url" not in json.dumps(blocks)


def test_a_retried_request_posts_nothing_twice(stack: SlackStack) -> None:
    # Given a request posted to both approvers
    parked = stack.park()
    # When the state machine retries the request (same run, same interrupt)
    stack.park_again(parked)
    # Then still one message per approver
    assert len(stack.slack.called("chat.postMessage")) == 2


def test_a_request_without_the_email_channel_sends_no_email(stack: SlackStack) -> None:
    # Given the stack's default channels are slack alone
    stack.container.settings = stack.container.settings.model_copy(
        update={"approval_channels": ["slack"]}
    )
    # When a run parks on an approval
    parked = stack.park()
    # Then nobody is emailed, and both approvers have their Slack message
    assert parked.links == {}
    assert len(stack.slack.called("chat.postMessage")) == 2


def test_a_request_can_go_to_one_shared_channel(fake_slack: RunningFakeSlack) -> None:
    # Given a stack posting approval requests in one Slack channel
    stack = SlackStack(fake_slack, conversation="CAPPROVALS")
    # When a run parks on an approval
    parked = stack.park()
    # Then one message is posted, in that channel, remembered for no one approver
    assert [p["channel"] for p in stack.slack.called("chat.postMessage")] == ["CAPPROVALS"]
    assert stack.message(parked, to=None).conversation == "CAPPROVALS"


# --------------------------------------------------------------------------------------------
# Signatures
# --------------------------------------------------------------------------------------------


def test_a_press_with_a_bad_signature_is_refused_and_decides_nothing(
    stack: SlackStack, callback: Any
) -> None:
    # Given a press whose signature was made with another secret
    parked = stack.park()
    body, headers = stack.press(parked, "UALICE")
    headers["X-Slack-Signature"] = "v0=" + "0" * 64
    # When it reaches the callback
    answer = call(callback, slack_event(body, headers))
    # Then it is refused as unauthenticated and the approval stays pending
    assert answer["statusCode"] == 401
    assert stack.container.approvals.get(parked.approval_id).status is ApprovalStatus.pending


def test_a_press_signed_more_than_five_minutes_ago_is_refused(
    stack: SlackStack, callback: Any
) -> None:
    # Given a correctly signed press whose timestamp is six minutes old
    parked = stack.park()
    body, headers = stack.press(parked, "UALICE", age=360)
    # When it reaches the callback
    answer = call(callback, slack_event(body, headers))
    # Then it is refused, and nothing is decided
    assert answer["statusCode"] == 401
    assert stack.container.approvals.get(parked.approval_id).status is ApprovalStatus.pending


def test_a_replayed_press_is_refused_and_only_audited(stack: SlackStack, callback: Any) -> None:
    # Given alice's press that voted on a request needing both approvers
    parked = stack.park(policy={"quorum": "all"})
    body, headers = stack.press(parked, "UALICE")
    assert call(callback, slack_event(body, headers))["statusCode"] == 200
    # When the very same request arrives again (within Slack's window)
    answer = call(callback, slack_event(body, headers))
    # Then it is acknowledged but refused as a replay: one vote, an audit line, alice told
    assert answer["statusCode"] == 200
    assert len(stack.container.approvals.votes(parked.approval_id)) == 1
    assert ("refused", "replayed", "slack:UALICE") in stack.audit(parked)
    assert "seen before" in _ephemeral_to(stack, "UALICE")[-1]


# --------------------------------------------------------------------------------------------
# Acknowledged at once, decided out of the request
# --------------------------------------------------------------------------------------------


class GatedApprovals:
    """The approvals store behind a gate: every call waits until the gate opens (a store
    that takes its time), and fails the first ``failures`` decisions (a crash half-way)."""

    def __init__(self, store: Any, *, failures: int = 0) -> None:
        self._store = store
        self.gate = threading.Event()
        self.gate.set()
        self.failures = failures

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._store, name)

        def gated(*args: Any, **kwargs: Any) -> Any:
            # A guard against a test that never reopens the gate, not a speed bound.
            if not self.gate.wait(timeout=300 * PATIENCE):
                raise AssertionError(f"the store's {name} was called while the gate was shut")
            if name in ("decide", "vote") and self.failures > 0:
                self.failures -= 1
                raise StorageError("the process died here")
            return method(*args, **kwargs)

        return gated


def test_a_press_is_acknowledged_while_the_store_is_still_busy(
    stack: SlackStack, callback: Any
) -> None:
    # Given a store that answers nothing until let go, and presses handed to a worker thread
    parked = stack.park()
    gated = GatedApprovals(stack.container.approvals)
    stack.container.approvals = gated
    stack.container.handoff = handoff = ThreadHandoff()
    body, headers = stack.press(parked, "UALICE")
    gated.gate.clear()
    # When alice presses Approve
    answer = call(callback, slack_event(body, headers))
    # Then Slack has its 200 before the store has answered anything
    assert answer["statusCode"] == 200
    assert stack.steps.sent == []
    # And once the store answers, the press is decided and alice is told
    gated.gate.set()
    handoff.drain()
    assert stack.output(parked)["decision"] == "approved"
    assert "approved by alice@example.com" in _ephemeral_to(stack, "UALICE")[-1]


def test_a_press_handed_on_carries_no_signature(stack: SlackStack, callback: Any) -> None:
    # Given a press
    parked = stack.park()
    body, headers = stack.press(parked, "UALICE")
    # When it is acknowledged and handed on
    call(callback, slack_event(body, headers))
    # Then the job names the press, and holds only a hash of the request's signature
    (job,) = stack.container.handoff.jobs
    assert job["approval_id"] == parked.approval_id
    assert job["user_id"] == "UALICE"
    assert headers["X-Slack-Signature"] not in json.dumps(job)
    assert headers["X-Slack-Signature"][3:] not in json.dumps(job)


def test_a_press_whose_decision_failed_half_way_is_decided_when_run_again(
    stack: SlackStack, callback: Any
) -> None:
    # Given a store that fails the first decision (after the press was claimed)
    parked = stack.park()
    stack.container.approvals = GatedApprovals(stack.container.approvals, failures=1)
    stack.container.handoff = handoff = ThreadHandoff()
    # When alice presses Approve and the handed-on press is run again after the failure
    body, headers = stack.press(parked, "UALICE")
    assert call(callback, slack_event(body, headers))["statusCode"] == 200
    handoff.drain()
    # Then the retry decides (it is not taken for a replay), once
    assert stack.output(parked)["decision"] == "approved"
    assert len(stack.steps.sent) == 1
    assert ("refused", "replayed", "slack:UALICE") not in stack.audit(parked)


def test_the_handed_on_event_decides_in_the_function_itself(
    stack: SlackStack, callback: Any
) -> None:
    # Given a press handed on, as the asynchronous invocation's event
    parked = stack.park()
    jobs: list[dict[str, Any]] = []

    class Queued:
        def hand_off(self, job: Any, *, function_arn: str, run: Any) -> None:
            jobs.append(json.loads(json.dumps(dict(job))))

    stack.container.handoff = Queued()
    body, headers = stack.press(parked, "UALICE")
    call(callback, slack_event(body, headers))
    assert stack.steps.sent == []
    # When Lambda invokes the function with it
    call(callback, jobs[0])
    # Then the press is decided
    assert stack.output(parked)["decision"] == "approved"


def test_lambda_handoff_invokes_the_function_asynchronously() -> None:
    # Given a Lambda client that records its calls
    calls: list[dict[str, Any]] = []

    class Client:
        def invoke(self, **params: Any) -> dict[str, Any]:
            calls.append(params)
            return {"StatusCode": 202}

    # When a job is handed on
    LambdaHandoff(Client()).hand_off({"kind": "k"}, function_arn="arn:fn", run=print)
    # Then the function is invoked with it as an asynchronous event
    assert calls == [
        {"FunctionName": "arn:fn", "InvocationType": "Event", "Payload": b'{"kind": "k"}'}
    ]


# --------------------------------------------------------------------------------------------
# The modal: a comment and typed edits
# --------------------------------------------------------------------------------------------


def _open_form(stack: SlackStack, callback: Any, parked: Parked, user: str) -> dict[str, Any]:
    """``user`` presses "Comment or edit…" on alice's message: the modal as it reads then."""
    message = stack.message(parked)
    body, headers = signed_form_opening(
        SIGNING_SECRET,
        user_id=user,
        approval_id=parked.approval_id,
        conversation=message.conversation,
        message_ts=message.message_id,
        timestamp=int(stack.clock().timestamp()),
    )
    assert call(callback, slack_event(body, headers))["statusCode"] == 200
    (view_id,) = stack.slack.views
    return stack.slack.views[view_id]


def _submit(
    stack: SlackStack, callback: Any, view: dict[str, Any], user: str, values: dict[str, str]
) -> dict[str, Any]:
    body, headers = signed_form_submission(
        SIGNING_SECRET,
        view,
        user_id=user,
        values=values,
        timestamp=int(stack.clock().timestamp()),
    )
    return call(callback, slack_event(body, headers))


def test_comment_or_edit_opens_a_modal_with_each_editable_value_as_a_typed_input(
    stack: SlackStack, callback: Any
) -> None:
    # Given a request whose amount and note may be edited
    parked = stack.park()
    # When alice presses "Comment or edit…"
    view = _open_form(stack, callback, parked, "UALICE")
    # Then the modal asks for a decision and a comment, and shows each value to edit
    inputs = {b["block_id"]: b for b in view["blocks"] if b["type"] == "input"}
    assert list(inputs) == ["decision", "comment", "edit.amount", "edit.note"]
    assert inputs["edit.amount"]["element"]["initial_value"] == "1200"
    assert inputs["edit.amount"]["hint"]["text"] == "A number."
    assert view["callback_id"] == "langorch.form"
    assert stack.slack.called("views.open")[0]["trigger_id"] == "1700000001.trigger"


def test_a_rejection_from_the_modal_carries_the_comment_and_the_typed_edits(
    stack: SlackStack, callback: Any
) -> None:
    # Given alice's open modal
    parked = stack.park()
    view = _open_form(stack, callback, parked, "UALICE")
    # When she rejects with a comment and a new amount
    values = {"decision": "rejected", "comment": "Too high", "edit.amount": "900"}
    answer = _submit(stack, callback, view, "UALICE", values)
    # Then the modal closes, and the run resumes rejected with the comment and the edit
    assert answer["statusCode"] == 200
    assert answer["body"] == ""
    output = stack.output(parked)
    assert output["decision"] == "rejected"
    assert output["comment"] == "Too high"
    assert output["edits"] == {"amount": 900}


def test_an_edit_of_the_wrong_type_is_shown_in_the_modal_and_decides_nothing(
    stack: SlackStack, callback: Any
) -> None:
    # Given alice's open modal
    parked = stack.park()
    view = _open_form(stack, callback, parked, "UALICE")
    # When she approves with an amount that is not a number
    values = {"decision": "approved", "edit.amount": "nine hundred"}
    answer = _submit(stack, callback, view, "UALICE", values)
    # Then Slack is told to show the error under the amount, and nothing is decided
    assert json.loads(answer["body"]) == {
        "response_action": "errors",
        "errors": {"edit.amount": "amount must be a number (like 0)"},
    }
    assert stack.container.approvals.get(parked.approval_id).status is ApprovalStatus.pending


def test_a_vote_is_handed_to_a_slack_user_from_the_modal(stack: SlackStack, callback: Any) -> None:
    # Given a request both must approve, whose policy allows delegation, and carol in Slack
    stack.slack.users["UCAROL"] = "carol@example.com"
    parked = stack.park(policy={"quorum": "all", "delegation": True})
    view = _open_form(stack, callback, parked, "UALICE")
    # When alice hands her vote to carol (picked as a Slack user) in the modal
    values = {"decision": "delegate", "delegate_to_user": "UCAROL"}
    assert _submit(stack, callback, view, "UALICE", values)["statusCode"] == 200
    # Then carol holds alice's vote, alice is told, and the thread says so
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval.delegations == {"carol@example.com": ALICE}
    assert "handed to carol@example.com" in _ephemeral_to(stack, "UALICE")[-1]
    assert _thread_of(stack, parked)[-1].startswith(
        f"{ALICE} handed their vote to carol@example.com"
    )


def test_a_vote_handed_to_nobody_is_shown_in_the_modal(stack: SlackStack, callback: Any) -> None:
    # Given alice's modal on a request that allows delegation
    parked = stack.park(policy={"quorum": "all", "delegation": True})
    view = _open_form(stack, callback, parked, "UALICE")
    # When she picks "Hand my vote to…" and nobody
    answer = _submit(stack, callback, view, "UALICE", {"decision": "delegate"})
    # Then the modal says whom is missing, and nothing is recorded
    assert json.loads(answer["body"])["errors"] == {
        "delegate_to_user": "Choose whom to hand your vote to."
    }
    assert stack.container.approvals.get(parked.approval_id).delegations == {}


def test_a_person_who_is_not_an_approver_opening_the_modal_is_told_so(
    stack: SlackStack, callback: Any
) -> None:
    # Given mallory, whom the approval does not name
    parked = stack.park()
    # When mallory presses "Comment or edit…"
    view = _open_form(stack, callback, parked, "UMALLORY")
    # Then the modal says so, offers nothing to submit, and the refusal is audited
    assert "submit" not in view
    assert "not an approver" in json.dumps(view["blocks"])
    assert stack.audit(parked)[-1] == ("refused", "not_an_approver", "slack:UMALLORY")


# --------------------------------------------------------------------------------------------
# Identity
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "user",
    [
        # mallory, a member of the workspace the approval does not name
        pytest.param("UMALLORY", id="a-member-the-approval-does-not-name"),
        # a user id Slack's users.info does not find (another workspace's)
        pytest.param("UOTHER", id="a-user-slack-does-not-know"),
    ],
)
def test_a_person_who_is_not_an_approver_is_told_so_and_only_audited(
    stack: SlackStack, callback: Any, user: str
) -> None:
    # Given a press by someone who is not an approver
    parked = stack.park()
    body, headers = stack.press(parked, user)
    # When it reaches the callback (they pressed Approve on alice's message)
    answer = call(callback, slack_event(body, headers))
    # Then it is acknowledged, they are told, the approval stays pending, and only the refusal
    # is written
    assert answer["statusCode"] == 200
    assert "not an approver" in _ephemeral_to(stack, user)[0]
    assert stack.container.approvals.get(parked.approval_id).status is ApprovalStatus.pending
    assert stack.audit(parked)[-1] == ("refused", "not_an_approver", f"slack:{user}")
    assert stack.steps.sent == []


def test_the_explicit_mapping_wins_over_the_slack_profile(fake_slack: RunningFakeSlack) -> None:
    # Given a mapping that names UMALLORY as bob (whatever Slack's profile says)
    stack = SlackStack(fake_slack)
    stack.container.notifiers = {
        "slack": SlackNotifier(
            lambda: web_client(BOT_TOKEN, fake_slack.base_url), users={"UMALLORY": BOB}
        )
    }
    parked = stack.park()
    message = stack.message(parked, ALICE)
    # When UMALLORY presses Approve
    answer = decide_in_chat(
        DecideInChat(parked.approval_id, "approved", "UMALLORY", message, delivery_id="d1"),
        stack.container,
    )
    # Then it is bob's decision, and Slack's profile was never asked
    assert answer.outcome == "decided"
    assert stack.container.approvals.get(parked.approval_id).decided_by == BOB
    assert stack.slack.called("users.info") == []


def test_separation_of_duties_holds_in_slack(stack: SlackStack, callback: Any) -> None:
    # Given a run alice started, on an approval that keeps its starter from approving
    parked = stack.park(policy={"separation_of_duties": True}, started_by=ALICE)
    body, headers = stack.press(parked, "UALICE")
    # When alice presses Approve in Slack
    call(callback, slack_event(body, headers))
    # Then she is told why, and nothing is decided
    assert stack.container.approvals.get(parked.approval_id).status is ApprovalStatus.pending
    assert _ephemeral_to(stack, "UALICE")
    assert stack.steps.sent == []


# --------------------------------------------------------------------------------------------
# One decision, every channel updated
# --------------------------------------------------------------------------------------------


def test_a_decision_in_slack_resumes_the_run_and_edits_every_message(
    stack: SlackStack, callback: Any
) -> None:
    # Given a request posted to alice and bob
    parked = stack.park()
    body, headers = stack.press(parked, "UALICE")
    # When alice presses Approve
    assert call(callback, slack_event(body, headers))["statusCode"] == 200
    # Then the run resumes with alice's decision, recorded as hers through Slack
    assert stack.output(parked)["decision"] == "approved"
    assert stack.output(parked)["approver"] == ALICE
    decide = next(
        e for e in stack.container.approvals.audit(parked.approval_id) if e.action == "decide"
    )
    assert (decide.channel, decide.operator) == ("slack", "slack:UALICE")
    # And both messages now say who decided, with no buttons left to press
    updates = stack.slack.called("chat.update")
    assert len(updates) == 2
    assert all("Approved by alice@example.com" in u["text"] for u in updates)
    assert "langorch.approve" not in json.dumps(updates)


def test_a_decision_in_slack_makes_the_email_page_say_already_decided(
    stack: SlackStack, callback: Any
) -> None:
    # Given alice approved in Slack
    parked = stack.park()
    body, headers = stack.press(parked, "UALICE")
    call(callback, slack_event(body, headers))
    # When bob opens his emailed link
    page = call(callback, event(parked.links[BOB]))
    # Then the page says it was decided, by alice
    assert page["statusCode"] == 200
    assert "already" in page["body"].lower() and ALICE in page["body"]


def test_a_decision_on_the_email_page_edits_the_slack_messages(
    stack: SlackStack, callback: Any
) -> None:
    # Given bob rejects on his emailed page
    parked = stack.park()
    open_and_decide(callback, parked.links[BOB], "rejected", comment="")
    # Then both Slack messages say bob rejected
    updates = stack.slack.called("chat.update")
    assert len(updates) == 2
    assert all("Rejected by bob@example.com" in u["text"] for u in updates)
    # And alice pressing Approve afterwards is told it was decided, and changes nothing
    body, headers = stack.press(parked, "UALICE")
    call(callback, slack_event(body, headers))
    assert "Already decided" in _ephemeral_to(stack, "UALICE")[-1]
    assert stack.output(parked)["decision"] == "rejected"


def _thread_of(stack: SlackStack, parked: Parked, to: str | None = ALICE) -> list[str]:
    """What was posted in the thread of the message sent to ``to``."""
    message = stack.message(parked, to)
    return [
        str(p["text"])
        for p in stack.slack.called("chat.postMessage")
        if p.get("thread_ts") == message.message_id and p.get("channel") == message.conversation
    ]


def test_a_vote_shows_the_quorum_progress_on_the_message_and_in_its_thread(
    stack: SlackStack, callback: Any
) -> None:
    # Given a request both approvers must approve
    parked = stack.park(policy={"quorum": "all"})
    # When alice approves in Slack
    body, headers = stack.press(parked, "UALICE")
    call(callback, slack_event(body, headers))
    # Then each message reads "1 of 2 approvals" and keeps its buttons
    for to in (ALICE, BOB):
        message = stack.message(parked, to)
        shown = stack.slack.messages[message.conversation, message.message_id]
        assert "1 of 2 approvals" in json.dumps(shown["blocks"])
        assert "langorch.approve" in json.dumps(shown["blocks"])
        # And its thread says who voted how
        assert _thread_of(stack, parked, to) == [
            f"{ALICE} approved: 1 of 2 approvals; waiting for {BOB}."
        ]


def test_reminders_and_escalations_are_posted_in_the_thread(stack: SlackStack) -> None:
    # Given a quorum request with a reminder at 4 h and an escalation to a manager at a day
    policy = {
        "quorum": "all",
        "reminders": ["4h"],
        "escalation": [{"after": "1d", "approvers": ["boss@example.com"]}],
    }
    parked = stack.park(policy=policy, timeout=3 * 86400)
    # When the reminder and then the escalation fire
    stack.clock.advance(4 * 3600)
    fire_timers(parked.approval_id, stack.container)
    stack.clock.advance(20 * 3600)
    fire_timers(parked.approval_id, stack.container)
    # Then both are told in the thread, with whom they went to
    thread = _thread_of(stack, parked)
    assert thread[0].startswith(f"Reminded {ALICE}, {BOB}: no decision 4h after the request")
    assert "(0 of 2 approvals;" in thread[0]
    assert thread[1].startswith("Escalated to boss@example.com:")


def test_thirty_concurrent_presses_on_a_quorum_request_count_each_vote_once(
    stack: SlackStack,
) -> None:
    # Given thirty approvers who must all approve, each known to Slack
    people = [f"p{i}@example.com" for i in range(30)]
    stack.slack.users.update({f"U{i:02d}": address for i, address in enumerate(people)})
    stack.container.settings = stack.container.settings.model_copy(
        update={"approval_channels": ["email"]}
    )
    parked = stack.park(approvers=people, policy={"quorum": "all"})
    message = PostedMessage("slack", "CAPPROVALS", "1700000000.000001")

    def press(i: int) -> ChatAnswer:
        command = DecideInChat(
            parked.approval_id, "approved", f"U{i:02d}", message, delivery_id=f"sig-{i}"
        )
        return decide_in_chat(command, stack.container)

    stack.container.notifiers = {
        "slack": SlackNotifier(lambda: web_client(BOT_TOKEN, stack.fake.base_url))
    }
    # When all thirty press Approve at once
    with ThreadPoolExecutor(max_workers=30) as pool:
        answers = list(pool.map(press, range(30)))
    # Then every vote is counted once, and the run resumes exactly once
    votes = stack.container.approvals.votes(parked.approval_id)
    assert sorted(v.approver for v in votes) == sorted(people)
    assert [a.outcome for a in answers].count("decided") == 1
    assert len(stack.steps.sent) == 1
    assert stack.output(parked)["decision"] == "approved"


def test_a_decision_lost_in_a_crash_is_delivered_by_a_later_press(
    stack: SlackStack, callback: Any
) -> None:
    # Given alice's approval was recorded, then the process died before it reached the run
    parked = stack.park()
    stack.container.approvals.decide(
        parked.approval_id, ApprovalStatus.approved, ALICE, None, {}, stack.clock()
    )
    assert stack.status(parked) == "RUNNING"
    # When bob presses Reject in Slack after the redelivery grace
    stack.clock.advance(REDELIVERY_GRACE.total_seconds() + 1)
    body, headers = stack.press(parked, "UBOB", "rejected", to=BOB)
    call(callback, slack_event(body, headers))
    # Then the run resumes with alice's recorded approval (not bob's), once
    assert stack.output(parked)["decision"] == "approved"
    assert stack.output(parked)["approver"] == ALICE
    assert "Already decided" in _ephemeral_to(stack, "UBOB")[-1]


def test_no_log_line_carries_the_signature_token_or_secret(
    stack: SlackStack, callback: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a press, a bad press and a replay, logged at DEBUG
    caplog.set_level(logging.DEBUG)
    parked = stack.park()
    body, headers = stack.press(parked, "UALICE")
    bad = dict(headers, **{"X-Slack-Signature": "v0=" + "1" * 64})
    call(callback, slack_event(body, bad))
    call(callback, slack_event(body, headers))
    call(callback, slack_event(body, headers))
    # Then no line holds the signatures, the bot token, the signing secret or the task token
    text = caplog.text + "".join(str(r.__dict__) for r in caplog.records)
    for secret in (
        headers["X-Slack-Signature"],
        bad["X-Slack-Signature"],
        BOT_TOKEN,
        SIGNING_SECRET,
        parked.token,
    ):
        assert secret not in text


def test_a_press_on_details_is_acknowledged_and_decides_nothing(
    stack: SlackStack, callback: Any
) -> None:
    # Given a signed press on the Details button (a link button: Slack still reports it)
    parked = stack.park()
    payload = {
        "type": "block_actions",
        "user": {"id": "UALICE"},
        "actions": [{"action_id": "langorch.details", "value": parked.approval_id}],
    }
    body = urlencode({"payload": json.dumps(payload)}).encode()
    headers = signed_headers(SIGNING_SECRET, body, int(stack.clock().timestamp()))
    # When it reaches the callback
    answer = call(callback, slack_event(body, headers))
    # Then it is acknowledged, nobody is told anything and nothing is decided
    assert answer["statusCode"] == 200
    assert stack.slack.ephemeral == []
    assert stack.container.approvals.get(parked.approval_id).status is ApprovalStatus.pending


def test_a_request_for_teams_is_refused_as_a_channel_the_stack_has_no_app_for(
    stack: SlackStack,
) -> None:
    # Given approval requests go to Teams, which has no adapter yet
    stack.container.settings = stack.container.settings.model_copy(
        update={"approval_channels": ["teams"]}
    )
    # When a run parks on an approval, Then the request fails saying so and how to fix it
    with pytest.raises(ChannelNotConfiguredError, match="no teams app configured"):
        stack.park()


SLACK_WORKFLOW = workflow("pay", inputs={"amount": "number"}).steps("""
      - step_id: review
        kind: approval
        approval:
          approvers: [alice@example.com]
          channels: [email, slack]
          show_keys: [amount]
        branches: {approved: paid, rejected: paid}
      - {step_id: paid, kind: terminate}
""")


def test_a_step_naming_its_channels_asks_with_them(make_container: Any) -> None:
    from tests.integration.conftest import register_text, run_to_end
    from tests.support.approvers import recording_approver

    # Given a workflow whose approval step goes to email and Slack
    container = make_container()
    register_text(container, SLACK_WORKFLOW)
    asked, decide = recording_approver({"decision": "approved", "approver": ALICE})

    # When it runs to its approval
    run_to_end(container, "pay", {"amount": 12}, on_approval=decide)
    # Then the request the run parks with names both channels
    (request,) = asked
    assert request["channels"] == ["email", "slack"]


# --------------------------------------------------------------------------------------------
# The console's preview
# --------------------------------------------------------------------------------------------


def _console_page(stack: SlackStack, approval_id: str) -> str:
    from langorch.console.app import ConsoleApp
    from langorch.console.http import Request, Sessions
    from langorch.console.operator import Operator

    sessions = Sessions(b"k" * 32, token="start-up-token")
    operator = Operator("ana", "OS user", "ana@example.com")
    console = ConsoleApp(stack.container, "the test stack", frozenset(), operator, sessions)
    signed_in = sessions.open("start-up-token") or ""
    page = console.handle(Request("GET", f"/approvals/{approval_id}", {}, {}, session=signed_in))
    assert page.status == 200
    return page.body.decode("utf-8")


def test_the_console_shows_the_slack_message_as_approvers_see_it(stack: SlackStack) -> None:
    # Given a request posted to Slack, whose shown values hold markup
    parked = stack.park()
    # When the operator opens it in the console
    body = _console_page(stack, parked.approval_id)
    # Then the page previews the message: title, escaped values, the buttons (inert)
    preview = body[body.index('id="slack-preview"') :]
    assert "Pay invoice 42" in preview
    assert "<strong>vendor</strong><br>ACME &amp; Sons" in preview
    assert "&lt;b&gt;before&lt;/b&gt;" in preview
    assert "disabled" in preview and ">Approve</button>" in preview


def test_the_console_shows_no_slack_preview_for_a_request_not_sent_to_slack(
    stack: SlackStack,
) -> None:
    # Given a stack whose requests go by email only
    stack.container.settings = stack.container.settings.model_copy(
        update={"approval_channels": ["email"]}
    )
    parked = stack.park()
    # When the operator opens it, Then there is no Slack preview
    assert "slack-preview" not in _console_page(stack, parked.approval_id)
