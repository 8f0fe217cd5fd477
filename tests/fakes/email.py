"""An email sender that keeps what it sent."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from langorch.web.emails import OutgoingEmail


class RecordingEmailSender:
    """Sends nothing; ``sent`` lists every email in order, each with its message id."""

    def __init__(self) -> None:
        self.sent: list[OutgoingEmail] = []
        self.message_ids: list[str] = []

    def send(self, email: OutgoingEmail) -> str:
        """Record the email; returns a new message id."""
        self.sent.append(email)
        message_id = f"message-{len(self.sent)}"
        self.message_ids.append(message_id)
        return message_id
