"""``langorch agents add | list | show | remove`` and a CKP procedure through ``workflows put |
show | export --ckp``, through ``main(argv)`` against a moto server (the DynamoDB adapters)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from langorch.cli.main import main
from langorch.composition.container import Container
from tests.support.cli import fresh_emulator

PROCEDURE = Path(__file__).resolve().parents[2] / "examples" / "ckp_invoices" / "invoices.ckp.json"


@pytest.fixture
def container(endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Container:
    return fresh_emulator(endpoint, tmp_path / "home", monkeypatch)


def langorch(
    capsys: pytest.CaptureFixture[str], endpoint: str, *args: str, json_mode: bool = True
) -> tuple[int, Any, str]:
    code = main([*args, "--endpoint-url", endpoint, *(["--json"] if json_mode else [])])
    captured = capsys.readouterr()
    out = captured.out
    return code, (json.loads(out) if json_mode and out.strip() else out), captured.err


def test_add_list_show_and_remove_an_agent(
    container: Container, endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the agent's credential stored as a secret
    container.secrets.put_json("langorch/agents/desktop", {"value": "Bearer t"})
    # When a batch desktop agent with a session limit of 1 is registered
    code, added, _ = langorch(
        capsys,
        endpoint,
        *("agents", "add", "DESKTOP", "--http", "http://127.0.0.1:9/desktop"),
        *("--actions", "launch_app,type,click", "--mode", "batch", "--max-steps", "10"),
        *("--resource-key", "desktop:vm-01:session-1", "--limit", "1"),
        *("--header", "Authorization=secret:langorch/agents/desktop"),
    )
    # Then it is stored with its contract, and the resource's limit is set
    assert code == 0
    assert (added["new"], added["execution_mode"], added["max_steps_per_batch"]) == (
        True,
        "batch",
        10,
    )
    assert container.resources.get("desktop:vm-01:session-1").limit == 1
    _, listed, _ = langorch(capsys, endpoint, "agents", "list")
    assert [(a["name"], a["mode"], a["actions"]) for a in listed] == [
        ("DESKTOP", "batch", "launch_app,type,click")
    ]
    code, shown, _ = langorch(capsys, endpoint, "agents", "show", "DESKTOP", json_mode=False)
    assert "header     Authorization from secret langorch/agents/desktop" in shown
    assert "Bearer t" not in shown
    # When it is removed, Then showing it names what is registered (nothing)
    assert langorch(capsys, endpoint, "agents", "remove", "DESKTOP")[0] == 0
    code, _, err = langorch(capsys, endpoint, "agents", "show", "DESKTOP")
    assert code == 3
    assert "no agent registered as 'DESKTOP' (registered: none)" in err


def test_an_agent_whose_header_secret_is_missing_is_refused(
    container: Container, endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = langorch(
        capsys,
        endpoint,
        *("agents", "add", "WEB", "--http", "http://127.0.0.1:9/web", "--actions", "navigate"),
        *("--header", "Authorization=secret:nope"),
    )
    assert code == 1
    assert "secret(s) nope do not exist" in err
    assert container.agents.list() == []


def test_a_limit_without_a_resource_key_is_refused_naming_the_option(
    container: Container, endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = langorch(
        capsys,
        endpoint,
        *("agents", "add", "WEB", "--http", "http://127.0.0.1:9/web", "--actions", "navigate"),
        *("--limit", "2"),
    )
    assert code == 1
    assert "a concurrency limit needs a resource key (--resource-key K)" in err


def test_a_procedure_is_put_with_its_unbound_steps_as_warnings_shown_as_written_and_exported(
    container: Container, endpoint: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Given no agent registered: When the example procedure is put
    code, put, err = langorch(capsys, endpoint, "workflows", "put", str(PROCEDURE))
    # Then it is stored under its procedure_id, each unbound step a warning at its path
    assert code == 0
    assert [(r["id"], r["version"]) for r in put["results"]] == [("ckp_invoices", 1)]
    assert "workflow_graph.nodes.post_to_erp.steps[0].action" in err
    # When it is shown, Then it reads as written
    code, shown, _ = langorch(
        capsys, endpoint, "workflows", "show", "ckp_invoices", json_mode=False
    )
    assert shown.split("# a CKP procedure, as written\n", 1)[1].strip() == json.dumps(
        json.loads(PROCEDURE.read_text()), indent=2, ensure_ascii=False
    )
    # When it is exported as CKP and put back, Then it is the same version
    out = tmp_path / "exported.ckp.json"
    assert (
        langorch(capsys, endpoint, "workflows", "export", "ckp_invoices", "--ckp", "-o", str(out))[
            0
        ]
        == 0
    )
    code, again, _ = langorch(capsys, endpoint, "workflows", "put", str(out))
    assert [(r["version"], r["created"]) for r in again["results"]] == [(1, False)]


def test_put_strict_refuses_a_procedure_with_unbound_steps(
    container: Container, endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, document, _ = langorch(capsys, endpoint, "workflows", "put", "--strict", str(PROCEDURE))
    assert code == 2
    assert any(
        p["path"].endswith("nodes.fetch_invoices.steps[0].action") for p in document["problems"]
    )
    assert container.definitions.list_workflows() == []
