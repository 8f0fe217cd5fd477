"""The README walkthrough against the local stack, through its front doors only.

A signed webhook POST to the local gateway starts a run; the approval email lands in the outbox;
its link shows a page that decides nothing; a POST from the page decides, and the run resumes
in the emulator's Step Functions. Files put with ``langorch files put`` start the workflows
whose s3 trigger matches, once per object event. A schedule fires once per slot.

Nothing inside langorch is replaced: the stack runs the real handlers through the emulator's
Lambda, and the state machine is the package's ASL.
"""

from __future__ import annotations

import html
import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode

import pytest
from standardwebhooks import Webhook

from langorch.composition.bootstrap import build_container
from langorch.composition.container import Container
from langorch.domain.runs import RunRecord, TimelineEventType
from langorch.local.stack import LocalStack
from tests.support import polling
from tests.support.loopback import request
from tests.support.stacks import running_stack

T = TypeVar("T")

TRIGGER_FUNCTION = "langorch-trigger"

APPROVER = "approver@example.com"

DEFINITIONS = """
workflows:
  - plan_id: e2e_review
    name: A webhook, one approval, a branch per outcome
    triggers: [{type: webhook}]
    approvers: [approver@example.com]
    memory: false
    inputs_schema:
      properties: {item: {type: string}}
      required: [item]
    steps: &steps
      - step_id: prepare
        kind: transform
        transform: {subject: "item"}
      - step_id: review
        kind: approval
        depends_on: [prepare]
        approval:
          title: "Approve {{ item }}"
          show_keys: [subject]
          timeout_seconds: 3600
        branches: {approved: accept, rejected: decline, timed_out: expire}
      - {step_id: accept, kind: transform, transform: {outcome: "'accepted'"}}
      - {step_id: decline, kind: transform, transform: {outcome: "'declined'"}}
      - {step_id: expire, kind: transform, transform: {outcome: "'expired'"}}
  - plan_id: e2e_short_fuse
    name: The same with a 2-second approval timeout
    triggers: [{type: webhook}]
    approvers: [approver@example.com]
    memory: false
    inputs_schema:
      properties: {item: {type: string}}
      required: [item]
    steps:
      - {step_id: prepare, kind: transform, transform: {subject: "item"}}
      - step_id: review
        kind: approval
        depends_on: [prepare]
        approval: {title: "Approve {{ item }} quickly", timeout_seconds: 2}
        branches: {approved: accept, rejected: decline, timed_out: expire}
      - {step_id: accept, kind: transform, transform: {outcome: "'accepted'"}}
      - {step_id: decline, kind: transform, transform: {outcome: "'declined'"}}
      - {step_id: expire, kind: transform, transform: {outcome: "'expired'"}}
  - plan_id: e2e_csv_import
    triggers: [{type: s3, prefix: "inbox/", suffix: ".csv"}]
    memory: false
    steps:
      - {step_id: note, kind: transform, transform: {seen: "'csv'"}}
  - plan_id: e2e_pdf_import
    triggers: [{type: s3, prefix: "inbox/", suffix: ".pdf"}]
    memory: false
    steps:
      - {step_id: note, kind: transform, transform: {seen: "'pdf'"}}
  - plan_id: e2e_new_year
    triggers:
      - type: schedule
        schedule: {cron_expression: "0 0 1 1 *", timezone: UTC}
    memory: false
    steps:
      - {step_id: note, kind: transform, transform: {seen: "'new year'"}}
"""


# --------------------------------------------------------------------------------------------
# Helpers: HTTP, polling, the outbox
# --------------------------------------------------------------------------------------------


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 60.0) -> T:
    """Poll ``probe`` until it returns something (the emulator runs executions on threads)."""
    return polling.wait_for(probe, what=what, timeout=timeout, interval=0.2)


def outbox(stack: LocalStack) -> list[dict[str, Any]]:
    folder = Path(stack.settings.outbox_dir or "")
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def email_for(stack: LocalStack, run_id: str, container: Container) -> dict[str, Any]:
    def find() -> dict[str, Any] | None:
        ids = {a.approval_id for a in container.approvals.list(run_id=run_id)}
        return next((m for m in outbox(stack) if m["approval_id"] in ids), None)

    return wait_for(f"the approval email of {run_id}", find)


def run_in(container: Container, run_id: str, *statuses: str) -> RunRecord | None:
    run = container.runs.get_run(run_id)
    return run if run.status.value in statuses else None


# --------------------------------------------------------------------------------------------
# The stack
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """`langorch dev` in this process, with the walkthrough's workflows registered."""
    home = tmp_path_factory.mktemp("walkthrough") / ".langorch"
    with running_stack(home, definitions=DEFINITIONS) as running:
        yield running


@pytest.fixture
def container(stack: LocalStack) -> Container:
    return build_container(stack.settings)


def signed_headers(secret: str, delivery: str, payload: str) -> dict[str, str]:
    """Standard Webhooks headers made with the official library, as a sender makes them."""
    now = datetime.now(UTC)
    return {
        "webhook-id": delivery,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(secret).sign(delivery, now, payload),
        "Content-Type": "application/json",
    }


