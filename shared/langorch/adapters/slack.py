"""Slack through the official ``slack_sdk``: approval requests posted and edited, people named,
and Slack's request signature checked.

:class:`SlackNotifier` is the ``slack`` :class:`~langorch.app.ports.ChatNotifier`: it posts the
request in the configured channel or as a DM to each approver (``users.lookupByEmail``), edits
it once decided (``chat.update``), answers one person beside it (``chat.postEphemeral``) and
resolves a Slack user to an address (an explicit mapping wins; else ``users.info``'s profile
email, cached per process). :class:`SlackRequestVerifier` checks an interaction's signature and
timestamp window with ``slack_sdk.signature.SignatureVerifier``.

The bot token and the signing secret are read from one Secrets Manager secret (``{"bot_token",
"signing_secret"}``) on first use, so a stack that never posts to Slack never reads it. Neither
is logged, nor is a request's signature: ``slack_sdk`` redacts the token from its own debug
lines, and its logger here is kept at WARNING anyway.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from threading import Lock
from typing import TYPE_CHECKING, Any

from slack_sdk.signature import Clock, SignatureVerifier

from langorch.domain.approvals.channels import PostedMessage
from langorch.domain.errors import LangorchError, SignatureError, StorageError
from langorch.web.slack import (
    decided_blocks,
    escape,
    form_view,
    loading_view,
    notice_view,
    outcome_text,
    request_blocks,
)

if TYPE_CHECKING:
    from slack_sdk import WebClient

    from langorch.app.ports import SecretsStore
    from langorch.domain.approvals.record import Approval

logger = logging.getLogger(__name__)

CHANNEL = "slack"
MAX_CACHED_USERS = 10_000
TIMESTAMP_HEADER = "x-slack-request-timestamp"
SIGNATURE_HEADER = "x-slack-signature"
_TRANSIENT = frozenset({"ratelimited", "internal_error", "fatal_error", "service_unavailable"})


class SlackRefusedError(LangorchError):
    """Slack's Web API refused a call for good (a missing scope, a channel the bot is not in)."""


class SlackSignatureError(SignatureError):
    """A request claiming to be Slack's whose signature or timestamp does not verify."""


class SlackNotConfiguredError(LangorchError):
    """The Slack secret lacks the value a call needs."""


def slack_credentials(secrets: SecretsStore, name: str) -> dict[str, str]:
    """The Slack app's ``bot_token`` and ``signing_secret`` from the secret ``name``."""
    value = secrets.get_json(name)
    return {k: str(v) for k, v in value.items() if k in ("bot_token", "signing_secret")}


def web_client(token: str, base_url: str | None) -> WebClient:
    """A ``WebClient`` with the bot token, at Slack (or the fake Slack of ``langorch dev``)."""
    from slack_sdk import WebClient

    quiet = logging.getLogger("langorch.adapters.slack.sdk")
    quiet.setLevel(logging.WARNING)
    if base_url is None:
        return WebClient(token=token, timeout=10, logger=quiet)
    return WebClient(token=token, base_url=base_url.rstrip("/") + "/", timeout=10, logger=quiet)


