"""A run's attached files in the console, in a real browser (Debian's Chromium, Playwright).

A local stack runs a workflow whose ``attach`` step keeps a report and a value of its input;
the run page lists both, and a click downloads each under its name with its bytes. A path that
tries to leave the run's files gets a 404, even sent with the browser's session. Screenshots
are kept in ``artifacts/console/`` (gitignored) to be looked at.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from langorch.app.runs import StartRun, launch_run
from langorch.composition.container import Container
from langorch.console.operator import local_operator
from langorch.console.server import RunningConsole, serve_console
from langorch.local.stack import LocalStack
from tests.e2e.test_walkthrough import run_in, wait_for
from tests.support.browser import Tab, shot
from tests.support.stacks import running_stack

DEFINITIONS = """
workflows:
  - plan_id: console_report
    name: Write a report and keep it
    memory: false
    inputs_schema: {properties: {customer: {type: string}, order: {type: object}}}
    steps:
      - {step_id: total, kind: transform, transform: {total: "order.amount * 2"}}
      - step_id: keep
        kind: attach
        depends_on: [total]
        settings:
          files:
            - name: "Rapport été — {{ customer }}.md"
              content: "# {{ customer }}\\n\\nTotal: {{ total }}\\n"
            - {name: order.json, from: order}
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    home = tmp_path_factory.mktemp("console-artifacts") / ".langorch"
    with running_stack(home, definitions=DEFINITIONS) as running:
        yield running


@pytest.fixture(scope="module")
def container(stack: LocalStack) -> Container:
    return stack.container


@pytest.fixture(scope="module")
def console(container: Container) -> Iterator[RunningConsole]:
    operator = local_operator(address="operator@example.com")
    running = serve_console(container, target="the local stack", port=0, operator=operator)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def run_id(container: Container) -> str:
    """A run of the report workflow, ended."""
    data = {"customer": "Zoë", "order": {"amount": 21, "items": ["tea", "cake"]}}
    run, _ = launch_run(StartRun("console_report", input=data), container)
    wait_for("the run to succeed", lambda: run_in(container, run.run_id, "succeeded"))
    return run.run_id


@pytest.fixture(scope="module")
def operator_tab(browser: Any, console: RunningConsole) -> Iterator[Tab]:
    """The operator's browser, signed in once by the console's start-up link (its downloads
    accepted): one context and one tab that the module's tests take in turn."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    tab = Tab(context)
    tab.page.goto(console.startup_url)
    yield tab
    context.close()


@pytest.fixture
def page(operator_tab: Tab) -> Iterator[Any]:
    """A tab signed in to the console, in the module's browser."""
    yield operator_tab.take()
    errors = operator_tab.give_back()
    assert errors == [], f"the page logged errors: {errors}"


def test_the_run_page_lists_the_runs_files_and_a_click_downloads_each(
    console: RunningConsole, run_id: str, page: Any
) -> None:
    # Given the page of a run that attached a report and its order
    page.goto(f"{console.url}/runs/{run_id}")
    table = page.locator("table.artifacts")
    table.scroll_into_view_if_needed()
    shot(page, "run-artifacts")

    # Then both files are listed with the step that kept them, size and type
    rows = table.locator("tbody tr")
    assert rows.count() == 2
    report = rows.filter(has_text="Rapport été — Zoë.md")
    assert report.locator("td").nth(1).inner_text() == "keep"
    assert report.locator("td").nth(3).inner_text() == "text/markdown"

    # When the report's link is clicked
    with page.expect_download() as started:
        page.get_by_role("link", name="Rapport été — Zoë.md").click()
    download = started.value

    # Then it downloads under its own name with the bytes the run wrote
    assert download.suggested_filename == "Rapport été — Zoë.md"
    assert Path(download.path()).read_text(encoding="utf-8") == "# Zoë\n\nTotal: 42\n"

    # And the order downloads as the JSON the run was given
    with page.expect_download() as started:
        page.get_by_role("link", name="order.json").click()
    assert json.loads(Path(started.value.path()).read_text()) == {
        "amount": 21,
        "items": ["tea", "cake"],
    }


@pytest.mark.parametrize(
    "tail",
    ["keep/..%2F..%2F..%2Fstack.json", "..%2F..%2Fbucket/report.yaml", "keep/.order.json.json"],
)
def test_a_path_out_of_the_runs_files_is_not_found_even_with_a_session(
    console: RunningConsole, run_id: str, page: Any, tail: str
) -> None:
    # When the signed-in browser asks for a path that tries to leave the run's files
    response = page.request.get(f"{console.url}/runs/{run_id}/artifacts/{tail}")
    # Then nothing is served
    assert response.status == 404
    assert "endpoint_url" not in response.text()
