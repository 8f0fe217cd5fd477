"""Which deployment the CLI talks to: flags, environment, deployed stack, local stack file."""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping
from pathlib import Path

import pytest

from langorch.cli.target import (
    StackOutputs,
    TargetError,
    endpoint_reachable,
    local_home,
    resolve_target,
)
from langorch.config import Settings
from tests.support.cli import STACK_OUTPUTS as OUTPUTS


def _outputs(found: Mapping[str, str]) -> StackOutputs:
    def read(stack: str, settings: Settings) -> Mapping[str, str]:
        assert stack == "prod"
        return found

    return read


def _stack_file(home: Path, endpoint: str = "http://127.0.0.1:5999") -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "stack.json").write_text(
        json.dumps({"endpoint_url": endpoint, "settings": {"runs_table": "dev-runs"}}),
        encoding="utf-8",
    )


def test_endpoint_flag_wins_over_everything(tmp_path: Path) -> None:
    # Given a stack file, a stack name and an endpoint in the environment
    _stack_file(tmp_path / ".langorch")
    env = {"LANGORCH_ENDPOINT_URL": "http://env:1"}
    # When the endpoint flag is also given
    target = resolve_target(endpoint_url="http://flag:2", stack="prod", env=env, cwd=tmp_path)
    # Then the flag's endpoint is used
    assert target.settings.endpoint_url == "http://flag:2"
    assert (target.source, target.explicit) == ("--endpoint-url", True)


def test_endpoint_from_the_environment(tmp_path: Path) -> None:
    # Given LANGORCH_ENDPOINT_URL and a table name in the environment
    env = {"LANGORCH_ENDPOINT_URL": "http://env:1", "LANGORCH_RUNS_TABLE": "env-runs"}
    # When resolving with no flags
    target = resolve_target(env=env, cwd=tmp_path)
    # Then both come from the environment
    assert target.settings.endpoint_url == "http://env:1"
    assert target.settings.runs_table == "env-runs"


def test_a_stack_maps_its_outputs_to_settings(tmp_path: Path) -> None:
    # Given a deployed stack with every langorch output
    # When it is named
    target = resolve_target(stack="prod", env={}, cwd=tmp_path, outputs=_outputs(OUTPUTS))
    # Then its resources are the settings, with no endpoint override
    settings = target.settings
    assert settings.endpoint_url is None
    assert (settings.definitions_table, settings.runs_table, settings.bucket) == (
        "prod-definitions",
        "prod-runs",
        "prod-bucket",
    )
    assert settings.checkpoints_table == "prod-checkpoints"
    assert settings.memory_table == "prod-memory"


def test_a_stack_missing_outputs_is_refused(tmp_path: Path) -> None:
    # Given a stack without the Bucket output
    outputs = {k: v for k, v in OUTPUTS.items() if k != "Bucket"}
    # When it is named
    # Then resolution fails naming the missing output
    with pytest.raises(TargetError, match="Bucket"):
        resolve_target(stack="prod", env={}, cwd=tmp_path, outputs=_outputs(outputs))


def test_the_local_stack_file_is_the_default(tmp_path: Path) -> None:
    # Given a stack file in the default home
    _stack_file(tmp_path / ".langorch")
    # When resolving with no flags and no environment
    target = resolve_target(env={}, cwd=tmp_path)
    # Then its endpoint and settings are used, and it counts as implicit
    assert target.settings.endpoint_url == "http://127.0.0.1:5999"
    assert target.settings.runs_table == "dev-runs"
    assert target.explicit is False


def test_langorch_home_moves_the_stack_file(tmp_path: Path) -> None:
    # Given a stack file under LANGORCH_HOME
    _stack_file(tmp_path / "elsewhere", endpoint="http://127.0.0.1:6001")
    # When resolving
    target = resolve_target(env={"LANGORCH_HOME": str(tmp_path / "elsewhere")}, cwd=tmp_path)
    # Then that file is used
    assert target.settings.endpoint_url == "http://127.0.0.1:6001"