def deliver(stack: LocalStack, container: Container, workflow: str, data: Any) -> tuple[int, Any]:
    """A signed webhook delivery to the local gateway, as a sender makes it."""
    secret = container.secrets.get_json(stack.settings.webhook_secret_prefix + workflow)
    payload = json.dumps(data)
    body = payload.encode()
    headers = signed_headers(secret["current"], f"d-{uuid.uuid4().hex}", payload)
    status, answer = request(
        f"{stack.settings.public_base_url}/hooks/{workflow}",
        "POST",
        body,
        headers,
    )
    return status, json.loads(answer or b"null")


def decide(link: str, decision: str, dwell: float, **edits: str) -> tuple[int, str]:
    """Open the link, press at once (refused: scanners do that), read the page, press again
    (with ``edits``: the form's ``edit.<key>`` fields, as typed)."""
    status, page = request(link)
    assert status == 200
    fields = {"decision": decision, "comment": "e2e", **{f"edit.{k}": v for k, v in edits.items()}}
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    first = urlencode({**fields, "nonce": _token(page)}).encode()
    status, again = request(link, "POST", first, headers)
    assert status == 409 and b"press your button again" in again, "a form sent at once decided"
    shown = time.monotonic()
    # The person reads the re-shown page for the dwell (measured, not a blind sleep: the
    # answer below must be a decision).
    wait_for("the form's dwell", lambda: time.monotonic() - shown >= dwell)
    form = urlencode({**fields, "nonce": _token(again)}).encode()
    status, answer = request(link, "POST", form, headers)
    return status, answer.decode("utf-8", "replace")


def _token(page: bytes) -> str:
    nonce = re.search(rb'name="nonce" value="([^"]*)"', page)
    assert nonce is not None, "the page has no decision form"
    return html.unescape(nonce.group(1).decode())


def started_waiting(stack: LocalStack, container: Container, workflow: str) -> tuple[str, str]:
    """Start a run by webhook and wait for its approval email; returns run id and link."""
    status, answer = deliver(stack, container, workflow, {"item": "invoice 42"})
    assert status == 202, answer
    run_id = answer["run_id"]
    wait_for("the run to wait", lambda: run_in(container, run_id, "waiting_approval"))
    return run_id, email_for(stack, run_id, container)["link"]


# --------------------------------------------------------------------------------------------
# The walkthrough
# --------------------------------------------------------------------------------------------


def test_a_webhook_run_waits_for_the_link_and_resumes_on_approve(
    stack: LocalStack, container: Container
):
    # Given a run started by a signed webhook, waiting for its approval
    run_id, link = started_waiting(stack, container, "e2e_review")
    assert link.startswith(f"{stack.settings.public_base_url}/approvals/")

    # When the approver opens the link, nothing is decided: the view is audited, the approval
    # is still pending (a decision is one synchronous write, done before the page answers) and
    # the run still waits
    status, page = request(link)
    assert status == 200 and b"invoice 42" in page
    [approval] = container.approvals.list(run_id=run_id)
    audit = container.approvals.audit(approval.approval_id)
    assert [(e.action, e.method) for e in audit][-1:] == [("view", "GET")]
    assert container.approvals.get(approval.approval_id).status.value == "pending"
    assert container.runs.get_run(run_id).status.value == "waiting_approval"

    # When they approve on the page
    status, _ = decide(link, "approved", stack.settings.approval_form_dwell_seconds)
    assert status == 200

    # Then the run resumes on the approved branch and its timeline names the approver
    run = wait_for("the run to succeed", lambda: run_in(container, run_id, "succeeded"))
    assert run.outputs.get("outcome") == "accepted"
    decided = [
        e
        for e in container.runs.get_timeline(run_id)
        if e.type == TimelineEventType.approval_decided
    ]
    assert [e.actor for e in decided] == [APPROVER]


def test_a_rejection_runs_the_reject_branch(stack: LocalStack, container: Container):
    run_id, link = started_waiting(stack, container, "e2e_review")

    status, _ = decide(link, "rejected", stack.settings.approval_form_dwell_seconds)

    assert status == 200
    run = wait_for("the run to end", lambda: run_in(container, run_id, "succeeded", "failed"))
    assert run.outputs.get("outcome") == "declined"


def test_an_approval_nobody_decides_in_time_runs_the_timeout_branch(
    stack: LocalStack, container: Container
):
    run_id, _ = started_waiting(stack, container, "e2e_short_fuse")

    run = wait_for("the timeout branch", lambda: run_in(container, run_id, "succeeded", "failed"))

    assert run.outputs.get("outcome") == "expired"
    types = [e.type for e in container.runs.get_timeline(run_id)]
    assert TimelineEventType.approval_timed_out in types


