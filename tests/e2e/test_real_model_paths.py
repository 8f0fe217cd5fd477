"""Every entry point uses the model the user configured: `runs start --local` and `langorch dev`.

The "real" model is a loopback OpenAI-compatible server or Bedrock Converse endpoint
(``tests/llm_servers.py``), reached through the settings a user sets (the OpenAI base URL, the
Bedrock endpoint), with the key or AWS credentials from the user's environment.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from langorch.cli.main import main
from langorch.config import Settings
from langorch.local.stack import LocalStack, _stack_document, free_port, start_local_stack
from tests.llm_servers import FakeBedrock, FakeOpenAI

DEFINITIONS = """
blocks:
  - block_id: name_it
    output_keys: [title]
    prompt_template: "Name a book about {topic}"
    input_keys: [topic]
workflows:
  - plan_id: naming
    memory: false
    inputs_schema: {properties: {topic: {type: string}}, required: [topic]}
    steps:
      - {step_id: name, block_id: name_it}
"""


@pytest.fixture
def definitions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "naming" / "definitions.yaml"
    path.parent.mkdir()
    path.write_text(DEFINITIONS)
    return path


def langorch(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any, str]:
    code = main([*args, "--json"])
    captured = capsys.readouterr()
    # In-process functions (langorch dev) print one-line JSON logs and metrics to stdout too:
    # the CLI's document is the indented one.
    lines = captured.out.splitlines()
    start = next((i for i, line in enumerate(lines) if line == "{"), len(lines))
    out = "\n".join(lines[start:])
    return code, json.loads(out) if out.strip() else None, captured.err


def test_local_run_uses_openai_with_the_key_from_the_environment(
    definitions: Path,
    openai_server: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given OpenAI configured the way the README says (here: a compatible server's base URL)
    monkeypatch.setenv("LANGORCH_DEFAULT_LLM_PROVIDER", "openai")
    monkeypatch.setenv("LANGORCH_OPENAI_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    openai_server.answer({"title": "The Owl Book"}, prompt_tokens=11, completion_tokens=4)

    # When the workflow runs locally
    code, data, err = langorch(
        capsys, "runs", "start", "--local", str(definitions), "--input", '{"topic": "owls"}'
    )

    # Then the model answered the step, called with the user's key
    assert code == 0, err
    run = data["runs"][0]["run"]
    assert run["status"] == "succeeded"
    assert run["outputs"]["title"] == "The Owl Book"
    assert openai_server.calls == 1
    assert openai_server.received[0].headers["authorization"] == "Bearer sk-from-env"


def test_local_run_uses_bedrock_with_the_users_credentials_not_the_emulators(
    definitions: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given Bedrock as the provider (here: its endpoint on loopback) and the user's credentials
    # in the environment
    monkeypatch.setenv("LANGORCH_DEFAULT_LLM_PROVIDER", "bedrock")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAUSERSOWNKEY")
    with FakeBedrock().running() as server:
        monkeypatch.setenv("LANGORCH_BEDROCK_ENDPOINT_URL", server.url)
        server.tool_answer({"title": "Owls of the North"})  # type: ignore[attr-defined]

        # When the workflow runs locally (in the in-process emulator)
        code, data, err = langorch(
            capsys, "runs", "start", "--local", str(definitions), "--input", '{"topic": "owls"}'
        )

        # Then Bedrock answered, signed with the user's key: not the emulator's "local" nor
        # moto's fake one, and the user's environment is as it was
        assert code == 0, err
        assert data["runs"][0]["run"]["outputs"]["title"] == "Owls of the North"
        assert "Credential=AKIAUSERSOWNKEY/" in server.received[0].headers["authorization"]
        assert os.environ["AWS_ACCESS_KEY_ID"] == "AKIAUSERSOWNKEY"


def test_local_run_without_an_openai_key_says_where_to_put_it(
    definitions: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given OpenAI as the provider and no key anywhere
    monkeypatch.setenv("LANGORCH_DEFAULT_LLM_PROVIDER", "openai")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    # When the workflow runs locally
    code, data, _ = langorch(
        capsys, "runs", "start", "--local", str(definitions), "--input", '{"topic": "owls"}'
    )

    # Then the run failed saying which variable to set
    assert code == 1
    assert "LANGORCH_OPENAI_API_KEY" in data["runs"][0]["run"]["error"]["message"]


def test_stack_file_never_holds_the_key_and_only_its_owner_reads_it(tmp_path: Path) -> None:
    # Given a local stack whose settings carry an OpenAI key from the environment
    settings = Settings(openai_api_key="sk-secret", endpoint_url="http://127.0.0.1:1")
    stack = LocalStack(settings=settings, home=tmp_path)
    from langorch.local.stack import write_stack_file

    # When its stack file is written
    write_stack_file(stack.stack_file, _stack_document(stack))

    # Then the key is not in it, and the file is 0600
    text = stack.stack_file.read_text()
    assert "sk-secret" not in text
    assert "openai_api_key" not in json.loads(text)["settings"]
    assert stat.S_IMODE(stack.stack_file.stat().st_mode) == 0o600


def test_dev_stack_runs_use_the_configured_model(
    definitions: Path,
    openai_server: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given `langorch dev` started with OpenAI configured in the developer's environment
    monkeypatch.setenv("LANGORCH_DEFAULT_LLM_PROVIDER", "openai")
    monkeypatch.setenv("LANGORCH_OPENAI_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("LANGORCH_OPENAI_API_KEY", "sk-dev-secret")
    openai_server.answer({"title": "Owl Stories"})
    stack: LocalStack = start_local_stack(
        home=definitions.parent.parent / ".langorch",
        port=free_port(),
        examples=definitions.parent.parent,
    )
    try:
        # When a run is started against the stack and followed to its end
        code, data, err = langorch(
            capsys, "runs", "start", "naming", "--input", '{"topic": "owls"}', "--wait"
        )

        # Then the state machine's functions called the model with the key, and the stack file
        # never saw the key
        assert code == 0, err
        assert "Owl Stories" in json.dumps(data)
        assert openai_server.calls == 1
        assert openai_server.received[0].headers["authorization"] == "Bearer sk-dev-secret"
        assert "sk-dev-secret" not in stack.stack_file.read_text()
        assert stat.S_IMODE(stack.stack_file.stat().st_mode) == 0o600
    finally:
        stack.stop()
