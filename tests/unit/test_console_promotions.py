"""The console's workflow page says which version is active and how it got there."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from langorch.adapters.sqlite.definitions import SqliteDefinitions
from langorch.console.app import ConsoleApp
from langorch.console.http import Request, Sessions
from langorch.console.operator import Operator
from langorch.domain.definitions import PlanStep, TaskPlan
from langorch.domain.promotions import Gate, Promotion
from tests.fakes.approvals import InMemoryApprovals
from tests.fakes.runs import InMemoryRuns

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SESSIONS = Sessions(b"k" * 32, token="token")
SESSION = SESSIONS.open("token") or ""


class _Stack:
    """The definitions store (SQLite, as the local stack's), no runs, no approvals."""

    def __init__(self, sqlite_db: Any) -> None:
        self.definitions = SqliteDefinitions(sqlite_db, clock=lambda: T0)
        self.runs = InMemoryRuns()
        self.approvals = InMemoryApprovals()

    def clock(self) -> datetime:
        return T0


def _page(stack: _Stack, path: str, **query: str) -> str:
    app = ConsoleApp(stack, "the test stack", frozenset(), Operator("ana", "OS user"), SESSIONS)
    request = Request("GET", path, {k: [v] for k, v in query.items()}, {}, session=SESSION)
    response = app.handle(request)
    assert response.status == 200, response.body
    return response.body.decode()


def _plan(text: str) -> TaskPlan:
    return TaskPlan(plan_id="digest", description=text, steps=[PlanStep(step_id="s")])


def test_the_workflow_page_opens_on_the_active_version_and_marks_the_draft(sqlite_db: Any) -> None:
    # Given version 1 active and version 2 a draft
    stack = _Stack(sqlite_db)
    stack.definitions.put_workflow(_plan("one"))
    stack.definitions.put_workflow(_plan("two"), activate=False)
    # When the workflow page is opened, then its draft
    page = _page(stack, "/workflows/digest")
    draft = _page(stack, "/workflows/digest", version="2")
    # Then it opens on version 1, marked active, and the draft says it is one
    assert "v1 · active" in page and "v1</a> (active)" in page
    assert "v1 — runs, triggers and schedules start it" in page
    assert "v2 · draft" in draft and "(of the active version, v1)" in draft


def test_the_workflow_page_lists_promotions_with_their_gate(sqlite_db: Any) -> None:
    # Given version 2 promoted past a failed gate with --force
    stack = _Stack(sqlite_db)
    stack.definitions.put_workflow(_plan("one"))
    stack.definitions.put_workflow(_plan("two"), activate=False)
    gate = Gate("replay.json", runs=20, failures=1, passed=False)
    stack.definitions.promote(Promotion("digest", 2, None, "ana", T0, gate=gate, forced=True))
    # When the workflow page is opened
    page = _page(stack, "/workflows/digest")
    # Then version 2 is active and the promotion is listed with its gate, forced
    assert "v2 · active" in page
    assert "v2 by ana" in page and "20 runs replayed, 1 failing, forced" in page


def test_the_workflows_list_shows_a_workflow_stored_only_as_drafts_and_says_so(
    sqlite_db: Any,
) -> None:
    # Given a workflow stored only as a draft (`workflows put --draft`), and one with an
    # active version 1 and a draft version 2
    stack = _Stack(sqlite_db)
    drafted = TaskPlan(plan_id="drafted", description="new", steps=[PlanStep(step_id="s")])
    stack.definitions.put_workflow(drafted, activate=False)
    stack.definitions.put_workflow(_plan("one"))
    stack.definitions.put_workflow(_plan("two"), activate=False)

    # When the workflows list is opened
    page = _page(stack, "/workflows")

    # Then both are listed: the draft-only one marked as having no active version, the other
    # with its active version and its newer draft
    assert 'href="/workflows/drafted"' in page and 'href="/workflows/digest"' in page
    assert "draft only" in page
    assert "v1 active" in page and "v2 draft" in page
