"""The console's pure parts: redaction, labels, the graph drawing, the run view, cursors,
the start form's typing, the start-up token and sessions, the CSRF check and who the console
acts as. The pages in a browser: tests/browser."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from langorch.console.actions import ConsoleActionError, start_input
from langorch.console.drawing import graph_svg, layout
from langorch.console.http import CsrfError, Request, Sessions, session_of
from langorch.console.listing import FilterError, format_cursor, parse_cursor
from langorch.console.operator import Operator
from langorch.console.redact import REDACTED, redact, shown
from langorch.console.runview import build_run_view
from langorch.domain.definitions import TaskPlan
from langorch.domain.lookup import InMemoryLookup
from langorch.domain.plan.topology import step_graph
from langorch.domain.runs import RunRecord, RunStatus, TimelineEvent
from langorch.web.look import human_label
from tests.support.records import a_run

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ORIGIN = "http://127.0.0.1:8765"
TOKEN = "the-start-up-token"
SESSIONS = Sessions(b"k" * 32, token=TOKEN)
SESSION = SESSIONS.open(TOKEN) or ""


def review_graph():
    plan = TaskPlan.model_validate(
        {
            "plan_id": "review",
            "approvers": ["a@example.com"],
            "steps": [
                {"step_id": "draft", "kind": "transform", "transform": {"x": "1"}},
                {
                    "step_id": "gate",
                    "kind": "approval",
                    "depends_on": ["draft"],
                    "approval": {"title": "ok?", "timeout_seconds": 60, "max_iterations": 3},
                    "branches": {"approved": "ship", "rejected": "draft", "timed_out": "drop"},
                },
                {"step_id": "ship", "kind": "transform", "transform": {"y": "2"}},
                {"step_id": "drop", "kind": "transform", "transform": {"y": "3"}},
            ],
        }
    )
    return step_graph(plan, InMemoryLookup())


# --- redaction and labels --------------------------------------------------------------------


def test_secret_named_keys_are_redacted_at_any_depth():
    data = {"api_key": "abc", "nested": {"webhook_secret": "s", "ok": 1}, "list": [{"token": 1}]}
    assert redact(data) == {
        "api_key": REDACTED,
        "nested": {"webhook_secret": REDACTED, "ok": 1},
        "list": [{"token": REDACTED}],
    }


def test_secret_looking_text_is_redacted_whatever_its_key():
    assert redact("see https://x/approvals/a?ap=1&sig=abc") == REDACTED
    assert redact("Bearer abcdefghijklmnop") == REDACTED
    assert redact("sk-abcdefghijklmnopqrstu") == REDACTED
    assert redact("an ordinary sentence") == "an ordinary sentence"


def test_shown_values_are_cut_with_a_marker():
    text = shown("x" * 5000, limit=100)
    assert len(text) == 100 and text.endswith("…")


@pytest.mark.parametrize(
    ("key", "label"),
    [("invoice_total", "Invoice total"), ("dueDate", "Due date"), ("API_key", "API key")],
)
def test_keys_read_as_words(key: str, label: str):
    assert human_label(key) == label


# --- the graph -------------------------------------------------------------------------------


def test_a_review_loop_is_laid_out_top_down_with_its_back_edge_drawn_around():
    placed = layout(review_graph())
    assert placed["draft"].y < placed["gate"].y < placed["ship"].y
    assert placed["ship"].y == placed["drop"].y
    assert placed["ship"].x < placed["drop"].x


def test_the_graph_colours_steps_and_the_path_taken():
    svg = str(
        graph_svg(review_graph(), {"draft": "succeeded", "gate": "waiting"}, [("draft", "gate")])
    )
    assert svg.count("state-succeeded") == 1 and svg.count("state-waiting") == 1
    assert svg.count("state-pending") == 2
    # A step not reached reads as the legend and the step list say it, not "pending".
    assert svg.count("· not reached</text>") == 2 and "· pending" not in svg
    assert svg.count(" taken") == 1


def test_branches_to_one_step_are_one_arrow_with_every_label():
    plan = TaskPlan.model_validate(
        {
            "plan_id": "p",
            "approvers": ["a@example.com"],
            "steps": [
                {
                    "step_id": "gate",
                    "kind": "approval",
                    "approval": {"title": "ok?", "timeout_seconds": 60},
                    "branches": {"approved": "ship", "rejected": "drop", "timed_out": "drop"},
                },
                {"step_id": "ship", "kind": "transform", "transform": {"y": "2"}},
                {"step_id": "drop", "kind": "transform", "transform": {"y": "3"}},
            ],
        }
    )
    svg = str(graph_svg(step_graph(plan, InMemoryLookup())))
    assert svg.count("edge-branch") == 2
    assert "rejected / timed_out" in svg


def transform(step_id: str, **fields) -> dict:
    return {"step_id": step_id, "kind": "transform", "transform": {step_id: "1"}, **fields}


def graph_of(*steps: dict):
    plan = {"plan_id": "p", "approvers": ["a@example.com"], "steps": list(steps)}
    return step_graph(TaskPlan.model_validate(plan), InMemoryLookup())


def ticket_triage():
    """Issue 26's workflow: summarize, decide (normal -> send, urgent -> review), review."""
    return graph_of(
        transform("summarize"),
        {
            "step_id": "decide",
            "kind": "decision",
            "depends_on": ["summarize"],
            "condition": "{{ 'urgent' if priority == 'high' else 'normal' }}",
            "branches": {"normal": "send", "urgent": "review"},
        },
        {
            "step_id": "review",
            "kind": "approval",
            "approval": {"title": "Urgent ticket", "timeout_seconds": 600},
            "branches": {"approved": "send", "rejected": "close", "timed_out": "close"},
        },
        transform("send"),
        transform("close"),
    )


