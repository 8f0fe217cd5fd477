"""Approvals end to end on moto, with a real Step Functions task token.

A tiny state machine parks on ``lambda:invoke.waitForTaskToken`` (moto executes it; the token is
read from the execution history's ``TaskScheduled`` event), so ``SendTaskSuccess`` — and its
failure on a closed token — runs for real. Requests reach the real handlers through recorded
API Gateway HTTP API (v2) events.
"""

from __future__ import annotations

import base64
import copy
import io
import json
import logging
import re
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import boto3
import pytest
from moto import mock_aws

from langorch.adapters.request_counter import RequestCounter
from langorch.adapters.stepfunctions import StepFunctions
from langorch.app.approvals import (
    REDELIVERY_GRACE,
    ApprovalHttpRequest,
    RequestApproval,
    decide_approval,
    ensure_signing_key,
    expire_approval,
    load_signing_keys,
    request_approval,
    view_approval,
)
from langorch.app.container import Container
from langorch.config import Settings
from langorch.domain.approvals import (
    MAX_CODE_FAILURES,
    ApprovalStatus,
    approval_id_for,
    code_hash,
    link_url,
    sign_link,
)
from langorch.domain.runs import (
    PendingInterrupt,
    RunRecord,
    RunStatus,
    RunTrigger,
    transition,
)

from .conftest import UseContainer

REGION = "us-east-1"
ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "tests" / "fixtures" / "events"
BASE_URL = "https://approve.example.com"
ALICE = "alice@example.com"
BOB = "bob@example.com"
MOTO_CONFIG: Any = {
    "stepfunctions": {"execute_state_machine": True},
    "lambda": {"use_docker": False},
}


# --------------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------------


