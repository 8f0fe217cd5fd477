"""Approvals end to end on moto, with a real Step Functions task token: one test per wiring path.

The use-case logic (refusals, codes, redelivery, timeout and cancel, audit) is proven on fakes
in ``tests/unit/test_approvals_usecases.py``; the store's conditional writes in
``tests/contracts/test_approvals_store.py``. Here each path runs on the real adapters: GET/HEAD
through the handler, a decision resuming a real execution, decide-once under concurrency on
DynamoDB, a closed token refused by Step Functions, redelivery of a lost decision, the code
hash at rest, and no task token anywhere a person or a log can see.

A tiny state machine parks on ``lambda:invoke.waitForTaskToken`` (moto executes it; the token is
read from the execution history's ``TaskScheduled`` event), so ``SendTaskSuccess`` — and its
failure on a closed token — runs for real. Requests reach the real handlers through recorded
API Gateway HTTP API (v2) events.
"""

from __future__ import annotations

import io
import json
import logging
import re
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import boto3
import pytest
from moto import mock_aws

from langorch.adapters.stepfunctions import StepFunctions
from langorch.app.approvals.decisions import (
    REDELIVERY_GRACE,
    RequestApproval,
    decide_approval,
    ensure_signing_key,
    load_signing_keys,
    request_approval,
    view_approval,
)
from langorch.composition.container import Container
from langorch.config import Settings
from langorch.domain.approvals.codes import code_hash
from langorch.domain.approvals.outcomes import Shown
from langorch.domain.approvals.record import (
    ApprovalStatus,
)
from tests.fakes.clock import FakeClock
from tests.support.aws import one_request_at_a_time
from tests.support.polling import wait_for
from tests.unit.approvals_support import (
    ALICE,
    BASE_URL,
    BOB,
    CALLBACK_CONTEXT,
    an_approval_request,
    call,
    codes,
    decide_command,
    event,
    mailed_code,
    nonce,
    open_and_decide,
    read,
    view_command,
    waiting_run,
)

from .conftest import UseContainer

REGION = "us-east-1"
ROOT = Path(__file__).resolve().parents[2]
MOTO_CONFIG: Any = {
    "stepfunctions": {"execute_state_machine": True},
    "lambda": {"use_docker": False},
}


# --------------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------------


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
    clock: FakeClock
    sfn: Any
    machine_arn: str
    outbox: Path
    steps: CountingStepFunctions
    runs_seen: int = 0

    def park(self, **request: Any) -> Parked:
        """Start an execution that waits on its task token, and request the approval
        (``request``: what differs from :func:`an_approval_request`'s)."""
        self.runs_seen += 1
        return self.park_request(
            f"run-{self.runs_seen}", an_approval_request(self.runs_seen, **request)
        )

    def start_waiting(self, run_id: str, request: dict[str, Any]) -> tuple[str, str]:
        """Run ``run_id`` parked on ``request``, its execution started and waiting on its task
        token: the execution's ARN and the token."""
        waiting_run(self.container, run_id, request, self.clock.now)
        arn = self.sfn.start_execution(
            stateMachineArn=self.machine_arn,
            name=run_id,
            input=json.dumps({"run_id": run_id, "approval": request}),
        )["executionArn"]
        return arn, _task_token(self.sfn, arn)

    def park_request(self, run_id: str, request: dict[str, Any]) -> Parked:
        """Start run ``run_id``'s execution waiting on its task token, and request ``request``:
        the links and codes each approver was mailed."""
        arn, token = self.start_waiting(run_id, request)
        before = set(self.outbox.glob("*.json"))
        result = request_approval(
            RequestApproval(run_id=run_id, approval=request, task_token=token),
            self.container,
            randbelow=codes(),
        )
        parked = Parked(arn, token, result.approval_id)
        for path in sorted(set(self.outbox.glob("*.json")) - before):
            mail = json.loads(path.read_text())
            parked.links[mail["to"]] = mail["link"]
            if code := mailed_code(mail["text"]):
                parked.codes[mail["to"]] = code
        return parked

    def status(self, parked: Parked) -> str:
        return str(self.sfn.describe_execution(executionArn=parked.execution_arn)["status"])

    def wait_status(self, parked: Parked, wanted: str) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            described = self.sfn.describe_execution(executionArn=parked.execution_arn)
            return dict(described) if described["status"] == wanted else None

        return wait_for(reached, what=f"the execution to reach {wanted}", max_interval=0.8)


def _task_token(sfn: Any, execution_arn: str) -> str:
    def scheduled() -> str | None:
        for entry in sfn.get_execution_history(executionArn=execution_arn)["events"]:
            if entry["type"] == "TaskScheduled":
                parameters = json.loads(entry["taskScheduledEventDetails"]["parameters"])
                return str(parameters["Payload"]["task_token"])
        return None

    # (backing off: each check reads moto's execution history)
    return wait_for(scheduled, what="the execution to schedule its task", max_interval=0.8)


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
        clock = FakeClock(datetime.now(UTC).replace(microsecond=0))
        container = Container(
            Settings(outbox_dir=str(outbox), state_machine_arn=machine, public_base_url=BASE_URL),
            clock=clock,
        )
        one_request_at_a_time(container.client("dynamodb"))  # atomic, as DynamoDB's requests
        container.runs.create_table()
        ensure_signing_key(container.secrets, container.settings.link_signing_secret)
        steps = CountingStepFunctions(container.client("stepfunctions"), machine)
        container.__dict__["stepfunctions"] = steps
        yield Stack(container, clock, sfn, machine, outbox, steps)


