"""Approval requests in chat channels (Slack; Teams next): post, decide there, show the outcome.

- :func:`post_to_channels` posts a new request to its chat channels (``request_approval`` calls
  it after the emails) and remembers each message in the audit trail, so a retried request posts
  only what is missing.
- :func:`decide_in_chat` answers a button pressed in a chat. The person is who the chat says
  they are (a verified request names its user; the user's address comes from the chat's profile
  or an explicit mapping), never what the message carries: the message holds no signed link and
  no task token. A person no approval names is told so and only an audit line is written.
  Otherwise the decision goes through the approval page's own decide-once use-case, exactly as
  the console's does (:mod:`langorch.console.actions`): a link signed server-side for that
  approver, the page view, then the form. Separation of duties, delegation, quorums and the run
  checks hold as on the emailed page, and of a decision from email, console and chat exactly
  one is recorded.
- :func:`post_in_threads` tells each message's thread what happened since (a vote, a
  reminder, an escalation, a delegation); :func:`show_progress` shows a quorum's progress on
  the message.
- :func:`show_decided` edits every message posted for a decided approval to say who decided and
  when (the emailed page says "already decided" by itself).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from langorch.app.approvals.driver import audit
from langorch.app.approvals.ports import (
    LinkSettings,
    RequestPorts,
)
from langorch.app.ports import ApprovalNotifier, ChatThreads
from langorch.domain.approvals.channels import (
    CHAT_CHANNELS,
    PostedMessage,
    channels_of,
    posted_messages,
)
from langorch.domain.approvals.record import Approval
from langorch.domain.errors import LangorchError

logger = logging.getLogger(__name__)

DECISIONS = ("approved", "rejected")


def chosen_channels(approval: Approval, settings: LinkSettings) -> list[str]:
    """The channels ``approval`` goes to (its own, else the stack's default)."""
    return channels_of(approval.channels, settings.approval_channels)


def details_url(approval: Approval, settings: LinkSettings) -> str | None:
    """Where a message's Details button leads: the approval in the console, when one is
    configured. Without a console there is no Details button: the approval page itself opens
    only with the approver's signed link (a bearer link, which a message shared in a channel
    must never carry), so a plain link to it would land on "this link is not valid"."""
    if not settings.console_url:
        return None
    return f"{settings.console_url.rstrip('/')}/approvals/{approval.approval_id}"


def post_to_channels(approval: Approval, ports: RequestPorts) -> list[PostedMessage]:
    """Post a pending request to each of its chat channels, once per recipient.

    Raises:
        UnknownChannelError: the request names a channel langorch does not know.
        ChannelNotConfiguredError: it names a chat channel this stack has no notifier for.
    """
    posted: list[PostedMessage] = []
    chats = [c for c in chosen_channels(approval, ports.settings) if c in CHAT_CHANNELS]
    if not chats:
        return posted
    trail = ports.approvals.audit(approval.approval_id)
    for channel in chats:
        notifier = _notifier(ports.notifiers, channel, approval)
        done = [m.to for m in posted_messages(trail, channel)]
        sent = notifier.post_request(approval, details_url(approval, ports.settings), skip=done)
        for message in sent:
            audit(
                ports.approvals,
                approval.approval_id,
                "posted",
                message.outcome,
                at=ports.clock(),
                actor=message.to,
            )
        posted += sent
    return posted


def show_decided(approval: Approval, ports: RequestPorts) -> int:
    """Edit every chat message posted for ``approval`` to show its outcome.

    Best effort: the decision is recorded and delivered already; a message that cannot be
    edited is logged (ids only) and left as it was.

    Returns:
        How many messages were edited.
    """
    edited = 0
    for message in posted_messages(ports.approvals.audit(approval.approval_id)):
        notifier = ports.notifiers.get(message.channel)
        if notifier is None:
            continue
        try:
            notifier.show_decided(approval, message, details_url(approval, ports.settings))
        except LangorchError as exc:
            logger.warning(
                "approval message not updated",
                extra={
                    "approval_id": approval.approval_id,
                    "channel": message.channel,
                    "error": type(exc).__name__,
                },
            )
            continue
        edited += 1
    return edited


def post_in_threads(approval: Approval, text: str, ports: RequestPorts) -> int:
    """Post ``text`` in the thread of every chat message posted for ``approval``.

    Best effort, like :func:`show_decided`: what it tells happened already (and was emailed).

    Returns:
        How many threads it was posted in.
    """
    return _each_thread(approval, ports, lambda chat, message: chat.reply(message, text))


def show_progress(approval: Approval, progress: str, ports: RequestPorts) -> int:
    """Edit every chat message posted for a pending ``approval`` to show a quorum's
    ``progress`` (``1 of 2 approvals``). Best effort.

    Returns:
        How many messages were edited.
    """
    url = details_url(approval, ports.settings)
    return _each_thread(
        approval, ports, lambda chat, message: chat.show_progress(approval, message, url, progress)
    )


def _each_thread(
    approval: Approval,
    ports: RequestPorts,
    act: Callable[[ChatThreads, PostedMessage], None],
) -> int:
    done = 0
    for message in posted_messages(ports.approvals.audit(approval.approval_id)):
        chat = ports.notifiers.get(message.channel)
        if not isinstance(chat, ChatThreads):
            continue
        try:
            act(chat, message)
        except LangorchError as exc:
            logger.warning(
                "approval thread not updated",
                extra={
                    "approval_id": approval.approval_id,
                    "channel": message.channel,
                    "error": type(exc).__name__,
                },
            )
            continue
        done += 1
    return done


def _notifier(
    notifiers: Mapping[str, ApprovalNotifier], channel: str, approval: Approval
) -> ApprovalNotifier:
    found = notifiers.get(channel)
    if found is None:
        raise ChannelNotConfiguredError(
            f"approval step {approval.step_id!r}: channels names {channel!r}, but this stack "
            f"has no {channel} app configured (see the README, 'Approvals in {channel.title()}'),"
            " or remove it from the step's channels"
        )
    return found


class ChannelNotConfiguredError(LangorchError):
    """An approval names a chat channel the stack has no app for."""
