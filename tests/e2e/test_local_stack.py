"""The CLI as a user runs it: against `langorch dev`'s local stack, and with `runs start --local`.

These tests start the real emulator in server mode on a free loopback port and call
``langorch`` through ``main(argv)``; nothing inside langorch is replaced.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from langorch.cli.main import main
from langorch.local.stack import LocalStack
from tests.support.stacks import EXAMPLES, START_BLOG_REVIEW, running_stack


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """`langorch dev` in this process, with the examples registered: one for the module (its
    tests read the examples and start runs of their own)."""
    home = tmp_path_factory.mktemp("local-stack") / ".langorch"
    with running_stack(home, examples=EXAMPLES) as running:
        yield running


@pytest.fixture
def stack(started: LocalStack, monkeypatch: pytest.MonkeyPatch) -> LocalStack:
    """The module's stack; cwd is its home's parent."""
    monkeypatch.chdir(started.home.parent)
    return started


def langorch(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any, str]:
    code = main([*args, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out.strip() else None, captured.err


def run_locally(
    capsys: pytest.CaptureFixture[str], example: str, data: Any, *flags: str
) -> tuple[int, Any, str]:
    """``langorch runs start --local <example's definitions> --input <data> *flags``."""
    definitions = EXAMPLES / example / "definitions.yaml"
    return langorch(
        capsys, "runs", "start", "--local", str(definitions), "--input", json.dumps(data), *flags
    )


def test_dev_stack_registers_the_examples(stack: LocalStack, capsys: pytest.CaptureFixture[str]):
    # Given a running local stack
    # When the user lists workflows (no endpoint given: the stack file is found)
    code, data, _ = langorch(capsys, "workflows", "list")

    # Then the examples are there (the CKP procedure among them)
    assert code == 0
    assert {w["id"] for w in data["workflows"]} == {
        "blog_review",
        "ckp_invoices",
        "file_digest",
        "invoice_batch",
        "lunch_order",
        "order_status",
        "slack_review",
    }


def test_a_run_started_against_the_stack_shows_its_approver_in_the_timeline(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
):
    # Given the local stack
    # When a blog review run is started and approved from the command line
    code, data, err = langorch(capsys, *START_BLOG_REVIEW, "--approve")
    run_id = data["runs"][0]["run"]["run_id"]

    # Then it succeeded, and `runs show` has who decided
    assert code == 0, err
    code, shown, _ = langorch(capsys, "runs", "show", run_id)
    decided = [e for e in shown["timeline"] if e["type"] == "approval_decided"]
    assert shown["run"]["status"] == "succeeded"
    assert decided[0]["actor"] == "cli"


def test_input_failing_the_schema_is_refused_with_its_path(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
):
    code, data, _ = langorch(capsys, "runs", "start", "blog_review", "--input", '{"x": 1}')

    assert code == 2
    assert [p["path"] for p in data["problems"]] == ["input.commit_message"]


def test_local_run_needs_no_stack_and_remembers_across_repeats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    # Given no local stack at all
    monkeypatch.chdir(tmp_path)

    # When the lunch order runs twice locally, the first approval filling in a preference
    code, data, err = run_locally(
        capsys,
        "lunch_order",
        {"delivery_address": "1 Main St"},
        "--repeat",
        "2",
        "--approve",
        "--edit",
        'restaurant="Chipotle"',
        "--edit",
        'items_to_order=["Burrito Bowl"]',
    )

    # Then both succeeded, and only the first asked
    assert code == 0, err
    first, second = (r["timeline"] for r in data["runs"])
    assert any(e["type"] == "approval_requested" for e in first)
    assert not any(e["type"] == "approval_requested" for e in second)
    assert data["runs"][1]["run"]["outputs"]["restaurant"] == "Chipotle"
    assert err.count("approval needed") == 1


def test_local_run_of_the_invoice_batch_asks_only_for_large_invoices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.chdir(tmp_path)
    invoices = [{"id": "A", "amount": 10}, {"id": "B", "amount": 2500}, {"id": "C", "amount": 1}]

    code, data, err = run_locally(capsys, "invoice_batch", {"invoices": invoices}, "--reject")

    assert code == 0, err
    outcomes = data["runs"][0]["run"]["outputs"]["invoice_results"]
    assert [o["invoice_outcome"]["status"] for o in outcomes] == ["posted", "rejected", "posted"]
    assert err.count("approval needed") == 1


def test_an_approval_without_a_terminal_or_flag_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)

    code, _, err = run_locally(capsys, "blog_review", {"commit_message": "x"})

    assert code == 2
    assert "pass --approve or --reject" in err


def test_local_run_answers_every_finance_approver_the_policy_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    # Given an invoice above the second threshold (two approvals from finance)
    monkeypatch.chdir(tmp_path)
    invoices = [{"id": "C", "vendor": "v", "amount": 12000}]

    # When the batch runs with --approve
    code, data, err = run_locally(capsys, "invoice_batch", {"invoices": invoices}, "--approve")

    # Then two finance approvers answered, and the invoice was posted in one command
    assert code == 0, err
    outcomes = data["runs"][0]["run"]["outputs"]["invoice_results"]
    assert [o["invoice_outcome"]["status"] for o in outcomes] == ["posted"]
    assert "approved for ana@example.com, ben@example.com" in err
