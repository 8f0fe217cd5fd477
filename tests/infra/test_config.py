"""Deployment configuration: parsed from cdk.json context and -c overrides, validated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from infra.config import ConfigError, DeployConfig

SENDER = {"sender_email": "approvals@example.org"}


def _context(values: dict[str, Any]) -> Any:
    return values.get


def test_cli_overrides_win_over_cdk_json_and_strings_are_coerced() -> None:
    context = {
        "langorch": {
            "stage": "dev",
            "default_approvers": ["a@example.org"],
            "retain_data": True,
            **SENDER,
        },
        "stage": "prod",
        "default_approvers": "b@example.org, c@example.org",
        "retain_data": "false",
        "log_retention_days": "90",
    }
    config = DeployConfig.from_context(_context(context))
    assert config.stage == "prod"
    assert config.stack_name == "langorch-prod"
    assert config.default_approvers == ("b@example.org", "c@example.org")
    assert config.retain_data is False
    assert config.log_retention_days == 90


def test_bedrock_model_is_granted_only_for_the_bedrock_provider() -> None:
    # The default is a current model (Claude 3 Haiku reached end of life on 2026-09-10), served
    # through the global cross-region inference profile
    assert DeployConfig.parse({"llm_provider": "bedrock", **SENDER}).models_to_grant == (
        "global.anthropic.claude-haiku-4-5-20251001-v1:0",
    )
    assert (
        DeployConfig.parse(
            {"llm_provider": "openai", "llm_model": "gpt-4o-mini", **SENDER}
        ).models_to_grant
        == ()
    )


@pytest.mark.parametrize(
    ("values", "extras"),
    [
        ({}, ("bedrock",)),
        ({"llm_provider": "openai", "llm_model": "gpt-4o-mini"}, ("openai",)),
        (
            {"llm_provider": "openai", "bedrock_models": "amazon.nova-lite-v1:0"},
            ("bedrock", "openai"),
        ),
        ({"llm_provider": "offline", "llm_model": ""}, ()),
        ({"llm_providers": "bedrock,anthropic", "otel": "otlp"}, ("bedrock", "anthropic", "otel")),
    ],
)
def test_the_runner_layer_carries_the_configured_providers_sdks_and_otel(
    values: dict[str, Any], extras: tuple[str, ...]
) -> None:
    # The default provider's SDK (and Bedrock's when models are granted) unless llm_providers
    # says which: each SDK costs the runner's bundle (P4)
    assert DeployConfig.parse({**values, **SENDER}).runner_extras == extras


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"stage": "Prod"}, "stage"),
        ({"sender_email": "nobody"}, "sender_email"),
        ({"default_approvers": "x"}, "default_approvers"),
        ({"llm_provider": "llama"}, "llm_provider"),
        ({"llm_providers": "bedrock,llama"}, "llm_providers: 'llama' is not a provider"),
        ({"llm_providers": "offline"}, "llm_providers: 'offline' is not a provider"),
        ({"llm_providers": "openai"}, "leaves out bedrock, which llm_provider or bedrock_models"),
        ({"public_base_url": "http://example.org"}, "https://"),
        ({"domain_name": "runs.example.org"}, "certificate_arn"),
        ({"retain_data": "maybe"}, "retain_data"),
        ({"log_retention_days": 31}, "log_retention_days"),
        ({"ses_identity": "maybe"}, "ses_identity"),
        ({"ses_domain": "example.com"}, "is not at ses_domain"),
        ({"reconcile_minutes": 2000}, "reconcile_minutes 2000: between 1 and 1440"),
        ({"approval_channels": "email,pager"}, "approval_channels: .*'pager' unknown; choose from"),
        ({"slack_channel": "#approvals"}, "slack_channel '#approvals' is not a Slack channel id"),
        ({"kms": "alias/mine"}, "kms 'alias/mine': 'managed' .* or a key ARN"),
        ({"http_allowed_domains": "https://x.org"}, "http_allowed_domains: 'https://x.org'"),
        ({"otel": "xray"}, "otel 'xray': 'off' or 'otlp'"),
        (
            {"model_limits": {"openai:*": {"concurrency": 0}}},
            r"model_limits\['openai:\*'\]\.concurrency: must be a whole number from 1 to 1000",
        ),
        ({"model_limits": "{openai"}, "model_limits: not JSON"),
        (
            {"model_limits": {f"openai:m{i}": {"concurrency": 1} for i in range(100)}},
            "model_limits: 3,390 characters as JSON, past 2,048",
        ),
        ({"runs_indexes": "all"}, "runs_indexes 'all': 'lean' .* or 'full'"),
        ({"otel_endpoint": "http://c:4318/v1/traces"}, "otel_endpoint and otel_layer_arn need"),
    ],
)
def test_invalid_settings_are_refused_with_the_setting_named(
    values: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        DeployConfig.parse({**SENDER, **values})


def test_the_shipped_placeholder_sender_is_refused_with_how_to_set_one() -> None:
    # Given cdk.json as shipped (its sender_email is the placeholder SES cannot verify)
    with pytest.raises(ConfigError) as refused:
        DeployConfig.from_context(_context({"langorch": {"sender_email": "langorch@example.com"}}))
    # Then synthesis stops, naming the setting and how to set it
    assert "sender_email" in str(refused.value)
    assert "-c sender_email=" in str(refused.value)
    assert DeployConfig().sender_email == "langorch@example.com"  # nothing ships a real one


def test_approval_channels_are_read_from_a_comma_list() -> None:
    # Given -c approval_channels=email,slack on the command line, When parsed
    values = {"approval_channels": "email,slack", "sender_email": "approvals@example.org"}
    config = DeployConfig.parse(values)
    # Then both channels are kept, in order
    assert config.approval_channels == ("email", "slack")


def test_unknown_settings_are_refused() -> None:
    with pytest.raises(ConfigError, match="unknown langorch setting"):
        DeployConfig.from_context(_context({"langorch": {"stgae": "dev"}}))


def test_make_synth_takes_the_same_context_arguments_as_cdk() -> None:
    from infra.app import context_from_args

    assert context_from_args(["-c", "stage=prod", "--context", "sender_email=a@b.org"]) == {
        "stage": "prod",
        "sender_email": "a@b.org",
    }
    with pytest.raises(SystemExit, match="-c key=value"):
        context_from_args(["stage=prod"])


def test_synth_with_the_placeholder_sender_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the repository's cdk.json (its sender is the placeholder)
    from infra.app import main

    # When the app is synthesized as `make synth` does (`python -m infra.app` runs main(); in
    # this process, which has aws-cdk-lib loaded already, not in a new one that loads it again)
    monkeypatch.setattr("sys.argv", ["infra.app"])
    with pytest.raises(SystemExit) as exited:
        main()
    # Then it stops with exit 2 and one line naming the setting and the fix, no traceback
    assert exited.value.code == 2
    stderr = capsys.readouterr().err
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "sender_email" in errors[0] and "-c sender_email=" in errors[0]
    assert "b'!!" not in stderr


REGIONAL = {**SENDER, "llm_residency": "regional", "region": "eu-west-1"}


def test_regional_residency_refuses_a_global_profile_and_names_the_geography_one() -> None:
    # Given llm_residency regional in eu-west-1 and the shipped global default model
    # Then it is refused, with the eu. profile to use instead
    with pytest.raises(ConfigError, match=r"global inference profile.*'eu\.anthropic\.claude"):
        DeployConfig.parse(
            {**REGIONAL, "llm_model": "global.anthropic.claude-haiku-4-5-20251001-v1:0"}
        )


@pytest.mark.parametrize(
    ("regions", "message"),
    [
        ("", "list the regions it routes to in bedrock_regions"),
        ("eu-west-1,us-east-1", "bedrock_regions us-east-1 are outside the eu geography"),
    ],
)
def test_regional_residency_checks_a_geography_profile_against_bedrock_regions(
    regions: str, message: str
) -> None:
    model = "eu.anthropic.claude-haiku-4-5-20251001-v1:0"
    with pytest.raises(ConfigError, match=message):
        DeployConfig.parse({**REGIONAL, "llm_model": model, "bedrock_regions": regions})


def test_regional_residency_accepts_in_geography_profiles_and_in_region_models() -> None:
    geography = DeployConfig.parse(
        {
            **REGIONAL,
            "llm_model": "eu.anthropic.claude-haiku-4-5-20251001-v1:0",
            "bedrock_regions": "eu-west-1,eu-west-3,eu-central-1",
        }
    )
    assert geography.llm_residency == "regional"
    in_region = DeployConfig.parse({**REGIONAL, "llm_model": "amazon.nova-lite-v1:0"})
    assert in_region.models_to_grant == ("amazon.nova-lite-v1:0",)


def test_a_region_without_ses_is_refused_with_the_list_and_the_alternative() -> None:
    # Given a region SES does not serve, with email on (the default)
    # Then synthesis is refused, naming the other regions and how to deploy without email
    with pytest.raises(ConfigError) as refused:
        DeployConfig.parse({**SENDER, "region": "eu-south-2"})
    message = str(refused.value)
    assert "region eu-south-2 has no SES" in message
    assert "mx-central-1" in message and "-c email=off -c approval_channels=console" in message
    # ...and accepted with email off and approvals in the console
    config = DeployConfig.parse(
        {**SENDER, "region": "eu-south-2", "email": "off", "approval_channels": "console"}
    )
    assert config.email is False


def test_email_off_refuses_the_email_approval_channel() -> None:
    with pytest.raises(ConfigError, match="approval_channels names email but email is off"):
        DeployConfig.parse({**SENDER, "email": "off"})


def test_the_regions_without_ses_are_the_ones_cloudformation_lacks_ses_in() -> None:
    # Given cfn-lint's per-region resource lists (commercial and China partitions)
    from pathlib import Path

    import cfnlint

    from infra.config import NO_SES_REGIONS

    providers = Path(cfnlint.__file__).parent / "data" / "schemas" / "providers"
    lacking = {
        f.stem
        for f in providers.glob("*-*-[0-9].json")
        if "-iso" not in f.stem
        and "eusc-" not in f.stem
        and '"AWS::SES::ConfigurationSet"' not in f.read_text()
    }
    # Then the list the stack refuses is exactly those
    assert set(NO_SES_REGIONS) == lacking


def test_model_limits_are_read_from_json_on_the_command_line() -> None:
    # Given -c model_limits='{"openai": {"concurrency": 8}}', When parsed
    values = {"model_limits": '{"openai": {"concurrency": 8}}', **SENDER}
    # Then the object is kept as cdk.json would give it
    assert DeployConfig.parse(values).model_limits == {"openai": {"concurrency": 8}}


def test_a_cdk_nag_finding_is_told_as_its_rule_and_construct(tmp_path: Path) -> None:
    # Given the validation report a synth that cdk-nag refused leaves behind
    from infra.app import _violations

    report = tmp_path / "validation-report.json"
    rule = "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:x:execution:y-runs:*]"
    report.write_text(
        json.dumps(
            {
                "pluginReports": [
                    {
                        "pluginName": "AwsSolutions",
                        "violations": [
                            {
                                "ruleName": rule,
                                "violatingConstructs": [
                                    {"constructPath": "s/Functions/RunSegmentRole/Policy"}
                                ],
                            }
                        ],
                    }
                ]
            }
        )
    )
    # Then each finding is one line naming the rule and where it broke, not jsii's traceback
    assert _violations(report) == [f"{rule} on s/Functions/RunSegmentRole/Policy"]
