"""Tools over MCP in the deployed stack: the runner calls only the configured servers and reads
exactly the configured header secrets (``mcp_servers``, ``mcp_secrets`` in cdk.json)."""

from __future__ import annotations

import json

import pytest

from infra.config import ConfigError, DeployConfig
from tests.infra.conftest import Synth
from tests.infra.helpers import function_role, render, role_statements


def test_the_runner_reads_exactly_the_configured_tool_secrets(synth: Synth) -> None:
    runner = synth.stack.functions.run_segment
    role = function_role(synth.resources, synth.logical_id(runner))
    resources = [
        render(resource)
        for statement in role_statements(synth.resources, role)
        if "secretsmanager:GetSecretValue" in json.dumps(statement["Action"])
        for resource in (
            statement["Resource"]
            if isinstance(statement["Resource"], list)
            else [statement["Resource"]]
        )
    ]
    tool_secrets = [r for r in resources if "/tools/" in r]
    assert len(tool_secrets) == 1
    assert tool_secrets[0].endswith(":secret:langorch-test/tools/orders-??????")
    # and no other function may read it
    for name, function in synth.stack.functions.all.items():
        if function is runner:
            continue
        other = function_role(synth.resources, synth.logical_id(function))
        assert "/tools/" not in json.dumps(role_statements(synth.resources, other)), name


def test_the_runner_is_told_the_servers_it_may_call(synth: Synth) -> None:
    function = synth.resources[synth.logical_id(synth.stack.functions.run_segment)]
    env = function["Properties"]["Environment"]["Variables"]
    assert json.loads(env["LANGORCH_TOOL_SERVER_URLS"]) == ["https://tools.example.org/mcp"]


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("mcp_servers", "ftp://tools.example.org"),
        ("mcp_servers", "https://user:pw@tools.example.org/mcp"),
        ("mcp_secrets", "bad name!"),
    ],
)
def test_a_bad_mcp_setting_is_refused_by_name(setting: str, value: str) -> None:
    with pytest.raises(ConfigError, match=setting):
        DeployConfig.parse({"sender_email": "a@example.org", setting: value})