@pytest.fixture
def callback(stack: Stack, handler_container: UseContainer) -> Any:
    """The approval_callback handler module, using the test's container."""
    from functions.approval_callback import handler

    handler_container(handler, stack.container)
    return handler


def _page(outcome: Any) -> Any:
    from langorch.web.pages import outcome_page

    return outcome_page(outcome)


# --------------------------------------------------------------------------------------------
# Viewing decides nothing
# --------------------------------------------------------------------------------------------


def test_get_and_head_repeated_decide_nothing(stack: Stack, callback: Any) -> None:
    # Given a parked approval
    parked = stack.park()
    link = parked.links[ALICE]
    # When its link is opened and probed many times, as mail scanners do
    pages = [call(callback, event(link, method=m)) for m in ("GET", "HEAD", "GET", "HEAD")]
    # Then every answer is the inert page, and nothing was decided or resumed
    assert [p["statusCode"] for p in pages] == [200, 200, 200, 200]
    assert pages[1]["body"] == ""
    assert '<form method="post">' in pages[0]["body"]
    assert "<script" not in pages[0]["body"].lower()
    assert stack.steps.sent == []
    assert stack.status(parked) == "RUNNING"
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.status is ApprovalStatus.pending


# --------------------------------------------------------------------------------------------
# Deciding
# --------------------------------------------------------------------------------------------


def test_post_approve_resumes_the_run_with_the_decision(stack: Stack, callback: Any) -> None:
    # Given alice opened her link
    parked = stack.park()
    # When she approves with a comment and an edit
    _, answer = open_and_decide(
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


def test_concurrent_approve_and_reject_have_one_winner(stack: Stack) -> None:
    # Given alice and bob both have the page open
    parked = stack.park()
    forms = {}
    for who in (ALICE, BOB):
        shown = view_approval(view_command(parked.links[who]), stack.container)
        assert isinstance(shown, Shown)
        forms[who] = {"nonce": shown.nonce}
    # and have read it (the form decides only a dwell after its page view)
    stack.clock.now += timedelta(seconds=stack.container.settings.approval_form_dwell_seconds)
    forms[ALICE]["decision"] = "approved"
    forms[BOB]["decision"] = "rejected"
    results: dict[str, str] = {}
    start = threading.Barrier(2)

    def press(who: str) -> None:
        start.wait()
        outcome = decide_approval(decide_command(parked.links[who], forms[who]), stack.container)
        results[who] = _page(outcome).body

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


def test_a_click_after_the_execution_ended_is_kept_for_a_redrive(
    stack: Stack, callback: Any
) -> None:
    # Given a run whose Step Functions execution ended while it waited on its approval (this
    # machine has no catch: its task's real 1 s timeout fails the execution)
    parked = stack.park(timeout=1)
    # (alice opened the page a dwell before the approval's 1 s ran out)
    dwell = timedelta(seconds=stack.container.settings.approval_form_dwell_seconds)
    stack.clock.now -= dwell
    page = call(callback, event(parked.links[ALICE]))
    stack.clock.now += dwell
    stack.wait_status(parked, "FAILED")
    # When alice approves
    form = {"nonce": nonce(page["body"]), "decision": "approved"}
    answer = call(callback, event(parked.links[ALICE], method="POST", form=form))
    # Then SendTaskSuccess was refused (closed token), and she reads that her decision is kept
    # while the run is not running
    assert answer["statusCode"] == 202
    assert "the run is not running" in answer["body"]
    assert stack.steps.sent == []
    # ... and it is kept, undelivered, for the run's redrive
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.status is ApprovalStatus.approved
    assert approval.delivered_at is None
    trail = stack.container.approvals.audit(parked.approval_id)
    assert ("held", "run_not_running") in [(e.action, e.outcome) for e in trail]


# --------------------------------------------------------------------------------------------
# One-time code
# --------------------------------------------------------------------------------------------


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


def test_a_later_visit_delivers_a_lost_decision_once_as_recorded(
    stack: Stack, callback: Any
) -> None:
    # Given alice's approval was recorded, but the process died before it reached the run
    parked = stack.park()
    _record_then_crash(stack, parked)
    stack.clock.now += REDELIVERY_GRACE + timedelta(seconds=1)
    # When bob later opens his link, and then alice opens hers (a POST, and the other
    # redelivery paths: tests/unit/test_approvals_usecases.py)
    first = call(callback, event(parked.links[BOB]))
    later = call(callback, event(parked.links[ALICE]))
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


# --------------------------------------------------------------------------------------------
# Secrets never leak
# --------------------------------------------------------------------------------------------


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
    _, token = stack.start_waiting(run_id, request)
    answer = request_handler.handler(
        {"run_id": run_id, "approval": request, "task_token": token}, CALLBACK_CONTEXT
    )
    mail = json.loads(next(stack.outbox.glob("*.json")).read_text())
    eml = next(stack.outbox.glob("*.eml")).read_text()
    page = call(callback, event(mail["link"]))
    code = re.search(r"one-time code: (\d{6})", mail["text"])
    assert code
    form = {"nonce": read(callback, page["body"]), "decision": "approved", "code": code.group(1)}
    post = call(callback, event(mail["link"], method="POST", form=form))
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
    from langorch.domain.approvals.record import new_approval
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
    from langorch.domain.approvals.record import EmailNotSentError
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
        "import langorch.app.approvals.decisions, langorch.web.pages, langorch.web.emails\n"
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
