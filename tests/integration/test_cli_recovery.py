"""``langorch runs redrive | fork`` against the local emulator, as an operator types them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import emulator_home, runner
from tests.support.definitions import workflow

V1 = workflow("tally", inputs={"total": "integer", "count": "integer"}).steps("""
      - {step_id: prepare, kind: transform, transform: {items: "total + 0"}}
      - step_id: ratio
        kind: transform
        depends_on: [prepare]
        max_retries: 0
        transform: {per_item: "items / count"}
""")
V2 = V1.replace('"items / count"', '"items / (count or 1)"')
V3 = V1.replace('"items / count"', '"items / divisor"').replace(
    "count: {type: integer}}", "count: {type: integer}, divisor: {type: integer}}"
)


@pytest.fixture
def langorch(endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> Any:
    """The CLI against a fresh emulator (a local stack without a state machine)."""
    emulator_home(endpoint, tmp_path / ".langorch", monkeypatch)
    return runner(capsys)


def _put(langorch: Any, tmp_path: Path, text: str, name: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert langorch("workflows", "put", str(path)).code == 0


def _failed_run(langorch: Any, tmp_path: Path) -> str:
    _put(langorch, tmp_path, V1, "v1.yaml")
    started = langorch("runs", "start", "tally", "--input", '{"total": 10, "count": 0}', "--json")
    assert started.code == 1
    [document] = started.json()["runs"]
    assert document["run"]["status"] == "failed"
    return str(document["run"]["run_id"])


def test_redrive_onto_the_latest_version_finishes_the_run_and_show_prints_its_lineage(
    langorch: Any, tmp_path: Path
) -> None:
    run_id = _failed_run(langorch, tmp_path)
    _put(langorch, tmp_path, V2, "v2.yaml")
    done = langorch("runs", "redrive", run_id, "--version", "latest", "--reason", "divide safely")
    assert done.code == 0, done.stderr
    assert f"redriven {run_id}" in done.stdout and "version 2" in done.stdout
    shown = langorch("runs", "show", run_id)
    assert "succeeded" in shown.stdout
    assert "lineage:" in shown.stdout and "version 1 -> 2" in shown.stdout
    assert '"divide safely"' in shown.stdout
    document = langorch("runs", "show", run_id, "--json").json()
    assert document["run"]["redrives"][0]["reason"] == "divide safely"


def test_an_incompatible_version_is_refused_with_the_paths_then_forced(
    langorch: Any, tmp_path: Path
) -> None:
    run_id = _failed_run(langorch, tmp_path)
    _put(langorch, tmp_path, V3, "v3.yaml")
    refused = langorch("runs", "redrive", run_id, "--version", "2")
    assert refused.code == 2
    assert "cannot move" in refused.stderr
    assert "steps[1].transform.per_item: step ratio reads 'divisor'" in refused.stderr
    as_json = langorch("runs", "redrive", run_id, "--version", "2", "--json")
    [problem] = as_json.json()["problems"]
    assert problem["path"] == "steps[1].transform.per_item" and "--force" in problem["hint"]
    # --force accepts it, and says so in the run's record
    forced = langorch("runs", "redrive", run_id, "--version", "2", "--force", "--json")
    assert forced.code == 1 and forced.json()["forced"] is True


def test_fork_with_an_edited_key_and_bulk_redrive(langorch: Any, tmp_path: Path) -> None:
    first = _failed_run(langorch, tmp_path)
    forked = langorch("runs", "fork", first, "--at", "ratio", "--set", "count=5", "--json")
    assert forked.code == 0, forked.stderr
    child = forked.json()
    assert (child["status"], child["edited"]) == ("succeeded", ["count"])
    assert langorch("runs", "show", child["run_id"]).stdout.count(f"forked from {first}") == 1
    # bulk: the plan first, then each run with a progress line, then a summary
    second = _failed_run(langorch, tmp_path)
    _put(langorch, tmp_path, V2, "v2.yaml")
    plan = langorch("runs", "redrive", "--status", "failed", "--dry-run")
    assert plan.code == 0 and "plan: redrive 2 failed run(s)" in plan.stderr
    assert langorch("runs", "list", "--status", "failed", "--json").json()
    done = langorch(
        "runs",
        "redrive",
        "--status",
        "failed",
        "--workflow",
        "tally",
        "--version",
        "latest",
        "--since",
        "1h",
        "--rate",
        "25",
    )
    assert done.code == 0, done.stderr
    assert "[2/2]" in done.stderr and "done: 2 redriven" in done.stdout
    for run_id in (first, second):
        assert "succeeded" in langorch("runs", "show", run_id).stdout.splitlines()[0]


def _walkthrough() -> list[list[str]]:
    """The `langorch` commands of the README's "When a run fails" section, in order."""
    from tests.e2e.readme import README, bash_commands

    text = README.read_text(encoding="utf-8")
    section = text.split("## When a run fails", 1)[1].split("\n## ", 1)[0]
    return [argv[1:] for argv in bash_commands(section) if argv[0] == "langorch"]


def test_the_readme_walkthrough_runs_as_written(langorch: Any, monkeypatch: Any) -> None:
    from tests.e2e.readme import REPO

    monkeypatch.chdir(REPO)
    commands = [argv for argv in _walkthrough() if "--stack" not in argv]
    assert [argv[:2] for argv in commands][:3] == [
        ["workflows", "put"],
        ["runs", "start"],
        ["runs", "list"],
    ]
    run_id = None
    for argv in commands:
        # This emulator has no state machine (make dev's has): the CLI runs the run itself,
        # where `--wait` would only follow the execution.
        argv = [a for a in argv if a != "--wait"]
        argv = [run_id if a == "RUN_ID" and run_id else a for a in argv]
        result = langorch(*argv, "--json") if argv[:2] == ["runs", "start"] else langorch(*argv)
        if argv[:2] == ["runs", "start"]:
            [document] = result.json()["runs"]
            assert document["run"]["status"] == "failed"
            assert document["run"]["error"]["step_id"] == "share"
            run_id = document["run"]["run_id"]
            continue
        assert result.code == 0, (argv, result.stderr)
        if argv[:2] == ["runs", "show"]:
            assert "succeeded" in result.stdout.splitlines()[0]
            assert "lineage:" in result.stdout
    shown = langorch("runs", "show", str(run_id), "--json").json()
    finished = [e["step_id"] for e in shown["timeline"] if e["type"] == "step_finished"]
    assert finished.count("summarize") == 1  # the LLM step never ran again
    assert [r["attempt"] for r in shown["run"]["redrives"]] == [1, 2]
    assert len(shown["run"]["forks"]) == 1