def loop_and_review_loop():
    return graph_of(
        transform("draft"),
        {
            "step_id": "gate",
            "kind": "approval",
            "depends_on": ["draft"],
            "approval": {"title": "ok?", "timeout_seconds": 60, "max_iterations": 3},
            "branches": {"approved": "each", "rejected": "draft"},
        },
        {"step_id": "each", "kind": "loop", "loop": {"over": "items", "body": ["shout", "count"]}},
        transform("shout"),
        transform("count", depends_on=["shout"]),
        transform("after", depends_on=["each"]),
    )


def skip_edges():
    """Edges that jump one, two and three layers past steps in between."""
    return graph_of(
        transform("a"),
        transform("b", depends_on=["a"]),
        transform("c", depends_on=["b"]),
        transform("d", depends_on=["a", "b", "c"]),
        transform("e", depends_on=["a"]),
        transform("f", depends_on=["e", "d"]),
    )


def wide_with_error_routes():
    return graph_of(
        transform("start"),
        *[transform(f"fetch_{n}", depends_on=["start"], on_error="recover") for n in range(5)],
        transform("merge", depends_on=[f"fetch_{n}" for n in range(5)]),
        transform("recover"),
        transform("publish", depends_on=["merge"], on_error="recover"),
    )


def far_jump():
    """A chain of ten and an edge from its first step to its last (past MAX_SLOTS layers)."""
    chain = [transform("c0")] + [transform(f"c{n}", depends_on=[f"c{n - 1}"]) for n in range(1, 10)]
    return graph_of(*chain, transform("end", depends_on=["c0", "c9"]))


SHAPES = {
    "ticket triage": ticket_triage,
    "review loop and for-each loop": loop_and_review_loop,
    "skip edges": skip_edges,
    "fan-out with error routes": wide_with_error_routes,
    "a far jump": far_jump,
}


def boxes_and_edges(svg: str):
    """The steps' boxes, the edges' paths as sampled points, and the labels' boxes."""
    import re
    import xml.etree.ElementTree as ET

    root = ET.fromstring(svg)  # noqa: S314 - our own drawing, not untrusted input
    ns = "{http://www.w3.org/2000/svg}"
    boxes = [
        tuple(float(r.get(k)) for k in ("x", "y", "width", "height"))
        for r in root.iter(f"{ns}rect")
    ]
    edges = []
    for path in root.iter(f"{ns}path"):
        if path.get("class") == "arrowhead":
            continue
        points: list[tuple[float, float]] = []
        at = (0.0, 0.0)
        for command, args in re.findall(r"([MLC])([^MLC]+)", path.get("d")):
            numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", args)]
            pairs = list(zip(numbers[::2], numbers[1::2], strict=True))
            if command == "M":
                at = pairs[0]
                points.append(at)
            elif command == "L":
                points += [
                    (at[0] + (pairs[0][0] - at[0]) * t / 50, at[1] + (pairs[0][1] - at[1]) * t / 50)
                    for t in range(51)
                ]
                at = pairs[0]
            else:
                (c1, c2, end) = pairs
                for i in range(101):
                    t = i / 100
                    u = 1 - t
                    points.append(
                        tuple(
                            u**3 * p0 + 3 * u * u * t * p1 + 3 * u * t * t * p2 + t**3 * p3
                            for p0, p1, p2, p3 in zip(at, c1, c2, end, strict=True)
                        )
                    )
                at = end
        edges.append(points)
    labels = []
    for text in root.iter(f"{ns}text"):
        if text.get("class") != "edge-label":
            continue
        x, y, width = float(text.get("x")), float(text.get("y")), 6.5 * len(text.text or "")
        left = {"start": x, "middle": x - width / 2, "end": x - width}[text.get("text-anchor")]
        labels.append((text.text, (left, y - 10, width, 12)))
    return boxes, edges, labels