def test_a_repeated_delivery_starts_no_second_run(stack: LocalStack, container: Container):
    secret = container.secrets.get_json(stack.settings.webhook_secret_prefix + "e2e_review")
    payload = '{"item": "twice"}'
    body = payload.encode()
    headers = signed_headers(secret["current"], "delivery-twice", payload)
    url = f"{stack.settings.public_base_url}/hooks/e2e_review"

    first = request(url, "POST", body, headers)
    second = request(url, "POST", body, headers)

    assert first[0] == second[0] == 202
    assert json.loads(first[1])["run_id"] == json.loads(second[1])["run_id"]


def test_a_dropped_file_starts_only_the_matching_workflow_once_per_object_event(
    stack: LocalStack,
    container: Container,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
):
    from langorch.adapters.sqlite._db import Database
    from langorch.cli.main import main
    from langorch.local._invoke import TRIGGER
    from langorch.local.bucket_events import BucketEvents

    # A second watcher of the same bucket folder, with a memory of its own: every object event
    # reaches the trigger three times (through the stack's own watcher and through this one,
    # which also re-sends each event), as an at-least-once delivery may.
    trigger = stack.invoker(TRIGGER)
    seen: list[dict[str, Any]] = []

    def twice(event: dict[str, Any]) -> Any:
        trigger(event)
        answer = trigger(event)
        seen.append(event)  # after both deliveries were handled
        return answer

    duplicate = BucketEvents(
        container.bucket, Database(tmp_path / "duplicates.db"), twice, region=stack.settings.region
    )
    try:
        monkeypatch.chdir(Path(stack.home).parent)
        data = tmp_path / "orders.csv"
        data.write_text("id,amount\n1,10\n")

        # When the file is put with the CLI
        code = main(["files", "put", str(data), "--key", "inbox/orders.csv", "--json"])
        # The stack runs in this process: its log lines and outbox notices share stdout, so
        # read the command's indented document from its opening line.
        out = capsys.readouterr().out
        put, _ = json.JSONDecoder().raw_decode(out[out.index("{\n") :])
        assert code == 0
        assert put["matching_workflows"] == ["e2e_csv_import"]
        wait_for("the duplicate watcher to see the event", lambda: duplicate.pump() or seen)
    finally:
        duplicate()

    # Then exactly one run of the csv workflow starts and succeeds, and none of the pdf one
    def csv_runs() -> list[RunRecord]:
        runs = container.runs.list_runs(workflow_id="e2e_csv_import")
        return runs if runs and all(r.is_terminal for r in runs) else []

    runs = wait_for("the csv run to end", csv_runs)

    # Every delivery of the event has been decided once the trigger logged a start decision
    # for each: the stack's own poller's and this poller's two. Then count what they started.
    def every_delivery_decided() -> list[str] | None:
        found = start_decisions(stack, "e2e_csv_import")
        return found if len(found) >= 3 else None

    decisions = wait_for(
        "a start decision for each of the three deliveries", every_delivery_decided
    )
    assert decisions.count("run started") == 1, decisions
    assert len(container.runs.list_runs(workflow_id="e2e_csv_import")) == 1
    assert runs[0].status.value == "succeeded"
    assert container.runs.list_runs(workflow_id="e2e_pdf_import") == []


def start_decisions(stack: LocalStack, workflow: str) -> list[str]:
    """The trigger's start decisions for a workflow, from its log lines in the stack's store."""
    assert stack.flush_logs()
    with stack.container.db.read() as connection:
        messages = [
            message
            for (message,) in connection.execute(
                "SELECT message FROM log_lines WHERE log_group = ? AND instr(message, ?) > 0",
                (f"/aws/lambda/{TRIGGER_FUNCTION}", f'"{workflow}"'),
            )
        ]
    lines = [json.loads(m) for m in messages if m.startswith("{")]
    return [
        line["message"]
        for line in lines
        if line.get("workflow_id") == workflow
        and line.get("message") in ("run started", "duplicate start ignored")
    ]


def test_a_due_schedule_fires_once_even_when_the_tick_repeats(
    stack: LocalStack, container: Container
):
    from langorch.local._invoke import TRIGGER
    from langorch.local.ticker import Ticker, _read_schedules

    # Given the yearly schedule and a tick whose window holds its last slot (1 January)
    slot = datetime(datetime.now(UTC).year, 1, 1, tzinfo=UTC)
    invoke = stack.invoker(TRIGGER)
    delivered: list[Any] = []
    tick = Ticker(
        _read_schedules(stack.settings, stack.container.schedules),
        lambda event: delivered.append(invoke(event)),
        since=slot - timedelta(seconds=1),
    )

    # When the tick runs, and runs again for the same moment
    first = tick.fire_due(slot + timedelta(seconds=1))
    again = tick.fire_due(slot + timedelta(seconds=1))

    # Then the slot fired once and started one run
    assert [name for name, _ in first] == ["langorch-e2e_new_year"]
    assert again == []
    runs = wait_for(
        "the scheduled run",
        lambda: [r for r in container.runs.list_runs(workflow_id="e2e_new_year") if r.is_terminal],
    )
    assert len(runs) == 1
    assert runs[0].trigger.detail["scheduled_time"] == slot.strftime("%Y-%m-%dT%H:%M:%SZ")
