"""The run console in a real browser: Debian's Chromium driven by Playwright.

One local stack, one console and one signed-in tab for the module. A signed webhook starts a run,
it parks on an approval, the approval is decided in the console's inbox, and the run page
shows it succeeded with the path it took. Hostile run data (markup, quotes, unicode) is shown
as text, never run; actions without the page's CSRF token or from another origin do nothing.
The console answers only a browser that opened its start-up link, and acts as its operator:
another local process gets nothing, and nobody decides as someone else.
A screenshot of each page is kept in ``artifacts/console/`` (gitignored) to be looked at.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from langorch.composition.container import Container
from langorch.console.operator import Operator, local_operator
from langorch.console.server import RunningConsole, serve_console
from langorch.local.stack import LocalStack
from tests.e2e.test_walkthrough import deliver, email_for, run_in, wait_for
from tests.support.browser import SCREENSHOTS, Tab, shot
from tests.support.stacks import running_stack

HOSTILE = (
    '<script>window.__pwned=1</script>"\'><img src=x onerror="window.__pwned=2"> Ünïcødé ✓ 注文'
)

DEFINITIONS = """
workflows:
  - plan_id: console_review
    name: Review an invoice
    description: A webhook starts it; a person approves the invoice; it is paid or declined.
    triggers: [{type: webhook}]
    approvers: [approver@example.com, second@example.com]
    memory: false
    inputs_schema:
      properties:
        item: {type: string}
        amount: {type: number}
      required: [item]
    steps:
      - step_id: prepare
        kind: transform
        transform: {subject: "item", total: "amount"}
      - step_id: review
        kind: approval
        depends_on: [prepare]
        approval:
          title: "Approve {{ item }}"
          show_keys: [subject, total]
          editable_keys: [total]
          timeout_seconds: 3600
        branches: {approved: accept, rejected: decline, timed_out: decline}
      - {step_id: accept, kind: transform, transform: {outcome: "'accepted'"}}
      - {step_id: decline, kind: transform, transform: {outcome: "'declined'"}}
  - plan_id: console_flaky
    name: Call a flaky service
    triggers: [{type: webhook}]
    memory: false
    steps:
      - step_id: call
        kind: http
        max_retries: 1
        retry_backoff_seconds: 0
        http:
          method: POST
          url: "{{ service }}/orders?api_key=s3cr3t-in-url&sku={{ sku }}"
          body: {sku: "{{ sku }}", password: "hunter2-in-body"}
      - {step_id: after, kind: transform, depends_on: [call], transform: {done: "'yes'"}}
  - plan_id: console_lunch
    name: Ask what lunch to order
    triggers: [{type: webhook}]
    approvers: [approver@example.com]
    memory: false
    steps:
      - step_id: ask
        kind: approval
        approval:
          title: "What should lunch be?"
          editable_keys: [restaurant, items_to_order]
          editable_types: {restaurant: text, items_to_order: list}
          timeout_seconds: 3600
        branches: {approved: order, rejected: order, timed_out: order}
      - {step_id: order, kind: transform, transform: {count: "items_to_order | length"}}
  - plan_id: console_triage
    name: Triage a ticket
    description: A webhook brings a ticket; urgent ones need a person, normal ones are sent.
    triggers: [{type: webhook}]
    approvers: [approver@example.com]
    memory: false
    inputs_schema: {properties: {ticket: {type: string}, priority: {type: string}}}
    steps:
      - {step_id: summarize, kind: transform, transform: {summary: "ticket"}}
      - step_id: decide
        kind: decision
        depends_on: [summarize]
        condition: "{{ 'urgent' if priority == 'high' else 'normal' }}"
        branches: {normal: send, urgent: review}
      - step_id: review
        kind: approval
        approval: {title: "Urgent: {{ summary }}", show_keys: [summary], timeout_seconds: 3600}
        branches: {approved: send, rejected: close, timed_out: close}
      - {step_id: send, kind: transform, transform: {sent: "'yes'"}}
      - {step_id: close, kind: transform, transform: {sent: "'no'"}}
  - plan_id: console_batch
    name: Pay an invoice
    description: Small invoices are paid, larger ones approved, the largest by finance.
    triggers: [{type: webhook}]
    approvers: [approver@example.com]
    memory: false
    inputs_schema: {properties: {amount: {type: number}}}
    steps:
      - step_id: check_amount
        kind: decision
        cases:
          - {when: "amount > 10000", branch: needs_finance}
          - {when: "amount > 1000", branch: needs_approval}
        default_branch: automatic
        branches: {automatic: post, needs_approval: approve, needs_finance: finance}
      - step_id: approve
        kind: approval
        approval: {title: "Pay {{ amount }}?", timeout_seconds: 3600}
        branches: {approved: post, rejected: refuse, timed_out: refuse}
      - step_id: finance
        kind: approval
        approval: {title: "Finance: pay {{ amount }}?", timeout_seconds: 3600}
        branches: {approved: post, rejected: refuse, timed_out: refuse}
      - {step_id: post, kind: transform, transform: {paid: "amount"}}
      - {step_id: refuse, kind: transform, transform: {paid: "0"}}
  - plan_id: console_fix
    name: Price per unit
    description: A failing division asks a person to fix it instead of failing the run.
    triggers: [{type: webhook}]
    approvers: [approver@example.com]
    memory: false
    inputs_schema: {properties: {total: {type: number}, quantity: {type: integer}}}
    steps:
      - step_id: divide
        kind: transform
        transform: {unit_price: "total / quantity"}
        on_error: ask
      - {step_id: label, kind: transform, depends_on: [divide], transform: {label: "unit_price"}}
  - plan_id: console_queue
    name: One sync per customer
    triggers: [{type: webhook}]
    approvers: [approver@example.com]
    memory: false
    concurrency: {limit: 1, key: "{{ customer }}"}
    inputs_schema: {properties: {customer: {type: string}}}
    steps:
      - step_id: hold
        kind: approval
        approval: {title: "Sync {{ customer }}", timeout_seconds: 3600}
        branches: {approved: done, rejected: done, timed_out: done}
      - {step_id: done, kind: transform, transform: {synced: "'yes'"}}
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    home = tmp_path_factory.mktemp("console") / ".langorch"
    with running_stack(home, definitions=DEFINITIONS) as running:
        yield running


