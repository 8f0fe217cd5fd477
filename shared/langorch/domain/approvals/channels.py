"""Where an approval request reaches people: its channels, and the messages posted there.

An approval step names its channels (``channels: [email, slack]``); a step that names none takes
the stack's default (``Settings.approval_channels``). The decision is one, whichever channel it
comes from (the decide-once write of the approvals store); a chat message posted for the
request is edited afterwards to show who decided and when, and the emailed link's page reads
"already decided".

A posted message is remembered in the approval's append-only audit trail (action ``posted``,
outcome ``"<channel> <conversation> <message id>"``, actor the approver it went to, or
``None`` for a shared channel): every approvals store keeps that trail already, and a retried
request finds there whom it has posted to.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

if TYPE_CHECKING:
    from langorch.domain.approvals.audit import AuditEntry


Channel = Literal["email", "slack", "teams", "console"]
"""Where an approval request can go. ``console`` is the operator console's approvals list
(always readable there; naming it says so), ``teams`` has no adapter yet."""
CHANNELS: tuple[str, ...] = get_args(Channel)
CHAT_CHANNELS = frozenset({"slack", "teams"})
"""Channels whose messages are posted by a notifier (and edited once decided)."""
DEFAULT_CHANNELS: tuple[Channel, ...] = ("email", "console")


class UnknownChannelError(ValueError):
    """A channel name langorch does not know."""


def channels_of(named: Sequence[str], default: Sequence[str]) -> list[str]:
    """The channels a request goes to: those it names, else the stack's ``default``.

    Raises:
        UnknownChannelError: a name is none of :data:`CHANNELS` (says which, and the choices).
    """
    chosen = list(dict.fromkeys(named or default))
    unknown = [c for c in chosen if c not in CHANNELS]
    if unknown:
        raise UnknownChannelError(
            f"approval channels: {', '.join(map(repr, unknown))} unknown; "
            f"choose from {', '.join(CHANNELS)}"
        )
    return chosen


@dataclass(frozen=True)
class PostedMessage:
    """One chat message posted for an approval request (what editing it later needs)."""

    channel: str
    """The langorch channel: ``slack``."""
    conversation: str
    """Where it is: a Slack channel or DM id (``C…``, ``D…``)."""
    message_id: str
    """Its id in that conversation (Slack's ``ts``)."""
    to: str | None = None
    """The approver it was sent to (``None``: a shared channel)."""

    @property
    def outcome(self) -> str:
        """How it is written in the audit line's ``outcome``."""
        return f"{self.channel} {self.conversation} {self.message_id}"


def posted_messages(trail: Iterable[AuditEntry], channel: str | None = None) -> list[PostedMessage]:
    """The messages posted for an approval, read from its audit trail (of one ``channel``)."""
    found: list[PostedMessage] = []
    for entry in trail:
        parts = entry.outcome.split(" ")
        if entry.action != "posted" or len(parts) != 3:
            continue
        if channel is None or parts[0] == channel:
            found.append(PostedMessage(parts[0], parts[1], parts[2], entry.actor))
    return found
