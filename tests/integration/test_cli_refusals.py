"""Commands the CLI refuses (issue 16): errors that say what was wrong and how to fix it, and
flags that would be accepted and ignored. A refused command leaves the stack as it found it, so
these tests share one emulator holding ``DEFINITIONS`` (set up once for the module, instead of a
reset emulator and a ``workflows put`` per test); those that could start a run check that none
was.

Every command runs through ``main(argv)`` against a moto server found through a local stack file,
exactly as after ``make dev``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from langorch.cli.main import main
from tests.integration.test_cli_papercuts import DEFINITIONS
from tests.support.cli import Result, emulator_home, runner


@pytest.fixture(scope="module")
def shared_home(endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One fresh emulator for the module, with ``DEFINITIONS`` registered, and the local stack
    file `make dev` would have written for it."""
    folder = tmp_path_factory.mktemp("refusals")
    with pytest.MonkeyPatch.context() as patch:
        home = emulator_home(endpoint, folder / ".langorch", patch)
        path = folder / "definitions.yaml"
        path.write_text(DEFINITIONS)
        assert main(["workflows", "put", str(path)]) == 0
    yield home


@pytest.fixture
def langorch(
    shared_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Any:
    monkeypatch.setenv("LANGORCH_HOME", str(shared_home))
    return runner(capsys)


def assert_no_internals(result: Result) -> None:
    assert "unexpected" not in result.stderr
    assert "Error:" not in result.stderr  # no exception class names leak
    assert "stack.json" not in result.stderr


# --- errors that say what was wrong and how to fix it -------------------------------------


def test_a_missing_input_file_names_the_file_and_the_alternative(langorch: Any):
    result = langorch("runs", "start", "greet", "--input-file", "nope.json")

    assert result.code == 2
    assert_no_internals(result)
    assert "--input-file nope.json: no such file" in result.stderr
    assert "--input" in result.stderr.split("no such file", 1)[1]


def test_an_unknown_status_lists_the_statuses(langorch: Any):
    result = langorch("runs", "list", "--status", "done")

    assert result.code == 2
    assert_no_internals(result)
    assert "--status 'done' is not a run status" in result.stderr
    assert "succeeded" in result.stderr and "waiting_approval" in result.stderr


@pytest.mark.parametrize("group", ["runs", "approvals"])
def test_a_limit_out_of_range_is_a_usage_error(langorch: Any, group: str):
    result = langorch(group, "list", "--limit", "0")

    assert result.code == 2
    assert_no_internals(result)
    assert "--limit: must be between 1 and 1000, not 0" in result.stderr


def test_an_unknown_definition_names_the_local_stack_and_how_to_list(langorch: Any):
    result = langorch("blocks", "show", "nope")

    assert result.code == 3
    assert_no_internals(result)
    assert "no block nope is stored in the local stack" in result.stderr
    assert "`langorch blocks list`" in result.stderr


def test_an_unknown_version_names_the_versions_there_are(langorch: Any):
    result = langorch("workflows", "show", "greet@7")

    assert result.code == 3
    assert "workflow greet has no version 7 in the local stack: its versions are 1 to 1" in (
        result.stderr
    )


def test_hooks_send_to_a_workflow_without_a_webhook_trigger_says_so(langorch: Any):
    result = langorch("hooks", "send", "greet", "--input", "{}")

    assert result.code == 2
    assert_no_internals(result)
    assert "workflow greet has no webhook trigger" in result.stderr
    assert "secret" not in result.stderr
    assert "triggers: [{type: webhook}]" in result.stderr


@pytest.mark.parametrize(
    "argv", [["hooks", "send", "nope"], ["workflows", "rotate-secret", "nope"]]
)
def test_webhook_commands_for_an_unknown_workflow_say_how_to_find_one(
    langorch: Any, argv: list[str]
):
    result = langorch(*argv)

    assert result.code == 3
    assert_no_internals(result)
    assert "no workflow nope is stored in the local stack" in result.stderr
    assert "`langorch workflows list`" in result.stderr


def test_files_put_of_a_directory_says_it_wants_a_file(langorch: Any, tmp_path: Path):
    result = langorch("files", "put", str(tmp_path))

    assert result.code == 2
    assert f"{tmp_path} is a directory: give the path of the file to upload" in result.stderr


# --- flags that would be accepted and ignored are refused -----------------------------------


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        (["--edit", "x=1"], "--edit sets editable keys of an approval this command approves"),
        (["--reject", "--edit", "x=1"], "add --approve"),
        (["--comment", "looks good"], "--comment goes with the decision of --approve or --reject"),
        (["--script", "answers.yaml"], "--script is for --local runs"),
        (["--timeout", "5"], "--timeout bounds --wait"),
        (["--approve", "--wait", "--timeout", "5"], "this command drives the run to its end"),
    ],
)
def test_start_refuses_flags_that_would_do_nothing(langorch: Any, flags: list[str], reason: str):
    result = langorch("runs", "start", "greet", *flags)

    assert result.code == 2
    assert reason in result.stderr
    # and nothing was started (a run it started would be listed under its workflow)
    assert langorch("runs", "list", "--workflow", "greet", "--json").json()["runs"] == []
