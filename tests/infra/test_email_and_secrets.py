"""SES without click tracking; secrets generated or empty, never in the template."""

from __future__ import annotations

from tests.infra.conftest import Synth


def test_sender_identity_uses_a_configuration_set_without_tracking_events(
    synth: Synth,
) -> None:
    (identity,) = synth.of_type("AWS::SES::EmailIdentity").values()
    assert identity["Properties"]["EmailIdentity"] == "approvals@example.org"
    config_set_id = synth.logical_id(synth.stack.email.configuration_set)
    assert identity["Properties"]["ConfigurationSetAttributes"] == {
        "ConfigurationSetName": {"Ref": config_set_id}
    }
    # Open/click tracking needs an event destination for those events; the one destination
    # takes bounces and complaints only, so SES never rewrites approval links.
    (destination,) = synth.of_type("AWS::SES::ConfigurationSetEventDestination").values()
    events = destination["Properties"]["EventDestination"]["MatchingEventTypes"]
    assert sorted(events) == ["bounce", "complaint"]
    config_set = synth.resources[config_set_id]["Properties"]
    assert "TrackingOptions" not in config_set
    assert config_set["DeliveryOptions"] == {"TlsPolicy": "REQUIRE"}


def test_link_signing_key_is_generated_by_secrets_manager_in_the_loader_shape(
    synth: Synth,
) -> None:
    # Given the link-signing key secret
    key = synth.resources[synth.logical_id(synth.stack.secrets.link_signing_key)]["Properties"]
    # Then Secrets Manager generates it on create, {"current": "k1", "k1": <64 letters and
    # digits: valid base64 for 48 bytes>}: the template holds no value, and CloudFormation
    # never writes the key again (load_signing_keys reads this flat shape). Pinned: changing
    # this generator makes CloudFormation generate a new key over the rotated ones.
    assert "SecretString" not in key
    assert key["GenerateSecretString"] == {
        "ExcludePunctuation": True,
        "GenerateStringKey": "k1",
        "IncludeSpace": False,
        "PasswordLength": 64,
        "SecretStringTemplate": '{"current": "k1"}',
    }
    # ...and no seed secret is left beside it
    descriptions = [
        r["Properties"].get("Description", "")
        for r in synth.of_type("AWS::SecretsManager::Secret").values()
    ]
    assert not [d for d in descriptions if "generated material" in d]


def test_llm_key_secret_is_generated_empty_and_holds_no_template_value(synth: Synth) -> None:
    # Given the LLM key secret
    llm = synth.resources[synth.logical_id(synth.stack.secrets.llm_api_key)]["Properties"]
    # Then the template holds no value CloudFormation would write again on a change: the
    # secret is generated once, on create, with an empty api_key the operator replaces.
    # Pinned: changing this generator makes CloudFormation regenerate the value, over the
    # operator's key.
    assert "SecretString" not in llm
    assert llm["GenerateSecretString"] == {
        "ExcludePunctuation": True,
        "GenerateStringKey": "placeholder",
        "PasswordLength": 16,
        "SecretStringTemplate": '{"api_key": ""}',
    }


def test_bounces_and_complaints_reach_the_trigger_function_through_sns(synth: Synth) -> None:
    # Given the configuration set's event destination
    (destination,) = synth.of_type("AWS::SES::ConfigurationSetEventDestination").values()
    topic = synth.logical_id(synth.stack.email.events)
    target = destination["Properties"]["EventDestination"]["SnsDestination"]["TopicARN"]
    # Then it publishes to the email events topic, which the trigger function subscribes to
    assert target == {"Ref": topic}
    trigger = synth.logical_id(synth.stack.functions.trigger)
    assert any(
        s["Properties"]["TopicArn"] == {"Ref": topic}
        and s["Properties"]["Protocol"] == "lambda"
        and s["Properties"]["Endpoint"] == {"Fn::GetAtt": [trigger, "Arn"]}
        for s in synth.of_type("AWS::SNS::Subscription").values()
    )