class Clock:
    """A clock the test moves (the state machine's own timeouts use real time)."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now


class CountingStepFunctions(StepFunctions):
    """The real adapter, counting the ``SendTaskSuccess`` calls that got through."""

    def __init__(self, client: Any, arn: str | None) -> None:
        super().__init__(client, arn)
        self.sent: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def send_success(self, task_token: str, output: dict[str, Any]) -> None:
        super().send_success(task_token, output)
        with self._lock:
            self.sent.append(output)


@dataclass
class Parked:
    """One run parked on an approval: its execution, token, approval id and emailed links."""

    execution_arn: str
    token: str
    approval_id: str
    links: dict[str, str] = field(default_factory=dict)
    codes: dict[str, str] = field(default_factory=dict)


@dataclass
class Stack:
    container: Container
    clock: Clock
    sfn: Any
    machine_arn: str
    outbox: Path
    steps: CountingStepFunctions
    runs_seen: int = 0

    def park(
        self,
        *,
        timeout: int = 300,
        require_code: bool = False,
        approvers: list[str] | None = None,
        editable: dict[str, Any] | None = None,
        title: str = "Pay invoice 42",
    ) -> Parked:
        """Start an execution that waits on its task token, and request the approval."""
        self.runs_seen += 1
        run_id = f"run-{self.runs_seen}"
        interrupt_id = f"int-{self.runs_seen}"
        request = {
            "kind": "approval",
            "step_id": "review",
            "title": title,
            "message": "Check the amount <b>before</b> paying.",
            "context": {"vendor": "ACME & Sons", "amount": 1200},
            "editable": editable if editable is not None else {"amount": 1200, "note": "ok"},
            "approvers": approvers or [ALICE, BOB],
            "timeout_seconds": timeout,
            "on_timeout": "reject",
            "require_code": require_code,
            "iteration": 1,
            "max_iterations": 3,
            "interrupt_id": interrupt_id,
        }
        _waiting_run(self.container, run_id, request, self.clock.now)
        arn = self.sfn.start_execution(
            stateMachineArn=self.machine_arn,
            name=run_id,
            input=json.dumps({"run_id": run_id, "approval": request}),
        )["executionArn"]
        token = _task_token(self.sfn, arn)
        before = set(self.outbox.glob("*.json"))
        result = request_approval(
            RequestApproval(run_id=run_id, approval=request, task_token=token),
            self.container,
            randbelow=_codes(),
        )
        parked = Parked(arn, token, result.approval_id)
        for path in sorted(set(self.outbox.glob("*.json")) - before):
            mail = json.loads(path.read_text())
            parked.links[mail["to"]] = mail["link"]
            found = re.search(r"one-time code: (\d{6})", mail["text"])
            if found:
                parked.codes[mail["to"]] = found.group(1)
        return parked

    def status(self, parked: Parked) -> str:
        return str(self.sfn.describe_execution(executionArn=parked.execution_arn)["status"])

    def wait_status(self, parked: Parked, wanted: str, seconds: float = 10) -> dict[str, Any]:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            described = self.sfn.describe_execution(executionArn=parked.execution_arn)
            if described["status"] == wanted:
                return dict(described)
            time.sleep(0.05)
        raise AssertionError(f"execution did not reach {wanted}: {self.status(parked)}")


def _codes() -> Any:
    values = iter([111111, 222222, 333333, 444444, 555555, 666666])
    return lambda n: next(values)


def _waiting_run(container: Container, run_id: str, request: dict[str, Any], now: datetime) -> None:
    run = RunRecord(
        run_id=run_id,
        workflow_id="invoices",
        workflow_version=1,
        trigger=RunTrigger(type="manual"),
        created_at=now,
        updated_at=now,
    )
    container.runs.create_run(run)
    run = transition(run, RunStatus.running, now=now)
    pending = PendingInterrupt(
        interrupt_id=request["interrupt_id"], kind="approval", request=request
    )
    run = transition(run, RunStatus.waiting_approval, now=now, pending=pending)
    container.runs.save_run(run)


def _task_token(sfn: Any, execution_arn: str) -> str:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for event in sfn.get_execution_history(executionArn=execution_arn)["events"]:
            if event["type"] == "TaskScheduled":
                parameters = json.loads(event["taskScheduledEventDetails"]["parameters"])
                return str(parameters["Payload"]["task_token"])
        time.sleep(0.02)
    raise AssertionError("the execution never scheduled its task")


def _machine(sfn: Any, role: str, function_arn: str) -> str:
    definition = {
        "StartAt": "AwaitApproval",
        "States": {
            "AwaitApproval": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
                "Parameters": {
                    "FunctionName": function_arn,
                    "Payload": {
                        "run_id.$": "$.run_id",
                        "approval.$": "$.approval",
                        "task_token.$": "$$.Task.Token",
                    },
                },
                "TimeoutSecondsPath": "$.approval.timeout_seconds",
                "End": True,
            }
        },
    }
    return str(
        sfn.create_state_machine(
            name="approvals-test", definition=json.dumps(definition), roleArn=role
        )["stateMachineArn"]
    )


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    """moto executing state machines; a container whose emails go to an outbox folder."""
    with mock_aws(config=MOTO_CONFIG):
        iam = boto3.client("iam", region_name=REGION)
        role = iam.create_role(RoleName="sfn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        archive = io.BytesIO()
        with zipfile.ZipFile(archive, "w") as zipped:
            zipped.writestr("h.py", "def handler(event, context):\n    return {}\n")
        function_arn = boto3.client("lambda", region_name=REGION).create_function(
            FunctionName="request-approval",
            Runtime="python3.12",
            Role=role,
            Handler="h.handler",
            Code={"ZipFile": archive.getvalue()},
        )["FunctionArn"]
        sfn = boto3.client("stepfunctions", region_name=REGION)
        machine = _machine(sfn, role, function_arn)
        outbox = tmp_path / "outbox"
        clock = Clock()
        container = Container(
            Settings(outbox_dir=str(outbox), state_machine_arn=machine, public_base_url=BASE_URL),
            clock=clock,
        )
        container.runs.create_table()
        ensure_signing_key(container.secrets, container.settings.link_signing_secret)
        steps = CountingStepFunctions(container.client("stepfunctions"), machine)
        container.__dict__["stepfunctions"] = steps
        yield Stack(container, clock, sfn, machine, outbox, steps)


class FakeContext:
    """What Powertools reads from a Lambda context."""

    function_name = "approval-callback"
    function_version = "$LATEST"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:approval-callback"
    aws_request_id = "c6af9ac6-7b61-11e6-9a41-93e8deadbeef"


@pytest.fixture
def callback(stack: Stack, handler_container: UseContainer) -> Any:
    """The approval_callback handler module, using the test's container."""
    from functions.approval_callback import handler

    handler_container(handler, stack.container)
    return handler


def _event(
    link: str,
    *,
    method: str = "GET",
    form: dict[str, str] | None = None,
    source_ip: str = "203.0.113.7",
) -> dict[str, Any]:
    """A recorded API Gateway v2 event, pointed at ``link``."""
    name = "approval_post.json" if method == "POST" else "approval_get.json"
    event: dict[str, Any] = copy.deepcopy(json.loads((EVENTS / name).read_text()))
    parts = urlsplit(link)
    approval_id = parts.path.rsplit("/", 1)[-1]
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    event["rawPath"] = event["requestContext"]["http"]["path"] = parts.path
    event["rawQueryString"] = parts.query
    event["queryStringParameters"] = query or None
    event["pathParameters"] = {"id": approval_id}
    event["requestContext"]["http"]["method"] = method
    event["requestContext"]["http"]["sourceIp"] = source_ip
    event["routeKey"] = event["requestContext"]["routeKey"] = f"{method} /approvals/{{id}}"
    if form is not None:
        event["body"] = base64.b64encode(urlencode(form).encode()).decode()
    return event


def _call(callback: Any, event: dict[str, Any]) -> dict[str, Any]:
    return dict(callback.handler(event, FakeContext()))


