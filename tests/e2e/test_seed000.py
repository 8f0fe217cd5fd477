"""Seed 000 as written loads and runs through the CLI (issue 9 item 1).

``examples/seed000`` holds the seed's three example blocks, copied verbatim (one JSON file
each), and a plan that uses only the seed's ``TaskPlan`` / ``PlanStep`` / ``ScheduleSpec``
fields. They validate (with warnings, not errors), register and run with ``runs start --local``
and the offline LLM, no edit. Resolution of their inputs from preferences is
``tests/unit/test_seed000.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from langorch.cli.main import main
from tests.e2e.readme import REPO

SEED000 = REPO / "examples" / "seed000"
BLOCK_FILES = ["query_memory.json", "open_uber_eats.json", "add_to_cart_generic.json"]
FILES = [f"examples/seed000/{name}" for name in [*BLOCK_FILES, "lunch_plan.json"]]

# The fields seed 000 gives each model ("Block Definition Schema", "Plan models").
SEED_BLOCK_FIELDS = {
    "block_id",
    "name",
    "description",
    "version",
    "input_keys",
    "output_keys",
    "prompt_template",
    "tools_required",
    "llm_provider",
    "llm_model",
    "block_type",
    "branches",
    "max_retries",
    "timeout_seconds",
    "category",
    "tags",
    "created_by",
}
SEED_PLAN_FIELDS = {"plan_id", "user_intent", "steps", "entry_step_id", "schedule"}
SEED_STEP_FIELDS = {"step_id", "block_id", "depends_on", "branches"}
SEED_SCHEDULE_FIELDS = {"cron_expression", "timezone", "human_readable"}


@pytest.fixture
def repo_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The repository as a fresh checkout sees it: no stack running."""
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("LANGORCH_HOME", str(tmp_path / "home"))


def test_the_files_use_only_seed_000s_fields():
    # Given the example's files
    blocks = [json.loads((SEED000 / name).read_text(encoding="utf-8")) for name in BLOCK_FILES]
    plan = json.loads((SEED000 / "lunch_plan.json").read_text(encoding="utf-8"))

    # Then the blocks are the seed's three, and every field is one the seed defines
    assert [b["block_id"] for b in blocks] == [
        "query_memory",
        "open_uber_eats",
        "add_to_cart_generic",
    ]
    assert all(set(b) <= SEED_BLOCK_FIELDS for b in blocks)
    assert set(plan) <= SEED_PLAN_FIELDS
    assert all(set(step) <= SEED_STEP_FIELDS for step in plan["steps"])
    assert set(plan["schedule"]) <= SEED_SCHEDULE_FIELDS


def test_validate_accepts_them_with_warnings_and_strict_refuses_them(
    repo_cwd: None, capsys: pytest.CaptureFixture[str]
):
    # When they are validated, Then they are valid, with warnings apart from the result:
    # `browser` is unbound, and four inputs come from shared_context or preferences
    assert main(["workflows", "validate", *FILES]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("valid (8 warning(s) above): 3 block(s), 1 workflow(s)")
    assert err.count("warning: ") == 8
    assert "needs input 'uber_eats_credentials'" in err
    assert "'browser'" in err
    assert "error:" not in err

    # And with --strict the same findings are errors: exit 2
    assert main(["workflows", "validate", "--strict", *FILES]) == 2
    _, err = capsys.readouterr()
    assert err.startswith("error: 4 files: 8 problem(s)")


def test_runs_start_local_runs_them_to_the_end_with_the_offline_llm(
    repo_cwd: None, capsys: pytest.CaptureFixture[str]
):
    # When seed 000's files run on this machine (offline.yaml beside them scripts the LLM)
    code = main(["runs", "start", "--local", *FILES, "--input", '{"memory_query": "lunch"}'])

    # Then the run succeeds through the three steps, each block writing its output keys
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.startswith("run run-")
    assert "seed000_lunch@1  succeeded" in out
    for step in ("step_1", "step_2", "step_3"):
        assert f"ok         {step}" in out
    assert "session_active: true" in out
    assert "cart_total: $12.50" in out
