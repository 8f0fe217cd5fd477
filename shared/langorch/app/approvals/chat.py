"""A button pressed in a chat (Slack; Teams next): decide as the chat's verified user, once.

The person is who the chat says they are (a verified request names its user; the user's address
comes from an explicit mapping or the chat's profile), never what the message carries: the
message holds no signed link and no task token. A person no approval names is told so and only
an audit line is written. Otherwise the decision goes through the approval page's own
decide-once use-case, exactly as the console's does (:mod:`langorch.console.actions`): a link
signed server-side for that approver, the page view, then the form. Separation of duties,
delegation, quorums and the run checks hold as on the emailed page, and of decisions from
email, console and chat exactly one is recorded; the decision then edits every chat message
posted for the approval (:func:`~langorch.app.approvals.channels.show_decided`).

A request delivered twice (a replay within Slack's five-minute window) is refused by its
signature's hash, recorded once per approval like a page view's token.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langorch.app.approvals.channels import ChannelNotConfiguredError
from langorch.app.approvals.commands import DecideApproval, ViewApproval
from langorch.app.approvals.decisions import decide_approval, view_approval
from langorch.app.approvals.driver import audit
from langorch.app.approvals.keys import load_signing_keys
from langorch.app.approvals.ports import (
    ApprovalsStore,
    ApprovalTimers,
    Clock,
    EmailSender,
    LinkSettings,
    RequestPorts,
)
from langorch.app.ports import (
    ApprovalNotifier,
    ChatForms,
    ChatNotifier,
    Executions,
    RunsStore,
    SecretsStore,
)
from langorch.domain.approvals.audit import Visitor
from langorch.domain.approvals.channels import PostedMessage
from langorch.domain.approvals.outcomes import (
    AlreadyDecided,
    Decided,
    DecisionHeld,
    FormAgain,
    Shown,
    Voted,
)
from langorch.domain.approvals.record import Approval, ApprovalLinkError, sign_link
from langorch.domain.errors import LangorchError
from langorch.web.errors import sentence_of
from langorch.web.slack import DELEGATE, DELEGATE_TO

logger = logging.getLogger(__name__)

DECISIONS = ("approved", "rejected")


@dataclass(frozen=True)
class DecideInChat:
    """A verified chat request: who pressed which button on which message."""

    approval_id: str
    decision: str
    """``approved`` or ``rejected`` (anything else is refused)."""
    user_id: str
    """The chat's user id (Slack ``U…``), as the verified request names them."""
    message: PostedMessage
    delivery_id: str = field(repr=False)
    """What makes this request one of a kind (its signature): a second delivery of it is a
    replay and decides nothing. Only its hash is stored, never logged."""
    form: Mapping[str, str] = field(default_factory=dict)
    """What the chat's form sent besides the decision (``comment``, ``edit.<key>``), as the
    approval page's form names them; empty for a button."""


@dataclass(frozen=True)
class ChatAnswer:
    """What the person in the chat is told (only them), and what happened."""

    outcome: str
    """``decided``, ``voted``, ``delegated``, ``already_decided``, ``held``, ``not_an_approver``,
    ``replayed``, ``refused`` or ``not_found``."""
    text: str
    approval: Approval | None = None


@dataclass(frozen=True)
class _ChatPorts:
    """The request's ports with the form dwell off: a chat's press is an identified person's,
    not a mail scanner's (the console turns it off for the same reason)."""

    approvals: ApprovalsStore
    runs: RunsStore
    executions: Executions
    secrets: SecretsStore
    settings: LinkSettings
    clock: Clock
    email: EmailSender
    approval_timers: ApprovalTimers
    notifiers: Mapping[str, ApprovalNotifier]


@dataclass(frozen=True)
class _Undwelled:
    public_base_url: str
    link_signing_secret: str
    approval_channels: Sequence[str]
    console_url: str | None
    approval_form_dwell_seconds: float = 0.0


def decide_in_chat(cmd: DecideInChat, ports: RequestPorts) -> ChatAnswer:
    """Decide (or vote) as the chat's user, once; tell them the outcome beside the message.

    Returns:
        The answer the chat's user was told (a refusal is an answer too: nothing raises for
        what a person did).

    Raises:
        ChannelNotConfiguredError: no notifier for the command's channel.
        StorageError: a store failed transiently (the chat shows an error; pressing again
            works, since a recorded decision is never recorded twice).
    """
    chat = ports.notifiers.get(cmd.message.channel)
    if not isinstance(chat, ChatNotifier):
        raise ChannelNotConfiguredError(f"no chat notifier for {cmd.message.channel!r}")
    answer = _decide(cmd, ports, chat)
    if answer.outcome not in ("replayed", "not_found"):
        once = f"{cmd.message.channel}:{_digest(cmd.delivery_id)}:finished"
        ports.approvals.use_view_token(cmd.approval_id, once)
    # A decision edited every message already (``decide_approval`` does, whichever channel).
    try:
        chat.tell(cmd.message, cmd.user_id, answer.text)
    except LangorchError as exc:
        # What happened stands (recorded, audited); only the note to the person is missing.
        logger.warning(
            "chat answer not shown",
            extra={"approval_id": cmd.approval_id, "error": type(exc).__name__},
        )
    return answer


