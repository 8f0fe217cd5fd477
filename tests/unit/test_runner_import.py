"""The runner's cold start (PERFORMANCE P3): what importing its handler must not load.

Each check imports the handler in a fresh interpreter: they are ``slow`` (``make test`` runs
them; ``pytest -m "not slow"`` is the quick loop)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.subprocess  # each test starts a fresh Python; make test runs them

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
sys.path[:0] = [{root!r}, {shared!r}]
import functions.run_segment.handler
top = {{m.split(".")[0] for m in sys.modules}}
print(json.dumps({{
    "loaded": sorted(top & {{"aws_xray_sdk", "jsonschema", "croniter", "langgraph"}}),
    "validation": "langorch.domain.validation" in sys.modules,
}}))
"""


def _probe(script: str, **env: str) -> dict[str, Any]:
    """Run ``script`` (a template over the repository's ``root`` and ``shared`` folders) in a
    fresh interpreter with Lambda's bare environment plus ``env``: the JSON it printed last."""
    done = subprocess.run(
        [sys.executable, "-c", script.format(root=str(ROOT), shared=str(ROOT / "shared"))],
        capture_output=True,
        text=True,
        timeout=120,
        env={"AWS_DEFAULT_REGION": "us-east-1", "PATH": "/usr/bin:/bin", **env},
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _import_runner(**env: str) -> dict[str, Any]:
    return _probe(PROBE, **env)


@pytest.mark.slow
def test_the_runner_handler_imports_no_xray_validation_jsonschema_or_croniter_when_not_tracing():
    # Given a fresh interpreter in Lambda with tracing turned off
    # When it imports the runner's handler
    result = _import_runner(LAMBDA_TASK_ROOT=str(ROOT), POWERTOOLS_TRACE_DISABLED="true")

    # Then neither the engine (it loads before SnapStart's snapshot, below) nor the X-Ray SDK,
    # definition validation, jsonschema or croniter is loaded
    assert result == {"loaded": [], "validation": False}


@pytest.mark.slow
def test_the_runner_handler_loads_the_xray_sdk_when_tracing_is_on():
    # Given a fresh interpreter in Lambda with active tracing (the deployed configuration)
    # When it imports the runner's handler
    result = _import_runner(LAMBDA_TASK_ROOT=str(ROOT))

    # Then Powertools' Tracer is real, so the X-Ray SDK is loaded
    assert result == {"loaded": ["aws_xray_sdk"], "validation": False}


LAZY_FOR_THE_CLI = (
    "langorch.domain.definitions",
    "langorch.domain.approvals.record",
    "langorch.llm.builtin_tools",
    "langorch.llm.registry",
    "urllib.request",
)
"""What the CLI's commands import only when they use it (issue 26) and a segment may need at
once: the definition models, the approval record, the LLM providers' registry, the built-in
tools and their HTTP client."""

SNAPSTART_PROBE = """
import json, random, sys
sys.path[:0] = [{root!r}, {shared!r}]
import functions.run_segment.handler as runner
from snapshot_restore_py import get_after_restore, get_before_snapshot
engine_before_hooks = "langgraph" in sys.modules
for func, args, kwargs in get_before_snapshot():  # what Lambda does before the snapshot
    func(*args, **kwargs)
engine_after_hooks = "langgraph" in sys.modules
lazy = sorted(m for m in {lazy!r} if m in sys.modules)
snapshot = random.getstate()  # what every sandbox restored from the snapshot starts with
draws = []
for sandbox in range(2):
    random.setstate(snapshot)
    for func, args, kwargs in get_after_restore():  # what Lambda does after a restore
        func(*args, **kwargs)
    draws.append(random.random())
print(json.dumps({{
    "before_snapshot_hooked": [f for f, _, _ in get_before_snapshot()] == [runner.load_engine],
    "engine_before_hooks": engine_before_hooks,
    "engine_after_hooks": engine_after_hooks,
    "lazy_in_snapshot": lazy,
    "after_restore_hooked": [f for f, _, _ in get_after_restore()] == [runner.reseed_random],
    "same_draws": draws[0] == draws[1],
}}))
"""
"""A SnapStart sandbox's life in one fresh interpreter, as Lambda's runtime drives it: import the
handler, run the before-snapshot hooks, then restore two sandboxes from that one snapshot and
run the after-restore hooks in each."""


@pytest.fixture(scope="module")
def snapstart() -> dict[str, Any]:
    """What ``SNAPSTART_PROBE`` saw, in a fresh interpreter with AWS's runtime-hooks library, as
    Lambda's runtime has it (one interpreter for the three tests below: each reads its part)."""
    return _probe(SNAPSTART_PROBE.replace("{lazy!r}", repr(LAZY_FOR_THE_CLI)))


@pytest.mark.slow
def test_snapstart_takes_its_snapshot_with_the_engine_loaded(snapstart: dict[str, Any]):
    # Given a fresh interpreter with AWS's runtime-hooks library, as Lambda's runtime has it
    # When the handler is imported and the runtime runs the before-snapshot hooks
    result = snapstart

    # Then the import left the engine out and the hook loaded it into the snapshot
    assert result["before_snapshot_hooked"] is True
    assert (result["engine_before_hooks"], result["engine_after_hooks"]) == (False, True)


@pytest.mark.slow
def test_the_snapshot_holds_what_the_cli_imports_only_on_use(snapstart: dict[str, Any]):
    # Given a fresh interpreter with AWS's runtime-hooks library, as Lambda's runtime has it
    # When the handler is imported and the runtime runs the before-snapshot hooks
    loaded = snapstart["lazy_in_snapshot"]

    # Then the modules the CLI imports lazily are in the snapshot: a segment does not import
    # them inside a step's timeout
    assert loaded == sorted(LAZY_FOR_THE_CLI)


@pytest.mark.slow
def test_sandboxes_restored_from_one_snapshot_draw_different_random_numbers(
    snapstart: dict[str, Any],
):
    # Given a fresh interpreter with AWS's runtime-hooks library, as Lambda's runtime has it
    # When two sandboxes are restored from the same snapshot and the runtime runs the
    # after-restore hooks in each
    result = snapstart

    # Then the runner's hook reseeded random: their first draws differ
    assert result["after_restore_hooked"] is True
    assert result["same_draws"] is False
