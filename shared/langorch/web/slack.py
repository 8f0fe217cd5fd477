"""Slack's side of an approval: the request as Block Kit, and a button press read back.

The message shows what the approval page shows (title, message, the shown values) with Approve
and Reject buttons, "Comment or edit…" (a modal) and, when a console is configured, a Details
button to the approval there. It carries no signed
link, no code and no task token: a button's value is only the approval id, and who pressed it
is Slack's verified user, resolved to an address server-side. Text is escaped for Slack's
``mrkdwn`` (``&``, ``<``, ``>``: a value cannot become a link or a mention) and bounded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from langorch.domain.approvals.edits import (
    EDIT_PREFIX,
    EditRejectedError,
    as_text,
    is_editable_here,
    kind_of,
    parse_edits,
)
from langorch.domain.approvals.record import Approval, bounded, human_time
from langorch.domain.errors import RequestRejectedError

BLOCK_ID = "langorch-approval"
APPROVE = "langorch.approve"
REJECT = "langorch.reject"
DETAILS = "langorch.details"
REVIEW = "langorch.review"
"""The button that opens the modal: a comment, typed edits, then Approve or Reject."""
DELEGATE = "delegate"
"""The modal's decision that hands the person's vote to a Slack user (the page's ``delegate``)."""
DELEGATE_TO = "delegate_to_user"
"""The modal's block (and form field) naming that Slack user's id."""
FORM_CALLBACK = "langorch.form"
"""The modal's ``callback_id`` (its ``view_submission`` is read back by it)."""
MAX_FORM_FIELDS = 40
"""Editable keys offered in the modal (Slack allows 100 blocks in a view)."""
MAX_INPUT_CHARS = 3000
"""Slack's limit of a text input's value: a longer value is shown, not offered for editing."""
MAX_METADATA_CHARS = 3000
"""Slack's limit of a view's ``private_metadata``."""
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


def request_blocks(
    approval: Approval, details_url: str | None, *, progress: str | None = None
) -> list[dict[str, Any]]:
    """The request: what is asked, the shown values, Approve / Reject / Details (and a
    quorum's ``progress``, ``1 of 2 approvals``, once votes are in)."""
    actions = {
        "type": "actions",
        "block_id": BLOCK_ID,
        "elements": [
            _button("Approve", APPROVE, approval.approval_id, style="primary"),
            _button("Reject", REJECT, approval.approval_id, style="danger"),
            *_review(approval),
            *_details(details_url),
        ],
    }
    due = f"Decide before {human_time(approval.expires_at)}."
    if progress:
        due = f"{escape(progress)}. {due}"
    return [*_head(approval), {"type": "context", "elements": [_mrkdwn(due)]}, actions]


def _review(approval: Approval) -> list[dict[str, Any]]:
    # A fix's choices are not Approve/Reject: its page alone asks them.
    if approval.fix is not None:
        return []
    label = "Comment or edit…" if approval.editable else "Comment…"
    return [
        {
            "type": "button",
            "text": {"type": "plain_text", "text": label},
            "action_id": REVIEW,
            "value": approval.approval_id,
        }
    ]


def decided_blocks(approval: Approval, details_url: str | None) -> list[dict[str, Any]]:
    """The request once decided: who decided and when, the buttons gone."""
    blocks = [
        *_head(approval),
        {"type": "context", "elements": [_mrkdwn(escape(outcome_text(approval)))]},
    ]
    if details_url is not None:
        blocks.append({"type": "actions", "block_id": BLOCK_ID, "elements": _details(details_url)})
    return blocks


def _details(details_url: str | None) -> list[dict[str, Any]]:
    # No console: no Details button (see channels.details_url: the page needs a signed link).
    if details_url is None:
        return []
    return [
        {
            "type": "button",
            "text": {"type": "plain_text", "text": "Details"},
            "action_id": DETAILS,
            "url": details_url,
        }
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


def read_interaction(body: bytes) -> ButtonPress | FormOpened | FormSent | None:
    """The button press a (verified) interaction request carries.

    Returns:
        A press of Approve or Reject, of "Comment or edit…", or the modal submitted;
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
    if not isinstance(payload, dict):
        return None
    if payload.get("type") == "view_submission":
        if (payload.get("view") or {}).get("callback_id") != FORM_CALLBACK:
            return None
        try:
            return _read_form(payload)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise SlackPayloadError(f"Slack form without {exc}") from exc
    if payload.get("type") != "block_actions":
        return None
    actions = payload.get("actions") or []
    action = next((a for a in actions if a.get("action_id") in (*ACTIONS, REVIEW)), None)
    if action is None:
        return None
    try:
        if action["action_id"] == REVIEW:
            return FormOpened(
                approval_id=str(action["value"]),
                user_id=str(payload["user"]["id"]),
                conversation=str(payload["container"]["channel_id"]),
                message_id=str(payload["container"]["message_ts"]),
                trigger_id=str(payload["trigger_id"]),
            )
        return ButtonPress(
            approval_id=str(action["value"]),
            decision=ACTIONS[action["action_id"]],
            user_id=str(payload["user"]["id"]),
            conversation=str(payload["container"]["channel_id"]),
            message_id=str(payload["container"]["message_ts"]),
        )
    except (KeyError, TypeError) as exc:
        raise SlackPayloadError(f"Slack button press without {exc}") from exc


# --------------------------------------------------------------------------------------------
# The modal: a comment and typed edits (views.open with the press's trigger_id, then
# views.update once the approval is read; its view_submission is checked before it closes)
# --------------------------------------------------------------------------------------------

_SAMPLES: dict[str, Any] = {
    "text": "",
    "number": 0,
    "yes_no": False,
    "lines": [],
    "json_object": {},
    "json_list": [0],
}
"""A value of each input kind the modal checks against (the page's kinds; JSON split by its
type, which an edit must keep)."""


def _kind(value: Any) -> str:
    kind = kind_of(value).value
    if kind == "json":
        return "json_object" if isinstance(value, dict) else "json_list"
    return kind


def loading_view(where: Mapping[str, str]) -> dict[str, Any]:
    """The modal as it opens at once (the trigger id lasts three seconds; the approval is read
    out of the request, then :func:`form_view` replaces this)."""
    return {
        "type": "modal",
        "callback_id": FORM_CALLBACK,
        "title": {"type": "plain_text", "text": "Approval"},
        "private_metadata": json.dumps(dict(where)),
        "blocks": [{"type": "section", "text": _mrkdwn("Reading the approval…")}],
    }


def notice_view(text: str) -> dict[str, Any]:
    """The modal saying ``text`` and nothing to submit (not an approver, already decided)."""
    return {
        "type": "modal",
        "title": {"type": "plain_text", "text": "Approval"},
        "close": {"type": "plain_text", "text": "Close"},
        "blocks": [{"type": "section", "text": _mrkdwn(escape(bounded(text, MAX_TEXT_CHARS)))}],
    }


def form_view(approval: Approval, where: Mapping[str, str]) -> dict[str, Any]:
    """The modal: what is asked, Approve or Reject, a comment, each editable key as an input
    of its kind (a value too long for Slack's input is shown, not offered)."""
    kinds: dict[str, str] = {}
    inputs: list[dict[str, Any]] = []
    for key, value in list(approval.editable.items())[:MAX_FORM_FIELDS]:
        text = as_text(value)
        if not is_editable_here(value) or len(text) > MAX_INPUT_CHARS:
            shown = bounded(f"*{escape(key)}* (edit it on the approval page)", MAX_FIELD_CHARS)
            inputs.append({"type": "section", "text": _mrkdwn(shown)})
            continue
        kinds[key] = _kind(value)
        inputs.append(_input(key, value, text, kinds[key]))
    metadata = json.dumps({**where, "kinds": kinds})
    if len(metadata) > MAX_METADATA_CHARS:
        # Too many keys to carry their kinds: the modal takes the decision and the comment.
        kinds, inputs = (
            {},
            [_mrkdwn_section("Edit the values on the approval page (your email's link).")],
        )
        metadata = json.dumps(dict(where))
    decision: dict[str, Any] = {
        "type": "input",
        "block_id": "decision",
        "label": {"type": "plain_text", "text": "Decision"},
        "element": {
            "type": "radio_buttons",
            "action_id": "decision",
            "options": [_option("Approve", "approved"), _option("Reject", "rejected")],
        },
    }
    delegation = _delegation(approval)
    if delegation:
        decision["element"]["options"].append(_option("Hand my vote to…", DELEGATE))
    comment = {
        "type": "input",
        "block_id": "comment",
        "optional": True,
        "label": {"type": "plain_text", "text": "Comment"},
        "element": {
            "type": "plain_text_input",
            "action_id": "comment",
            "multiline": True,
            "max_length": MAX_INPUT_CHARS,
        },
    }
    return {
        "type": "modal",
        "callback_id": FORM_CALLBACK,
        "title": {"type": "plain_text", "text": "Approval"},
        "submit": {"type": "plain_text", "text": "Send"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "private_metadata": metadata,
        "blocks": [*_head(approval), decision, *delegation, comment, *inputs],
    }


def _delegation(approval: Approval) -> list[dict[str, Any]]:
    """Whom to hand the vote to (a Slack user), when the approval's policy allows delegation."""
    if approval.policy is None or not approval.policy.delegation:
        return []
    return [
        {
            "type": "input",
            "block_id": DELEGATE_TO,
            "optional": True,
            "label": {"type": "plain_text", "text": "Hand my vote to"},
            "element": {"type": "users_select", "action_id": "user"},
        }
    ]


def _mrkdwn_section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": _mrkdwn(text)}


def _option(text: str, value: str) -> dict[str, Any]:
    return {"text": {"type": "plain_text", "text": text}, "value": value}


def _input(key: str, value: Any, text: str, kind: str) -> dict[str, Any]:
    element: dict[str, Any]
    if kind == "yes_no":
        element = {
            "type": "radio_buttons",
            "action_id": "value",
            "options": [_option("yes", "yes"), _option("no", "no")],
            "initial_option": _option(text, text),
        }
    else:
        element = {
            "type": "plain_text_input",
            "action_id": "value",
            "multiline": kind in ("lines", "json_object", "json_list"),
            "max_length": MAX_INPUT_CHARS,
        }
        if text:
            element["initial_value"] = text
    hint = {
        "number": "A number.",
        "lines": "One item per line.",
        "json_object": "A JSON object.",
        "json_list": "A JSON list.",
    }.get(kind)
    block: dict[str, Any] = {
        "type": "input",
        "block_id": EDIT_PREFIX + key,
        "optional": True,
        "label": {"type": "plain_text", "text": bounded(key, MAX_TITLE_CHARS)},
        "element": element,
    }
    if hint:
        block["hint"] = {"type": "plain_text", "text": hint}
    return block


def form_errors(kinds: Mapping[str, str], form: Mapping[str, str]) -> dict[str, str]:
    """What the modal must show before it closes: an edit that does not fit its kind, or a
    vote handed to nobody (see :func:`edit_errors`)."""
    errors = edit_errors(kinds, form)
    if form.get("decision") == DELEGATE and not form.get(DELEGATE_TO):
        errors[DELEGATE_TO] = "Choose whom to hand your vote to."
    return errors


def edit_errors(kinds: Mapping[str, str], form: Mapping[str, str]) -> dict[str, str]:
    """Each edit that does not fit its kind, by the modal block that shows it (what Slack's
    ``response_action: errors`` takes); empty when all fit. The store is not read: whether a
    value changed is the decision's to see (:func:`~langorch.domain.approvals.edits.parse_edits`
    again, against the approval's values)."""
    errors: dict[str, str] = {}
    for key, kind in kinds.items():
        field = EDIT_PREFIX + key
        if field not in form or kind not in _SAMPLES:
            continue
        try:
            parse_edits({key: _SAMPLES[kind]}, {field: form[field]})
        except EditRejectedError as exc:
            errors[field] = f"{key} {exc.problem}"
    return errors


@dataclass(frozen=True)
class FormOpened:
    """The "Comment or edit…" button pressed: open the modal with ``trigger_id``."""

    approval_id: str
    user_id: str
    conversation: str
    message_id: str
    trigger_id: str


@dataclass(frozen=True)
class FormSent:
    """The modal submitted: the form as the approval page would post it (``decision``,
    ``comment``, ``edit.<key>``), and the kinds its edits are checked against."""

    approval_id: str
    user_id: str
    conversation: str
    message_id: str
    form: dict[str, str]
    kinds: dict[str, str]


def _read_form(payload: Mapping[str, Any]) -> FormSent:
    view = payload["view"]
    where = json.loads(view.get("private_metadata") or "{}")
    values = view.get("state", {}).get("values", {})
    form: dict[str, str] = {}
    for block_id, actions in values.items():
        for state in actions.values():
            picked = state.get("selected_option")
            value = picked.get("value") if isinstance(picked, dict) else state.get("value")
            if state.get("type") == "users_select":
                value = state.get("selected_user")
            if isinstance(value, str):
                form[str(block_id)] = value
            elif block_id.startswith(EDIT_PREFIX) and state.get("type") == "plain_text_input":
                form[str(block_id)] = ""  # emptied
    kinds = where.get("kinds") or {}
    return FormSent(
        approval_id=str(where["approval_id"]),
        user_id=str(payload["user"]["id"]),
        conversation=str(where["conversation"]),
        message_id=str(where["message_id"]),
        form=form,
        kinds={str(k): str(v) for k, v in kinds.items()},
    )
