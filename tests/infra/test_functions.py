"""Functions: one runtime and asset everywhere, JSON logs, tracing, SnapStart on the runner."""

from __future__ import annotations

import json
from typing import Any

import pytest

from langorch.config import Settings
from tests.infra.conftest import STAGE, Synth
from tests.infra.helpers import ref_target

HANDLERS = {
    "trigger": "functions.trigger.handler.handler",
    "run-segment": "functions.run_segment.handler.handler",
    "request-approval": "functions.request_approval.handler.handler",
    "approval-callback": "functions.approval_callback.handler.handler",
}


def _functions(synth: Synth) -> dict[str, dict[str, Any]]:
    return {
        name: synth.resources[synth.logical_id(fn)]["Properties"]
        for name, fn in synth.stack.functions.all.items()
    }


def test_every_function_runs_python_312_on_arm64_with_json_logs_and_tracing(
    synth: Synth,
) -> None:
    for name, fn in _functions(synth).items():
        assert fn["Runtime"] == "python3.12", name
        assert fn["Architectures"] == ["arm64"], name
        assert fn["TracingConfig"] == {"Mode": "Active"}, name
        assert fn["LoggingConfig"]["LogFormat"] == "JSON", name
        assert fn["Handler"] == HANDLERS[name]
        assert fn["FunctionName"] == f"langorch-{STAGE}-{name}"


def test_all_functions_share_one_code_asset(synth: Synth) -> None:
    functions = _functions(synth).values()
    assert len({json.dumps(f["Code"], sort_keys=True) for f in functions}) == 1


LAYERS = {
    "trigger": ["base"],
    "run-segment": ["base", "runner"],
    "request-approval": ["base"],
    "approval-callback": ["base"],
}
"""The dependency layers each function imports from (tests/infra/test_layers.py proves each
handler's code imports with these alone)."""


def test_each_function_gets_exactly_the_layers_it_imports_from(synth: Synth) -> None:
    # Given the stack's layers by name
    layers = {synth.logical_id(v): k for k, v in synth.stack.functions.layers.items()}
    # When each function's layer list is read from the template
    got = {
        name: [layers[ref_target(ref) or ""] for ref in fn["Layers"]]
        for name, fn in _functions(synth).items()
    }
    # Then the base layer is everyone's, the runner's own layer only the runner's, in order
    # (a later layer's files would win over an earlier one's: they share none)
    assert got == LAYERS


def test_layers_are_built_for_the_functions_runtime_and_architecture(synth: Synth) -> None:
    layers = synth.of_type("AWS::Lambda::LayerVersion")
    assert len(layers) == 2
    for layer in layers.values():
        assert layer["Properties"]["CompatibleRuntimes"] == ["python3.12"]
        assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]


def test_each_function_logs_to_its_own_group_with_retention(synth: Synth) -> None:
    groups = synth.of_type("AWS::Logs::LogGroup")
    for name, fn in _functions(synth).items():
        group = groups[ref_target(fn["LoggingConfig"]["LogGroup"]) or ""]["Properties"]
        assert group["LogGroupName"] == f"/aws/lambda/langorch-{STAGE}-{name}"
        assert group["RetentionInDays"] == 30


def test_every_log_group_has_retention(synth: Synth) -> None:
    for logical_id, group in synth.of_type("AWS::Logs::LogGroup").items():
        assert group["Properties"].get("RetentionInDays"), logical_id


def test_only_the_runner_has_snapstart_and_is_invoked_through_its_alias(synth: Synth) -> None:
    functions = _functions(synth)
    assert functions["run-segment"]["SnapStart"] == {"ApplyOn": "PublishedVersions"}
    for name in ("trigger", "request-approval", "approval-callback"):
        assert "SnapStart" not in functions[name]
    alias_id = synth.logical_id(synth.stack.functions.runner_alias)
    alias = synth.resources[alias_id]["Properties"]
    assert alias["Name"] == "live"
    version = synth.resources[ref_target(alias["FunctionVersion"]) or ""]
    runner_id = synth.logical_id(synth.stack.functions.run_segment)
    assert version["Properties"]["FunctionName"] == {"Ref": runner_id}
    machine = next(iter(synth.of_type("AWS::StepFunctions::StateMachine").values()))
    assert machine["Properties"]["DefinitionSubstitutions"]["RunSegmentFunctionArn"] == {
        "Ref": alias_id
    }