def _nonce(body: str) -> str:
    found = re.search(r'name="nonce" value="([^"]+)"', body)
    assert found, "the page has no nonce"
    return found.group(1)


def _open_and_decide(
    callback: Any, link: str, decision: str, **fields: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    page = _call(callback, _event(link))
    form = {"nonce": _nonce(page["body"]), "decision": decision, **fields}
    return page, _call(callback, _event(link, method="POST", form=form))


def _request(link: str, method: str, form: dict[str, str] | None = None) -> ApprovalHttpRequest:
    parts = urlsplit(link)
    return ApprovalHttpRequest(
        approval_id=parts.path.rsplit("/", 1)[-1],
        method=method,
        query=dict(parse_qsl(parts.query)),
        form=form or {},
        source_ip="198.51.100.9",
        user_agent="test-agent",
    )


# --------------------------------------------------------------------------------------------
# Requesting
# --------------------------------------------------------------------------------------------


def test_each_approver_gets_their_own_link_from_the_public_url(stack: Stack) -> None:
    # Given a run parked on an approval for alice and bob
    parked = stack.park()
    # Then each got an email with a link built from the public URL, and the approval is pending
    assert set(parked.links) == {ALICE, BOB}
    assert parked.links[ALICE] != parked.links[BOB]
    assert all(link.startswith(f"{BASE_URL}/approvals/apr-") for link in parked.links.values())
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.status is ApprovalStatus.pending
    assert approval.workflow_id == "invoices"
    assert [a.approval_id for a in stack.container.approvals.list(pending_only=True)] == [
        parked.approval_id
    ]


def test_a_retried_request_stores_and_emails_nothing_twice(stack: Stack) -> None:
    # Given a parked approval whose request is delivered again (at-least-once)
    parked = stack.park()
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None
    request = {**approval.model_dump(mode="json"), "interrupt_id": approval.interrupt_id}
    mails = len(list(stack.outbox.glob("*.json")))
    # When it is requested again
    again = request_approval(
        RequestApproval(run_id=approval.run_id, approval=request, task_token=parked.token),
        stack.container,
    )
    # Then nothing new was created or emailed
    assert (again.approval_id, again.created, again.emailed) == (parked.approval_id, False, [])
    assert len(list(stack.outbox.glob("*.json"))) == mails


def test_the_task_token_is_readable_only_through_task_token(stack: Stack) -> None:
    parked = stack.park()
    repo = stack.container.approvals
    assert repo.task_token(parked.approval_id) == parked.token
    shown = [repo.get(parked.approval_id), *repo.list(), *repo.list(pending_only=True)]
    assert all(parked.token not in json.dumps(a.model_dump(mode="json")) for a in shown if a)


# --------------------------------------------------------------------------------------------
# Viewing decides nothing
# --------------------------------------------------------------------------------------------


def test_get_and_head_repeated_decide_nothing(stack: Stack, callback: Any) -> None:
    # Given a parked approval
    parked = stack.park()
    link = parked.links[ALICE]
    # When its link is opened and probed many times, as mail scanners do
    pages = [_call(callback, _event(link, method=m)) for m in ("GET", "HEAD", "GET", "HEAD")]
    # Then every answer is the inert page, and nothing was decided or resumed
    assert [p["statusCode"] for p in pages] == [200, 200, 200, 200]
    assert pages[1]["body"] == ""
    assert '<form method="post">' in pages[0]["body"]
    assert "<script" not in pages[0]["body"].lower()
    assert stack.steps.sent == []
    assert stack.status(parked) == "RUNNING"
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.status is ApprovalStatus.pending


def test_the_page_shows_context_escaped_with_security_headers(stack: Stack, callback: Any) -> None:
    parked = stack.park(title="<img src=x onerror=alert(1)>")
    page = _call(callback, _event(parked.links[ALICE]))
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


# --------------------------------------------------------------------------------------------
# Deciding
# --------------------------------------------------------------------------------------------


def test_post_approve_resumes_the_run_with_the_decision(stack: Stack, callback: Any) -> None:
    # Given alice opened her link
    parked = stack.park()
    # When she approves with a comment and an edit
    _, answer = _open_and_decide(
        callback,
        parked.links[ALICE],
        "approved",
        comment="Looks good",
        **{"edit.amount": "1100", "edit.note": "ok"},
    )
    # Then the run resumed (for real) with her decision, and the page says so
    assert answer["statusCode"] == 200
    assert "You approved" in answer["body"]
    output = json.loads(stack.wait_status(parked, "SUCCEEDED")["output"])
    assert output == {
        "decision": "approved",
        "approver": ALICE,
        "comment": "Looks good",
        "edits": {"amount": 1100},
    }
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None
    assert (approval.status, approval.decided_by) == (ApprovalStatus.approved, ALICE)
    assert stack.container.approvals.list(pending_only=True) == []


def test_a_rejection_carries_the_comment(stack: Stack, callback: Any) -> None:
    parked = stack.park()
    _, answer = _open_and_decide(callback, parked.links[BOB], "rejected", comment="Too much")
    assert "You rejected" in answer["body"]
    output = json.loads(stack.wait_status(parked, "SUCCEEDED")["output"])
    assert (output["decision"], output["approver"], output["comment"]) == (
        "rejected",
        BOB,
        "Too much",
    )


def test_a_second_click_says_already_approved_and_resumes_nothing(
    stack: Stack, callback: Any
) -> None:
    # Given alice approved
    parked = stack.park()
    _open_and_decide(callback, parked.links[ALICE], "approved")
    stack.wait_status(parked, "SUCCEEDED")
    # When alice clicks again and bob opens and rejects
    again = _call(callback, _event(parked.links[ALICE]))
    bob_page = _call(callback, _event(parked.links[BOB]))
    bob_post = _call(
        callback,
        _event(
            parked.links[BOB],
            method="POST",
            form={"nonce": "whatever", "decision": "rejected"},
        ),
    )
    # Then each sees "already approved by alice at T" (not an error), and only one resume
    for page in (again, bob_page, bob_post):
        assert page["statusCode"] == 200
        assert re.search(
            r"already approved by alice@example\.com at \d{4}-\d\d-\d\d \d\d:\d\d UTC",
            page["body"],
        )
    assert len(stack.steps.sent) == 1


@pytest.mark.usefixtures("atomic_dynamodb")
def test_concurrent_approve_and_reject_have_one_winner(stack: Stack) -> None:
    # Given alice and bob both have the page open
    parked = stack.park()
    forms = {}
    for who in (ALICE, BOB):
        page = view_approval(_request(parked.links[who], "GET"), stack.container)
        forms[who] = {"nonce": _nonce(page.body)}
    forms[ALICE]["decision"] = "approved"
    forms[BOB]["decision"] = "rejected"
    results: dict[str, str] = {}
    start = threading.Barrier(2)

    def press(who: str) -> None:
        start.wait()
        page = decide_approval(_request(parked.links[who], "POST", forms[who]), stack.container)
        results[who] = page.body

    # When both press at the same moment
    threads = [threading.Thread(target=press, args=(who,)) for who in (ALICE, BOB)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then exactly one decision won and resumed the run; the other reads who won
    assert len(stack.steps.sent) == 1
    winner = stack.steps.sent[0]["approver"]
    loser = BOB if winner == ALICE else ALICE
    assert "You " in results[winner]
    assert f"already {stack.steps.sent[0]['decision']} by {winner}" in results[loser]
    output = json.loads(stack.wait_status(parked, "SUCCEEDED")["output"])
    assert output["approver"] == winner


# --------------------------------------------------------------------------------------------
# Refusals: nothing resumes
# --------------------------------------------------------------------------------------------


def _tampered(link: str, name: str, value: str) -> str:
    parts = urlsplit(link)
    query = dict(parse_qsl(parts.query))
    query[name] = value
    return f"{parts.scheme}://{parts.netloc}{parts.path}?{urlencode(query)}"


@pytest.mark.parametrize(
    ("name", "value"),
    [("sig", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), ("kid", "k9"), ("exp", "9999999999")],
)
def test_a_tampered_link_is_refused_and_resumes_nothing(
    stack: Stack, callback: Any, name: str, value: str
) -> None:
    parked = stack.park()
    link = _tampered(parked.links[ALICE], name, value)
    page = _call(callback, _event(link))
    post = _call(callback, _event(link, method="POST", form={"decision": "approved"}))
    for answer in (page, post):
        assert answer["statusCode"] == 403
        assert "This link is not valid" in answer["body"]
    assert stack.steps.sent == [] and stack.status(parked) == "RUNNING"


def test_a_link_without_a_signature_is_refused(stack: Stack, callback: Any) -> None:
    parked = stack.park()
    bare = parked.links[ALICE].split("?")[0]
    assert _call(callback, _event(bare))["statusCode"] == 403
    assert stack.steps.sent == []


def test_one_approvers_link_cannot_be_moved_to_another_approval(
    stack: Stack, callback: Any
) -> None:
    first, second = stack.park(), stack.park()
    query = urlsplit(first.links[ALICE]).query
    moved = f"{BASE_URL}/approvals/{second.approval_id}?{query}"
    assert _call(callback, _event(moved))["statusCode"] == 403


def test_an_expired_link_shows_the_expired_page(stack: Stack, callback: Any) -> None:
    # Given a parked approval whose expiry has passed (by the service's clock)
    parked = stack.park(timeout=300)
    page = _call(callback, _event(parked.links[ALICE]))
    stack.clock.now += timedelta(seconds=301)
    # When alice posts the form she opened earlier
    form = {"nonce": _nonce(page["body"]), "decision": "approved"}
    answer = _call(callback, _event(parked.links[ALICE], method="POST", form=form))
    # Then she reads that it expired, and nothing resumed
    assert answer["statusCode"] == 410
    assert "This approval has expired" in answer["body"]
    assert stack.steps.sent == [] and stack.status(parked) == "RUNNING"


def test_a_click_after_the_task_timed_out_is_too_late(stack: Stack, callback: Any) -> None:
    # Given an approval whose Step Functions task timed out (a real 1 s timeout)
    parked = stack.park(timeout=1)
    page = _call(callback, _event(parked.links[ALICE]))
    stack.wait_status(parked, "FAILED", seconds=15)
    # When alice approves
    form = {"nonce": _nonce(page["body"]), "decision": "approved"}
    answer = _call(callback, _event(parked.links[ALICE], method="POST", form=form))
    # Then SendTaskSuccess was refused (closed token): "too late", the approval timed out
    assert answer["statusCode"] == 410
    assert "Too late" in answer["body"]
    assert stack.steps.sent == []
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.status is ApprovalStatus.timed_out
    trail = stack.container.approvals.audit(parked.approval_id)
    assert ("too_late", "task_closed") in [(e.action, e.outcome) for e in trail]


def test_a_click_after_the_run_ended_is_refused(stack: Stack, callback: Any) -> None:
    # Given a parked run that an operator cancelled
    parked = stack.park()
    run = stack.container.runs.get_run("run-1")
    stack.container.runs.save_run(transition(run, RunStatus.cancelled, now=stack.clock.now))
    # When alice approves
    _, answer = _open_and_decide(callback, parked.links[ALICE], "approved")
    # Then she reads that the run ended, and nothing resumed
    assert answer["statusCode"] == 410
    assert "This run has ended" in answer["body"]
    assert stack.steps.sent == [] and stack.status(parked) == "RUNNING"
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.status is ApprovalStatus.cancelled


def test_a_validly_signed_link_for_someone_not_an_approver_is_refused(
    stack: Stack, callback: Any
) -> None:
    # Given a correctly signed link for carol, who is not an approver of this step
    parked = stack.park()
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None
    keys = load_signing_keys(stack.container.secrets, stack.container.settings.link_signing_secret)
    params = sign_link(
        approval.approval_id,
        "carol@example.com",
        approval.expires_at,
        keys.current,
        keys.current_key,
    )
    link = link_url(BASE_URL, approval.approval_id, params)
    # When carol opens and posts / Then she is refused, and nothing resumed
    assert _call(callback, _event(link))["statusCode"] == 403
    post = _call(callback, _event(link, method="POST", form={"decision": "approved"}))
    assert post["statusCode"] == 403 and "not an approver" in post["body"]
    assert stack.steps.sent == []


def test_a_post_without_the_page_nonce_decides_nothing(stack: Stack, callback: Any) -> None:
    parked = stack.park()
    answer = _call(
        callback, _event(parked.links[ALICE], method="POST", form={"decision": "approved"})
    )
    assert answer["statusCode"] == 400
    assert "Please use the buttons on the page" in answer["body"]
    assert stack.steps.sent == []


def test_a_post_that_is_not_a_form_is_refused(stack: Stack, callback: Any) -> None:
    parked = stack.park()
    event = _event(parked.links[ALICE], method="POST", form={"decision": "approved"})
    event["headers"]["content-type"] = "application/json"
    assert _call(callback, event)["statusCode"] == 415
    assert stack.steps.sent == []


def test_an_edit_that_is_not_json_shows_the_form_again(stack: Stack, callback: Any) -> None:
    parked = stack.park()
    _, answer = _open_and_decide(
        callback, parked.links[ALICE], "approved", **{"edit.amount": "{not json"}
    )
    assert answer["statusCode"] == 400
    assert "must be JSON" in answer["body"] and '<form method="post">' in answer["body"]
    assert stack.steps.sent == []


# --------------------------------------------------------------------------------------------
# One-time code
# --------------------------------------------------------------------------------------------


def test_a_step_requiring_a_code_refuses_a_missing_or_wrong_code(
    stack: Stack, callback: Any
) -> None:
    # Given an approval that requires the code from the email
    parked = stack.park(require_code=True)
    assert set(parked.codes) == {ALICE, BOB}
    page = _call(callback, _event(parked.links[ALICE]))
    assert 'name="code"' in page["body"]
    nonce = _nonce(page["body"])
    # When alice posts without a code, then with bob's code
    missing = _call(
        callback,
        _event(parked.links[ALICE], method="POST", form={"nonce": nonce, "decision": "approved"}),
    )
    wrong = _call(
        callback,
        _event(
            parked.links[ALICE],
            method="POST",
            form={"nonce": nonce, "decision": "approved", "code": parked.codes[BOB]},
        ),
    )
    # Then both are refused with the form shown again, and nothing resumed
    for answer in (missing, wrong):
        assert answer["statusCode"] == 403
        assert "does not match" in answer["body"] and '<form method="post">' in answer["body"]
    assert stack.steps.sent == []
    # And her own code decides
    right = _call(
        callback,
        _event(
            parked.links[ALICE],
            method="POST",
            form={"nonce": nonce, "decision": "approved", "code": parked.codes[ALICE]},
        ),
    )
    assert right["statusCode"] == 200 and "You approved" in right["body"]
    assert len(stack.steps.sent) == 1


def test_only_the_hash_of_a_code_is_stored(stack: Stack) -> None:
    parked = stack.park(require_code=True)
    raw = boto3.client("dynamodb", region_name=REGION).query(
        TableName=stack.container.settings.runs_table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"approval#{parked.approval_id}"}},
    )["Items"]
    stored = json.dumps(raw)
    assert all(code not in stored for code in parked.codes.values())
    keys = load_signing_keys(stack.container.secrets, stack.container.settings.link_signing_secret)
    ref = dict(parse_qsl(urlsplit(parked.links[ALICE]).query))["ap"]
    expected = code_hash(parked.approval_id, ref, parked.codes[ALICE], keys.current_key)
    assert stack.container.approvals.code_hash(parked.approval_id, ref) == expected


