"""``langorch resources set|list`` against a moto server found through a local stack file,
exactly as after ``make dev``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import requests

from langorch.cli.main import main
from langorch.composition.container import Container
from langorch.config import Settings


@pytest.fixture
def container(endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Container:
    requests.post(f"{endpoint}/moto-api/reset", timeout=60).raise_for_status()
    container = Container(Settings(endpoint_url=endpoint))
    container.ensure_resources()
    home = tmp_path / ".langorch"
    home.mkdir()
    monkeypatch.setenv("LANGORCH_HOME", str(home))
    (home / "stack.json").write_text(json.dumps({"endpoint_url": endpoint, "settings": {}}))
    return container


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_declared_limit_is_listed_with_holders_and_queue(
    container: Container, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a declared resource, one holder and one waiter, and an undeclared resource in use
    assert run(capsys, "resources", "set", "web:pool-a", "--limit", "1")[0] == 0
    now = time.time()
    for holder in ("run-a/step", "run-b/step"):
        container.resources.acquire(
            "web:pool-a", holder, now=now, lease_seconds=60, wait_seconds=60
        )
    container.resources.acquire(
        "desktop:vm-01", "run-c/x", now=now, lease_seconds=60, wait_seconds=60
    )

    # When they are listed, as JSON and as text
    code, out, _ = run(capsys, "resources", "list", "--json")
    _, text, _ = run(capsys, "resources", "list")

    # Then each shows its limit, its holders and its queue; the undeclared one is marked
    assert code == 0
    assert json.loads(out) == [
        {
            "name": "desktop:vm-01",
            "limit": 1,
            "declared": False,
            "held_by": ["run-c/x"],
            "queued": [],
        },
        {
            "name": "web:pool-a",
            "limit": 1,
            "declared": True,
            "held_by": ["run-a/step"],
            "queued": ["run-b/step"],
        },
    ]
    assert "queued 1. run-b/step" in text and "* undeclared: the default limit" in text


def test_a_bad_limit_is_refused_with_the_field_and_a_hint(
    container: Container, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "resources", "set", "web:pool-a", "--limit", "0")
    assert code == 2
    assert "limit" in err and "1 to 1000" in err