def test_environment_names_are_settings_fields(synth: Synth) -> None:
    # Every LANGORCH_* variable must be read by Settings: a typo would be silently ignored.
    fields = set(Settings.model_fields)
    for name, fn in _functions(synth).items():
        for key in fn["Environment"]["Variables"]:
            if key.startswith("LANGORCH_"):
                assert key.removeprefix("LANGORCH_").lower() in fields, (name, key)


def test_environment_points_at_the_stacks_resources(synth: Synth) -> None:
    stack = synth.stack
    expected = {
        "LANGORCH_DEFINITIONS_TABLE": {"Ref": synth.logical_id(stack.tables.definitions)},
        "LANGORCH_RUNS_TABLE": {"Ref": synth.logical_id(stack.tables.runs)},
        "LANGORCH_CHECKPOINTS_TABLE": {"Ref": synth.logical_id(stack.tables.checkpoints)},
        "LANGORCH_MEMORY_TABLE": {"Ref": synth.logical_id(stack.tables.memory)},
        "LANGORCH_BUCKET": {"Ref": synth.logical_id(stack.files.bucket)},
        "LANGORCH_CHECKPOINT_PREFIX": "checkpoints",
        "LANGORCH_LINK_SIGNING_SECRET": {"Ref": synth.logical_id(stack.secrets.link_signing_key)},
        "LANGORCH_LLM_API_KEY_SECRET": {"Ref": synth.logical_id(stack.secrets.llm_api_key)},
        "LANGORCH_SES_CONFIGURATION_SET": {"Ref": synth.logical_id(stack.email.configuration_set)},
        "LANGORCH_SENDER_EMAIL": "approvals@example.org",
        "LANGORCH_DEFAULT_APPROVERS": '["alice@example.org", "bob@example.org"]',
        "LANGORCH_DEFAULT_LLM_PROVIDER": "bedrock",
        "LANGORCH_WEBHOOK_SECRET_PREFIX": f"langorch-{STAGE}/webhooks/",
        "LANGORCH_SCHEDULER_GROUP": {"Ref": synth.logical_id(stack.triggers.schedule_group)},
        "LANGORCH_LOG_GROUP_PREFIX": f"/aws/lambda/langorch-{STAGE}-",
    }
    for name, fn in _functions(synth).items():
        env = fn["Environment"]["Variables"]
        for key, value in expected.items():
            assert env[key] == value, (name, key)
        assert env["LANGORCH_PUBLIC_BASE_URL"] == {
            "Fn::GetAtt": [synth.logical_id(stack.api.api), "ApiEndpoint"]
        }


@pytest.mark.parametrize(
    ("name", "has_arn"),
    [
        ("trigger", True),
        ("approval-callback", True),
        ("run-segment", False),
        ("request-approval", False),
    ],
)
def test_only_starters_and_resumers_know_the_state_machine(
    synth: Synth, name: str, has_arn: bool
) -> None:
    env = _functions(synth)[name]["Environment"]["Variables"]
    machine_id = synth.logical_id(synth.stack.workflow.state_machine)
    if has_arn:
        assert env["LANGORCH_STATE_MACHINE_ARN"] == {"Ref": machine_id}
    else:
        assert "LANGORCH_STATE_MACHINE_ARN" not in env


def test_environment_holds_no_secret_values(synth: Synth) -> None:
    secret_ids = set(synth.of_type("AWS::SecretsManager::Secret"))
    for name, fn in _functions(synth).items():
        env = fn["Environment"]["Variables"]
        assert "resolve:secretsmanager" not in json.dumps(env), name
        for key in ("LANGORCH_LINK_SIGNING_SECRET", "LANGORCH_LLM_API_KEY_SECRET"):
            # A reference to the secret (its ARN), never its value.
            assert ref_target(env[key]) in secret_ids, (name, key)
        assert "LANGORCH_OPENAI_API_KEY" not in env, name