def _decide(cmd: DecideInChat, ports: RequestPorts, chat: ChatNotifier) -> ChatAnswer:
    store, now = ports.approvals, ports.clock()
    operator = f"{cmd.message.channel}:{cmd.user_id}"
    approval = store.get(cmd.approval_id)
    if approval is None:
        return ChatAnswer("not_found", "This approval no longer exists.")
    visitor = Visitor(
        "POST", user_agent=cmd.message.channel, channel=cmd.message.channel, operator=operator
    )
    once = f"{cmd.message.channel}:{_digest(cmd.delivery_id)}"
    # Claimed once, finished once: a delivery whose claim is spent but whose finish is not is
    # a retry of a run that ended half-way (a crash after Slack's acknowledgement), and goes
    # on (deciding is idempotent); one whose both are spent is a replay.
    claimed = store.use_view_token(approval.approval_id, once)
    if not claimed and not store.use_view_token(approval.approval_id, f"{once}:finished"):
        audit(
            store,
            approval.approval_id,
            "refused",
            "replayed",
            at=now,
            actor=operator,
            visitor=visitor,
        )
        return ChatAnswer("replayed", "This request was seen before; nothing was recorded.")
    address = chat.address_of(cmd.user_id)
    approver = (
        next((a for a in approval.named() if approval.same_person(a, address)), None)
        if address
        else None
    )
    delegate_to = cmd.form.get(DELEGATE_TO) if cmd.decision == DELEGATE else None
    if delegate_to is not None:
        # The vote goes to the person Slack knows that user as (the mapping, else the profile).
        to = chat.address_of(delegate_to)
        if approver is not None and not to:
            text = "Slack shows no email for the person you chose; nothing was recorded."
            return ChatAnswer("refused", text, approval)
        delegate_to = to
    if approver is None or (cmd.decision not in DECISIONS and delegate_to is None):
        why = "not_an_approver" if approver is None else "invalid_form"
        audit(store, approval.approval_id, "refused", why, at=now, actor=operator, visitor=visitor)
        text = (
            "You are not an approver of this request, so nothing was recorded."
            if approver is None
            else "That is not a decision this request takes."
        )
        return ChatAnswer(why if approver is None else "refused", text, approval)
    keys = load_signing_keys(ports.secrets, ports.settings.link_signing_secret)
    link = sign_link(
        approval.approval_id,
        approver,
        approval.expires_at,
        keys.current,
        keys.current_key,
        generation=approval.link_generation,
    )
    quick = _without_dwell(ports)
    try:
        view = view_approval(ViewApproval(approval.approval_id, link, visitor), quick)
        if isinstance(view, Shown):
            extra = {k: v for k, v in cmd.form.items() if k == "comment" or k.startswith("edit.")}
            if delegate_to is not None:
                extra = {"delegate_to": delegate_to}
            form = {**extra, "decision": cmd.decision, "nonce": view.nonce}
            outcome = decide_approval(
                DecideApproval(approval.approval_id, link, form, visitor), quick
            )
        else:
            outcome = view
    except ApprovalLinkError as exc:
        return ChatAnswer("refused", sentence_of(exc), approval)
    # Voted and DecisionHeld are kinds of Decided: asked about first.
    if isinstance(outcome, DecisionHeld):
        return ChatAnswer("held", sentence_of_held(), outcome.approval)
    if isinstance(outcome, Voted) and outcome.delegated_to:
        text = f"Your vote is handed to {outcome.delegated_to}: {outcome.progress}."
        return ChatAnswer("delegated", text, outcome.approval)
    if isinstance(outcome, Voted):
        text = (
            f"Your vote is recorded: {outcome.progress}."
            if outcome.recorded
            else f"You voted before; that vote stands: {outcome.progress}."
        )
        return ChatAnswer("voted", text, outcome.approval)
    if isinstance(outcome, Decided):
        return ChatAnswer("decided", _decided_text(outcome.approval), outcome.approval)
    if isinstance(outcome, AlreadyDecided):
        current = store.get(approval.approval_id) or approval
        return ChatAnswer("already_decided", "Already decided: " + _decided_text(current), current)
    if isinstance(outcome, FormAgain):
        return ChatAnswer(
            "refused",
            f"{sentence_of(outcome.error)} Decide on the approval page (your email's link).",
            approval,
        )
    return ChatAnswer("refused", "This approval cannot be decided now.", approval)


def _digest(delivery_id: str) -> str:
    return hashlib.sha256(delivery_id.encode()).hexdigest()[:32]


PRESS_JOB = "langorch.chat_press"
"""The ``kind`` of a handed-on press (:func:`press_job`)."""


