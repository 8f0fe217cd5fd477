"""The ``langorch`` command run through ``main(argv)`` in the test's process, and its output
read back as a person or a script reads it."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from langorch.cli.main import main
from langorch.composition.container import Container
from langorch.config import Settings


@dataclass
class Result:
    """One command's exit code and what it printed."""

    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        """Stdout as the single JSON document ``--json`` prints."""
        return json.loads(self.stdout)


def runner(capsys: pytest.CaptureFixture[str], *extra: str) -> Callable[..., Result]:
    """A function that runs ``langorch *argv *extra`` and returns its ``Result``."""

    def run(*argv: str) -> Result:
        capsys.readouterr()
        code = main([*argv, *extra])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def last_document(out: str) -> Any:
    """The command's JSON document in stdout that it shares with the handlers running in this
    process (their Powertools lines, EMF metrics and outbox notices are interleaved with it):
    the last JSON object that is not a log line."""
    decoder = json.JSONDecoder()
    found: Any = None
    at = 0
    while (start := out.find("{", at)) != -1:
        try:
            value, end = decoder.raw_decode(out, start)
        except ValueError:
            at = start + 1
            continue
        if isinstance(value, dict) and not {"level", "_aws"} & set(value):
            found = value
        at = end
    return found


def langorch_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any, str]:
    """Run ``langorch *args --json`` beside a stack whose handlers print to the same stdout: its
    exit code, its JSON document (``last_document``) and its stderr."""
    code = main([*args, "--json"])
    captured = capsys.readouterr()
    return code, last_document(captured.out), captured.err


def use_stack(home: Path, endpoint: str, **settings: Any) -> None:
    """Write the local stack file `make dev` writes, for a stack on ``endpoint``."""
    (home / "stack.json").write_text(json.dumps({"endpoint_url": endpoint, "settings": settings}))


def fresh_emulator(
    endpoint: str, home: Path, monkeypatch: pytest.MonkeyPatch, *, stores: bool = True
) -> Container:
    """The moto server on ``endpoint`` reset, ``LANGORCH_HOME`` pointed at ``home`` (no stack
    file there), and a container on the emulator.

    Args:
        endpoint: The moto server's URL.
        home: The folder the commands find as their home.
        monkeypatch: The test's, to set ``LANGORCH_HOME``.
        stores: Create the tables and buckets (``False``: an empty account).
    """
    monkeypatch.setenv("LANGORCH_HOME", str(home))
    requests.post(f"{endpoint}/moto-api/reset", timeout=60).raise_for_status()
    container = Container(Settings(endpoint_url=endpoint))
    if stores:
        container.ensure_resources()
    return container


def emulator_home(endpoint: str, home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh emulator (the moto server reset, the stores created) and ``home`` holding the
    stack file `make dev` would have written for it, found through ``LANGORCH_HOME``."""
    fresh_emulator(endpoint, home, monkeypatch)
    home.mkdir()
    use_stack(home, endpoint)
    return home


STACK_OUTPUTS = {
    "DefinitionsTable": "prod-definitions",
    "RunsTable": "prod-runs",
    "CheckpointsTable": "prod-checkpoints",
    "MemoryTable": "prod-memory",
    "Bucket": "prod-bucket",
}
"""A deployed stack's outputs (``prod-`` names), as ``langorch`` reads them to find its
resources."""
