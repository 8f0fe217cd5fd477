"""``langorch blocks`` and ``langorch workflows`` through ``main(argv)`` against a real endpoint.

The CLI talks HTTP to a moto server on 127.0.0.1, exactly as it talks to the local stack.
"""

from __future__ import annotations

import copy
import json
import socket
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
    client = make_client("dynamodb", Settings(endpoint_url=endpoint))
    repository = DefinitionsRepository(client, TABLE)
    repository.create_table()
    return repository


@pytest.fixture
def cli(endpoint: str, repo: DefinitionsRepository, capsys: pytest.CaptureFixture[str]) -> Any:
    targeted, untargeted = runner(capsys, "--endpoint-url", endpoint), runner(capsys)

    def run(*argv: str, target: bool = True) -> Result:
        return (targeted if target else untargeted)(*argv)

    return run


def _write(path: Path, document: Any) -> str:
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return str(path)


def _block(block_id: str = "shorten", **changes: Any) -> dict[str, Any]:
    return {
        "block_id": block_id,
        "name": "Summarize",
        "input_keys": ["text"],
        "output_keys": ["summary"],
        "prompt_template": "Summarize: {{ text }}",
        "category": "text",
        "tags": ["llm"],
        **changes,
    }


def _workflow(plan_id: str = "digest", **step: Any) -> dict[str, Any]:
    return {
        "plan_id": plan_id,
        "inputs_schema": {"properties": {"text": {"type": "string"}}, "required": ["text"]},
        "steps": [{"step_id": "shorten", "block_id": "shorten", **step}],
    }


# --------------------------------------------------------------------------------------------
# put / list / show
# --------------------------------------------------------------------------------------------


def test_blocks_put_stores_version_1(cli: Any, tmp_path: Path) -> None:
    # Given a block file
    file = _write(tmp_path / "block.yaml", _block())
    # When it is put
    result = cli("blocks", "put", file, "--json")
    # Then version 1 is stored
    assert result.code == 0, result.stderr
    [stored] = result.json()["results"]
    assert (stored["kind"], stored["id"], stored["version"], stored["created"]) == (
        "block",
        "shorten",
        1,
        True,
    )


def test_putting_the_same_file_again_changes_nothing(cli: Any, tmp_path: Path) -> None:
    # Given a stored block
    file = _write(tmp_path / "block.yaml", _block())
    cli("blocks", "put", file)
    # When the same file is put again
    result = cli("blocks", "put", file, "--json")
    # Then it reports version 1, unchanged
    [stored] = result.json()["results"]
    assert (stored["version"], stored["created"]) == (1, False)


def test_blocks_list_json_shows_the_latest_of_each(cli: Any, tmp_path: Path) -> None:
    # Given two blocks, one changed once
    cli("blocks", "put", _write(tmp_path / "a.yaml", _block("a")))
    cli("blocks", "put", _write(tmp_path / "b.yaml", _block("b")))
    cli("blocks", "put", _write(tmp_path / "b.yaml", _block("b", description="v2")))
    # When blocks are listed
    result = cli("blocks", "list", "--json")
    # Then each block appears once at its latest version
    assert result.code == 0
    assert [(b["id"], b["version"]) for b in result.json()["blocks"]] == [("a", 1), ("b", 2)]


def test_blocks_list_filters_by_category_and_tags(cli: Any, tmp_path: Path) -> None:
    # Given blocks with different categories and tags
    cli("blocks", "put", _write(tmp_path / "a.yaml", _block("a", tags=["llm", "fast"])))
    cli("blocks", "put", _write(tmp_path / "b.yaml", _block("b", tags=["llm"])))
    cli("blocks", "put", _write(tmp_path / "c.yaml", _block("c", category="mail")))
    # When listing one category with two tags
    result = cli("blocks", "list", "--category", "text", "--tag", "llm", "--tag", "fast", "--json")
    # Then only the block matching all of them is listed
    assert [b["id"] for b in result.json()["blocks"]] == ["a"]


