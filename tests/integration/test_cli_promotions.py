"""``langorch workflows put --draft | promote | history``: drafts stored beside the active
version, promoted with the replay gate's result, through ``main(argv)`` against moto."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from langorch.adapters.aws import make_client
from langorch.adapters.dynamodb.definitions import DefinitionsRepository
from langorch.config import Settings
from tests.support.cli import Result, runner

TABLE = "langorch-definitions"


@pytest.fixture
def repo(endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DefinitionsRepository:
    """A fresh emulator state with the definitions table; no local stack file anywhere."""
    monkeypatch.setenv("LANGORCH_HOME", str(tmp_path / "home"))
    requests.post(f"{endpoint}/moto-api/reset", timeout=60).raise_for_status()
    repository = DefinitionsRepository(
        make_client("dynamodb", Settings(endpoint_url=endpoint)), TABLE
    )
    repository.create_table()
    return repository


@pytest.fixture
def cli(endpoint: str, repo: DefinitionsRepository, capsys: pytest.CaptureFixture[str]) -> Any:
    run = runner(capsys, "--endpoint-url", endpoint)

    def call(*argv: str) -> Result:
        return run(*argv)

    return call


def _file(path: Path, prompt: str, *, webhook: bool = False) -> str:
    workflow: dict[str, Any] = {
        "plan_id": "digest",
        "steps": [{"step_id": "shorten", "block_id": "shorten"}],
    }
    if webhook:
        workflow["triggers"] = [{"type": "webhook"}]
    document = {
        "blocks": [
            {
                "block_id": "shorten",
                "input_keys": ["text"],
                "output_keys": ["summary"],
                "prompt_template": prompt,
            }
        ],
        "workflows": [workflow],
    }
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return str(path)


def _gate(path: Path, *, version: int = 2, failing: int = 0, workflow: str = "digest") -> str:
    failures = {f"run-{n}": ["path changed"] for n in range(failing)}
    report = {
        "workflow": workflow,
        "candidate_version": version,
        "fail_on": {"kinds": ["path"], "cost_rise": 0.2},
        "passed": not failures,
        "failures": failures,
        "summary": {"runs": 20},
        "runs": [],
    }
    path.write_text(json.dumps(report), encoding="utf-8")
    return str(path)


@pytest.fixture
def drafted(cli: Any, tmp_path: Path) -> None:
    """Version 1 active, version 2 (a changed prompt) stored as a draft."""
    assert cli("workflows", "put", _file(tmp_path / "v1.yaml", "Summarize: {{ text }}")).code == 0
    draft = cli("workflows", "put", "--draft", _file(tmp_path / "v2.yaml", "Shorten: {{ text }}"))
    assert draft.code == 0, draft.stderr
    assert "version 2 is a draft; runs start version 1" in draft.stdout


def test_a_draft_is_listed_as_the_latest_while_the_active_version_stays(
    cli: Any, drafted: None
) -> None:
    # Given version 1 active and version 2 a draft (the fixture)
    # When the workflows are listed and the workflow shown without a version
    listed = cli("workflows", "list", "--json").json()["workflows"]
    shown = cli("workflows", "show", "digest", "--json").json()
    text = cli("workflows", "show", "digest").stdout
    # Then the listing names both, and what runs start is version 1
    assert [(w["id"], w["version"], w["active_version"]) for w in listed] == [("digest", 2, 1)]
    assert (shown["version"], shown["active_version"], shown["latest_version"]) == (1, 1, 2)
    assert "version 1 (active; draft 2 is newer)" in text


def test_a_gate_that_passed_promotes_the_draft_and_is_recorded(
    cli: Any, drafted: None, tmp_path: Path
) -> None:
    # Given a replay report of version 2 that passed
    gate = _gate(tmp_path / "replay.json")
    # When version 2 is promoted with it
    promoted = cli("workflows", "promote", "digest", "--version", "2", "--gate", gate)
    # Then it is active, and the history keeps who, the gate's summary and the verdict
    assert promoted.code == 0, promoted.stderr
    assert "version 2 is active (was version 1)" in promoted.stdout
    assert cli("workflows", "show", "digest", "--json").json()["version"] == 2
    history = cli("workflows", "history", "digest", "--json").json()
    assert history["active_version"] == 2
    [record] = history["promotions"]
    assert (record["version"], record["previous_version"], record["forced"]) == (2, 1, False)
    assert record["promoted_by"]
    assert record["gate"] == {
        "source": gate,
        "runs": 20,
        "failures": 0,
        "passed": True,
        "fail_on": ["path", "cost+20%"],
    }


def test_a_failed_gate_refuses_the_promotion(cli: Any, drafted: None, tmp_path: Path) -> None:
    # Given a replay report of version 2 where 3 runs failed the gate
    gate = _gate(tmp_path / "replay.json", failing=3)
    # When version 2 is promoted with it
    refused = cli("workflows", "promote", "digest", "--version", "2", "--gate", gate)
    # Then the promotion is refused, saying why and how to override, and version 1 stays active
    assert refused.code == 6
    assert "20 runs, 3 failing" in refused.stderr and "--force" in refused.stderr
    assert cli("workflows", "show", "digest", "--json").json()["version"] == 1
    assert cli("workflows", "history", "digest", "--json").json()["promotions"] == []


def test_a_forced_promotion_past_a_failed_gate_is_recorded_as_forced(
    cli: Any, drafted: None, tmp_path: Path
) -> None:
    # Given a replay report of version 2 that failed
    gate = _gate(tmp_path / "replay.json", failing=1)
    # When version 2 is promoted with --force
    forced = cli("workflows", "promote", "digest", "--version", "2", "--gate", gate, "--force")
    # Then it is active, and the record says it was forced past a failed gate
    assert forced.code == 0, forced.stderr
    [record] = cli("workflows", "history", "digest", "--json").json()["promotions"]
    assert (record["version"], record["forced"], record["gate"]["passed"]) == (2, True, False)
    assert "(forced)" in cli("workflows", "history", "digest").stdout


def test_a_gate_of_another_version_is_refused_with_the_field(
    cli: Any, drafted: None, tmp_path: Path
) -> None:
    # Given a replay report of version 3
    gate = _gate(tmp_path / "replay.json", version=3)
    # When version 2 is promoted with it
    refused = cli("workflows", "promote", "digest", "--version", "2", "--gate", gate)
    # Then it is refused at the report's field, with how to write the right one
    assert refused.code != 0
    assert "candidate_version: the report replayed version 3, not 2" in refused.stderr
    assert "--candidate-version 2" in refused.stderr


def test_promoting_an_unknown_version_says_how_to_store_one(cli: Any, drafted: None) -> None:
    # Given versions 1 and 2
    # When version 7 is promoted
    refused = cli("workflows", "promote", "digest", "--version", "7")
    # Then it is not found, with how to store a draft
    assert refused.code != 0
    assert "digest@7 not found" in refused.stderr and "put --draft" in refused.stderr


def test_a_draft_syncs_no_trigger_until_it_is_promoted(cli: Any, tmp_path: Path) -> None:
    # Given a workflow with no trigger, and a draft of it that adds a webhook
    cli("workflows", "put", _file(tmp_path / "v1.yaml", "Summarize: {{ text }}"))
    draft = cli(
        "workflows", "put", "--draft", _file(tmp_path / "v2.yaml", "A: {{ text }}", webhook=True)
    )
    # When the draft is stored, then promoted
    promoted = cli("workflows", "promote", "digest", "--version", "2", "--json")
    # Then the draft created no webhook secret, and the promotion did (shown once)
    assert draft.code == 0 and "webhook secret" not in draft.stdout
    assert promoted.code == 0, promoted.stderr
    assert promoted.json()["triggers"]["webhook_secret"].startswith("whsec_")
