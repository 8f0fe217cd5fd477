"""SES refusals name their real cause and the fix (sandbox recipient, unverified sender, IAM)."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from langorch.adapters.ses import SesSender
from langorch.domain.approvals.record import EmailNotSentError
from langorch.web.emails import OutgoingEmail

SENDER = "approvals@example.org"
EMAIL = OutgoingEmail(
    to="alice@example.net", subject="s", approval_id="apr-1", text="t", html="h", link="l"
)


def _refused(code: str, message: str) -> str:
    client = boto3.client(
        "ses", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    sender = SesSender(client, sender=SENDER, configuration_set="langorch-prod-approvals")
    with Stubber(client) as stub:
        stub.add_client_error("send_email", service_error_code=code, service_message=message)
        with pytest.raises(EmailNotSentError) as refused:
            sender.send(EMAIL)
    return str(refused.value)


def _unverified(identity: str) -> str:
    """What the sender raises when SES (in the sandbox or not) has not verified ``identity``."""
    return _refused(
        "MessageRejected",
        "Email address is not verified. The following identities failed the check in region "
        f"EU-WEST-1: {identity}",
    )


def _denied_on_identity(identity: str) -> str:
    """What the sender raises when the role may not send on ``identity``'s SES resource."""
    return _refused(
        "AccessDenied",
        "User `arn:aws:sts::1:assumed-role/r/f' is not authorized to perform `ses:SendEmail' on "
        f"resource `arn:aws:ses:eu-west-1:1:identity/{identity}'",
    )


def test_a_sandbox_recipient_is_named_as_the_cause_not_the_sender() -> None:
    text = _unverified("alice@example.net")
    assert "sandbox" in text and "production access" in text
    assert "sender" not in text.split(";", 1)[1]


def test_an_unverified_sender_is_named_with_how_to_verify_it() -> None:
    text = _unverified(SENDER)
    assert f"the sender {SENDER} is not a verified identity" in text


def test_a_role_refused_on_the_recipients_identity_points_at_the_sandbox_grant() -> None:
    text = _denied_on_identity("alice@example.net")
    assert "recipient" in text and "identity/*" in text


def test_a_role_refused_on_the_sender_points_at_the_stack_grant() -> None:
    text = _denied_on_identity(SENDER)
    assert f"may not send as {SENDER}" in text and "langorch-prod-approvals" in text


def test_an_approval_email_is_tagged_with_its_approval_for_bounce_events() -> None:
    # Given the sender with the stack's configuration set
    client = boto3.client(
        "ses", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    sender = SesSender(client, sender=SENDER, configuration_set="langorch-prod-approvals")
    with Stubber(client) as stub:
        # Then SES is asked to send through the set, tagged with the approval (what its bounce
        # and complaint events carry back to the trigger function)
        stub.add_response(
            "send_email",
            {"MessageId": "m-1"},
            {
                "Source": SENDER,
                "Destination": {"ToAddresses": ["alice@example.net"]},
                "Message": {
                    "Subject": {"Data": "s", "Charset": "UTF-8"},
                    "Body": {
                        "Text": {"Data": "t", "Charset": "UTF-8"},
                        "Html": {"Data": "h", "Charset": "UTF-8"},
                    },
                },
                "ConfigurationSetName": "langorch-prod-approvals",
                "Tags": [{"Name": "approval_id", "Value": "apr-1"}],
            },
        )
        assert sender.send(EMAIL) == "m-1"