def test_blocks_list_text_is_a_table(cli: Any, tmp_path: Path) -> None:
    # Given a stored block
    cli("blocks", "put", _write(tmp_path / "a.yaml", _block("a")))
    # When listed without --json
    result = cli("blocks", "list")
    # Then a header row and one row per block are printed
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["ID", "VERSION", "TYPE", "CATEGORY", "TAGS", "NAME"]
    assert lines[1].split() == ["a", "1", "action", "text", "llm", "Summarize"]


def test_show_json_has_version_hash_and_created_at(cli: Any, tmp_path: Path) -> None:
    # Given a stored block
    cli("blocks", "put", _write(tmp_path / "a.yaml", _block()))
    # When it is shown
    result = cli("blocks", "show", "shorten", "--json")
    # Then the definition comes with its version, hash and creation time
    shown = result.json()
    assert shown["version"] == 1
    assert len(shown["content_hash"]) == 64
    assert shown["created_at"]
    assert shown["definition"]["prompt_template"] == "Summarize: {{ text }}"


def test_show_at_version_prints_that_version(cli: Any, tmp_path: Path) -> None:
    # Given two versions of a block
    file = tmp_path / "a.yaml"
    cli("blocks", "put", _write(file, _block()))
    cli("blocks", "put", _write(file, _block(prompt_template="Shorter: {{ text }}")))
    # When version 1 is shown
    result = cli("blocks", "show", "shorten@1", "--json")
    # Then the old content is printed, not the latest
    assert result.json()["version"] == 1
    assert result.json()["definition"]["prompt_template"] == "Summarize: {{ text }}"


def test_show_text_is_yaml_with_a_metadata_header(cli: Any, tmp_path: Path) -> None:
    # Given a stored block
    cli("blocks", "put", _write(tmp_path / "a.yaml", _block()))
    # When shown without --json
    result = cli("blocks", "show", "shorten")
    # Then a comment header names version, hash and creation, and the body is the YAML definition
    assert result.stdout.startswith("# block shorten version 1\n# hash ")
    assert "# created " in result.stdout
    assert yaml.safe_load(result.stdout)["block_id"] == "shorten"


def test_show_of_an_unknown_version_exits_3(cli: Any, endpoint: str, tmp_path: Path) -> None:
    # Given a block with one version
    cli("blocks", "put", _write(tmp_path / "a.yaml", _block()))
    # When version 7 is shown
    result = cli("blocks", "show", "shorten@7")
    # Then the command fails with a one-line reason
    assert result.code == 3
    assert result.stderr.strip() == (
        f"error: block shorten has no version 7 in the endpoint {endpoint}: its versions are 1 to 1"
    )


def test_a_bad_version_reference_is_a_usage_error(cli: Any) -> None:
    # When a version is not a number
    result = cli("workflows", "show", "digest@latest")
    # Then the command fails as a usage error
    assert result.code == 2
    assert "ID@N" in result.stderr


def test_workflows_put_list_and_show(cli: Any, tmp_path: Path) -> None:
    # Given a file with a block and the workflow that uses it
    file = _write(tmp_path / "both.yaml", {"blocks": [_block()], "workflows": [_workflow()]})
    # When it is put
    put = cli("workflows", "put", file, "--json")
    # Then both are stored in one go, block first, and the workflow is listed and shown
    assert put.code == 0, put.stderr
    assert [(r["kind"], r["id"]) for r in put.json()["results"]] == [
        ("block", "shorten"),
        ("workflow", "digest"),
    ]
    listed = cli("workflows", "list", "--json").json()["workflows"]
    assert [(w["id"], w["version"], w["steps"]) for w in listed] == [("digest", 1, 1)]
    assert cli("workflows", "show", "digest@1", "--json").json()["id"] == "digest"