def test_home_option_wins_over_langorch_home(tmp_path: Path) -> None:
    # Given two stack files: one under LANGORCH_HOME, one under the folder given as --home
    _stack_file(tmp_path / "from-env", endpoint="http://127.0.0.1:6001")
    _stack_file(tmp_path / "from-option", endpoint="http://127.0.0.1:6002")
    # When resolving with both
    target = resolve_target(
        home="from-option", env={"LANGORCH_HOME": str(tmp_path / "from-env")}, cwd=tmp_path
    )
    # Then --home (relative to the working directory) is the one used
    assert target.settings.endpoint_url == "http://127.0.0.1:6002"


def test_a_missing_stack_names_the_home_and_how_to_point_at_one(tmp_path: Path) -> None:
    # Given no stack file under the home given
    # When resolving
    with pytest.raises(TargetError) as raised:
        resolve_target(home=str(tmp_path / "nowhere"), env={}, cwd=tmp_path)
    # Then the message names the file looked for and the two ways to name a home
    message = str(raised.value)
    assert str(tmp_path / "nowhere" / "stack.json") in message
    assert "--home" in message and "LANGORCH_HOME" in message


def test_local_home_defaults_to_dot_langorch_in_the_working_directory(tmp_path: Path) -> None:
    assert local_home(None, env={}, cwd=tmp_path) == tmp_path / ".langorch"
    assert local_home(None, env={"LANGORCH_HOME": "/srv/lo"}, cwd=tmp_path) == Path("/srv/lo")


def test_a_corrupt_stack_file_is_a_target_error(tmp_path: Path) -> None:
    # Given a stack file that is not JSON
    (tmp_path / ".langorch").mkdir()
    (tmp_path / ".langorch" / "stack.json").write_text("{not json", encoding="utf-8")
    # When resolving
    # Then the error names the file
    with pytest.raises(TargetError, match=r"stack\.json"):
        resolve_target(env={}, cwd=tmp_path)


def test_nothing_to_talk_to_says_how_to_start_a_stack(tmp_path: Path) -> None:
    # Given no flags, no environment and no stack file
    # When resolving
    with pytest.raises(TargetError) as raised:
        resolve_target(env={}, cwd=tmp_path)
    # Then the message tells both ways out
    assert "make dev" in str(raised.value)
    assert "--stack NAME" in str(raised.value)


def test_a_closed_port_is_not_reachable() -> None:
    # Given a port nobody listens on
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # When probed (the socket is closed again)
    # Then it is reported unreachable
    assert endpoint_reachable(f"http://127.0.0.1:{port}", timeout=0.2) is False


def test_list_and_dict_settings_in_the_environment_are_read_as_json(tmp_path: Path) -> None:
    # Given the approval channels, the Slack users and the approvers as JSON (as the stack
    # sets them for its functions)
    env = {
        "LANGORCH_ENDPOINT_URL": "http://env:1",
        "LANGORCH_APPROVAL_CHANNELS": '["slack"]',
        "LANGORCH_SLACK_USERS": '{"U1": "a@example.com"}',
        "LANGORCH_DEFAULT_APPROVERS": '["a@example.com"]',
    }

    # When the CLI resolves its target
    settings = resolve_target(env=env, cwd=tmp_path).settings

    # Then each is the list or dict its JSON says
    assert settings.approval_channels == ["slack"]
    assert settings.slack_users == {"U1": "a@example.com"}
    assert settings.default_approvers == ["a@example.com"]


def test_a_list_setting_that_is_not_json_is_a_target_error_naming_it(tmp_path: Path) -> None:
    # Given approvers written as a bare address
    env = {"LANGORCH_ENDPOINT_URL": "http://env:1", "LANGORCH_DEFAULT_APPROVERS": "a@x.com"}

    # When the CLI resolves its target
    with pytest.raises(TargetError) as caught:
        resolve_target(env=env, cwd=tmp_path)

    # Then the error names the variable and the JSON form it takes
    assert str(caught.value).startswith("invalid LANGORCH_* setting: LANGORCH_DEFAULT_APPROVERS")
    assert '["a@example.com"]' in str(caught.value)