def test_too_many_wrong_codes_lock_the_approval(stack: Stack, callback: Any) -> None:
    parked = stack.park(require_code=True)
    nonce = _nonce(_call(callback, _event(parked.links[ALICE]))["body"])
    form = {"nonce": nonce, "decision": "approved", "code": "000000"}
    answers = [
        _call(callback, _event(parked.links[ALICE], method="POST", form=form))
        for _ in range(MAX_CODE_FAILURES)
    ]
    assert "Too many wrong codes" in answers[-1]["body"]
    form["code"] = parked.codes[ALICE]
    locked = _call(callback, _event(parked.links[ALICE], method="POST", form=form))
    assert locked["statusCode"] == 403 and "Too many wrong codes" in locked["body"]
    assert stack.steps.sent == []


# --------------------------------------------------------------------------------------------
# Lost deliveries: the process dies between recording a decision and SendTaskSuccess
# --------------------------------------------------------------------------------------------

RECORDED = {
    "decision": "approved",
    "approver": ALICE,
    "comment": "Looks good",
    "edits": {"amount": 1100},
}


def _record_then_crash(stack: Stack, parked: Parked) -> None:
    """Alice's approval is written, then the process dies before SendTaskSuccess."""
    stack.container.approvals.decide(
        parked.approval_id,
        ApprovalStatus.approved,
        ALICE,
        RECORDED["comment"],
        RECORDED["edits"],
        stack.clock.now,
    )