# --------------------------------------------------------------------------------------------
# Pinning
# --------------------------------------------------------------------------------------------


def test_stored_workflow_pins_the_latest_block_version(cli: Any, tmp_path: Path) -> None:
    # Given a block at version 2
    file = tmp_path / "block.yaml"
    cli("blocks", "put", _write(file, _block()))
    cli("blocks", "put", _write(file, _block(description="v2")))
    # When a workflow using it without a version is put
    cli("workflows", "put", _write(tmp_path / "wf.yaml", _workflow()))
    # Then the stored workflow names version 2
    shown = cli("workflows", "show", "digest", "--json").json()
    assert shown["definition"]["steps"][0]["block_version"] == 2


def test_an_explicit_block_version_is_kept(cli: Any, tmp_path: Path) -> None:
    # Given a block at version 2
    file = tmp_path / "block.yaml"
    cli("blocks", "put", _write(file, _block()))
    cli("blocks", "put", _write(file, _block(description="v2")))
    # When a workflow pinned to version 1 is put
    cli("workflows", "put", _write(tmp_path / "wf.yaml", _workflow(block_version=1)))
    # Then the stored workflow still names version 1
    shown = cli("workflows", "show", "digest", "--json").json()
    assert shown["definition"]["steps"][0]["block_version"] == 1


def test_a_changed_block_makes_the_re_put_workflow_a_new_version(cli: Any, tmp_path: Path) -> None:
    # Given a workflow stored against block version 1
    block_file = tmp_path / "block.yaml"
    workflow_file = _write(tmp_path / "wf.yaml", _workflow())
    cli("blocks", "put", _write(block_file, _block()))
    cli("workflows", "put", workflow_file)
    # When the block changes and the unchanged workflow file is put again
    cli("blocks", "put", _write(block_file, _block(description="v2")))
    result = cli("workflows", "put", workflow_file, "--json")
    # Then the workflow becomes version 2, pinned to block version 2; version 1 keeps block 1
    [stored] = result.json()["results"]
    assert (stored["version"], stored["created"]) == (2, True)
    old = cli("workflows", "show", "digest@1", "--json").json()
    assert old["definition"]["steps"][0]["block_version"] == 1


# --------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------


def test_a_bad_file_exits_2_with_every_problem_path(cli: Any, tmp_path: Path) -> None:
    # Given a block with two problems: a bad id and an unknown field
    file = _write(tmp_path / "bad.yaml", _block("1nope", temprature=0.2))
    # When it is put with --json
    result = cli("blocks", "put", file, "--json")
    # Then the command exits 2 and lists both problems with their paths and hints
    assert result.code == 2
    document = result.json()
    paths = sorted(p["path"] for p in document["problems"])
    assert paths == [f"{file}: block_id", f"{file}: temprature"]
    assert all(p["hint"] for p in document["problems"])
    assert document["error"].startswith(file)
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_bad_file_in_text_mode_prints_each_problem_with_its_hint(
    cli: Any, tmp_path: Path
) -> None:
    # Given a block with an unknown field
    file = _write(tmp_path / "bad.yaml", _block(temprature=0.2))
    # When it is put without --json
    result = cli("blocks", "put", file)
    # Then stderr has the reason, then the problem with its path and hint
    assert result.code == 2
    first, problem = result.stderr.strip().splitlines()
    assert first.startswith("error: ")
    assert problem.strip().startswith(f"{file}: temprature: unknown field")
    assert "(hint: " in problem


def test_nothing_is_stored_when_one_of_several_files_is_bad(
    cli: Any, repo: DefinitionsRepository, tmp_path: Path
) -> None:
    # Given a good block file, a good workflow file and a malformed file
    good = _write(tmp_path / "good.yaml", _block())
    workflow = _write(tmp_path / "wf.yaml", _workflow())
    bad = tmp_path / "bad.yaml"
    bad.write_text("block_id: [unclosed\n", encoding="utf-8")
    # When all three are put together
    result = cli("workflows", "put", good, workflow, str(bad))
    # Then the command fails and nothing at all was stored
    assert result.code == 2
    assert repo.list_blocks() == []
    assert repo.list_workflows() == []


