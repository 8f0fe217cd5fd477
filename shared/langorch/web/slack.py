"""Slack's side of an approval: the request as Block Kit, and a button press read back.

The message shows what the approval page shows (title, message, the shown values) with Approve
and Reject buttons and a Details button to the approval in the console. It carries no signed
link, no code and no task token: a button's value is only the approval id, and who pressed it
is Slack's verified user, resolved to an address server-side. Text is escaped for Slack's
``mrkdwn`` (``&``, ``<``, ``>``: a value cannot become a link or a mention) and bounded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from langorch.domain.approvals.record import Approval, bounded, human_time
from langorch.domain.errors import RequestRejectedError

BLOCK_ID = "langorch-approval"
APPROVE = "langorch.approve"
REJECT = "langorch.reject"
DETAILS = "langorch.details"
ACTIONS = {APPROVE: "approved", REJECT: "rejected"}
MAX_TITLE_CHARS = 150
"""Slack's limit for a header block's text."""
MAX_TEXT_CHARS = 2900
"""Under Slack's 3000 characters of a section's text."""
MAX_FIELDS = 10
"""Slack's limit of fields in one section."""
MAX_FIELD_CHARS = 1900
"""Under Slack's 2000 characters of a section field."""
MAX_PAYLOAD_BYTES = 256 * 1024


class SlackPayloadError(RequestRejectedError):
    """A verified Slack request whose payload is not an interaction langorch can read."""


def escape(text: str) -> str:
    """``text`` as literal ``mrkdwn`` (Slack's own three escapes)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)


def _head(approval: Approval) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": bounded(approval.title, MAX_TITLE_CHARS)},
        }
    ]
    if approval.message:
        text = escape(bounded(approval.message, MAX_TEXT_CHARS))
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": text}})
    fields = [
        {
            "type": "mrkdwn",
            "text": bounded(f"*{escape(str(key))}*\n{escape(_value(value))}", MAX_FIELD_CHARS),
        }
        for key, value in list(approval.context.items())[:MAX_FIELDS]
    ]
    if fields:
        blocks.append({"type": "section", "fields": fields})
    return blocks


def request_blocks(approval: Approval, details_url: str) -> list[dict[str, Any]]:
    """The request: what is asked, the shown values, Approve / Reject / Details."""
    actions = {
        "type": "actions",
        "block_id": BLOCK_ID,
        "elements": [
            _button("Approve", APPROVE, approval.approval_id, style="primary"),
            _button("Reject", REJECT, approval.approval_id, style="danger"),
            {
                "type": "button",
                "text": {"type": "plain_text", "text": "Details"},
                "action_id": DETAILS,
                "url": details_url,
            },
        ],
    }
    due = f"Decide before {human_time(approval.expires_at)}."
    return [*_head(approval), {"type": "context", "elements": [_mrkdwn(due)]}, actions]


def decided_blocks(approval: Approval, details_url: str) -> list[dict[str, Any]]:
    """The request once decided: who decided and when, the buttons gone."""
    return [
        *_head(approval),
        {"type": "context", "elements": [_mrkdwn(escape(outcome_text(approval)))]},
        {
            "type": "actions",
            "block_id": BLOCK_ID,
            "elements": [
                {
                    "type": "button",
                    "text": {"type": "plain_text", "text": "Details"},
                    "action_id": DETAILS,
                    "url": details_url,
                }
            ],
        },
    ]


def outcome_text(approval: Approval) -> str:
    """``Approved by ana@example.com at 2026-11-27 10:00 UTC``."""
    when = f" at {human_time(approval.decided_at)}" if approval.decided_at else ""
    who = f" by {approval.decided_by}" if approval.decided_by else ""
    return f"{approval.status.value.replace('_', ' ').capitalize()}{who}{when}"


def _button(text: str, action_id: str, approval_id: str, *, style: str) -> dict[str, Any]:
    return {
        "type": "button",
        "text": {"type": "plain_text", "text": text},
        "action_id": action_id,
        "value": approval_id,
        "style": style,
    }


def _mrkdwn(text: str) -> dict[str, str]:
    return {"type": "mrkdwn", "text": text}


@dataclass(frozen=True)
class ButtonPress:
    """An Approve or Reject pressed on a langorch message."""

    approval_id: str
    decision: str
    user_id: str
    conversation: str
    message_id: str


def read_interaction(body: bytes) -> ButtonPress | None:
    """The button press a (verified) interaction request carries.

    Returns:
        ``None`` for an interaction that decides nothing (the Details button, another app's
        block): it is acknowledged and ignored.

    Raises:
        SlackPayloadError: not Slack's form with a JSON ``payload``, or a langorch button
            without the fields a press has.
    """
    if len(body) > MAX_PAYLOAD_BYTES:
        raise SlackPayloadError(f"Slack interaction over {MAX_PAYLOAD_BYTES} bytes")
    try:
        form = parse_qs(body.decode("utf-8"), max_num_fields=5)
        payload = json.loads(form["payload"][0])
    except (UnicodeDecodeError, ValueError, KeyError, IndexError) as exc:
        raise SlackPayloadError("Slack interaction without a JSON payload field") from exc
    if not isinstance(payload, dict) or payload.get("type") != "block_actions":
        return None
    actions = payload.get("actions") or []
    action = next((a for a in actions if a.get("action_id") in ACTIONS), None)
    if action is None:
        return None
    try:
        return ButtonPress(
            approval_id=str(action["value"]),
            decision=ACTIONS[action["action_id"]],
            user_id=str(payload["user"]["id"]),
            conversation=str(payload["container"]["channel_id"]),
            message_id=str(payload["container"]["message_ts"]),
        )
    except (KeyError, TypeError) as exc:
        raise SlackPayloadError(f"Slack button press without {exc}") from exc