def inside(point: tuple[float, float], box: tuple[float, ...], inset: float = 1.0) -> bool:
    x, y, width, height = box
    return x + inset < point[0] < x + width - inset and y + inset < point[1] < y + height - inset


def overlap(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


@pytest.mark.parametrize("shape", SHAPES)
def test_no_edge_is_drawn_through_a_step_and_no_label_is_hidden(shape: str):
    boxes, edges, labels = boxes_and_edges(str(graph_svg(SHAPES[shape]())))

    # No point of any edge is inside a step's box (issue 26: decide's ``normal`` branch to
    # send ran behind the review step, its label under the box)
    assert edges and boxes
    through = [
        (n, point, box)
        for n, points in enumerate(edges)
        for point in points
        for box in boxes
        if inside(point, box)
    ]
    assert through == []
    # And no label is under a step or on another label
    assert [(text, box) for text, label in labels for box in boxes if overlap(label, box)] == []
    assert [
        (a, b)
        for i, (a, one) in enumerate(labels)
        for b, other in labels[i + 1 :]
        if overlap(one, other)
    ] == []


def test_step_names_in_the_graph_are_escaped():
    plan = TaskPlan.model_validate(
        {"plan_id": "p", "steps": [{"step_id": "a", "kind": "transform", "transform": {"x": "1"}}]}
    )
    svg = str(graph_svg(step_graph(plan, InMemoryLookup()), {"a": '"><script>'}))
    assert "<script>" not in svg and "&lt;script&gt;" in svg


# --- the run view ----------------------------------------------------------------------------


def event(seq: int, seconds: float, type_: str, step: str, **fields) -> TimelineEvent:
    return TimelineEvent(
        seq=seq, at=T0 + timedelta(seconds=seconds), type=type_, step_id=step, **fields
    )


def test_the_run_view_has_states_spans_and_the_branch_taken():
    run = run_record(
        RunStatus.succeeded, ended_at=T0 + timedelta(seconds=10), input={"password": "hunter2"}
    )
    events = [
        event(1, 0, "step_started", "draft"),
        event(2, 1, "step_finished", "draft", duration_ms=1000, outputs_summary={"x": "1"}),
        event(3, 1, "step_started", "gate"),
        event(4, 1, "approval_requested", "gate"),
        event(
            5, 8, "approval_decided", "gate", actor="a@example.com", detail={"decision": "approved"}
        ),
        event(6, 8, "step_finished", "gate", duration_ms=5, detail={"branch": "approved"}),
        event(7, 9, "step_started", "ship"),
        event(8, 10, "step_finished", "ship", duration_ms=900),
    ]

    view = build_run_view(run, events, review_graph(), T0 + timedelta(seconds=20))

    states = {s.step_id: s.state for s in view.steps}
    assert states == {
        "draft": "succeeded",
        "gate": "succeeded",
        "ship": "succeeded",
        "drop": "pending",
    }
    assert ("gate", "ship") in view.taken and ("gate", "drop") not in view.taken
    assert ("gate", "draft") not in view.taken
    approval = [s for s in view.spans if s.kind == "approval"]
    assert [(s.start_s, s.end_s, s.note) for s in approval] == [
        (1.0, 8.0, "approved by a@example.com")
    ]
    assert view.input == [("Password", REDACTED)]


def test_a_failed_step_shows_its_error_and_the_error_route_is_not_the_path_of_a_success():
    run = run_record(RunStatus.failed, ended_at=T0 + timedelta(seconds=2))
    error = {"step_id": "draft", "type": "StepTimeoutError", "message": "took <too> long"}
    events = [
        event(1, 0, "step_started", "draft"),
        event(2, 1, "step_retried", "draft"),
        event(3, 2, "step_failed", "draft", duration_ms=900, error=error),
    ]

    view = build_run_view(run, events, review_graph(), T0 + timedelta(seconds=5))

    [draft] = [s for s in view.steps if s.step_id == "draft"]
    assert draft.state == "failed" and draft.retries == 1
    assert draft.error == "StepTimeoutError: took <too> long"
    assert view.taken == []
    assert [(s.label, s.state) for s in view.spans] == [("draft", "failed"), ("draft", "failed")]


def run_record(status: RunStatus, **fields) -> RunRecord:
    """Run ``r`` of the review workflow in ``status``, created at ``T0``."""
    return a_run("r", workflow_id="review", status=status, at=T0, **fields)


def test_each_attempt_of_a_retried_step_is_its_own_span():
    # Given a step whose first two attempts failed (0-1 s, 3-4 s) and whose third succeeded
    error = {"step_id": "draft", "type": "HttpStepError", "message": "HTTP 503 from api"}
    events = [
        event(1, 0, "step_started", "draft"),
        event(2, 1, "step_retried", "draft", duration_ms=1000, error=error, detail={"attempt": 1}),
        event(3, 4, "step_retried", "draft", duration_ms=1000, error=error, detail={"attempt": 2}),
        event(4, 8, "step_finished", "draft", duration_ms=2000, detail={"attempt": 3}),
    ]

    view = build_run_view(run_record(RunStatus.running), events, review_graph(), T0)

    # Then the waterfall has a row per attempt, each where it ran, labelled, failed ones red
    rows = [(s.which, s.state, s.start_s, s.end_s) for s in view.spans]
    assert rows == [
        ("attempt 1", "failed", 0.0, 1.0),
        ("attempt 2", "failed", 3.0, 4.0),
        ("attempt 3", "succeeded", 6.0, 8.0),
    ]
    # And the step succeeded: its failed attempts are history, not its error
    [draft] = [s for s in view.steps if s.step_id == "draft"]
    assert draft.state == "succeeded" and draft.error is None and draft.retries == 2
    assert draft.earlier == [
        "attempt 1: HttpStepError: HTTP 503 from api",
        "attempt 2: HttpStepError: HTTP 503 from api",
    ]


def test_a_redriven_run_shows_attempts_as_attempts_and_no_stale_error():
    # Given a run whose step failed, was redriven by an operator, and then succeeded
    error = {"step_id": "draft", "type": "Boom", "message": "the service was down"}
    redrive = {"attempt": 1, "from_step": None, "reason": "service is back"}
    events = [
        event(1, 0, "step_started", "draft"),
        event(2, 1, "step_failed", "draft", duration_ms=1000, error=error),
        event(3, 1, "run_finished", None),
        event(4, 10, "run_redriven", None, actor="console:ana", detail=redrive),
        event(5, 11, "step_started", "draft"),
        event(6, 12, "step_finished", "draft", duration_ms=1000, outputs_summary={"x": "1"}),
    ]

    view = build_run_view(run_record(RunStatus.running), events, review_graph(), T0)

    # Then the step is succeeded with no error box, its failure kept as history
    [draft] = [s for s in view.steps if s.step_id == "draft"]
    assert draft.state == "succeeded" and draft.error is None
    assert draft.earlier == ["before redrive #1: Boom: the service was down"]
    # And the waterfall: the failed attempt, a redrive marker (who, why), the attempt after it
    rows = [(s.label, s.which, s.kind, s.state) for s in view.spans]
    assert rows == [
        ("draft", "before the redrive", "step", "failed"),
        ("Redrive #1", "", "redrive", "redrive"),
        ("draft", "after redrive #1", "step", "succeeded"),
    ]
    marker = view.spans[1]
    assert marker.note == "by console:ana · from the last good checkpoint · service is back"


def test_a_failed_http_step_shows_the_request_it_sent_redacted():
    error = {"step_id": "draft", "type": "HttpStepError", "message": "HTTP 500 from api"}
    request = {
        "method": "POST",
        "url": "https://api.example.com/orders?api_key=s3cr3t&sku=A-1",
        "body": {"sku": "A-1", "password": "hunter2"},
    }
    events = [
        event(1, 0, "step_started", "draft"),
        event(2, 1, "step_failed", "draft", error=error, detail={"request": request}),
    ]

    view = build_run_view(run_record(RunStatus.failed), events, review_graph(), T0)

    [draft] = [s for s in view.steps if s.step_id == "draft"]
    sent = dict(draft.sent)
    assert sent["Request"].startswith("POST https://api.example.com/orders?api_key=")
    assert "s3cr3t" not in sent["Request"] and "sku=A-1" in sent["Request"]
    assert '"sku": "A-1"' in sent["Body"] and "hunter2" not in sent["Body"]


# --- cursors, forms, CSRF --------------------------------------------------------------------


def test_a_cursor_reads_back_as_the_run_it_was_made_from():
    run = a_run("run-1", workflow_id="w", at=T0)
    assert parse_cursor(format_cursor(run)) == (T0, "run-1")
    with pytest.raises(FilterError):
        parse_cursor("not a cursor")


def test_the_start_form_types_each_field_as_its_schema_says():
    fields = [
        {"name": "n", "type": "integer", "widget": "number", "required": True},
        {"name": "tags", "type": "array", "widget": "json", "required": False},
        {"name": "urgent", "type": "boolean", "widget": "checkbox", "required": False},
        {"name": "note", "type": "string", "widget": "text", "required": False},
    ]
    form = {"in.n": ["3"], "in.tags": ['["a"]'], "in.urgent": ["on"], "in.note": [""]}
    assert start_input(fields, form) == {"n": 3, "tags": ["a"], "urgent": True}
    with pytest.raises(ConsoleActionError, match=r"input\.n"):
        start_input(fields, {"in.n": ["three"]})
    with pytest.raises(ConsoleActionError, match="required"):
        start_input(fields, {})


def post(session: str, token: str, **headers: str) -> Request:
    return Request("POST", "/runs/r/cancel", {}, headers, {"csrf": [token]}, session=session)


def test_a_post_needs_the_session_token_and_the_console_origin():
    sessions = SESSIONS
    session = SESSION
    token = sessions.token(session)
    origins = frozenset({ORIGIN})

    sessions.check(post(session, token, origin=ORIGIN), origins)
    sessions.check(post(session, token, referer=ORIGIN + "/runs/r"), origins)
    for refused in (
        post("", token, origin=ORIGIN),
        post(session, "wrong", origin=ORIGIN),
        post(session, sessions.token("another"), origin=ORIGIN),
        post(session, token, origin="http://evil.example"),
        post(session, token, origin="null"),
        post(session, token),
    ):
        with pytest.raises(CsrfError):
            sessions.check(refused, origins)


def test_a_malformed_cookie_is_no_session():
    assert session_of({"cookie": "langorch_console=<script>"}) == ""
    assert session_of({"cookie": "\x00;;;="}) == ""
    assert session_of({"cookie": f"other=1; langorch_console={SESSION}"}) == SESSION


# --- the runs list over the store's contract (the in-memory fake) ----------------------------


class _Stack:
    """What the runs page reads: the runs store and the clock."""

    def __init__(self, runs, now: datetime) -> None:
        self.runs = runs
        self.now = now

    def clock(self) -> datetime:
        return self.now


def listed(count: int):
    from tests.fakes.runs import InMemoryRuns

    runs = InMemoryRuns()
    for n in range(count):
        at = T0 + timedelta(minutes=n)
        runs.create_run(
            a_run(
                f"run-{n:03d}", workflow_id="w", trigger="webhook" if n % 2 else "schedule", at=at
            )
        )
    return _Stack(runs, T0 + timedelta(minutes=count))


def page_of(stack: _Stack, **query: str):
    from langorch.console.listing import runs_page

    request = Request("GET", "/runs", {k: [v] for k, v in query.items()}, {})
    return runs_page(stack, request, size=50)


def test_the_runs_list_pages_through_every_run_once_newest_first():
    stack = listed(120)
    seen: list[str] = []
    cursor = ""
    pages = 0
    while True:
        page = page_of(stack, **({"before": cursor} if cursor else {}))
        seen += [r.run_id for r in page.runs]
        pages += 1
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert pages == 3
    assert seen == [f"run-{n:03d}" for n in reversed(range(120))]


def test_trigger_and_time_filters_fill_a_page_from_several_reads():
    stack = listed(120)
    webhooks = page_of(stack, trigger="webhook")
    assert len(webhooks.runs) == 50
    assert all(r.trigger.type == "webhook" for r in webhooks.runs)
    recent = page_of(stack, since="1h")
    assert [r.run_id for r in recent.runs][-1] == "run-070"
    assert recent.next_cursor is not None
    rest = page_of(stack, since="1h", before=recent.next_cursor)
    assert [r.run_id for r in rest.runs] == [f"run-{n:03d}" for n in reversed(range(60, 70))]
    assert rest.next_cursor is None
    with pytest.raises(FilterError):
        page_of(stack, status="bogus")


def test_a_search_finds_a_run_by_its_id_or_the_start_of_it():
    stack = listed(120)

    assert [r.run_id for r in page_of(stack, q="run-007").runs] == ["run-007"]
    assert [r.run_id for r in page_of(stack, q="run-11").runs] == [
        f"run-{n:03d}" for n in reversed(range(110, 120))
    ]
    assert [r.run_id for r in page_of(stack, q="11").runs][:2] == ["run-119", "run-118"]
    # A run found by its id still has to match the other filters (odd runs are webhooks)
    assert page_of(stack, q="run-007", trigger="schedule").runs == []
    with pytest.raises(FilterError, match="run id"):
        page_of(stack, q="<script>")


def test_the_runs_list_learns_of_runs_started_after_its_newest():
    from langorch.console.listing import format_cursor, newer_runs

    stack = listed(120)
    shown = stack.runs.get_run("run-115")
    request = Request("GET", "/api/runs", {"after": [format_cursor(shown)]}, {})

    runs, complete = newer_runs(stack, request)

    assert [r.run_id for r in runs] == ["run-119", "run-118", "run-117", "run-116"]
    assert complete


def test_fork_edits_are_key_json_lines_and_a_bad_line_is_named():
    from langorch.console import actions

    assert actions.fork_edits('amount=120\n\nnote="late"\nitems=["a", "b"]') == {
        "amount": 120,
        "note": "late",
        "items": ["a", "b"],
    }
    with pytest.raises(ConsoleActionError, match="line 2: the value of 'note' is not JSON"):
        actions.fork_edits("amount=1\nnote=late")
    with pytest.raises(ConsoleActionError, match="line 1: write KEY=JSON"):
        actions.fork_edits("just text")


# --- the app's answers without a stack behind it ---------------------------------------------


class _Clock:
    """A stack with nothing in it but a clock and an empty approvals store: enough for
    refusals and error pages."""

    def __init__(self) -> None:
        from tests.fakes.approvals import InMemoryApprovals

        self.approvals = InMemoryApprovals()

    def clock(self) -> datetime:
        return T0


OPERATOR = Operator("ana", "OS user", "ana@example.com")


def console_app(operator: Operator = OPERATOR):
    from langorch.console.app import ConsoleApp

    return ConsoleApp(_Clock(), "the test stack", frozenset({ORIGIN}), operator, SESSIONS)


def get(path: str, session: str = SESSION, **query: str) -> Request:
    return Request("GET", path, {k: [v] for k, v in query.items()}, {}, session=session)


def test_an_action_without_its_token_is_refused_before_anything_is_read():
    response = console_app().handle(
        Request("POST", "/runs/r/cancel", {}, {"origin": ORIGIN}, {}, session=SESSION)
    )
    assert response.status == 403
    assert b"token does not match" in response.body


def test_unknown_paths_and_methods_answer_404_and_405_with_the_security_headers():
    from langorch.console.app import headers_for

    app = console_app()
    missing = app.handle(get("/nowhere/<script>"))
    assert missing.status == 404
    assert b"<script>" not in missing.body and b"&lt;script&gt;" in missing.body
    assert app.handle(get("/runs/r/cancel")).status == 405
    headers = headers_for(missing)
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert "unsafe-inline" not in headers["Content-Security-Policy"]
    assert headers["X-Frame-Options"] == "DENY"


def test_static_files_are_served_from_the_package_only():
    app = console_app()
    css = app.handle(Request("GET", "/static/langorch.css", {}, {}))
    assert css.status == 200 and css.content_type.startswith("text/css")
    assert b"prefers-color-scheme:dark" in css.body
    assert app.handle(Request("GET", "/static/console.js", {}, {})).status == 200
    assert app.handle(Request("GET", "/static/..", {}, {})).status == 404
    assert app.handle(Request("GET", "/static/app.py", {}, {})).status == 404


def test_langorch_console_says_how_to_start_a_stack_that_is_not_answering(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    import json
    import socket

    from langorch.cli.main import main

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (tmp_path / ".langorch").mkdir()
    (tmp_path / ".langorch" / "stack.json").write_text(
        json.dumps({"endpoint_url": f"http://127.0.0.1:{port}", "settings": {}})
    )
    monkeypatch.chdir(tmp_path)

    code = main(["console", "--port", "0"])

    assert code != 0
    assert "make dev" in capsys.readouterr().err


def test_the_run_page_renders_hostile_values_as_text():
    hostile = "<script>alert(1)</script>\"'><img src=x onerror=alert(2)> ✓"
    run = run_record(
        RunStatus.failed,
        input={"note": hostile},
        error={"step_id": "draft", "type": "Boom", "message": hostile},
    )
    events = [
        event(1, 0, "step_started", "draft"),
        event(2, 1, "step_failed", "draft", error={"type": "Boom", "message": hostile}),
    ]
    view = build_run_view(run, events, review_graph(), T0)
    request = Request("GET", "/runs/r", {}, {}, session=SESSION)

    body = (
        console_app()
        .page("run.html", request, view=view, approvals=[], recovery=True, message="")
        .body.decode()
    )

    assert "<script>alert" not in body and "<img src=x" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert 'action="/runs/r/redrive"' not in body or 'name="csrf"' in body


def test_the_run_pages_audit_says_each_decision_came_through_the_link_or_the_console():
    from langorch.domain.approvals.audit import AuditEntry

    # Given an approval viewed and decided from its emailed link, then decided again in the console
    def entry(action: str, **visit: str) -> AuditEntry:
        return AuditEntry(approval_id="apr-1", at=T0, action=action, outcome="ok", **visit)

    audit = [
        entry("emailed", actor="ana@example.com"),
        entry("decide", method="POST", source_ip="10.0.0.9", user_agent="Firefox/140"),
        entry("decide", method="POST", channel="console", operator="ana (OS user)"),
    ]
    view = build_run_view(run_record(RunStatus.succeeded), [], review_graph(), T0)
    request = Request("GET", "/runs/r", {}, {}, session=SESSION)

    # When the run page renders its approvals
    body = (
        console_app()
        .page(
            "run.html",
            request,
            view=view,
            approvals=[(pending_approval(["ana@example.com"]), audit)],
            recovery=True,
            message="",
        )
        .body.decode()
    )

    # Then each row says where it came from: the emailed link with its client, or the console
    # and who acted there; the service's own line (the email sent) names none
    rows = body.split("<tr>")
    assert "<td>emailed link · Firefox/140</td>" in rows[-2]
    assert "<td>console · ana (OS user)</td>" in rows[-1]
    assert "<td></td>" in next(row for row in rows if "<td>emailed</td>" in row)


@pytest.mark.parametrize(
    ("status", "offers_checkpoint"),
    [(RunStatus.failed, True), (RunStatus.succeeded, False), (RunStatus.cancelled, False)],
)
def test_only_a_failed_run_offers_to_continue_from_its_last_good_checkpoint(
    status: RunStatus, offers_checkpoint: bool
) -> None:
    # Redriving a succeeded or cancelled run from its checkpoint is refused (it has nowhere to
    # continue); the page offers what the use-case accepts: running it again from a step.
    run = run_record(status)
    view = build_run_view(run, [event(1, 0, "step_started", "draft")], review_graph(), T0)
    request = Request("GET", "/runs/r", {}, {}, session=SESSION)

    body = (
        console_app()
        .page("run.html", request, view=view, approvals=[], recovery=True, message="")
        .body.decode()
    )

    assert ("from the last good checkpoint" in body) is offers_checkpoint
    assert (">Redrive</button>" in body) is offers_checkpoint
    assert (">Run again</button>" in body) is not offers_checkpoint
    assert 'value="draft">from step draft</option>' in body


# --- the start-up token, sessions and who the console acts as ------------------------------


def test_a_request_without_a_session_is_refused_and_shows_nothing_of_the_stack():
    app = console_app()

    for session in ("", "forged.0123456789abcdef", SESSIONS.token(SESSION)):
        page = app.handle(get("/approvals", session=session))
        api = app.handle(get("/api/status", session=session, id="r"))

        assert page.status == 401 and api.status == 401
        assert b"start-up link" in page.body
        assert b"ana" not in page.body and b"/approvals" not in page.body
        assert "Set-Cookie" not in page.headers and "Set-Cookie" not in api.headers


def test_the_start_up_token_opens_a_session_and_redirects_to_the_page_without_it():
    response = console_app().handle(get("/runs", session="", token=TOKEN, status="failed"))

    assert response.status == 303
    assert response.headers["Location"] == "/runs?status=failed"
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
    issued = cookie.split(";")[0].partition("=")[2]
    assert SESSIONS.valid(issued)


def test_a_wrong_start_up_token_opens_nothing():
    response = console_app().handle(get("/runs", session="", token="a-guess"))

    assert response.status == 403
    assert "Set-Cookie" not in response.headers
    assert not SESSIONS.valid("a-guess") and SESSIONS.open("a-guess") is None


def test_a_session_of_another_console_process_is_not_one_of_this_ones():
    other = Sessions(b"o" * 32, token=TOKEN).open(TOKEN) or ""

    assert not SESSIONS.valid(other)
    assert console_app().handle(get("/runs", session=other)).status == 401


def test_every_page_says_who_is_acting():
    body = console_app().handle(get("/nowhere")).body.decode()

    assert "acting as <strong>ana</strong>" in body and "OS user, ana@example.com" in body
    assert "admin override on" not in body


def pending_approval(approvers: list[str]):
    from langorch.domain.approvals.record import Approval

    return Approval(
        approval_id="apr-1",
        run_id="run-1",
        step_id="review",
        interrupt_id="i-1",
        approvers=approvers,
        created_at=T0,
        expires_at=T0 + timedelta(hours=1),
    )


@pytest.mark.parametrize(
    "spelling", ["ana@example.com", "Ana <ANA@Example.com.>", "ana+console@example.com"]
)
def test_the_operator_decides_as_the_address_the_approval_names_them_by(spelling: str):
    approval = pending_approval(["ben@example.com", spelling])

    assert Operator("ana", "OS user", "ana@example.com").may_decide_for(approval) == [spelling]


def test_an_operator_the_approval_does_not_name_decides_nothing_without_the_override():
    approval = pending_approval(["ben@example.com", "cho@example.com"])

    assert Operator("ana", "OS user", "ana@example.com").may_decide_for(approval) == []
    assert Operator("ana", "OS user", None).may_decide_for(approval) == []
    admin = Operator("ana", "OS user", None, admin=True)
    assert admin.may_decide_for(approval) == ["ben@example.com", "cho@example.com"]


def test_a_look_alike_address_is_not_the_operator():
    approval = pending_approval(["\u0430na@example.com"])  # a Cyrillic a

    assert Operator("x", "OS user", "ana@example.org").may_decide_for(approval) == []


def test_the_decide_action_refuses_an_operator_the_approval_does_not_name():
    from langorch.console.actions import NotYoursToDecideError, decide

    stack = _Clock()
    stack.approvals.put_pending(pending_approval(["ben@example.com"]), "task-token")
    form = {"decision": ["approved"], "approver": ["ben@example.com"]}
    request = Request("POST", "/approvals/apr-1", {}, {}, form, session=SESSION)

    with pytest.raises(NotYoursToDecideError, match=r"names ben@example\.com"):
        decide(stack, OPERATOR, "apr-1", request)
    assert stack.approvals.get("apr-1").is_pending
    assert stack.approvals.audit("apr-1") == []


class _Principals:
    """STS as a fake: the ARN of the credentials' principal."""

    def __init__(self, arn: str) -> None:
        self.arn = arn

    def principal_arn(self) -> str:
        return self.arn


@pytest.mark.parametrize(
    ("arn", "address"),
    [
        (
            "arn:aws:sts::111122223333:assumed-role/AWSReservedSSO_Admin_0a1b/ana@example.com",
            "ana@example.com",
        ),
        ("arn:aws:iam::111122223333:user/ops/ana@example.com", "ana@example.com"),
        ("arn:aws:iam::111122223333:user/ana", None),
        ("arn:aws:sts::111122223333:assumed-role/Deploy/botocore-session-17", None),
    ],
)
def test_against_a_stack_the_operator_is_the_iam_principal(arn: str, address: str | None):
    from langorch.console.operator import stack_operator

    operator = stack_operator(_Principals(arn))

    assert (operator.principal, operator.source, operator.address) == (
        arn,
        "IAM principal",
        address,
    )
    assert operator.actor == f"console:{arn}"


def test_against_a_stack_no_flag_names_another_address():
    from types import SimpleNamespace

    from langorch.console.operator import OperatorError, operator_of

    stack = SimpleNamespace(
        settings=SimpleNamespace(local_home=None),
        caller=_Principals("arn:aws:iam::1:user/ana"),
    )

    with pytest.raises(OperatorError, match="IAM principal"):
        operator_of(stack, address="ben@example.com")