def test_a_workflow_using_an_unknown_block_is_refused(
    cli: Any, repo: DefinitionsRepository, tmp_path: Path
) -> None:
    # Given a workflow whose block is neither stored nor in the batch
    file = _write(tmp_path / "wf.yaml", _workflow())
    # When it is put
    result = cli("workflows", "put", file, "--json")
    # Then the problem points at the step's block_id and nothing is stored
    assert result.code == 2
    [problem] = result.json()["problems"]
    assert problem["path"] == f"{file}: workflow digest: steps[0].block_id"
    assert repo.list_workflows() == []


# --------------------------------------------------------------------------------------------
# Offline validation and targets
# --------------------------------------------------------------------------------------------


def test_validate_works_offline_against_the_same_files(cli: Any, tmp_path: Path) -> None:
    # Given no stack at all and a file with a block and the workflow using it
    file = _write(tmp_path / "both.yaml", {"blocks": [_block()], "workflows": [_workflow()]})
    # When it is validated
    result = cli("workflows", "validate", file, "--json", target=False)
    # Then it is valid, checked without any stored definitions
    assert result.code == 0, result.stderr
    assert result.json() == {
        "valid": True,
        "checked_against": "built-in blocks only",
        "blocks": ["shorten"],
        "workflows": ["digest"],
        "warnings": [],
    }


def test_validate_warns_about_a_review_loop_with_no_route_for_its_last_rejection(
    cli: Any, tmp_path: Path
) -> None:
    # Given a review loop bounded to 2 rounds that declares no on_max_iterations
    review = {
        "step_id": "review",
        "kind": "approval",
        "depends_on": ["shorten"],
        "approval": {"approvers": ["ed@example.com"], "show_keys": ["summary"]},
        "branches": {"approved": "done", "rejected": "shorten"},
    }
    workflow = _workflow()
    workflow["steps"] += [review, {"step_id": "done", "kind": "terminate"}]
    bounded = copy.deepcopy(workflow)
    bounded["steps"][1]["approval"]["max_iterations"] = 2
    routed = copy.deepcopy(bounded)
    routed["steps"][1]["approval"]["on_max_iterations"] = "done"
    files = [
        _write(tmp_path / f"{name}.yaml", {"blocks": [_block()], "workflows": [plan]})
        for name, plan in (("bounded", bounded), ("routed", routed))
    ]

    # When each is validated
    warned, quiet = (cli("workflows", "validate", f, target=False) for f in files)

    # Then both are valid; the one without a route is warned about on stderr, with the fix
    assert warned.code == 0 and quiet.code == 0, (warned.stderr, quiet.stderr)
    assert warned.stderr == (
        f"warning: {files[0]}: workflow digest: steps[1].approval.max_iterations: "
        "when round 2 is rejected "
        "the run fails with ReviewLoopExhaustedError (hint: declare approval.on_max_iterations "
        "(e.g. a terminate step with status failed and outputs) to route it)\n"
    )
    assert quiet.stderr == ""


def _seed_shaped(tmp_path: Path) -> list[str]:
    """Seed 000's open_uber_eats block and a plan using it, as the seed writes them."""
    block = {
        "block_id": "open_uber_eats",
        "name": "Open Uber Eats",
        "description": "Navigate to Uber Eats and log in",
        "input_keys": ["uber_eats_credentials"],
        "output_keys": ["session_active", "logged_in"],
        "prompt_template": "Log in using credentials: {uber_eats_credentials}.",
        "tools_required": ["browser"],
        "block_type": "action",
    }
    plan = {"plan_id": "lunch", "steps": [{"step_id": "open", "block_id": "open_uber_eats"}]}
    return [_write(tmp_path / "block.yaml", block), _write(tmp_path / "plan.yaml", plan)]