def _send_attempts(calls: RequestCounter) -> int:
    return calls.counts.get("SendTaskSuccess", 0)


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_later_visit_delivers_a_lost_decision_once_as_recorded(
    stack: Stack, callback: Any, method: str
) -> None:
    # Given alice's approval was recorded, but the process died before it reached the run
    parked = stack.park()
    _record_then_crash(stack, parked)
    stack.clock.now += REDELIVERY_GRACE + timedelta(seconds=1)
    # When bob later opens his link (or posts a rejection), and then alice opens hers
    form = {"nonce": "whatever", "decision": "rejected", "comment": "No"}
    first = _call(
        callback, _event(parked.links[BOB], method=method, form=form if method == "POST" else None)
    )
    later = _call(callback, _event(parked.links[ALICE]))
    # Then the run resumed once, with alice's recorded decision (not bob's), and both read it
    output = json.loads(stack.wait_status(parked, "SUCCEEDED")["output"])
    assert output == RECORDED
    assert stack.steps.sent == [RECORDED]
    for page in (first, later):
        assert page["statusCode"] == 200
        assert "already approved by alice@example.com" in page["body"]
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.status is ApprovalStatus.approved
    assert approval.delivered_at is not None
    trail = [
        (e.action, e.outcome, e.actor) for e in stack.container.approvals.audit(parked.approval_id)
    ]
    assert [entry for entry in trail if entry[0] == "redeliver"] == [
        ("redeliver", "delivered", BOB)
    ]


