"""A parked approval on fakes: the approval use-cases and the callback handler without AWS.

:class:`FakeStack` mirrors the moto stack of ``tests/integration/test_approvals.py``: it parks a
run on an approval (a waiting run record, an execution waiting on a task token, the request
with its emails) and calls the real ``approval_callback`` handler with API Gateway events, all
on the in-memory fakes of ``tests/fakes``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from langorch.app.approvals.decisions import (
    ApprovalRequested,
    DecideApproval,
    RequestApproval,
    ViewApproval,
    Visitor,
    decide_approval,
    ensure_signing_key,
    view_approval,
)
from langorch.app.approvals.decisions import request_approval as request
from langorch.domain.approvals.outcomes import AlreadyDecided, Shown
from langorch.domain.approvals.record import Approval
from langorch.domain.runs import PendingInterrupt, RunRecord, RunStatus, RunTrigger, transition
from tests.fakes import Fakes, InMemoryExecutions
from tests.fakes.approvals import InMemoryApprovals
from tests.support.events import EVENTS as EVENTS  # re-exported: the Slack tests build on it
from tests.support.events import LambdaContext
from tests.support.events import approval_event as event

CALLBACK_CONTEXT = LambdaContext("approval-callback", "c6af9ac6-7b61-11e6-9a41-93e8deadbeef")
BASE_URL = "https://approve.example.com"
ALICE = "alice@example.com"
BOB = "bob@example.com"


class CountingExecutions(InMemoryExecutions):
    """The executions fake, keeping every ``SendTaskSuccess`` attempt and those that landed."""

    def __init__(self, state_machine_arn: str | None) -> None:
        super().__init__(state_machine_arn)
        self.sent: list[dict[str, Any]] = []
        self.attempts = 0
        self.unavailable = False

    def park(self, run_id: str, payload: dict[str, Any] | None = None) -> str:
        """Park the run on a task; its token joins the suite-wide leak guard."""
        from tests.conftest import FAKE_TASK_TOKENS

        token = super().park(run_id, payload)
        FAKE_TASK_TOKENS.append(token)
        return token

    def send_success(self, task_token: str, output: dict[str, Any]) -> None:
        self.attempts += 1
        if self.unavailable:
            from langorch.domain.errors import StorageError

            raise StorageError("Step Functions SendTaskSuccess failed: ServiceUnavailable")
        super().send_success(task_token, output)
        self.sent.append(output)


class ApprovalFakes(Fakes):
    """The shared fakes plus the approvals store (what the approval use-cases read)."""

    def __init__(self, **settings: Any) -> None:
        super().__init__(seed_builtins=False, **settings)
        self.approvals = InMemoryApprovals()
        self.executions = CountingExecutions(self.settings.state_machine_arn)


@dataclass
class Parked:
    """One run parked on an approval: its run id, token, approval id and emailed links."""

    run_id: str
    token: str
    approval_id: str
    links: dict[str, str] = field(default_factory=dict)
    codes: dict[str, str] = field(default_factory=dict)
    request: dict[str, Any] = field(default_factory=dict)
    """The approval the run's task asked for (what a park again asks for)."""


class FakeStack:
    """Parks runs on approvals and answers approval pages, all on fakes."""

    def __init__(self) -> None:
        self.container = ApprovalFakes(public_base_url=BASE_URL)
        self.clock = self.container.clock
        self.steps = self.container.executions
        self.runs_seen = 0
        ensure_signing_key(self.container.secrets, self.container.settings.link_signing_secret)

    def read_pages(self) -> None:
        """The people who opened pages read them: the clock moves past the form's dwell."""
        self.clock.advance(self.container.settings.approval_form_dwell_seconds)

    def park(
        self,
        *,
        timeout: int = 300,
        require_code: bool = False,
        approvers: list[str] | None = None,
        editable: dict[str, Any] | None = None,
        title: str = "Pay invoice 42",
        previous: dict[str, Any] | None = None,
        policy: dict[str, Any] | None = None,
        started_by: str | None = None,
    ) -> Parked:
        """A run waiting on its task token, and the approval requested for it."""
        self.runs_seen += 1
        run_id = f"run-{self.runs_seen}"
        approval = an_approval_request(
            self.runs_seen,
            title=title,
            approvers=approvers,
            timeout=timeout,
            require_code=require_code,
            editable=editable,
            iteration=1 if previous is None else previous["iteration"] + 1,
        )
        if previous is not None:
            approval["previous"] = previous
        if policy is not None:
            approval["policy"] = policy
        waiting_run(self.container, run_id, approval, self.clock(), started_by=started_by)
        token = self.steps.park(run_id)
        before = len(self.container.email.sent)
        result = request(
            RequestApproval(run_id=run_id, approval=approval, task_token=token),
            self.container,
            randbelow=codes(),
        )
        parked = Parked(run_id, token, result.approval_id, request=approval)
        for mail in self.container.email.sent[before:]:
            parked.links[mail.to] = mail.link
            if code := mailed_code(mail.text):
                parked.codes[mail.to] = code
        return parked

    def park_again(self, parked: Parked) -> ApprovalRequested:
        """The run's new execution (after a restart) parks on the same approval again."""
        token = self.steps.park(parked.run_id)
        return request(
            RequestApproval(run_id=parked.run_id, approval=parked.request, task_token=token),
            self.container,
            randbelow=codes(),
        )

    def approval(self, parked: Parked) -> Approval:
        """The stored approval (it must be there)."""
        approval = self.container.approvals.get(parked.approval_id)
        assert approval is not None, f"approval {parked.approval_id} is not stored"
        return approval

    def status(self, parked: Parked) -> str:
        """The execution's status (RUNNING until resumed)."""
        return str(self.steps.describe(parked.run_id)["status"])

    def output(self, parked: Parked) -> dict[str, Any]:
        """What the run resumed with."""
        described = self.steps.describe(parked.run_id)
        assert described["status"] == "SUCCEEDED", described["status"]
        return dict(json.loads(described["output"]))

    def time_out(self, parked: Parked) -> None:
        """The task stops waiting (its timeout): its token is closed from now on, and the
        execution goes on to the timeout's segment."""
        self.steps.time_out_tasks(parked.run_id)

    def audit(self, parked: Parked) -> list[tuple[str, str, str | None]]:
        """The approval's audit trail as (action, outcome, actor)."""
        trail = self.container.approvals.audit(parked.approval_id)
        return [(e.action, e.outcome, e.actor) for e in trail]