@pytest.fixture(scope="module")
def container(stack: LocalStack) -> Container:
    return stack.container


@pytest.fixture(scope="module")
def console(container: Container) -> Iterator[RunningConsole]:
    """The console of the OS user running the tests, known to approvals as approver@."""
    operator = local_operator(address="approver@example.com")
    running = serve_console(container, target="the local stack", port=0, operator=operator)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def operator_tab(browser: Any, console: RunningConsole) -> Iterator[Tab]:
    """The operator's browser, signed in once by the console's start-up link: one context and
    one tab that the tests of the module take in turn."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = Tab(context, ignored="401 (Unauthorized)")
    tab.page.goto(console.startup_url)
    yield tab
    context.close()


@pytest.fixture(scope="module")
def stranger_tab(browser: Any) -> Iterator[Tab]:
    """A browser of its own, whose cookies each test clears (``fresh_page``)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    yield Tab(context, ignored="401 (Unauthorized)")
    context.close()


@pytest.fixture
def fresh_page(stranger_tab: Tab) -> Iterator[Any]:
    """A browser tab that never opened a console's start-up link: it holds no cookie, the only
    thing a console knows a browser by."""
    stranger_tab.page.context.clear_cookies()
    yield stranger_tab.take()
    errors = stranger_tab.give_back()
    assert errors == [], f"the page logged errors: {errors}"


@pytest.fixture
def own_page(browser: Any, console: RunningConsole) -> Iterator[Any]:
    """A tab signed in to the console in a context of its own, for a test that changes what
    the context keeps (its clock)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = Tab(context, ignored="401 (Unauthorized)")
    tab.page.goto(console.startup_url)
    yield tab.page
    context.close()
    assert tab.errors == [], f"the page logged errors: {tab.errors}"


@pytest.fixture
def page(operator_tab: Tab) -> Iterator[Any]:
    """A browser tab signed in to the console, as its operator's browser is."""
    yield operator_tab.take()
    errors = operator_tab.give_back()
    assert errors == [], f"the page logged errors: {errors}"


def console_as(container: Container, operator: Operator) -> RunningConsole:
    return serve_console(container, target="the local stack", port=0, operator=operator)


def parked(stack: LocalStack, container: Container, data: dict[str, Any]) -> str:
    status, answer = deliver(stack, container, "console_review", data)
    assert status == 202, answer
    run_id = str(answer["run_id"])
    wait_for("the run to park", lambda: run_in(container, run_id, "waiting_approval"))
    wait_for("its approval", lambda: container.approvals.list(run_id=run_id) or None)
    return run_id


def test_a_webhook_run_approved_in_the_inbox_shows_succeeded_with_its_path(
    stack: LocalStack, container: Container, console: RunningConsole, page: Any
):
    # Given a run started by a signed webhook, parked on its approval
    run_id = parked(stack, container, {"item": "invoice 42", "amount": 120})

    # When the operator opens the inbox, picks the approval and approves with an edit
    page.goto(f"{console.url}/approvals")
    shot(page, "approvals")
    page.get_by_role("link", name="Approve invoice 42").first.click()
    # (the page says who decides: the operator, as the address the approval names them by)
    assert "Deciding as approver@example.com" in page.locator("#deciding-as").inner_text()
    assert page.locator("select#approver").count() == 0
    page.get_by_label("Total").fill("99")
    page.get_by_label("Comment").fill("ok, paid less")
    shot(page, "approval")
    page.get_by_role("button", name="Approve").click()

    # Then the console says so, the decision went through the decide-once use-case
    assert "You approved this request" in page.locator(".notice").inner_text()
    [approval] = container.approvals.list(run_id=run_id)
    assert approval.status.value == "approved"
    assert approval.decided_by == "approver@example.com"
    assert approval.edits == {"total": 99}

    # And the audit names the operator and the channel beside the approver they decided as
    operator = console.operator
    assert operator is not None
    decided = [e for e in container.approvals.audit(approval.approval_id) if e.action == "decide"]
    assert [(e.actor, e.channel, e.operator) for e in decided] == [
        ("approver@example.com", "console", f"{operator.principal} (OS user)")
    ]
    audit = page.locator("table.audit").inner_text()
    assert f"console · {operator.principal} (OS user)" in audit

    # And the run page shows it succeeded along prepare → review → accept
    wait_for("the run to succeed", lambda: run_in(container, run_id, "succeeded"))
    page.goto(f"{console.url}/runs/{run_id}")
    assert page.locator("h1 .pill").inner_text() == "succeeded"
    assert page.locator("svg.graph .node.state-succeeded").count() == 3
    assert page.locator("svg.graph .node.state-pending").count() == 1
    assert page.locator("svg.graph .edge.taken").count() == 2
    assert "accept" in page.locator("table.waterfall").inner_text()
    shot(page, "run")
    page.emulate_media(color_scheme="dark")
    shot(page, "run-dark")
    page.emulate_media(color_scheme="light")

    # And the graph is reachable from the keyboard: a step's box links to its details
    page.locator("svg.graph a").first.focus()
    page.keyboard.press("Enter")
    assert page.evaluate("location.hash") == "#step-prepare"

    # And the runs list shows it (the live status script ran without errors)
    page.goto(f"{console.url}/runs")
    row = page.locator("tr", has=page.locator(f"a:text-is('{run_id}')"))
    assert row.locator(".pill").inner_text() == "succeeded"
    shot(page, "runs")