def test_validate_with_only_warnings_exits_0_and_prints_them_apart(
    cli: Any, tmp_path: Path
) -> None:
    # Given a seed-000 block needing `browser` (bound by nothing) and a plan whose input
    # comes from the user's preferences
    files = _seed_shaped(tmp_path)
    # When validated
    result = cli("workflows", "validate", *files, target=False)
    # Then it is valid: the result on stdout, one `warning:` line per warning on stderr, each
    # with its path and hint
    assert result.code == 0, result.stderr
    assert result.stdout.startswith("valid (3 warning(s) above): 1 block(s), 1 workflow(s)")
    lines = result.stderr.splitlines()
    assert [line.split(" (hint: ")[0] for line in lines] == [
        f"warning: {files[0]}: block open_uber_eats: tools_required[0]: tool 'browser' "
        "is not bound in this deployment",
        f"warning: {files[1]}: workflow lunch: steps[0].block_id: block 'open_uber_eats' needs "
        "input 'uber_eats_credentials', which no input or earlier step provides",
        f"warning: {files[1]}: workflow lunch: steps[0].block_id: block 'open_uber_eats' needs "
        "tool 'browser', which is not bound in this deployment",
    ]
    assert all(" (hint: " in line for line in lines)
    assert "error" not in result.stderr


def test_validate_json_lists_the_warnings(cli: Any, tmp_path: Path) -> None:
    # Given the seed-shaped files, When validated with --json
    result = cli("workflows", "validate", *_seed_shaped(tmp_path), "--json", target=False)
    # Then the document is valid and carries each warning's path, message and hint
    assert result.code == 0
    document = result.json()
    assert document["valid"] is True
    assert [w["path"].rsplit(": ", 1)[1] for w in document["warnings"]] == [
        "tools_required[0]",
        "steps[0].block_id",
        "steps[0].block_id",
    ]
    assert all(w["hint"] for w in document["warnings"])


def test_strict_turns_warnings_into_errors(cli: Any, tmp_path: Path) -> None:
    # Given the seed-shaped files, When validated and put with --strict
    files = _seed_shaped(tmp_path)
    validated = cli("workflows", "validate", "--strict", *files, target=False)
    put = cli("workflows", "put", "--strict", *files)
    # Then both exit 2 with the warnings as problems, and nothing is stored
    for result in (validated, put):
        assert result.code == 2
        assert result.stderr.startswith("error: 2 files: 3 problem(s)")
        assert "warning:" not in result.stderr
    assert cli("workflows", "list", "--json").json()["workflows"] == []
    assert cli("blocks", "list", "--json").json()["blocks"] == []


def test_put_with_only_warnings_stores_and_prints_them(cli: Any, tmp_path: Path) -> None:
    # Given the seed-shaped files, When put without --strict
    result = cli("workflows", "put", *_seed_shaped(tmp_path))
    # Then both are stored, exit 0, and the warnings are on stderr apart from the result
    assert result.code == 0, result.stderr
    assert "block open_uber_eats: version 1 stored" in result.stdout
    assert "workflow lunch: version 1 stored" in result.stdout
    assert result.stderr.count("warning: ") == 3
    assert "warning" not in result.stdout


def test_blocks_put_prints_warnings_and_strict_refuses_them(cli: Any, tmp_path: Path) -> None:
    # Given seed 000's open_uber_eats block (it needs `browser`, which nothing binds)
    block_file = _seed_shaped(tmp_path)[0]
    # When it is put strictly, Then it exits 2 and nothing is stored
    strict = cli("blocks", "put", "--strict", block_file)
    assert strict.code == 2
    assert cli("blocks", "list", "--json").json()["blocks"] == []
    # When it is put as usual, Then it is stored, with the warning on stderr and in --json
    put = cli("blocks", "put", block_file, "--json")
    assert put.code == 0, put.stderr
    assert [r["id"] for r in put.json()["results"]] == ["open_uber_eats"]
    assert [w["path"] for w in put.json()["warnings"]] == [
        f"{block_file}: block open_uber_eats: tools_required[0]"
    ]
    assert put.stderr.startswith(f"warning: {block_file}: block open_uber_eats:")