def test_a_decision_that_may_still_be_on_its_way_is_not_sent_again(
    stack: Stack, callback: Any
) -> None:
    # Given alice's approval was recorded moments ago (its own request may still deliver it)
    parked = stack.park()
    _record_then_crash(stack, parked)
    stack.clock.now += REDELIVERY_GRACE - timedelta(seconds=1)
    # When bob opens his link
    with RequestCounter(stack.container.client("stepfunctions")) as calls:
        page = _call(callback, _event(parked.links[BOB]))
    # Then he reads who decided, and nothing was sent: the run still waits
    assert page["statusCode"] == 200 and "already approved by alice" in page["body"]
    assert _send_attempts(calls) == 0
    assert stack.status(parked) == "RUNNING"


def test_a_delivered_approval_opened_again_sends_nothing(stack: Stack, callback: Any) -> None:
    # Given alice approved and the run resumed
    parked = stack.park()
    _open_and_decide(callback, parked.links[ALICE], "approved")
    stack.wait_status(parked, "SUCCEEDED")
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.delivered_at is not None
    # When, long after the grace, both open their links and bob posts a rejection
    stack.clock.now += timedelta(minutes=2)
    with RequestCounter(stack.container.client("stepfunctions")) as calls:
        pages = [
            _call(callback, _event(parked.links[ALICE])),
            _call(callback, _event(parked.links[BOB])),
            _call(
                callback,
                _event(
                    parked.links[BOB], method="POST", form={"nonce": "x", "decision": "rejected"}
                ),
            ),
        ]
    # Then each reads who decided, and no SendTaskSuccess was even attempted
    assert [p["statusCode"] for p in pages] == [200, 200, 200]
    assert _send_attempts(calls) == 0
    assert len(stack.steps.sent) == 1
    actions = [e.action for e in stack.container.approvals.audit(parked.approval_id)]
    assert "redeliver" not in actions


