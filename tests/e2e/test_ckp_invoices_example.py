"""The ckp_invoices example as `make dev` runs it (README, "CKP procedures"): its stand-in agents
started and registered before the procedure is stored, a run started from the CLI going through
the state machine to its end with every agent step on its timeline, and a large batch parked on
finance's approval until the emailed page decides it."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from langorch.cli.main import main
from langorch.composition.bootstrap import build_container
from langorch.local.stack import LocalStack, free_port, start_local_stack
from tests.e2e.test_order_status_example import _result
from tests.e2e.test_walkthrough import decide, email_for, run_in, wait_for

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    # `langorch dev` in this process; the CLI finds its stack file from the working directory.
    home = tmp_path_factory.mktemp("ckp_invoices") / ".langorch"
    cwd = os.getcwd()
    os.chdir(home.parent)
    stack = start_local_stack(home=home, port=free_port(), examples=EXAMPLES, servers=True)
    yield stack
    stack.stop()
    os.chdir(cwd)


def langorch(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    code = main([*args, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return _result(captured.out)


def test_a_run_from_the_cli_posts_every_invoice_through_the_agents(
    dev: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the stack with the example's agents registered
    agents = build_container(dev.settings).agents.list()
    assert [a.name for a in agents] == ["DATABASE", "DESKTOP", "EMAIL", "WEB"]
    # When the procedure is started and waited for
    started = langorch(capsys, "runs", "start", "ckp_invoices", "--wait")
    run_id = started["runs"][0]["run"]["run_id"]
    shown = langorch(capsys, "runs", "show", run_id)
    # Then it succeeded, each invoice's ERP steps one batch call holding the desktop session
    assert shown["run"]["status"] == "succeeded"
    assert shown["run"]["outputs"]["processed"] == 3
    tools = [e["detail"] for e in shown["timeline"] if e["type"] == "tool_called"]
    assert sum(1 for t in tools if t["tool"].startswith("DESKTOP.")) == 21
    assert {t.get("batch") for t in tools if t["tool"].startswith("DESKTOP.")} == {7}
    assert "resource_acquired" in {e["type"] for e in shown["timeline"]}


def test_a_large_batch_waits_for_the_emailed_page_to_approve_it(
    dev: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    container = build_container(dev.settings)
    # Given a run of twelve invoices, parked on finance's approval
    started = langorch(
        capsys,
        "runs",
        "start",
        "ckp_invoices",
        "--input",
        json.dumps({"mailbox": "busy@example.com"}),
    )
    run_id = started["run"]["run_id"]
    wait_for("the run to wait", lambda: run_in(container, run_id, "waiting_approval"))
    link = email_for(dev, run_id, container)["link"]
    # When finance approves on the page the email links to
    status, _ = decide(link, "approved", dev.settings.approval_form_dwell_seconds)
    assert status == 200
    # Then the run goes on to post all twelve
    done = wait_for("the run to end", lambda: run_in(container, run_id, "succeeded", "failed"))
    assert done.status.value == "succeeded"
    assert done.outputs["processed"] == 12