def test_validate_offline_reports_an_unknown_block(cli: Any, tmp_path: Path) -> None:
    # Given no stack and a workflow whose block is nowhere
    file = _write(tmp_path / "wf.yaml", _workflow())
    # When it is validated
    result = cli("workflows", "validate", file, "--json", target=False)
    # Then it is invalid, with the step's path
    assert result.code == 2
    assert [p["path"] for p in result.json()["problems"]] == [
        f"{file}: workflow digest: steps[0].block_id"
    ]


def test_validate_uses_stored_blocks_when_a_stack_is_reachable(cli: Any, tmp_path: Path) -> None:
    # Given a stored block
    cli("blocks", "put", _write(tmp_path / "block.yaml", _block()))
    # When a workflow file using it is validated against the stack
    result = cli("workflows", "validate", _write(tmp_path / "wf.yaml", _workflow()), "--json")
    # Then it is valid, and nothing was stored
    assert result.code == 0, result.stderr
    assert result.json()["checked_against"] == "stored definitions (--endpoint-url)"
    assert cli("workflows", "list", "--json").json()["workflows"] == []


def test_no_stack_is_a_one_line_error(cli: Any) -> None:
    # Given no endpoint, no --stack and no local stack file
    # When a command needs the stack
    result = cli("blocks", "list", target=False)
    # Then it exits non-zero with one line telling how to start one
    assert result.code == 4
    [line] = result.stderr.strip().splitlines()
    assert "no local stack running" in line
    assert "make dev" in line
    assert "--stack NAME" in line


def test_the_local_stack_file_is_found_by_default(
    cli: Any, endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a local stack file written by `langorch dev`, pointing at the emulator
    home = tmp_path / "dev-home"
    home.mkdir()
    (home / "stack.json").write_text(
        json.dumps({"endpoint_url": endpoint, "settings": {"definitions_table": TABLE}}),
        encoding="utf-8",
    )
    monkeypatch.setenv("LANGORCH_HOME", str(home))
    cli("blocks", "put", _write(tmp_path / "a.yaml", _block()))
    # When a command runs with no target options
    result = cli("blocks", "list", "--json", target=False)
    # Then it talks to the local stack
    assert result.code == 0, result.stderr
    assert [b["id"] for b in result.json()["blocks"]] == ["shorten"]


def test_json_before_the_command_applies_too(cli: Any, tmp_path: Path) -> None:
    # Given a stored block
    cli("blocks", "put", _write(tmp_path / "a.yaml", _block()))
    # When --json is given before the group
    result = cli("--json", "blocks", "list")
    # Then the output is JSON
    assert result.json()["blocks"][0]["id"] == "shorten"


def test_validate_falls_back_to_offline_when_the_local_stack_is_down(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a local stack file left behind by a `langorch dev` that has stopped
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    home = tmp_path / "stale-home"
    home.mkdir()
    (home / "stack.json").write_text(
        json.dumps({"endpoint_url": f"http://127.0.0.1:{closed_port}", "settings": {}}),
        encoding="utf-8",
    )
    monkeypatch.setenv("LANGORCH_HOME", str(home))
    file = _write(tmp_path / "both.yaml", {"blocks": [_block()], "workflows": [_workflow()]})
    # When a file is validated with no target options
    result = cli("workflows", "validate", file, "--json", target=False)
    # Then it is validated offline instead of failing
    assert result.code == 0, result.stderr
    assert result.json()["checked_against"] == "built-in blocks only"
