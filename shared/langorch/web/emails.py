"""The approval email: a subject that cannot inject headers, escaped and bounded bodies.

The email carries the approver's own signed link and, when the step requires it, their one-time
code. It never carries the task token (which the renderer is never given). Its templates,
``email.txt`` and ``email.html``, are files in ``web/templates/`` beside the approval page's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from langorch.domain.approvals.record import Approval, bounded, human_time
from langorch.web.look import without_bidi

if TYPE_CHECKING:
    from jinja2 import Environment

MAX_SUBJECT_CHARS = 120
MAX_TITLE_CHARS = 200
MAX_MESSAGE_CHARS = 4000
MAX_CONTEXT_KEYS = 20
MAX_CONTEXT_VALUE_CHARS = 500
SUBJECT_PREFIX = "Approval needed: "
FIX_SUBJECT_PREFIX = "Fix needed: "
"""The subject's start when a failed step asks a person to fix it (``on_error: ask``)."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f\u0085\u2028\u2029]+")


@dataclass(frozen=True)
class OutgoingEmail:
    """One rendered email to one approver.

    ``link`` is kept apart for the local outbox, which prints it; the fields holding the link are
    left out of ``repr`` so logging the object cannot leak a signed link.
    """

    to: str
    subject: str
    approval_id: str
    text: str = field(repr=False)
    html: str = field(repr=False)
    link: str = field(repr=False)


def clean_subject(text: str, limit: int = MAX_SUBJECT_CHARS) -> str:
    """A one-line subject: CR, LF and other control characters become spaces, then bounded.

    A subject is a header; a newline in it would start a new header (``Bcc:`` …). Its
    bidirectional controls are neutralised as on every page (:func:`~langorch.web.look.shown`).
    """
    one_line = " ".join(_CONTROL.sub(" ", without_bidi(text)).split())
    return bounded(one_line, limit)


def compile_templates() -> None:
    """Compile both email templates now, for a process that forks workers (``langorch dev``'s
    fork server): each worker otherwise compiles them on its first email."""
    _env(False).get_template("email.txt")
    _env(True).get_template("email.html")


@lru_cache(maxsize=2)
def _env(html: bool) -> Environment:
    from jinja2 import Environment, PackageLoader, StrictUndefined

    from langorch.web.look import human_label, shown

    # The text body is not HTML: escaping it would show "&amp;" to the reader.
    env = Environment(
        loader=PackageLoader("langorch.web", "templates"),
        autoescape=html,  # noqa: S701 - on for the HTML body; the text body is not HTML
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        finalize=shown,  # titles and names cannot reorder themselves (bidi controls)
    )
    env.filters["label"] = human_label
    return env


def _shown(value: Any) -> str:
    import json

    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return bounded(text, MAX_CONTEXT_VALUE_CHARS)


def _previous(approval: Approval) -> dict[str, Any] | None:
    previous = approval.previous
    if previous is None:
        return None
    who = bounded(previous.approver, 200) if previous.approver else "The approver"
    asked = " and asked:" if previous.comment else " without a comment."
    changed = bounded(", ".join(previous.changed[:MAX_CONTEXT_KEYS]), 1_000)
    return {
        "said": f"Round {approval.iteration}: {who} rejected round {previous.iteration}{asked}",
        "comment": bounded(previous.comment, MAX_MESSAGE_CHARS),
        "changes": f"Changed since: {changed}."
        if changed
        else "None of the details shown changed.",
    }


def render_approval_email(
    approval: Approval,
    *,
    to: str,
    link: str,
    code: str | None = None,
    reason: str | None = None,
    progress: str | None = None,
) -> OutgoingEmail:
    """The email asking ``to`` to decide ``approval``.

    Args:
        approval: what is asked (title, message, context).
        to: the approver's address.
        link: their signed link.
        code: their one-time code, when the step requires one.
        reason: why this email is sent again (a reminder, an escalation, a delegation).
        progress: where the votes stand (``1 of 2 approvals; waiting for …``).
    """
    title = bounded(approval.title, MAX_TITLE_CHARS)
    context = [
        (bounded(str(k), 64), _shown(v))
        for k, v in list(approval.context.items())[:MAX_CONTEXT_KEYS]
    ]
    fix = approval.fix
    error = f"{fix.error_type}: {fix.error_message}" if fix is not None else ""
    values = {
        "title": title,
        "message": bounded(approval.message, MAX_MESSAGE_CHARS),
        "fix": fix is not None,
        # A fix's own message leaves the error out: the email says it as well.
        "error": bounded(error, MAX_MESSAGE_CHARS) if error != approval.message else "",
        "context": context,
        "previous": _previous(approval),
        "link": link,
        "code": code,
        "expires": human_time(approval.expires_at),
        "reason": bounded(reason, 300) if reason else None,
        "progress": bounded(progress, 300) if progress else None,
    }
    return OutgoingEmail(
        to=to,
        subject=clean_subject(
            (FIX_SUBJECT_PREFIX if fix is not None else SUBJECT_PREFIX)
            + _subject_note(reason)
            + title
        ),
        approval_id=approval.approval_id,
        text=_env(False).get_template("email.txt").render(values),
        html=_env(True).get_template("email.html").render(values),
        link=link,
    )


def _subject_note(reason: str | None) -> str:
    """``Reminder: `` or ``Escalated: `` before the title when the email is sent again."""
    for word in ("Reminder", "Escalated"):
        if reason and reason.startswith(word):
            return f"{word}: "
    return ""
