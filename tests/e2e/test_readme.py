"""The README's copy-paste commands work as written: it stays true."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

from langorch.app.definitions import validate_files
from langorch.cli.main import build_parser, main
from tests.e2e.readme import README, REPO, bash_commands, definition_snippets, langorch_commands

PLACEHOLDERS = {"RUN_ID": "run-0", "ID": "apr-0"}


def test_every_command_is_the_langorch_the_readme_puts_on_the_path():
    text = README.read_text(encoding="utf-8")
    commands = bash_commands(text)
    activate = ["source", ".venv/bin/activate"]

    # The virtualenv is activated before the first `langorch` command, and no command spells
    # the path another way
    assert activate in commands
    first = next(i for i, argv in enumerate(commands) if argv[0] == "langorch")
    assert commands.index(activate) < first
    assert not [argv for argv in commands if argv[0].endswith("/langorch")]


def test_every_langorch_command_parses_and_names_files_the_repository_ships():
    commands = langorch_commands()
    assert len(commands) >= 10
    # One parser for all (~50 ms of CPU to build, 84 commands): parsing leaves it as it was
    parser = build_parser()

    for argv in commands:
        args = [PLACEHOLDERS.get(word, word) for word in argv]
        try:
            parser.parse_args(args)
        except SystemExit as exc:
            pytest.fail(f"`langorch {' '.join(argv)}` does not parse (exit {exc.code})")
        for word in argv:
            if word.startswith("examples/"):
                assert (REPO / word).is_file(), f"`langorch {' '.join(argv)}`: no {word}"


@pytest.mark.parametrize(
    "argv",
    langorch_commands(("runs", "start", "--local")),
    ids=lambda argv: " ".join(a for a in argv if a.startswith("examples/") or a.startswith("--r")),
)
def test_each_local_example_runs_as_written(
    argv: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
):
    # Given the repository as a fresh checkout sees it (no stack running)
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("LANGORCH_HOME", str(tmp_path / "home"))

    # When the README's command runs
    main(argv)

    # Then it runs the example to its end and prints its timeline, with no error
    out, err = capsys.readouterr()
    assert "error:" not in err
    assert out.startswith("run run-")
    assert "  end  " in out


def test_the_readme_runs_every_local_example_it_describes():
    described = {a for argv in langorch_commands(("runs", "start", "--local")) for a in argv}

    assert {
        "examples/blog_review/definitions.yaml",
        "examples/lunch_order/definitions.yaml",
        "examples/invoice_batch/definitions.yaml",
    } <= described


def test_the_writing_workflows_examples_validate_without_errors_or_warnings(tmp_path: Path):
    # Given the definition snippets of the README's "Writing workflows" section
    snippets = definition_snippets("Writing workflows")
    assert len(snippets) >= 2

    for i, snippet in enumerate(snippets):
        file = tmp_path / f"snippet{i}.yaml"
        file.write_text(snippet, encoding="utf-8")
        # When each is validated offline, strictly (a warning would raise)
        batch = validate_files([file], strict=True)
        # Then it defines a workflow and nothing is wrong with it
        assert batch.workflows, snippet
        assert batch.warnings == []


@pytest.mark.parametrize(
    "argv",
    langorch_commands(("workflows", "validate")),
    ids=lambda argv: " ".join(a.rsplit("/", 1)[-1] for a in argv if a.startswith("examples/")),
)
def test_each_validate_command_succeeds_as_written(
    argv: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
):
    # Given the repository as a fresh checkout sees it (no stack running)
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("LANGORCH_HOME", str(tmp_path / "home"))

    # When the README's command runs, Then it exits 0 and says the files are valid
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert out.startswith("valid")
    assert "error:" not in err


def test_the_ask_a_person_example_is_the_file_its_command_runs():
    # Given the README's "ask a person" definition and the file its command runs
    [snippet] = definition_snippets("When a step fails: ask a person")
    shipped = (REPO / "examples" / "fix_on_failure" / "unit_price.yaml").read_text()

    # Then the README shows that file's definition as it is
    assert snippet in shipped
    assert "on_error: ask" in snippet


def _walkthroughs() -> list[tuple[str, str]]:
    """Each ``python examples/…`` command of the README and the output block after it."""
    text = README.read_text(encoding="utf-8")
    found = re.findall(r"```bash\n(python examples/\S+)\n```\s*\n```\n(.*?)```", text, re.DOTALL)
    return [(command, shown) for command, shown in found]


def test_the_readme_has_the_slack_walkthrough():
    assert [c for c, _ in _walkthroughs()] == ["python examples/slack_review/walkthrough.py"]


@pytest.mark.parametrize("command,shown", _walkthroughs(), ids=lambda v: v.split("\n")[0][:40])
def test_each_walkthrough_prints_what_the_readme_shows(
    command: str,
    shown: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
):
    # Given the repository as a fresh checkout sees it
    monkeypatch.chdir(REPO)
    script = command.split()[1]
    # When the README's walkthrough runs as `python` runs it, as __main__ (its own local stack,
    # offline), in this process: a new interpreter would import moto and LangGraph again
    runpy.run_path(script, run_name="__main__")
    # Then it ends well and prints each line the README shows (times and ids aside)
    out = capsys.readouterr().out
    for line in shown.splitlines():
        if line.strip() and "UTC" not in line and "…" not in line.replace("Comment…", ""):
            assert line in out, f"the README shows {line!r}; the walkthrough did not"
    assert "succeeded" in out


@pytest.mark.parametrize(
    "argv",
    [argv for argv in langorch_commands(("test",)) if len(argv) > 1],
    ids=lambda argv: argv[1],
)
def test_each_test_command_passes_as_written(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    # Given the repository as a fresh checkout sees it
    monkeypatch.chdir(REPO)
    # When the README's `langorch test FILE` runs, Then every case passes
    assert main(argv) == 0
    out, _ = capsys.readouterr()
    assert " passed, 0 failed" in out


def test_the_testing_section_shows_the_blog_review_case_it_ships():
    # Given the README's tests.yaml snippet and the file the example ships
    [snippet] = definition_snippets("Testing workflows")
    shipped = (REPO / "examples" / "blog_review" / "tests.yaml").read_text()
    # Then the case it shows is the example's (its lines, comments aside)
    for line in snippet.splitlines():
        code = line.split("#")[0].rstrip()
        if code.strip() and not code.startswith("definitions"):
            assert code.strip() in shipped, line
