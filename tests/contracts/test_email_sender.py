"""Contract of the email sender (``EmailSender``): SES on moto, the local outbox, the fake."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from langorch.adapters.outbox import OutboxSender
from langorch.adapters.ses import SesSender
from langorch.web.emails import OutgoingEmail
from tests.fakes import RecordingEmailSender

Sender = SesSender | OutboxSender | RecordingEmailSender


@pytest.fixture(params=["fake", "ses", "outbox"])
def sender(request: pytest.FixtureRequest, tmp_path: Path) -> Sender:
    if request.param == "fake":
        return RecordingEmailSender()
    if request.param == "outbox":
        return OutboxSender(tmp_path / "outbox", stdout=io.StringIO())
    import boto3

    request.getfixturevalue("aws")
    client = boto3.client("ses", region_name="us-east-1")
    client.verify_email_identity(EmailAddress="langorch@example.com")
    return SesSender(client, sender="langorch@example.com", configuration_set=None)


def _email(n: int) -> OutgoingEmail:
    return OutgoingEmail(
        to=f"approver{n}@example.com",
        subject=f"Approve run {n}",
        text="Open the link",
        html="<p>Open the link</p>",
        approval_id=f"run-{n}.step",
        link=f"https://example.com/approvals/run-{n}.step",
    )


def test_each_sent_email_gets_its_own_message_id(sender: Sender) -> None:
    first = sender.send(_email(1))
    second = sender.send(_email(2))
    assert first and second and first != second


def test_the_outbox_keeps_one_copy_of_a_message_sent_again(tmp_path: Path) -> None:
    # Given the local outbox, and a message sent once
    outbox = OutboxSender(tmp_path / "outbox", stdout=io.StringIO())
    first = outbox.send(_email(1))
    # When the same message is sent again (a request retried after a crash), and another one
    again = outbox.send(_email(1))
    other = outbox.send(_email(2))
    # Then the outbox holds the first copy once, and the other message beside it
    assert again == first and other != first
    assert sorted(p.stem for p in (tmp_path / "outbox").glob("*.json")) == sorted([first, other])