def press_job(cmd: DecideInChat) -> dict[str, Any]:
    """``cmd`` as a job to hand on (:class:`~langorch.app.ports.Handoff`): JSON, and without
    the request's signature (only its hash, which is what the replay check keeps anyway)."""
    return {
        "kind": PRESS_JOB,
        "approval_id": cmd.approval_id,
        "decision": cmd.decision,
        "user_id": cmd.user_id,
        "channel": cmd.message.channel,
        "conversation": cmd.message.conversation,
        "message_id": cmd.message.message_id,
        "delivery": _digest(cmd.delivery_id),
        "form": dict(cmd.form),
    }


def press_of(job: Mapping[str, Any]) -> DecideInChat:
    """The press a job of :func:`press_job` carries.

    Raises:
        ValueError: not such a job (names the missing field).
    """
    fields = ("approval_id", "decision", "user_id", "channel", "conversation", "message_id")
    missing = [f for f in (*fields, "delivery") if not isinstance(job.get(f), str)]
    if job.get("kind") != PRESS_JOB or missing:
        raise ValueError(f"not a chat press job: missing {', '.join(missing) or 'kind'}")
    where = PostedMessage(job["channel"], job["conversation"], job["message_id"])
    form = job.get("form") or {}
    return DecideInChat(
        job["approval_id"],
        job["decision"],
        job["user_id"],
        where,
        delivery_id=job["delivery"],
        form={str(k): str(v) for k, v in form.items()},
    )


FORM_JOB = "langorch.chat_form"
"""The ``kind`` of a handed-on form to fill (:func:`open_form`)."""


def open_form(
    channel: str,
    trigger: str,
    user_id: str,
    where: PostedMessage,
    approval_id: str,
    ports: RequestPorts,
) -> dict[str, str]:
    """Open a chat's form beside a request at once (its trigger lasts seconds) and return the
    job that fills it (:func:`fill_form`, handed on: it reads the store).

    Raises:
        ChannelNotConfiguredError: the channel has no notifier with forms.
    """
    chat = ports.notifiers.get(channel)
    if not isinstance(chat, ChatForms):
        raise ChannelNotConfiguredError(f"no chat notifier with forms for {channel!r}")
    shown = {
        "approval_id": approval_id,
        "conversation": where.conversation,
        "message_id": where.message_id,
    }
    form_id = chat.open_form(trigger, shown)
    return {"kind": FORM_JOB, "channel": channel, "form_id": form_id, "user_id": user_id, **shown}


def fill_form(job: Mapping[str, Any], ports: RequestPorts) -> str:
    """Fill an opened form with the approval, for an approver of it while it is pending;
    otherwise say why in the form (a stranger's opening is audited, like their press).

    Returns:
        ``shown``, ``not_an_approver``, ``already_decided`` or ``not_found``.
    """
    chat = ports.notifiers.get(str(job["channel"]))
    if not isinstance(chat, ChatForms) or not isinstance(chat, ChatNotifier):
        raise ChannelNotConfiguredError(f"no chat notifier with forms for {job['channel']!r}")
    form_id, user_id = str(job["form_id"]), str(job["user_id"])
    approval = ports.approvals.get(str(job["approval_id"]))
    if approval is None:
        chat.close_form(form_id, "This approval no longer exists.")
        return "not_found"
    address = chat.address_of(user_id)
    if not address or not any(approval.same_person(a, address) for a in approval.named()):
        operator = f"{job['channel']}:{user_id}"
        audit(
            ports.approvals,
            approval.approval_id,
            "refused",
            "not_an_approver",
            at=ports.clock(),
            actor=operator,
            visitor=Visitor(
                "GET",
                user_agent=str(job["channel"]),
                channel=str(job["channel"]),
                operator=operator,
            ),
        )
        chat.close_form(form_id, "You are not an approver of this request.")
        return "not_an_approver"
    if approval.decided_at is not None:
        chat.close_form(form_id, "Already decided: " + _decided_text(approval))
        return "already_decided"
    where = {k: str(job[k]) for k in ("approval_id", "conversation", "message_id")}
    chat.fill_form(form_id, approval, where)
    return "shown"


def sentence_of_held() -> str:
    """What a person is told when the run is not running (the decision waits for it)."""
    return "Your decision is recorded; the run is not running now and will take it when resumed."


def _decided_text(approval: Approval) -> str:
    when = approval.decided_at.strftime("%Y-%m-%d %H:%M UTC") if approval.decided_at else ""
    return f"{approval.status.value} by {approval.decided_by or 'someone'} {when}".rstrip() + "."


def _without_dwell(ports: RequestPorts) -> _ChatPorts:
    settings = ports.settings
    return _ChatPorts(
        approvals=ports.approvals,
        runs=ports.runs,
        executions=ports.executions,
        secrets=ports.secrets,
        settings=_Undwelled(
            settings.public_base_url,
            settings.link_signing_secret,
            settings.approval_channels,
            settings.console_url,
        ),
        clock=ports.clock,
        email=ports.email,
        approval_timers=ports.approval_timers,
        notifiers=ports.notifiers,
    )
