"""Settings() reads LANGORCH_* from the environment: names in any case, lists and dicts as JSON."""

from __future__ import annotations

import pytest

from langorch.config import Settings, SettingsError


def test_settings_read_their_variables_in_any_case_the_constructor_winning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a region and a bucket in the environment, one of them in lower case
    monkeypatch.setenv("LANGORCH_REGION", "eu-west-1")
    monkeypatch.setenv("langorch_bucket", "drops")

    # When settings are built with the region given
    settings = Settings(region="ap-south-1")

    # Then the constructor's region wins, the bucket comes from the environment
    assert (settings.region, settings.bucket) == ("ap-south-1", "drops")


def test_list_and_dict_settings_are_read_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the approvers, the channels and the Slack users as JSON (as the stack sets them)
    monkeypatch.setenv("LANGORCH_DEFAULT_APPROVERS", '["a@example.com", "b@example.com"]')
    monkeypatch.setenv("LANGORCH_APPROVAL_CHANNELS", '["slack"]')
    monkeypatch.setenv("LANGORCH_SLACK_USERS", '{"U1": "a@example.com"}')
    monkeypatch.setenv("LANGORCH_TOOL_SERVER_URLS", "null")

    # When settings are read
    settings = Settings()

    # Then each is the list or dict the JSON says
    assert settings.default_approvers == ["a@example.com", "b@example.com"]
    assert settings.approval_channels == ["slack"]
    assert settings.slack_users == {"U1": "a@example.com"}
    assert settings.tool_server_urls is None


def test_a_list_setting_that_is_not_json_names_its_variable_and_the_form_it_takes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given approvers written as a bare address
    monkeypatch.setenv("LANGORCH_DEFAULT_APPROVERS", "a@example.com")

    # When settings are read
    with pytest.raises(SettingsError) as caught:
        Settings()

    # Then the error names the variable and shows the JSON it takes
    message = str(caught.value)
    assert message.startswith("LANGORCH_DEFAULT_APPROVERS is not JSON")
    assert '["a@example.com"]' in message
