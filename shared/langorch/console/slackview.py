"""The console's preview of an approval's Slack message: what approvers see (issue 30).

The blocks are the very ones the Slack adapter posts (:func:`langorch.web.slack.request_blocks`,
or :func:`~langorch.web.slack.decided_blocks` once decided), drawn as HTML: a header, the text
(Slack's ``mrkdwn``: its three escapes undone, then escaped for HTML, ``*bold*`` drawn bold),
the fields, the context line and the buttons (inert here).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from markupsafe import Markup, escape

from langorch.app.approvals.channels import chosen_channels, details_url
from langorch.app.approvals.ports import LinkSettings
from langorch.domain.approvals.channels import UnknownChannelError
from langorch.domain.approvals.record import Approval
from langorch.web.slack import decided_blocks, request_blocks

_BOLD = re.compile(r"\*([^*\n]+)\*")


def mrkdwn_html(text: str) -> Markup:
    """Slack ``mrkdwn`` as safe HTML: literal text, ``*bold*`` bold, line breaks kept."""
    literal = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    html = str(escape(literal))
    html = _BOLD.sub(r"<strong>\1</strong>", html).replace("\n", "<br>")
    return Markup(html)  # noqa: S704 - built from escaped text only


def slack_preview(approval: Approval, settings: LinkSettings) -> list[dict[str, Any]] | None:
    """The approval's Slack message as the console draws it; ``None`` when it does not go to
    Slack (its channels, else the stack's default, do not name ``slack``)."""
    try:
        if "slack" not in chosen_channels(approval, settings):
            return None
    except UnknownChannelError:
        return None
    url = details_url(approval, settings)
    blocks = request_blocks(approval, url) if approval.is_pending else decided_blocks(approval, url)
    return [drawn for block in blocks if (drawn := _draw(block)) is not None]


def _draw(block: dict[str, Any]) -> dict[str, Any] | None:
    kind = block.get("type")
    if kind == "header":
        return {"kind": "header", "text": block["text"]["text"]}
    if kind == "section" and "text" in block:
        return {"kind": "text", "html": mrkdwn_html(block["text"]["text"])}
    if kind == "section":
        return {"kind": "fields", "html": [mrkdwn_html(f["text"]) for f in block["fields"]]}
    if kind == "context":
        return {"kind": "context", "html": mrkdwn_html(_texts(block["elements"]))}
    if kind == "actions":
        buttons = [
            {"text": e["text"]["text"], "style": e.get("style", ""), "url": e.get("url")}
            for e in block["elements"]
        ]
        return {"kind": "buttons", "buttons": buttons}
    return None


def _texts(elements: Sequence[dict[str, Any]]) -> str:
    return " ".join(str(e.get("text", "")) for e in elements)
