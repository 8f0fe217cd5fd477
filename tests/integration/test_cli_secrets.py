"""``langorch secrets put | exists | delete`` against a local home: a value goes in from
standard input or the command line, is stored as its readers read it, and is never printed."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from langorch.cli.main import main
from tests.support.homes import local_home


def test_a_value_from_standard_input_is_stored_as_tools_read_it_and_never_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a local home, and a token piped in (so it is not in the shell's history)
    container = local_home(tmp_path / ".langorch")
    monkeypatch.setattr("sys.stdin", io.StringIO("Bearer s3cret-token\n"))
    # When it is put
    code = main(["secrets", "put", "langorch/tools/orders", "--home", str(tmp_path / ".langorch")])
    out = capsys.readouterr()
    # Then it is stored as {"value": ...}, the shape a tool's header reads, and not shown
    assert code == 0
    assert container.secrets.get_json("langorch/tools/orders", fresh=True) == {
        "value": "Bearer s3cret-token"
    }
    assert "s3cret" not in out.out + out.err
    assert "created" in out.out


def test_a_json_object_replaces_a_secret_and_exists_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = str(tmp_path / ".langorch")
    container = local_home(tmp_path / ".langorch")
    assert main(["secrets", "put", "llm", "--value", "a", "--home", home]) == 0
    assert main(["secrets", "put", "llm", "--object", '{"api_key": "b"}', "--home", home]) == 0
    assert container.secrets.get_json("llm", fresh=True) == {"api_key": "b"}
    capsys.readouterr()
    assert main(["secrets", "exists", "llm", "--home", home, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"name": "llm", "exists": True}
    assert main(["secrets", "delete", "llm", "--home", home]) == 0
    assert main(["secrets", "exists", "llm", "--home", home]) == 1


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (["--object", "[1]"], "give a JSON object"),
        (["--object", "{"], "not JSON"),
        (["--value", ""], "empty"),
    ],
)
def test_a_bad_value_is_refused_with_the_reason_and_nothing_stored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], given: list[str], said: str
) -> None:
    container = local_home(tmp_path / ".langorch")
    code = main(["secrets", "put", "x", *given, "--home", str(tmp_path / ".langorch")])
    assert code == 2
    assert said in capsys.readouterr().err
    assert not container.secrets.exists("x")
