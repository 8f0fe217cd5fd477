"""The ckp_invoices example on the embedded stores (SQLite), as ``runs start --local`` runs it: its
stand-in agents started and registered, the procedure stored bound to them, a run driven to its
end. Then the secret the procedure reads (``{{secrets.ERP_PASSWORD}}``) is looked for everywhere
it must not be — every table of the home's database but the secrets store, every other file of
the home, the log records, the console's pages — and the sensitive variable is looked for in
the timeline and the logs."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from langorch.app.definitions import register_files, seed_builtins
from langorch.app.runs import StartRun, drive, start_run
from langorch.app.tool_registry import known_tool_names
from langorch.composition.embedded import EmbeddedContainer
from langorch.config import Settings
from langorch.console.app import ConsoleApp
from langorch.console.http import Request, Sessions
from langorch.console.operator import Operator
from langorch.local.example_tools import ExampleTools, start_example_servers

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ckp_invoices"
PROCEDURE = EXAMPLE / "invoices.ckp.json"
SECRET_ID = "langorch/ckp_invoices/erp"
ERP_USER = "svc-ap-7c1e9d"
"""The sensitive variable's value in these runs (distinctive, to be found if it leaks)."""


@pytest.fixture
def local(tmp_path: Path) -> Iterator[tuple[EmbeddedContainer, ExampleTools]]:
    home = tmp_path / "home"
    settings = Settings(
        region="us-east-1", offline_script=str(EXAMPLE / "offline.yaml"), local_home=str(home)
    )
    container = EmbeddedContainer(settings)
    container.ensure_resources()
    seed_builtins(container.definitions)
    servers = start_example_servers(container, [EXAMPLE])
    try:
        register_files(
            container.definitions,
            [PROCEDURE],
            tools=known_tool_names(container.tool_servers),
            agents=container.agents.list(),
        )
        yield container, servers
    finally:
        servers.stop()


def run_to_the_end(container: EmbeddedContainer, **inputs: Any) -> str:
    run, _ = start_run(StartRun("ckp_invoices", input={"erp_user": ERP_USER, **inputs}), container)
    drive(
        run.run_id,
        container,
        on_approval=lambda pending: {"decision": "approved", "approver": "finance@example.com"},
        sleep=lambda seconds: time.sleep(min(seconds, 0.05)),
    )
    return run.run_id


def test_the_example_posts_every_invoice_through_its_agents(
    local: tuple[EmbeddedContainer, ExampleTools],
) -> None:
    container, servers = local
    # Given the stand-in agents registered as an operator would
    assert sorted(servers.agents) == ["DATABASE", "DESKTOP", "EMAIL", "WEB"]
    # When a run of the procedure goes to its end
    run_id = run_to_the_end(container)
    # Then it succeeded with the three invoices posted and its audit record
    run = container.runs.get_run(run_id)
    assert run.status.value == "succeeded"
    assert run.outputs["processed"] == 3
    assert run.outputs["final_audit_log"]["outcome"] == "posted"
    # And each invoice's seven desktop steps went in one call, holding the session
    timeline = container.runs.get_timeline(run_id)
    desktop = [e for e in timeline if str(e.detail.get("tool", "")).startswith("DESKTOP.")]
    assert len(desktop) == 21
    assert {e.detail.get("batch") for e in desktop} == {7}
    leases = [e.type.value for e in timeline if e.type.value.startswith("resource_")]
    assert leases == ["resource_acquired", "resource_released"] * 3


def test_a_large_batch_waits_for_finances_approval(
    local: tuple[EmbeddedContainer, ExampleTools],
) -> None:
    container, _ = local
    run_id = run_to_the_end(container, mailbox="busy@example.com")
    timeline = container.runs.get_timeline(run_id)
    assert [e.type.value for e in timeline if e.type.value.startswith("approval")] == [
        "approval_requested",
        "approval_decided",
    ]
    assert container.runs.get_run(run_id).outputs["processed"] == 12


def test_the_secret_is_nowhere_but_the_secrets_store(
    local: tuple[EmbeddedContainer, ExampleTools], caplog: pytest.LogCaptureFixture
) -> None:
    container, _ = local
    secret = container.secrets.get_json(SECRET_ID)["value"]
    # Given a run whose desktop steps typed the secret into the ERP (its login succeeded)
    with caplog.at_level(logging.DEBUG):
        run_id = run_to_the_end(container)
    assert container.runs.get_run(run_id).status.value == "succeeded"
    # Then no table of the home's database but the secrets store holds it (runs, timeline,
    # checkpoints, recorded calls, definitions, approvals, logs)
    assert tables_holding(container.home / "langorch.db", secret) == ["secrets"]
    # And no other file of the home does
    assert [p for p in files_of(container.home) if secret.encode() in p.read_bytes()] == []
    # And no log record does
    assert secret not in logged(caplog)
    # And no console page does
    for page in (f"/runs/{run_id}", "/workflows/ckp_invoices", "/runs"):
        assert secret not in console_page(container, page)


def test_the_sensitive_variable_is_not_shown_on_the_timeline_or_in_the_logs(
    local: tuple[EmbeddedContainer, ExampleTools], caplog: pytest.LogCaptureFixture
) -> None:
    container, _ = local
    with caplog.at_level(logging.DEBUG):
        run_id = run_to_the_end(container)
    shown = " ".join(e.model_dump_json() for e in container.runs.get_timeline(run_id))
    assert ERP_USER not in shown
    assert "[redacted]" in shown
    assert ERP_USER not in logged(caplog)


def tables_holding(database: Path, text: str) -> list[str]:
    """The tables with a row holding ``text`` (as text or as bytes)."""
    found = []
    connection = sqlite3.connect(database)
    try:
        tables = [
            r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        for table in tables:
            for row in connection.execute(f'SELECT * FROM "{table}"'):  # noqa: S608 - test
                if any(_holds(value, text) for value in row):
                    found.append(table)
                    break
    finally:
        connection.close()
    return found


def _holds(value: Any, text: str) -> bool:
    if isinstance(value, str):
        return text in value
    if isinstance(value, bytes):
        return text.encode() in value
    return False


def files_of(home: Path) -> list[Path]:
    """Every file of the home but the database itself (its tables are read above)."""
    return [p for p in home.rglob("*") if p.is_file() and not p.name.startswith("langorch.db")]


def logged(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)


def console_page(container: EmbeddedContainer, path: str) -> str:
    sessions = Sessions(b"k" * 32, token="start-up-token")
    operator = Operator("ana", "OS user", "ana@example.com")
    console = ConsoleApp(
        container, "the local stack", frozenset({"http://127.0.0.1:8765"}), operator, sessions
    )
    signed_in = sessions.open("start-up-token") or ""
    response = console.handle(Request("GET", path, {}, {}, session=signed_in))
    assert response.status == 200, response.body[:500]
    return response.body.decode()
