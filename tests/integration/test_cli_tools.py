"""``langorch tools add | list | show | remove`` through ``main(argv)`` against a moto server,
with the order_status example's MCP server for ``show --probe``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from langorch.cli.main import main
from langorch.composition.container import Container
from tests.order_desk import load_order_desk
from tests.support.cli import fresh_emulator

TOKEN = "cli-token-never-printed"


@pytest.fixture
def container(endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Container:
    return fresh_emulator(endpoint, tmp_path / "home", monkeypatch)


@pytest.fixture(scope="module")
def desk() -> Iterator[Any]:
    running = load_order_desk().serve(TOKEN)
    yield running
    running.stop()


def langorch(capsys: pytest.CaptureFixture[str], endpoint: str, *args: str) -> tuple[int, Any, str]:
    code = main([*args, "--endpoint-url", endpoint, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out.strip() else None, captured.err


def test_add_list_show_probe_and_remove_a_tool(
    container: Container, desk: Any, endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the header's value stored as a secret
    container.secrets.put_json("langorch/tools/orders", {"value": f"Bearer {TOKEN}"})
    # When the server is registered with only one of its tools allowed
    code, added, _ = langorch(
        capsys,
        endpoint,
        *("tools", "add", "orders", "--mcp", desk.url, "--allow", "lookup_order"),
        *("--header", "Authorization=secret:langorch/tools/orders"),
    )
    assert (code, added["new"], added["headers"]) == (
        0,
        True,
        {"Authorization": "langorch/tools/orders"},
    )
    # Then it is listed beside the built-in tools, shown, and probed through the secret
    code, rows, _ = langorch(capsys, endpoint, "tools", "list")
    assert {(r["name"], r["kind"]) for r in rows} >= {("orders", "mcp"), ("calculator", "built-in")}
    code, shown, _ = langorch(capsys, endpoint, "tools", "show", "orders", "--probe")
    assert [t["name"] for t in shown["tools"]] == ["lookup_order"]
    assert TOKEN not in json.dumps(shown)
    # And once removed it is gone
    assert langorch(capsys, endpoint, "tools", "remove", "orders")[0] == 0
    code, _, err = langorch(capsys, endpoint, "tools", "show", "orders")
    assert code != 0 and "no tool registered as 'orders'" in err


def test_a_header_with_a_literal_value_or_a_missing_secret_stores_nothing(
    container: Container, endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = "http://127.0.0.1:9/mcp"
    code, _, err = langorch(
        capsys, endpoint, "tools", "add", "orders", "--mcp", url, "--header", "X-Key=abc123"
    )
    assert code != 0 and "secret:<Secrets Manager id>" in err and "abc123" not in err
    code, _, err = langorch(
        capsys, endpoint, "tools", "add", "orders", "--mcp", url, "--header", "X-Key=secret:nope"
    )
    assert code != 0 and "secret(s) nope do not exist" in err
    assert container.tool_servers.list() == []


def test_a_built_in_name_cannot_be_registered(
    container: Container, endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = langorch(
        capsys, endpoint, "tools", "add", "calculator", "--mcp", "http://127.0.0.1:9/mcp"
    )
    assert code != 0 and "built-in tool" in err


def test_a_tool_says_what_a_call_of_unknown_outcome_does_retry_unless_told_to_fail(
    container: Container, endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given two registrations, one left at the default and one told to fail
    url = "http://127.0.0.1:9/mcp"
    assert langorch(capsys, endpoint, "tools", "add", "orders", "--mcp", url)[0] == 0
    code, added, _ = langorch(
        capsys, endpoint, "tools", "add", "payments", "--mcp", url, "--on-unknown", "fail"
    )
    # When they are shown
    _, orders, _ = langorch(capsys, endpoint, "tools", "show", "orders")
    _, payments, _ = langorch(capsys, endpoint, "tools", "show", "payments")
    # Then a call of unknown outcome is sent again with its key by default, or fails the step
    assert (code, added["on_unknown"]) == (0, "fail")
    assert (orders["on_unknown"], payments["on_unknown"]) == ("retry", "fail")
    assert container.tool_servers.get("payments").on_unknown == "fail"  # type: ignore[union-attr]