def test_a_lost_decision_whose_task_closed_is_marked_delivered_and_left(
    stack: Stack, callback: Any
) -> None:
    # Given alice's approval was recorded and lost, and the task then timed out (a real 1 s
    # timeout; the run's own timeout path resumes it with the recorded decision)
    parked = stack.park(timeout=1)
    _record_then_crash(stack, parked)
    stack.wait_status(parked, "FAILED", seconds=15)
    stack.clock.now += REDELIVERY_GRACE + timedelta(seconds=1)
    # When bob opens his (now expired) link twice
    with RequestCounter(stack.container.client("stepfunctions")) as calls:
        pages = [_call(callback, _event(parked.links[BOB])) for _ in range(2)]
    # Then one send found the task closed, the decision stands and is marked delivered, and
    # the second visit sent nothing
    assert _send_attempts(calls) == 1
    for page in pages:
        assert page["statusCode"] == 200
        assert "already approved by alice@example.com" in page["body"]
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.status is ApprovalStatus.approved
    assert approval.delivered_at is not None
    trail = [
        (e.action, e.outcome, e.actor) for e in stack.container.approvals.audit(parked.approval_id)
    ]
    assert ("redeliver", "task_closed", BOB) in trail


def test_a_delivered_decision_is_never_reopened_timed_out_or_cancelled(stack: Stack) -> None:
    # Given alice's approval was recorded and marked delivered
    parked = stack.park()
    repo = stack.container.approvals
    decided = repo.decide(
        parked.approval_id, ApprovalStatus.approved, ALICE, None, {}, stack.clock.now
    )
    assert decided.delivered_at is None
    assert repo.mark_delivered(parked.approval_id, stack.clock.now) is not None
    # When anything tries to undo or close it
    undone = (
        repo.reopen(decided),
        repo.mark(parked.approval_id, ApprovalStatus.timed_out),
        repo.mark(parked.approval_id, ApprovalStatus.cancelled),
    )
    # Then nothing changed it: the run got this decision
    assert undone == (False, False, False)
    approval = repo.get(parked.approval_id)
    assert approval is not None and approval.status is ApprovalStatus.approved


def test_a_pending_approval_has_nothing_to_mark_delivered(stack: Stack) -> None:
    # Given a pending approval
    parked = stack.park()
    # When it is marked delivered / Then nothing is, and it stays pending
    assert stack.container.approvals.mark_delivered(parked.approval_id, stack.clock.now) is None
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.is_pending and approval.delivered_at is None


# --------------------------------------------------------------------------------------------
# Timeout path, audit, secrets never leak
# --------------------------------------------------------------------------------------------


def test_expire_approval_closes_it_once_and_later_clicks_read_expired(
    stack: Stack, callback: Any
) -> None:
    parked = stack.park()
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None
    assert approval_id_for(approval.run_id, approval.interrupt_id) == parked.approval_id
    assert expire_approval(approval.run_id, approval.interrupt_id, stack.container) is True
    assert expire_approval(approval.run_id, approval.interrupt_id, stack.container) is False
    page = _call(callback, _event(parked.links[ALICE]))
    assert page["statusCode"] == 410 and "expired" in page["body"]
    assert stack.steps.sent == []


def test_the_audit_trail_has_every_view_and_decision(stack: Stack, callback: Any) -> None:
    # Given alice viewed, bob probed with HEAD, alice approved, bob clicked late
    parked = stack.park()
    _call(callback, _event(parked.links[BOB], method="HEAD", source_ip="198.51.100.1"))
    _open_and_decide(callback, parked.links[ALICE], "approved")
    _call(callback, _event(parked.links[BOB], source_ip="198.51.100.1"))
    # When the trail is read
    trail = stack.container.approvals.audit(parked.approval_id)
    # Then it has each step in order, with who, from where and the outcome
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