def an_approval_request(
    n: int,
    *,
    title: str = "Pay invoice 42",
    approvers: list[str] | None = None,
    timeout: int = 300,
    require_code: bool = False,
    editable: dict[str, Any] | None = None,
    iteration: int = 1,
) -> dict[str, Any]:
    """The approval request of the ``n``-th parked run: an invoice to pay, ALICE and BOB to
    decide it, its amount and note editable."""
    return {
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
        "iteration": iteration,
        "max_iterations": 3,
        "interrupt_id": f"int-{n}",
    }


def mailed_code(text: str) -> str | None:
    """The one-time code an approval email carries, if any."""
    found = re.search(r"one-time code: (\d{6})", text)
    return found.group(1) if found else None


def codes() -> Any:
    values = iter([111111, 222222, 333333, 444444, 555555, 666666])
    return lambda n: next(values)


def waiting_run(
    container: Any,
    run_id: str,
    request: dict[str, Any],
    now: datetime,
    *,
    started_by: str | None = None,
) -> None:
    """A run record parked on ``request`` (started by ``started_by``, when known)."""
    detail = {"started_by": started_by} if started_by else {}
    run = RunRecord(
        run_id=run_id,
        workflow_id="invoices",
        workflow_version=1,
        trigger=RunTrigger(type="manual", detail=detail),
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


def call(callback: Any, built: dict[str, Any]) -> dict[str, Any]:
    """The handler's answer to one event."""
    return dict(callback.handler(built, CALLBACK_CONTEXT))


def nonce(body: str) -> str:
    """The form nonce on a page."""
    found = re.search(r'name="nonce" value="([^"]+)"', body)
    assert found, "the page has no nonce"
    return found.group(1)


def read(callback: Any, body: str) -> str:
    """A person reads the page (the fake clock moves past the form's dwell): its view token."""
    container = callback.container()
    container.clock.advance(container.settings.approval_form_dwell_seconds)
    return nonce(body)


def open_and_decide(
    callback: Any, link: str, decision: str, **fields: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Open the page, read it, then post its form with ``decision``."""
    page = call(callback, event(link))
    form = {"nonce": read(callback, page["body"]), "decision": decision, **fields}
    return page, call(callback, event(link, method="POST", form=form))


def submit(callback: Any, link: str, shown: dict[str, Any], **form: str) -> dict[str, Any]:
    """Read ``shown`` (the page, or the last answer with its form) and post its form from
    ``link`` with ``form``: the callback's answer."""
    fields = {"nonce": read(callback, shown["body"]), **form}
    return call(callback, event(link, method="POST", form=fields))


VISITOR_IP = "198.51.100.9"
VISITOR_AGENT = "test-agent"


def view_command(link: str) -> ViewApproval:
    """The page use-case's command for opening ``link`` (as the callback builds it)."""
    parts = urlsplit(link)
    return ViewApproval(
        approval_id=parts.path.rsplit("/", 1)[-1],
        link=dict(parse_qsl(parts.query)),
        visitor=Visitor("GET", source_ip=VISITOR_IP, user_agent=VISITOR_AGENT),
    )


def decide_command(link: str, form: dict[str, str] | None = None) -> DecideApproval:
    """The decide use-case's command for posting ``form`` from ``link``'s page."""
    parts = urlsplit(link)
    return DecideApproval(
        approval_id=parts.path.rsplit("/", 1)[-1],
        link=dict(parse_qsl(parts.query)),
        form=form or {},
        visitor=Visitor("POST", source_ip=VISITOR_IP, user_agent=VISITOR_AGENT),
    )


def tampered(link: str, name: str, value: str) -> str:
    """``link`` with one query parameter changed."""
    parts = urlsplit(link)
    query = dict(parse_qsl(parts.query))
    query[name] = value
    return f"{parts.scheme}://{parts.netloc}{parts.path}?{urlencode(query)}"


def press(stack: FakeStack, link: str, decision: str, **form: str) -> Any:
    """Open the page, read it, press a button (the page that says who decided, when decided)."""
    shown = view_approval(view_command(link), stack.container)
    if isinstance(shown, AlreadyDecided):
        return shown
    assert isinstance(shown, Shown)
    stack.read_pages()
    fields = {"nonce": shown.nonce, "decision": decision, **form}
    return decide_approval(decide_command(link, fields), stack.container)