class SlackNotifier:
    """Approval requests in Slack, through a ``WebClient`` made on first use.

    Args:
        connect: makes the client (reads the bot token; called once, on the first call).
        conversation: the channel id to post in; ``None``: a DM to each approver.
        users: Slack user id -> address, winning over the profile's email.
    """

    channel = CHANNEL

    def __init__(
        self,
        connect: Callable[[], WebClient],
        *,
        conversation: str | None = None,
        users: Mapping[str, str] | None = None,
    ) -> None:
        self._connect = connect
        self._client: WebClient | None = None
        self._conversation = conversation
        self._users = dict(users or {})
        self._known: dict[str, str | None] = {}
        self._lock = Lock()

    def _web(self) -> WebClient:
        with self._lock:
            if self._client is None:
                self._client = self._connect()
            return self._client

    def _call(self, method: str, **params: Any) -> dict[str, Any]:
        from slack_sdk.errors import SlackApiError, SlackClientError

        try:
            # The SDK's own method: it picks how each is sent (JSON, form or query string).
            response = getattr(self._web(), method)(**params)
        except SlackApiError as exc:
            error = str(exc.response.get("error", "unknown"))
            if error in _TRANSIENT or exc.response.status_code >= 500:
                raise StorageError(f"Slack {method} failed: {error}") from None
            raise SlackRefusedError(f"Slack refused {method}: {error}") from None
        except (SlackClientError, OSError) as exc:
            raise StorageError(f"Slack {method} failed: {type(exc).__name__}") from None
        return dict(response.data) if isinstance(response.data, dict) else {}

    def post_request(
        self, approval: Approval, details_url: str | None, *, skip: Sequence[str | None] = ()
    ) -> list[PostedMessage]:
        """Post the request in the channel, or as a DM to each approver not in ``skip``."""
        blocks = request_blocks(approval, details_url)
        text = f"Approval needed: {approval.title}"
        if self._conversation is not None:
            if None in skip:
                return []
            return [self._post(approval, self._conversation, blocks, text, None)]
        posted = []
        for address in approval.approvers:
            if address in skip:
                continue
            user = self._user_id(address)
            if user is None:
                logger.warning(
                    "approver has no Slack user; not posted",
                    extra={"approval_id": approval.approval_id},
                )
                continue
            posted.append(self._post(approval, user, blocks, text, address))
        return posted

    def _post(
        self,
        approval: Approval,
        where: str,
        blocks: list[dict[str, Any]],
        text: str,
        to: str | None,
    ) -> PostedMessage:
        answer = self._call("chat_postMessage", channel=where, text=text, blocks=blocks)
        return PostedMessage(CHANNEL, str(answer["channel"]), str(answer["ts"]), to)

    def show_decided(
        self, approval: Approval, posted: PostedMessage, details_url: str | None
    ) -> None:
        """Edit the message: the outcome, who decided and when; the buttons gone."""
        self._call(
            "chat_update",
            channel=posted.conversation,
            ts=posted.message_id,
            text=outcome_text(approval),
            blocks=decided_blocks(approval, details_url),
        )

    def tell(self, posted: PostedMessage, user_id: str, text: str) -> None:
        """A message beside ``posted`` that only ``user_id`` sees."""
        self._call("chat_postEphemeral", channel=posted.conversation, user=user_id, text=text)

    def reply(self, posted: PostedMessage, text: str) -> None:
        """``chat.postMessage`` in the message's thread (``thread_ts``)."""
        self._call(
            "chat_postMessage",
            channel=posted.conversation,
            thread_ts=posted.message_id,
            text=escape(text),
        )

    def show_progress(
        self, approval: Approval, posted: PostedMessage, details_url: str | None, progress: str
    ) -> None:
        """``chat.update``: the request as posted, with the quorum's progress under it."""
        self._call(
            "chat_update",
            channel=posted.conversation,
            ts=posted.message_id,
            text=f"Approval needed: {approval.title} ({progress})",
            blocks=request_blocks(approval, details_url, progress=progress),
        )

    def open_form(self, trigger: str, where: Mapping[str, str]) -> str:
        """``views.open`` with the press's trigger id: the modal, reading the approval."""
        answer = self._call("views_open", trigger_id=trigger, view=loading_view(where))
        return str(answer["view"]["id"])

    def fill_form(self, form_id: str, approval: Approval, where: Mapping[str, str]) -> None:
        """``views.update``: the decision, a comment and the editable values."""
        self._call("views_update", view_id=form_id, view=form_view(approval, where))

    def close_form(self, form_id: str, text: str) -> None:
        """``views.update``: ``text`` and nothing to submit."""
        self._call("views_update", view_id=form_id, view=notice_view(text))

    def address_of(self, user_id: str) -> str | None:
        """The explicit mapping's address, else the Slack profile's email (cached)."""
        if user_id in self._users:
            return self._users[user_id]
        with self._lock:
            if user_id in self._known:
                return self._known[user_id]
        try:
            found = self._call("users_info", user=user_id)
        except SlackRefusedError:
            return None  # user_not_found (another workspace's user): nobody here
        profile = found.get("user", {}).get("profile", {})
        email = profile.get("email")
        with self._lock:
            if len(self._known) >= MAX_CACHED_USERS:
                self._known.clear()
            self._known[user_id] = str(email) if email else None
        return self._known[user_id]

    def _user_id(self, address: str) -> str | None:
        mapped = next((u for u, a in self._users.items() if a.lower() == address.lower()), None)
        if mapped is not None:
            return mapped
        try:
            found = self._call("users_lookupByEmail", email=address)
        except SlackRefusedError:
            return None  # users_not_found: the approver is not in this workspace
        return str(found["user"]["id"])


class SlackRequestVerifier:
    """Checks that a request is Slack's: ``X-Slack-Signature`` over the timestamp and body
    with the signing secret, the timestamp within five minutes of ``clock``.

    Args:
        signing_secret: reads the signing secret (once, on first use).
        clock: seconds since the epoch (the service's clock).
    """

    def __init__(self, signing_secret: Callable[[], str], clock: Callable[[], float]) -> None:
        self._secret = signing_secret
        self._clock = clock

    def verify(self, body: bytes, headers: Mapping[str, str]) -> str:
        """Verify the request; returns its signature (what makes it one of a kind: a replay
        carries the same one). Never log it.

        Raises:
            SlackSignatureError: no signature or timestamp, a stale timestamp, or a signature
                that does not verify.
        """
        lowered = {k.lower(): v for k, v in headers.items()}
        timestamp, signature = lowered.get(TIMESTAMP_HEADER), lowered.get(SIGNATURE_HEADER)
        if not timestamp or not signature or not timestamp.isdigit():
            raise SlackSignatureError("the request has no Slack signature or timestamp")
        verifier = SignatureVerifier(self._secret(), clock=_Clock(self._clock))
        if not verifier.is_valid(body, timestamp, signature):
            raise SlackSignatureError("the Slack signature or timestamp does not verify")
        return signature


class _Clock(Clock):
    """``slack_sdk``'s clock, reading the service's."""

    def __init__(self, now: Callable[[], float]) -> None:
        super().__init__()
        self._now = now

    def now(self) -> float:
        return self._now()