def test_the_task_token_appears_in_no_email_url_page_or_log(
    stack: Stack,
    callback: Any,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    handler_container: UseContainer,
) -> None:
    # Everything at INFO (what runs in Lambda), ours at DEBUG; botocore's DEBUG wire dumps are
    # off in Lambda and would show any request body.
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.DEBUG, logger="langorch")
    # Given the whole flow, with the request going through its handler
    from functions.request_approval import handler as request_handler

    handler_container(request_handler, stack.container)
    stack.runs_seen += 1
    run_id = f"run-{stack.runs_seen}"
    request = {
        "kind": "approval",
        "step_id": "review",
        "title": "Pay",
        "approvers": [ALICE],
        "timeout_seconds": 300,
        "interrupt_id": "int-x",
        "require_code": True,
    }
    _waiting_run(stack.container, run_id, request, stack.clock.now)
    arn = stack.sfn.start_execution(
        stateMachineArn=stack.machine_arn,
        name=run_id,
        input=json.dumps({"run_id": run_id, "approval": request}),
    )["executionArn"]
    token = _task_token(stack.sfn, arn)
    answer = request_handler.handler(
        {"run_id": run_id, "approval": request, "task_token": token}, FakeContext()
    )
    mail = json.loads(next(stack.outbox.glob("*.json")).read_text())
    eml = next(stack.outbox.glob("*.eml")).read_text()
    page = _call(callback, _event(mail["link"]))
    code = re.search(r"one-time code: (\d{6})", mail["text"])
    assert code
    form = {"nonce": _nonce(page["body"]), "decision": "approved", "code": code.group(1)}
    post = _call(callback, _event(mail["link"], method="POST", form=form))
    assert post["statusCode"] == 200
    printed = capsys.readouterr()
    # Then the token is nowhere a person or a log can see, while the link was printed locally
    seen = [
        json.dumps(answer),
        json.dumps(mail),
        eml,
        mail["link"],
        page["body"],
        post["body"],
        json.dumps(page["headers"]),
        caplog.text,
        printed.out,
        printed.err,
    ]
    leaks = [i for i, text in enumerate(seen) if token in text]
    assert leaks == []
    assert mail["link"] in printed.out
    assert "approval decided" in caplog.text + printed.out  # the logs were captured
    assert urlsplit(mail["link"]).query not in caplog.text + printed.err
    assert answer["emailed"] == 1


# --------------------------------------------------------------------------------------------
# SES
# --------------------------------------------------------------------------------------------


def test_ses_sends_text_and_html_without_header_injection(tmp_path: Path) -> None:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ses.models import ses_backends

    from langorch.adapters.ses import SesSender
    from langorch.domain.approvals import new_approval
    from langorch.web.emails import render_approval_email

    with mock_aws():
        client = boto3.client("ses", region_name=REGION)
        client.verify_email_identity(EmailAddress="langorch@example.com")
        sender = SesSender(client, sender="langorch@example.com", configuration_set=None)
        approval = new_approval(
            run_id="run-s",
            workflow_id="wf",
            request={
                "interrupt_id": "i",
                "step_id": "s",
                "title": "Pay\r\nBcc: attacker@example.com",
                "message": "<script>x()</script>",
                "approvers": [ALICE],
            },
            now=datetime.now(UTC),
        )
        email = render_approval_email(approval, to=ALICE, link=f"{BASE_URL}/approvals/a?x=1")
        message_id = sender.send(email)
        sent = ses_backends[DEFAULT_ACCOUNT_ID][REGION].sent_messages
        assert message_id and len(sent) == 1
        assert sent[0].subject == "Approval needed: Pay Bcc: attacker@example.com"
        assert "&lt;script&gt;" in sent[0].body and "<script>" not in sent[0].body
        assert sent[0].destinations["ToAddresses"] == [ALICE]


def test_ses_refusing_an_email_is_a_named_error() -> None:
    from langorch.adapters.ses import SesSender
    from langorch.domain.approvals import EmailNotSentError
    from langorch.web.emails import OutgoingEmail

    with mock_aws():
        client = boto3.client("ses", region_name=REGION)
        sender = SesSender(client, sender="unverified@example.com", configuration_set=None)
        email = OutgoingEmail(to=ALICE, subject="s", approval_id="a", text="t", html="h", link="l")
        with pytest.raises(EmailNotSentError, match="verified identity"):
            sender.send(email)


# --------------------------------------------------------------------------------------------
# Cold starts
# --------------------------------------------------------------------------------------------


def test_the_handlers_import_neither_langgraph_nor_langchain() -> None:
    code = (
        "import sys\n"
        "import functions.request_approval.handler, functions.approval_callback.handler\n"
        "import langorch.app.approvals, langorch.web.pages, langorch.web.emails\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('langgraph', 'langchain',"
        " 'langchain_core', 'langchain_aws', 'langchain_openai'))\n"
        "print(bad)\n"
        "assert not bad, bad\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