def test_the_workflow_page_starts_a_run_from_its_inputs_form(
    console: RunningConsole, container: Container, page: Any
):
    page.goto(f"{console.url}/workflows")
    shot(page, "workflows")
    page.get_by_role("link", name="console_review").click()
    assert page.locator("svg.graph .node").count() == 4
    page.get_by_label("Item").fill("from the form")
    page.get_by_label("Amount").fill("7.5")
    shot(page, "workflow")
    page.get_by_role("button", name="Start run").click()

    assert "Run started" in page.locator(".notice").inner_text()
    run_id = page.locator("h1 .mono").inner_text()
    run = container.runs.get_run(run_id)
    assert run.input == {"item": "from the form", "amount": 7.5}
    assert run.trigger.type == "manual"


def test_an_ended_run_is_forked_from_its_page_with_an_edited_key(
    stack: LocalStack, container: Container, console: RunningConsole, page: Any
):
    # Given a run its approver approved, which ended
    run_id = parked(stack, container, {"item": "invoice 7", "amount": 70})
    [approval] = container.approvals.list(run_id=run_id)
    page.goto(f"{console.url}/approvals/{approval.approval_id}")
    page.get_by_role("button", name="Approve").click()
    wait_for("the run to end", lambda: run_in(container, run_id, "succeeded"))

    # When the operator forks it at the accept step with the total set
    page.goto(f"{console.url}/runs/{run_id}")
    page.get_by_text("Fork…").click()
    page.get_by_label("Start a new run at").select_option("accept")
    page.get_by_label("with these keys set").fill("total=65")
    shot(page, "fork")
    page.get_by_role("button", name="Fork").click()

    # Then the new run's page opens, linked to the original, and it ran accept on the edit
    forked = page.locator("h1 .mono").inner_text()
    assert forked != run_id
    wait_for("the fork to succeed", lambda: run_in(container, forked, "succeeded"))
    run = container.runs.get_run(forked)
    assert run.outputs["outcome"] == "accepted" and run.outputs["total"] == 65
    page.reload()
    assert run_id in page.locator("body").inner_text()  # lineage names the original
    assert [(f.run_id, f.at_step) for f in container.runs.get_run(run_id).forks] == [
        (forked, "accept")
    ]


def test_hostile_run_data_is_shown_as_text_and_never_runs(
    stack: LocalStack, container: Container, console: RunningConsole, page: Any
):
    # Given a run whose input is markup, quotes and unicode, and a secret-named key
    run_id = parked(
        stack, container, {"item": HOSTILE, "amount": 1, "api_key": "sk-live-0123456789abcdef"}
    )

    # When its run page and its approval are shown
    page.goto(f"{console.url}/runs/{run_id}")
    shot(page, "hostile-run")
    html = page.content()

    # Then nothing ran, no element was injected, and the text reads as sent
    assert page.evaluate("window.__pwned") is None
    assert page.locator("main script, main img").count() == 0
    assert HOSTILE in page.locator("main").inner_text()
    # And the secret-named value is redacted
    assert "sk-live-0123456789abcdef" not in html
    page.goto(f"{console.url}/approvals")
    page.locator("a", has_text="Ünïcødé").first.click()
    assert page.evaluate("window.__pwned") is None
    assert page.locator("main img").count() == 0
    shot(page, "hostile-approval")


def test_statuses_on_the_runs_page_update_without_a_reload(
    stack: LocalStack, container: Container, console: RunningConsole, page: Any
):
    from langorch.app.runs import cancel_run

    # Given the runs page showing a run that waits on its approval
    run_id = parked(stack, container, {"item": "live"})
    page.goto(f"{console.url}/runs")
    pill = page.locator(f"[data-run-id='{run_id}']")
    assert pill.inner_text() == "waiting approval"
    page.evaluate("window.__same_page = true")

    # When the run is cancelled elsewhere
    cancel_run(run_id, container, actor="test", reason="live status")

    # Then its status changes on the page, which was not reloaded
    pill.filter(has_text="cancelled").wait_for(timeout=20_000)
    assert page.evaluate("window.__same_page") is True


def test_the_emailed_page_shares_the_console_look_with_human_labels(
    stack: LocalStack, container: Container, fresh_page: Any
):
    page = fresh_page
    run_id = parked(stack, container, {"item": "looks", "amount": 3})
    link = email_for(stack, run_id, container)["link"]

    page.goto(link)

    # The shared stylesheet is applied (an Approve button is not the browser's grey) and the
    # keys read as words
    approve = page.get_by_role("button", name="Approve")
    colour = approve.evaluate("b => getComputedStyle(b).backgroundColor")
    assert colour not in ("rgb(239, 239, 239)", "rgb(240, 240, 240)", "rgba(0, 0, 0, 0)")
    headers = [t.strip() for t in page.locator("th").all_inner_texts()]
    assert "Subject" in headers and "subject" not in headers
    shot(page, "emailed-approval")


def test_no_link_signature_task_token_or_secret_reaches_the_browser(
    stack: LocalStack, container: Container, console: RunningConsole
):
    run_id = parked(stack, container, {"item": "secret check"})
    [approval] = container.approvals.list(run_id=run_id)
    secret = container.secrets.get_json(stack.settings.webhook_secret_prefix + "console_review")
    pages = [
        f"/runs/{run_id}",
        "/approvals",
        f"/approvals/{approval.approval_id}",
        "/runs",
        "/workflows/console_review",
    ]
    cookie, _ = _session(console)
    for path in pages:
        body = _get(console.url + path, cookie=cookie)[1]
        assert "sig=" not in body and "&amp;sig" not in body
        assert secret["current"] not in body
        assert "taskToken" not in body and "task_token" not in body


