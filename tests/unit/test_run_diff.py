"""``langorch runs diff``: a run beside its fork shows the edited key and what changed after it."""

from __future__ import annotations

from typing import Any

from langorch.app.recovery.forks import fork
from langorch.app.runs import StartRun, drive, start_run
from langorch.cli.commands.run_diff import render_diff
from langorch.domain.run_diff import diff_runs
from tests.fakes import Fakes
from tests.integration.conftest import register_text
from tests.support.definitions import workflow

FLOW = workflow("brief", inputs={"topic": "string"}, required=["topic"]).steps("""
      - {step_id: gather, kind: transform, transform: {notes: "'notes on ' ~ topic"}}
      - {step_id: digest, kind: transform, depends_on: [gather],
         transform: {summary: "notes | upper"}}
      - {step_id: close, kind: transform, depends_on: [digest], transform: {done: "1"}}
""")


def _no_approval(request: dict[str, Any]) -> dict[str, Any]:
    raise AssertionError(f"no approval expected: {request}")


def _run_and_fork() -> tuple[Fakes, str, str]:
    deps = Fakes()
    register_text(deps, FLOW)  # type: ignore[arg-type]
    run, _ = start_run(StartRun("brief", input={"topic": "otters"}), deps)
    drive(run.run_id, deps, on_approval=_no_approval)
    forked = fork(deps, run.run_id, at_step="digest", edits={"notes": "corrected"}, actor="ops@x")
    drive(forked.run_id, deps, on_approval=_no_approval)
    return deps, run.run_id, forked.run_id


def _diff(deps: Fakes, a: str, b: str) -> Any:
    runs = deps.runs
    return diff_runs(runs.get_run(a), runs.get_timeline(a), runs.get_run(b), runs.get_timeline(b))


def test_a_fork_shows_its_edited_key_and_the_changed_downstream_outputs() -> None:
    # Given a run, and its fork at digest with notes edited
    deps, original, child = _run_and_fork()
    # When the two are compared
    found = _diff(deps, original, child)
    # Then the fork and its edited key are named
    assert found.fork == {
        "child": child,
        "from": original,
        "at_step": "digest",
        "edited": ["notes"],
        "edited_values": {"notes": "corrected"},
    }
    # ... the step before the fork is the same visit in both, the steps after it differ where
    # their outputs did
    changed = {(r.step_id, tuple(r.changed_keys())) for r in found.changed_steps}
    assert changed == {("digest", ("summary",))}
    # ... and the final outputs that differ are the edited key and what was computed from it
    assert {k: (a, b) for k, a, b in found.outputs} == {
        "notes": ("notes on otters", "corrected"),
        "summary": ("NOTES ON OTTERS", "CORRECTED"),
    }


def test_the_text_puts_the_two_timelines_side_by_side() -> None:
    # Given a run and its fork
    deps, original, child = _run_and_fork()
    # When the comparison is rendered for a person
    text = render_diff(_diff(deps, original, child), width=120)
    # Then it says what was forked, marks the changed step with its old and new value
    assert "B is a fork of A at step digest, edited: notes = corrected" in text
    assert "    summary: NOTES ON OTTERS  ->  CORRECTED" in text
    marked = [line.split()[1] for line in text.splitlines() if line.startswith("* ")]
    assert marked == ["digest"]
    assert "outputs that differ:" in text and "  notes: A notes on otters  B corrected" in text


def test_the_console_compares_a_run_with_its_fork() -> None:
    from langorch.console.app import ConsoleApp
    from tests.fakes.approvals import InMemoryApprovals
    from tests.unit.test_console import OPERATOR, ORIGIN, SESSIONS, get

    # Given a run and its fork, on a stack the console shows
    deps, original, child = _run_and_fork()
    deps.approvals = InMemoryApprovals()  # type: ignore[attr-defined]  # the page's badge
    app = ConsoleApp(deps, "the test stack", frozenset({ORIGIN}), OPERATOR, SESSIONS)
    # When the comparison page is opened
    page = app.handle(get(f"/runs/{original}/diff/{child}"))
    # Then it names the fork and its edited key, and marks the step whose output changed
    body = page.body.decode()
    assert page.status == 200
    assert "B is a fork of A at step <strong>digest</strong>, edited:" in body
    assert '<span class="mono">notes</span> = "corrected"' in body
    assert body.count('class="changed"') == 1 and "differs: summary" in body