def test_an_action_without_the_page_token_or_from_another_site_does_nothing(
    stack: LocalStack, container: Container, console: RunningConsole
):
    run_id = parked(stack, container, {"item": "csrf check"})
    cookie, token = _session(console)
    status, _ = _post(
        console.url + f"/runs/{run_id}/cancel", "reason=x", origin=console.url, cookie=cookie
    )
    assert status == 403
    status, _ = _post(
        console.url + f"/runs/{run_id}/cancel",
        f"csrf={token}",
        origin="http://evil.example",
        cookie=cookie,
    )
    assert status == 403
    assert container.runs.get_run(run_id).status.value == "waiting_approval"
    # The same form from the console's own origin cancels it
    status, _ = _post(
        console.url + f"/runs/{run_id}/cancel", f"csrf={token}", origin=console.url, cookie=cookie
    )
    assert status == 303
    assert container.runs.get_run(run_id).status.value == "cancelled"


class _Flaky(BaseHTTPRequestHandler):
    """A service that answers 503 until it is told to work."""

    working = False

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b'{"id": "ord-1"}'
        self.send_response(201 if type(self).working else 503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def flaky() -> Iterator[str]:
    _Flaky.working = False
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_a_redriven_run_shows_its_attempts_as_attempts_and_what_it_sent(
    stack: LocalStack, container: Container, console: RunningConsole, page: Any, flaky: str
):
    # Given a run whose http step failed twice (the service answered 503)
    status, answer = deliver(stack, container, "console_flaky", {"service": flaky, "sku": "A-1"})
    assert status == 202, answer
    run_id = str(answer["run_id"])
    wait_for("the run to fail", lambda: run_in(container, run_id, "failed"))

    # When the operator opens it
    page.goto(f"{console.url}/runs/{run_id}")

    # Then each attempt is a row, and the failed step says what it sent, redacted as inputs are
    rows = page.locator("table.waterfall tbody tr")
    assert [r.strip() for r in rows.locator("td:first-child").all_inner_texts()] == [
        "call attempt 1",
        "call attempt 2",
    ]
    call = page.locator("#step-call")
    sent = call.locator("table.kv").first.inner_text()
    assert f"POST {flaky}/orders?api_key=" in sent and "sku=A-1" in sent
    assert "s3cr3t-in-url" not in page.content() and "hunter2-in-body" not in page.content()
    assert call.locator(".error").count() == 1
    shot(page, "run-failed-http")

    # When the service works again and the operator redrives the run from the console
    _Flaky.working = True
    page.get_by_role("button", name="Redrive").click()
    page.wait_for_url(f"**/runs/{run_id}?done=redriven")  # the form's answer, before our reload
    wait_for("the redriven run to succeed", lambda: run_in(container, run_id, "succeeded"))
    page.goto(f"{console.url}/runs/{run_id}")

    # Then the step is succeeded, without its old error box; its failures are history
    assert call.locator(".pill").first.inner_text() == "succeeded"
    assert call.locator(".error").count() == 0
    call.locator("summary").click()
    assert "attempt 1: HttpStepError" in call.locator(".earlier").inner_text()
    # And the waterfall marks the redrive (by whom) between labelled attempts
    labels = [r.strip() for r in rows.locator("td:first-child").all_inner_texts()]
    assert labels[:3] == [
        "call before the redrive · attempt 1",
        "call before the redrive · attempt 2",
        "↻ Redrive #1",
    ]
    assert "call after redrive #1" in labels
    assert f"by console:{console.operator.principal}" in rows.nth(2).inner_text()  # type: ignore[union-attr]
    shot(page, "run-redriven")


def test_an_empty_list_field_is_a_list_editor_and_stores_a_list(
    stack: LocalStack, container: Container, console: RunningConsole, page: Any
):
    # Given a run asking its approver for a restaurant and the items to order (a list)
    status, answer = deliver(stack, container, "console_lunch", {})
    assert status == 202, answer
    run_id = str(answer["run_id"])
    wait_for("the run to park", lambda: run_in(container, run_id, "waiting_approval"))
    [approval] = wait_for("its approval", lambda: container.approvals.list(run_id=run_id))

    # When the operator opens it
    page.goto(f"{console.url}/approvals/{approval.approval_id}")

    # Then the empty list is a multi-line editor that says one item per line
    items = page.get_by_label("Items to order")
    assert items.evaluate("e => e.tagName") == "TEXTAREA"
    assert "one per line" in page.locator("label", has_text="Items to order").inner_text()
    page.get_by_label("Restaurant").fill("Chipotle")
    items.fill("Burrito Bowl\nChips")
    shot(page, "approval-list-field")
    page.get_by_role("button", name="Approve").click()

    # And what is stored is a list, one item per line, never a string
    decided = container.approvals.get(approval.approval_id)
    assert decided.edits == {"restaurant": "Chipotle", "items_to_order": ["Burrito Bowl", "Chips"]}
    wait_for("the run to end", lambda: run_in(container, run_id, "succeeded"))
    assert container.runs.get_run(run_id).outputs["count"] == 2


GEOMETRY = """
() => {
  const svg = document.querySelector("svg.graph");
  const boxes = [...svg.querySelectorAll(".node rect")].map((r) => r.getBBox());
  const inside = (p, b) =>
    p.x > b.x + 1 && p.x < b.x + b.width - 1 && p.y > b.y + 1 && p.y < b.y + b.height - 1;
  const through = [];
  for (const path of svg.querySelectorAll(".edge path")) {
    const length = path.getTotalLength();
    for (let i = 0; i <= 400; i++) {
      const point = path.getPointAtLength((length * i) / 400);
      if (boxes.some((b) => inside(point, b))) through.push([point.x, point.y]);
    }
  }
  const hidden = [];
  for (const label of svg.querySelectorAll(".edge-label")) {
    label.scrollIntoView({block: "center"});
    const r = label.getBoundingClientRect();
    if (document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2) !== label) {
      hidden.push(label.textContent);
    }
  }
  const texts = [...svg.querySelectorAll(".edge-label")];
  const labels = texts.map((t) => t.textContent);
  const covering = [];
  texts.forEach((a, i) => texts.slice(i + 1).forEach((b) => {
    const p = a.getBBox(), q = b.getBBox();
    const across = p.x < q.x + q.width && q.x < p.x + p.width;
    if (across && p.y < q.y + q.height && q.y < p.y + p.height) {
      covering.push([a.textContent, b.textContent]);
    }
  }));
  return {through, hidden, labels, covering};
}
"""


def test_the_graph_draws_every_branch_around_the_steps_with_its_label_in_sight(
    console: RunningConsole, page: Any
):
    # Given issue 26's workflow: decide sends normal tickets on and urgent ones to review
    page.goto(f"{console.url}/workflows/console_triage")

    # When the browser lays the graph out
    found = page.evaluate(GEOMETRY)

    # Then no edge passes through a step's box, and every branch label is on top, in sight
    assert found["through"] == []
    assert found["hidden"] == []
    assert {"normal", "urgent", "approved", "rejected / timed_out"} <= set(found["labels"])
    assert found["covering"] == []
    page.locator("svg.graph").scroll_into_view_if_needed()
    page.locator("svg.graph").screenshot(path=str(SCREENSHOTS / "graph-triage.png"))


def test_branch_labels_leaving_one_step_never_cover_each_other(console: RunningConsole, page: Any):
    # Given a decision whose default branch skips the row its other branches go to (the
    # invoice_batch shape: "automatic" and "needs_approval" leave it side by side)
    page.goto(f"{console.url}/workflows/console_batch")

    # When the browser lays the graph out
    found = page.evaluate(GEOMETRY)

    # Then each label has its own place, in sight, and no edge crosses a step
    assert {"automatic", "needs_approval", "needs_finance"} <= set(found["labels"])
    assert found["covering"] == []
    assert found["hidden"] == []
    assert found["through"] == []
    page.locator("svg.graph").scroll_into_view_if_needed()
    page.locator("svg.graph").screenshot(path=str(SCREENSHOTS / "graph-batch.png"))


# --- the runs list ----------------------------------------------------------------------------


def test_a_new_run_appears_in_the_runs_list_within_two_seconds_without_a_reload(
    stack: LocalStack, container: Container, console: RunningConsole, own_page: Any
):
    page = own_page
    # Given the runs list open, its timers on a clock the test moves (not the machine's speed)
    page.clock.install()
    page.goto(f"{console.url}/runs")
    page.evaluate("window.__same_page = true")

    # When a run starts elsewhere, and two seconds pass on the page
    status, answer = deliver(stack, container, "console_review", {"item": "live row"})
    assert status == 202, answer
    run_id = str(answer["run_id"])
    page.clock.run_for(2000)

    # Then its row is at the top of the list, on the same page, with its live status
    first = page.locator("#runs tr").first
    first.locator(f"a:text-is('{run_id}')").wait_for(timeout=20_000)
    assert page.evaluate("window.__same_page") is True
    assert first.locator(f"[data-run-id='{run_id}']").count() == 1
    assert first.locator("time").get_attribute("datetime") is not None
    shot(page, "runs-live")


def test_runs_are_found_by_their_id_and_by_its_start(
    stack: LocalStack, container: Container, console: RunningConsole, page: Any
):
    run_id = parked(stack, container, {"item": "find me"})
    other = parked(stack, container, {"item": "not me"})

    for typed in (run_id, run_id[:12], run_id.removeprefix("run-")[:6]):
        page.goto(f"{console.url}/runs")
        page.get_by_label("Run id").fill(typed)
        page.get_by_role("button", name="Filter").click()

        shown = page.locator("#runs a.mono").all_inner_texts()
        assert run_id in shown, typed
        assert other not in shown or other.startswith(typed), typed
    shot(page, "runs-search")


def test_a_failed_run_shows_the_start_of_its_error_in_the_runs_list(
    stack: LocalStack, container: Container, console: RunningConsole, page: Any, flaky: str
):
    status, answer = deliver(stack, container, "console_flaky", {"service": flaky, "sku": "B-2"})
    assert status == 202, answer
    run_id = str(answer["run_id"])
    wait_for("the run to fail", lambda: run_in(container, run_id, "failed"))

    page.goto(f"{console.url}/runs?q={run_id}")

    snippet = page.locator("#runs tr", has=page.locator(f"a:text-is('{run_id}')")).locator(
        ".snippet"
    )
    assert snippet.inner_text().startswith("HttpStepError: HTTP 503 from 127.0.0.1")


def test_times_are_shown_in_the_viewers_zone_with_utc_on_hover(
    browser: Any, console: RunningConsole, container: Container
):
    # Given a viewer in Tokyo (UTC+9)
    context = browser.new_context(timezone_id="Asia/Tokyo", viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(console.startup_url)

    # When they read when a run started
    page.goto(f"{console.url}/runs")
    started = page.locator("#runs time").first
    utc = started.get_attribute("title")
    moment = datetime.fromisoformat(started.get_attribute("datetime"))

    # Then it reads in their zone, and the UTC time is its hover title
    tokyo = moment.astimezone(timezone(timedelta(hours=9)))
    assert started.inner_text() == tokyo.strftime("%Y-%m-%d %H:%M:%S GMT+9")
    assert utc == moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    shot(page, "runs-tokyo")
    context.close()


def test_the_workflows_list_shows_a_workflow_stored_only_as_drafts_marked_as_such(
    console: RunningConsole, container: Container, page: Any
):
    from langorch.domain.definitions import PlanStep, TaskPlan

    # Given a workflow stored only as a draft (`langorch workflows put --draft`)
    draft = TaskPlan(
        plan_id="console_drafted",
        name="Not promoted yet",
        steps=[PlanStep(step_id="only", kind="transform", transform={"x": "'1'"})],
    )
    container.definitions.put_workflow(draft, activate=False)

    # When the operator opens the workflows list
    page.goto(f"{console.url}/workflows")
    shot(page, "workflows-drafts")

    # Then it is listed beside the active ones, marked as having no active version
    row = page.locator("tr", has=page.get_by_role("link", name="console_drafted"))
    assert row.locator(".pill").inner_text() == "draft only"
    active = page.locator("tr", has=page.get_by_role("link", name="console_review"))
    assert active.locator(".pill").count() == 0 and "v1 active" in active.inner_text()

    # And its page says that only drafts are stored and how to promote one
    row.get_by_role("link", name="console_drafted").click()
    assert "only drafts are stored" in page.locator("main").inner_text()


def test_the_approvals_tab_shows_how_many_wait_for_a_decision(
    stack: LocalStack, container: Container, console: RunningConsole, page: Any
):
    parked(stack, container, {"item": "count me"})
    waiting = len(container.approvals.list(pending_only=True, limit=100))

    page.goto(f"{console.url}/workflows")

    badge = page.get_by_role("link", name="Approvals").locator(".badge")
    assert badge.inner_text().split()[0] == str(waiting)


def test_the_approval_quality_page_shows_the_figures_of_approvals_stats_per_policy(
    stack: LocalStack, container: Container, console: RunningConsole, page: Any
):
    from langorch.app.approvals.quality import approval_quality

    # Given an approval the operator opens and approves in the console
    run_id = parked(stack, container, {"item": "quality 1"})
    [approval] = container.approvals.list(run_id=run_id)
    page.goto(f"{console.url}/approvals/{approval.approval_id}")
    page.get_by_role("button", name="Approve").click()
    wait_for("the decision", lambda: not container.approvals.get(approval.approval_id).is_pending)

    # When the operator follows the approvals page's link to the quality page
    page.goto(f"{console.url}/approvals")
    page.get_by_role("link", name="Approval quality").click()
    shot(page, "approval-quality")

    # Then it shows what `langorch approvals stats` computes: totals, per policy, per approver
    report = approval_quality(container.approvals, limit=500)
    policy = f"console_review/{approval.step_id}"
    assert policy in report["by_policy"]
    totals = page.locator("#quality-totals").inner_text().lower()
    assert f"decided\n{report['decided']}" in totals
    row = page.locator("#quality-by_policy tr", has_text=policy).inner_text().split("\t")
    figures = report["by_policy"][policy]
    assert row[:2] == [policy, str(figures["decided"])]
    assert row[2] == f"{round(figures['approve_rate'] * 100)}%"
    approver = page.locator("#quality-by_approver").inner_text()
    assert "approver@example.com" in approver


# --- who the console acts as ------------------------------------------------------------------


def test_the_start_up_link_signs_the_browser_in_and_leaves_no_token_in_the_address(
    console: RunningConsole, fresh_page: Any
):
    # Given the link the console printed when it started
    assert "?token=" in console.startup_url

    # When the operator opens it
    fresh_page.goto(console.startup_url)

    # Then the browser lands on the runs, at an address without the token, signed in by an
    # HttpOnly cookie, and the page says who is acting
    assert fresh_page.url == f"{console.url}/runs"
    [cookie] = fresh_page.context.cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert console.startup_url.partition("token=")[2] not in cookie["value"]
    operator = fresh_page.locator(".top .operator").inner_text()
    assert "acting as" in operator and "approver@example.com" in operator
    fresh_page.get_by_role("link", name="Workflows").click()
    assert fresh_page.url == f"{console.url}/workflows"
    shot(fresh_page, "signed-in")


def test_a_browser_without_the_start_up_link_is_told_how_to_get_in(
    console: RunningConsole, fresh_page: Any
):
    fresh_page.goto(f"{console.url}/approvals")

    assert fresh_page.locator("h1").inner_text() == "Open the console from its start-up link"
    assert fresh_page.locator(".top nav").count() == 0
    assert fresh_page.locator(".top .operator").count() == 0
    shot(fresh_page, "signed-out")


def test_a_second_local_process_without_the_token_can_neither_read_nor_decide(
    stack: LocalStack, container: Container, console: RunningConsole
):
    # Given a run parked on an approval the console could decide
    run_id = parked(stack, container, {"item": "another process"})
    [approval] = container.approvals.list(run_id=run_id)
    url = f"{console.url}/approvals/{approval.approval_id}"

    # When another process on this machine reads its pages as a plain HTTP client
    for path in ("/runs", f"/runs/{run_id}", "/approvals", f"/approvals/{approval.approval_id}"):
        status, body = _get(console.url + path)
        # Then it gets a refusal, and nothing of the stack: no run, no form, no CSRF token
        assert status == 401, path
        assert run_id not in body and approval.approval_id not in body
        assert 'name="csrf"' not in body
    assert _get(f"{console.url}/api/status?id={run_id}")[0] == 401

    # And its POST with the console's own Origin, with or without a cookie it made up, decides
    # nothing, as does a guessed start-up token
    for cookie in ("", f"langorch_console_{console.url.rsplit(':', 1)[1]}=made.up"):
        status, _ = _post(url, "decision=approved&csrf=x", origin=console.url, cookie=cookie)
        assert status == 401
    assert _get(f"{console.url}/?token=guess")[0] == 403
    assert container.approvals.get(approval.approval_id).is_pending
    assert not [e for e in container.approvals.audit(approval.approval_id) if e.action == "decide"]


def test_a_forged_origin_without_a_session_is_refused(
    stack: LocalStack, container: Container, console: RunningConsole
):
    # Given a run the console could cancel
    run_id = parked(stack, container, {"item": "forged origin"})

    # When a POST claims to come from the console's own page, with its Referer too, but carries
    # no session the console issued
    status, body = _post(
        f"{console.url}/runs/{run_id}/cancel",
        "reason=forged",
        origin=console.url,
        referer=f"{console.url}/runs/{run_id}",
    )

    # Then it is refused and the run still waits
    assert status == 401 and "start-up link" in body
    assert container.runs.get_run(run_id).status.value == "waiting_approval"


def test_an_operator_the_approval_does_not_name_cannot_decide_it(
    stack: LocalStack, container: Container, fresh_page: Any
):
    # Given a console whose operator is known as someone the approval does not name
    stranger = console_as(container, local_operator(address="stranger@example.com"))
    run_id = parked(stack, container, {"item": "not yours"})
    [approval] = container.approvals.list(run_id=run_id)
    page = fresh_page
    try:
        page.goto(stranger.startup_url)

        # When they open the approval
        page.goto(f"{stranger.url}/approvals/{approval.approval_id}")

        # Then the page says why they cannot decide it and who can, and offers no buttons
        refusal = page.locator("#not-yours").inner_text()
        assert "stranger@example.com" in refusal and "approver@example.com" in refusal
        assert page.get_by_role("button", name="Approve").count() == 0
        shot(page, "not-yours")

        # And a hand-made POST with their session, token and origin decides nothing
        cookie, token = _session(stranger)
        status, body = _post(
            f"{stranger.url}/approvals/{approval.approval_id}",
            f"csrf={token}&decision=approved&approver=approver%40example.com",
            origin=stranger.url,
            cookie=cookie,
        )
        assert status == 403 and "names approver@example.com" in body
        page.goto("about:blank")  # the tab leaves before its console stops
    finally:
        stranger.stop()
    assert container.approvals.get(approval.approval_id).is_pending


def test_the_admin_override_decides_on_an_approvers_behalf_and_is_audited(
    stack: LocalStack, container: Container, fresh_page: Any
):
    # Given a console started with the admin override by an operator no approval names
    admin = console_as(container, local_operator(admin=True))
    run_id = parked(stack, container, {"item": "on behalf"})
    [approval] = container.approvals.list(run_id=run_id)
    page = fresh_page
    try:
        page.goto(admin.startup_url)
        assert "admin override on" in page.locator(".top .operator").inner_text()

        # When they approve on second@'s behalf
        page.goto(f"{admin.url}/approvals/{approval.approval_id}")
        page.get_by_label("On behalf of").select_option("second@example.com")
        shot(page, "admin-override")
        page.get_by_role("button", name="Approve").click()
        assert "You approved this request" in page.locator(".notice").inner_text()
        page.goto("about:blank")  # the tab leaves before its console stops
    finally:
        admin.stop()

    # Then the decision is second@'s, and the audit says who overrode, through which channel
    decided = container.approvals.get(approval.approval_id)
    assert decided.decided_by == "second@example.com"
    assert admin.operator is not None
    [override] = [
        e for e in container.approvals.audit(approval.approval_id) if e.action == "override"
    ]
    assert (override.actor, override.channel, override.operator) == (
        "second@example.com",
        "console",
        admin.operator.described,
    )


def test_a_run_cancelled_in_the_console_names_the_operator_and_the_console_on_its_timeline(
    stack: LocalStack, container: Container, console: RunningConsole, page: Any
):
    run_id = parked(stack, container, {"item": "cancel me"})

    page.goto(f"{console.url}/runs/{run_id}")
    page.get_by_role("button", name="Cancel run").click()

    assert "Run cancelled" in page.locator(".notice").inner_text()
    [cancelled] = [e for e in container.runs.get_timeline(run_id) if e.type == "run_cancelled"]
    assert console.operator is not None
    assert cancelled.actor == f"console:{console.operator.principal}"


def test_a_run_paused_in_the_console_holds_its_decision_until_resumed(
    stack: LocalStack, container: Container, console: RunningConsole, page: Any
):
    # Given a run parked on its approval (issue 28 item 3)
    run_id = parked(stack, container, {"item": "invoice 77", "amount": 40})
    assert console.operator is not None
    actor = f"console:{console.operator.principal}"

    # When the operator pauses it from its page, saying why
    page.goto(f"{console.url}/runs/{run_id}")
    page.get_by_label("Why pause").fill("waiting for the budget")
    page.get_by_role("button", name="Pause").click()

    # Then the page says it paused, who paused it and why, and that its approval stays open
    assert "Run paused." in page.locator(".notice").inner_text()
    note = page.locator("#pause-note").inner_text()
    assert f"Paused by {actor}" in note and "waiting for the budget" in note
    assert "approval at review stays open" in note
    assert page.locator("h1 .pill").inner_text() == "paused"
    assert page.get_by_role("button", name="Resume").is_visible()
    shot(page, "run-paused")
    [paused] = [e for e in container.runs.get_timeline(run_id) if e.type == "run_paused"]
    assert (paused.actor, paused.detail["reason"]) == (actor, "waiting for the budget")

    # And the runs page's status filter finds it as paused
    page.goto(f"{console.url}/runs?status=paused")
    assert run_id in page.locator("table").inner_text()

    # When the approval is decided while the run is paused
    [approval] = container.approvals.list(run_id=run_id)
    page.goto(f"{console.url}/approvals/{approval.approval_id}")
    page.get_by_role("button", name="Approve").click()
    wait_for("the decision to be held", lambda: container.runs.get_run(run_id).held or None)

    # Then the run stays paused, holding the decision, and its page says so
    page.goto(f"{console.url}/runs/{run_id}")
    note = page.locator("#pause-note").inner_text()
    assert "approved by approver@example.com" in note and "held" in note
    shot(page, "run-paused-holding")

    # And when the operator resumes it, the held decision is delivered and the run finishes
    page.get_by_label("Why resume").fill("budget approved")
    page.get_by_role("button", name="Resume").click()
    assert "Run resumed." in page.locator(".notice").inner_text()
    wait_for("the run to succeed", lambda: run_in(container, run_id, "succeeded"))
    page.goto(f"{console.url}/runs/{run_id}")
    assert page.locator("h1 .pill").inner_text() == "succeeded"
    assert page.locator("#pause-note").count() == 0
    markers = page.locator("table.waterfall tr.pause").all_inner_texts()
    assert len(markers) == 2
    assert "Paused" in markers[0] and f"by {actor}" in markers[0]
    assert "waiting for the budget" in markers[0] and "while waiting at review" in markers[0]
    assert "Resumed" in markers[1] and "budget approved" in markers[1]
    shot(page, "run-resumed")
    [resumed] = [e for e in container.runs.get_timeline(run_id) if e.type == "run_resumed"]
    assert (resumed.actor, resumed.detail["reason"]) == (actor, "budget approved")


def test_pause_and_resume_act_only_on_a_posted_form_with_the_page_token(
    stack: LocalStack, container: Container, console: RunningConsole
):
    # Given a run parked on its approval, and a session of the console
    run_id = parked(stack, container, {"item": "pause by link"})
    cookie, token = _session(console)
    verbs = ("pause", "resume")

    # When the pause is asked by a GET (a link, a prefetch), or posted without the page's token
    got = [_get(f"{console.url}/runs/{run_id}/{verb}", cookie=cookie)[0] for verb in verbs]
    posted, _ = _post(
        f"{console.url}/runs/{run_id}/pause", "reason=x", origin=console.url, cookie=cookie
    )

    # Then neither acts: the run still waits on its approval, with no pause asked
    assert got == [405, 405] and posted == 403
    run = container.runs.get_run(run_id)
    assert (run.status.value, run.pause) == ("waiting_approval", None)

    # And the same form with the token pauses it
    status, _ = _post(
        f"{console.url}/runs/{run_id}/pause", f"csrf={token}", origin=console.url, cookie=cookie
    )
    assert status == 303
    assert container.runs.get_run(run_id).status.value == "paused"


def test_a_failed_step_is_fixed_from_the_consoles_inbox_and_the_run_succeeds(
    stack: LocalStack, container: Container, console: RunningConsole, page: Any
):
    # Given a run whose step failed and asked for a fix (issue 28 item 4)
    status, answer = deliver(stack, container, "console_fix", {"total": 90, "quantity": 0})
    assert status == 202, answer
    run_id = str(answer["run_id"])
    wait_for("the run to ask", lambda: run_in(container, run_id, "waiting_approval"))
    [approval] = wait_for("its approval", lambda: container.approvals.list(run_id=run_id) or None)

    # When the operator opens it from the inbox
    page.goto(f"{console.url}/approvals/{approval.approval_id}")

    # Then it shows the error, the step's input to edit, the output a skip gives, three choices
    assert "division by zero" in page.locator("#fix-error").inner_text()
    assert page.get_by_label("Quantity").input_value() == "0"
    assert page.get_by_label("Unit price").input_value() == ""
    for name in ("Retry with these inputs", "Skip, giving these outputs", "Fail the run"):
        assert page.get_by_role("button", name=name).is_visible()
    shot(page, "fix-asked")

    # When they correct the quantity and retry
    page.get_by_label("Quantity").fill("3")
    page.get_by_role("button", name="Retry with these inputs").click()

    # Then the page says so, and the run ran the step again and succeeded
    assert "You retried the step" in page.locator(".notice").inner_text()
    run = wait_for("the run to succeed", lambda: run_in(container, run_id, "succeeded"))
    assert run.outputs["unit_price"] == 30.0
    # And its page's timeline says a fix was asked, then who retried it, from the console
    page.goto(f"{console.url}/runs/{run_id}")
    notes = page.locator("table.waterfall").inner_text()
    assert "asked for a fix" in notes
    assert "fix: retry by approver@example.com (console)" in notes
    shot(page, "fix-retried")


def _get(url: str, *, cookie: str = "") -> tuple[int, str]:
    """A GET as a plain HTTP client makes it (another local process, unless given a cookie)."""
    request = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 - local console
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _post(
    url: str, body: str, *, origin: str, cookie: str = "", referer: str = ""
) -> tuple[int, str]:
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Origin": origin}
    if cookie:
        headers["Cookie"] = cookie
    if referer:
        headers["Referer"] = referer
    request = urllib.request.Request(url, body.encode(), headers, method="POST")  # noqa: S310
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _session(console: RunningConsole) -> tuple[str, str]:
    """A session cookie (for the start-up token) and its CSRF token, as the operator's browser
    gets them."""
    import re

    opener = urllib.request.build_opener(_NoRedirect)
    try:
        opener.open(console.startup_url, timeout=30)
        raise AssertionError("the start-up link did not redirect")
    except urllib.error.HTTPError as exc:
        assert exc.code == 303
        cookie = exc.headers["Set-Cookie"].split(";")[0]
    body = _get(console.url + "/workflows/console_review", cookie=cookie)[1]
    token = re.search(r'name="csrf" value="([^"]+)"', body)
    assert token is not None
    return cookie, token.group(1)


def test_a_queued_run_says_in_the_list_and_on_its_page_which_key_it_waits_for(
    stack: LocalStack, container: Container, console: RunningConsole, page: Any
):
    # Given a run of customer acme holding its key's one slot (parked on an approval)
    status, first = deliver(stack, container, "console_queue", {"customer": "acme"})
    assert status == 202, first
    wait_for("it to park", lambda: run_in(container, str(first["run_id"]), "waiting_approval"))
    # When a second delivery for acme arrives
    status, second = deliver(stack, container, "console_queue", {"customer": "acme"})
    assert status == 202, second
    queued = str(second["run_id"])
    assert container.runs.get_run(queued).status.value == "queued"

    # Then the runs list, filtered to queued runs, says why it waits
    page.goto(f"{console.url}/runs?status=queued&workflow=console_queue")
    row = page.locator("#runs tr", has=page.locator(f"a:text-is('{queued}')"))
    assert (
        row.locator(".why-waiting")
        .inner_text()
        .startswith(
            "waits for a slot of concurrency:console_queue:acme (concurrency): place 1 in line"
        )
    )
    shot(page, "runs-queued")
    # And so does its page
    page.goto(f"{console.url}/runs/{queued}")
    assert "concurrency:console_queue:acme" in page.locator("#why-waiting").inner_text()
    shot(page, "run-queued")
