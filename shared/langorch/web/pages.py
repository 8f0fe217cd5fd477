"""The approval page and its result pages: inert, escaped, bounded HTML.

Inert means: no script, no meta refresh, no auto-submitting form. Opening the page (GET or
HEAD — what mail scanners do) decides nothing; only the form's POST does. The form has no
``action``, so it posts back to the same URL with the signed query string, and the signature
itself never appears in the page body. Everything shown is escaped by Jinja2's autoescaping.
The templates are files in ``web/templates/``, loaded as the console loads its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from langorch.domain.approvals.edits import (
    EDIT_PREFIX,
    MAX_EDIT_FIELD_BYTES,
    EditKind,
    as_text,
    edit_elsewhere,
    is_editable_here,
    kind_of,
)
from langorch.domain.approvals.fixes import FAIL, RETRY, SKIP, fix_answer
from langorch.domain.approvals.outcomes import (
    Decided,
    DecideOutcome,
    DecisionHeld,
    FormAgain,
    Shown,
    ViewOutcome,
)
from langorch.domain.approvals.record import (
    AlreadyDecidedError,
    Approval,
    ApprovalStatus,
    bounded,
    decision_output,
    human_time,
)
from langorch.domain.errors import LangorchError
from langorch.web.errors import http_status, outcome_status, sentence_of, title_of

if TYPE_CHECKING:
    from jinja2 import Environment

MAX_TITLE_CHARS = 200
MAX_MESSAGE_CHARS = 10_000
MAX_CONTEXT_KEYS = 50
MAX_CONTEXT_VALUE_CHARS = 4_000
MAX_FEEDBACK_CHARS = 4_000
"""The previous round's comment as shown (the form accepts comments this long)."""

SECURITY_HEADERS: dict[str, str] = {
    "Content-Type": "text/html; charset=utf-8",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
}


@dataclass(frozen=True)
class Page:
    """An HTML response: status, body and the security headers every approval page carries."""

    status: int
    body: str
    headers: dict[str, str] = field(default_factory=lambda: dict(SECURITY_HEADERS))


TEMPLATES = ("base.html", "result.html", "form.html", "policy.html", "delegate.html")
"""The page templates, files in ``web/templates/`` (the emails' are there too)."""


def compile_templates() -> None:
    """Compile every page template now, for a process that forks workers (``langorch dev``'s
    fork server): each worker otherwise compiles them on its first page."""
    for name in TEMPLATES:
        _env().get_template(name)


@lru_cache(maxsize=1)
def _env() -> Environment:
    from jinja2 import Environment, PackageLoader, StrictUndefined
    from markupsafe import Markup

    from langorch.web.look import human_label, shown, stylesheet, verbatim

    # The form includes the policy's parts as templates of their own (policy.html,
    # delegate.html): restyling the form and changing what a policy shows touch other files.
    env = Environment(
        loader=PackageLoader("langorch.web", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        finalize=shown,  # titles and names cannot reorder themselves (bidi controls)
    )
    env.filters["label"] = human_label
    env.filters["verbatim"] = verbatim
    # The shared look, inline: the page's CSP allows inline styles only. Our own file.
    env.globals["css"] = Markup(stylesheet())  # noqa: S704 - our packaged stylesheet
    return env


def _render(template: str, status: int, **values: Any) -> Page:
    return Page(status=status, body=_env().get_template(template).render(**values))


def _shown(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, indent=2, default=str)
    return bounded(text, limit)


def editable_as_text(value: Any) -> str:
    """How an editable value appears in its input (see :mod:`langorch.domain.approvals.edits`)."""
    return as_text(value)


_HINTS = {EditKind.lines: "one per line", EditKind.json: "JSON", EditKind.number: "a number"}


def approval_page(
    approval: Approval,
    *,
    approver: str,
    nonce: str,
    error: str | None = None,
    values: Mapping[str, str] | None = None,
    status: int = 200,
    now: datetime | None = None,
) -> Page:
    """The confirmation page: what is asked and why, the context, edits, comment, buttons,
    and under a policy its progress and rules (``approval.votes``: the votes so far).

    Args:
        approval: the pending approval.
        approver: whose link this is (shown, so a forwarded link is noticed).
        nonce: the view token of this page view (the form field keeps the name ``nonce``).
        error: a sentence shown above the form (e.g. a wrong code).
        values: what the person typed before (comment, ``edit.*``), kept when the form is
            shown again.
        status: the HTTP status (200; 4xx when re-shown after a refused POST).
        now: the clock, for what happens next (default: the approval's creation).
    """
    items = list(approval.context.items())
    changed = set(approval.previous.changed) if approval.previous else set()
    context = [
        (bounded(str(k), 100), _shown(v, MAX_CONTEXT_VALUE_CHARS), k in changed)
        for k, v in items[:MAX_CONTEXT_KEYS]
    ]
    typed = values or {}
    editable = []
    fix = approval.fix
    for key, value in list(approval.editable.items())[:MAX_CONTEXT_KEYS]:
        text = editable_as_text(value)
        too_long = not is_editable_here(value)
        if not too_long and EDIT_PREFIX + str(key) in typed:
            # What the person typed (kept when the form is shown again), bounded like the edit.
            text = bounded(typed[EDIT_PREFIX + str(key)], MAX_EDIT_FIELD_BYTES)
        kind = kind_of(value)
        group, _, named = str(key).partition(".") if fix is not None else ("", "", str(key))
        editable.append(
            {
                "key": bounded(named, 100),
                "group": group,
                "name": EDIT_PREFIX + str(key),
                "value": bounded(text, MAX_CONTEXT_VALUE_CHARS) if too_long else text,
                "kind": kind.value,
                "hint": _HINTS.get(kind, ""),
                "too_long": too_long,
                "why": edit_elsewhere(approval.run_id, approval.step_id, str(key)),
                "rows": min(max(text.count("\n") + 2, 3), 20),
            }
        )
    message = approval.message
    if fix is not None and message == f"{fix.error_type}: {fix.error_message}":
        message = ""  # the error is shown as the error, once
    return _render(
        "form.html",
        status,
        heading=bounded(approval.title, MAX_TITLE_CHARS),
        message=bounded(message, MAX_MESSAGE_CHARS),
        fix=fix_view(approval),
        run_id=approval.run_id,
        step_id=approval.step_id,
        iteration=approval.iteration,
        max_iterations=approval.max_iterations,
        approver=approver,
        expires=human_time(approval.expires_at),
        context=context,
        previous=previous_round(approval),
        hidden_keys=max(len(items) - MAX_CONTEXT_KEYS, 0),
        editable=editable,
        nonce=nonce,
        require_code=approval.require_code,
        error=error,
        comment=typed.get("comment", ""),
        policy=policy_view(approval, now=now),
    )


def fix_view(approval: Approval) -> dict[str, Any] | None:
    """A failed step's error and the person's choices, bounded for display (``None``: not a
    fix, an ordinary approval)."""
    fix = approval.fix
    if fix is None:
        return None
    return {
        "error_type": bounded(fix.error_type, 200),
        "error_message": bounded(fix.error_message, MAX_MESSAGE_CHARS),
        "attempts": fix.attempts,
        "choices": list(fix.choices),
        "kind": fix.kind,
    }


def previous_round(approval: Approval) -> dict[str, Any] | None:
    """The previous round of a review loop, bounded for display (``None`` in round 1).

    Returns:
        ``iteration``, ``who`` (the approver, or "The approver"), ``comment`` (their feedback)
        and ``changed`` (the shown keys that changed since, comma-separated); plain text, for
        templates that escape it.
    """
    previous = approval.previous
    if previous is None:
        return None
    return {
        "iteration": previous.iteration,
        "who": bounded(previous.approver, 200) if previous.approver else "The approver",
        "comment": bounded(previous.comment, MAX_FEEDBACK_CHARS),
        "changed": bounded(", ".join(previous.changed[:MAX_CONTEXT_KEYS]), 2_000),
    }


def result_page(
    heading: str, sentence: str, *, status: int, details: list[tuple[str, str]] | None = None
) -> Page:
    """A page that reports an outcome: one sentence and a few facts."""
    return _render("result.html", status, heading=heading, sentence=sentence, details=details or [])


def policy_view(approval: Approval, *, now: datetime | None = None) -> dict[str, Any] | None:
    """What the page shows of a policy: progress ("2 of 3 approvals; waiting for legal"),
    its rules in words, and what happens next (``None`` without a policy)."""
    from langorch.domain.approvals.votes import next_timer, progress

    policy = approval.policy
    if policy is None:
        return None
    counted = progress(approval, approval.votes)
    upcoming = next_timer(approval, now or approval.created_at)
    return {
        "progress": bounded(counted.summary, 500),
        "rules": [bounded(line, 300) for line in policy_lines(approval)],
        "next": None
        if upcoming is None
        else f"{upcoming.kind} at {human_time(upcoming.due)} ({upcoming.why})",
        "delegation": policy.delegation,
    }


def policy_lines(approval: Approval) -> list[str]:
    """A policy in plain sentences (page, email and ``approvals show``)."""
    policy = approval.policy
    if policy is None:
        return []
    quorum = policy.quorum
    lines = []
    if quorum == "any":
        lines.append("One approval decides.")
    elif quorum == "all":
        lines.append("Every approver must approve.")
    elif quorum.groups:
        groups = ", ".join(f"{g.at_least} from {name}" for name, g in quorum.groups.items())
        lines.append(f"Needs {groups}.")
    else:
        lines.append(f"Needs {quorum.at_least} approvals.")
    lines.append(
        "One rejection rejects."
        if policy.rejection == "any_reject"
        else "Rejected once the approvals needed can no longer be reached."
    )
    if policy.reminder_delays():
        lines.append(f"Reminders after {', '.join(_delay(d) for d in policy.reminder_delays())}.")
    for n, level in enumerate(policy.escalation, 1):
        lines.append(
            f"Escalation {n} after {_delay(policy.escalation_delays()[n - 1])}: "
            f"{', '.join(level.approvers)}."
        )
    if policy.business_hours is not None:
        hours = policy.business_hours
        lines.append(
            f"Reminders and escalations only {', '.join(hours.days)} {hours.start}-{hours.end} "
            f"({hours.timezone})."
        )
    if policy.separation_of_duties:
        lines.append("Whoever started the run may not approve it.")
    if approval.on_timeout:
        lines.append(
            f"At {human_time(approval.expires_at)} without a decision: {approval.on_timeout}."
        )
    return lines


def _delay(seconds: int) -> str:
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def voted_page(approval: Approval, progress_text: str, *, recorded: bool, status: int) -> Page:
    """After a vote that did not (yet) decide: thanks, and where the votes stand."""
    title = bounded(approval.title, MAX_TITLE_CHARS)
    sentence = (
        f"Your vote on “{title}” is recorded." if recorded else f"You already voted on “{title}”."
    )
    return result_page(
        "Vote recorded" if recorded else "Already voted",
        f"{sentence} The run continues once the approval policy is met.",
        status=status,
        details=[("Progress", bounded(progress_text, 500)), ("Run", approval.run_id)],
    )


def decided_page(approval: Approval, *, status: int) -> Page:
    """After this approver's decision was recorded and the run resumed (a vote that did not
    decide yet: :func:`voted_page`, shown for a still-pending approval)."""
    if approval.is_pending:
        from langorch.domain.approvals.votes import progress

        return voted_page(
            approval, progress(approval, approval.votes).summary, recorded=True, status=status
        )
    details = [("Step", approval.step_id), ("Run", approval.run_id)]
    if approval.comment:
        details.append(("Comment", bounded(approval.comment, 500)))
    if approval.fix is not None:
        return _fixed_page(approval, details, status)
    verb = "approved" if approval.status is ApprovalStatus.approved else "rejected"
    if approval.edits:
        details.append(("Edited", ", ".join(sorted(approval.edits))))
    return result_page(
        f"You {verb} this request",
        f"Thank you: you {verb} “{bounded(approval.title, MAX_TITLE_CHARS)}”. The run continues.",
        status=status,
        details=details,
    )


def _fixed_page(approval: Approval, details: list[tuple[str, str]], status: int) -> Page:
    """After a fix's choice was recorded: what the run does now."""
    answer = fix_answer(decision_output(approval))
    said = {
        RETRY: ("retried the step", "The run runs the step again"),
        SKIP: ("skipped the step", "The run goes on with the outputs you gave"),
        FAIL: ("failed the run", "The run ends failed, with the step's error"),
    }[answer.choice]
    changed = answer.inputs or answer.outputs
    if changed:
        details.append(("Given", ", ".join(sorted(changed))))
    return result_page(
        f"You {said[0]}",
        f"Thank you: you {said[0]} “{bounded(approval.title, MAX_TITLE_CHARS)}”. {said[1]}.",
        status=status,
        details=details,
    )


def held_page(approval: Approval, *, status: int) -> Page:
    """After this approver's decision was recorded on a run that is not running (its execution
    ended while it waited): the decision is kept for the run's redrive, said plainly."""
    verb = "approved" if approval.status is ApprovalStatus.approved else "rejected"
    return result_page(
        f"You {verb} this request; the run is not running",
        f"Your decision on “{bounded(approval.title, MAX_TITLE_CHARS)}” is recorded, but the run "
        "is not running right now (it stopped while it waited for this approval), so it has not "
        "continued yet. Nothing more is needed from you: when an operator redrives the run, it "
        "continues with your decision and nobody is asked again.",
        status=status,
        details=[("Step", approval.step_id), ("Run", approval.run_id)],
    )


def already_decided_page(notice: AlreadyDecidedError, *, status: int) -> Page:
    """ "Already approved by X at T": an outcome to read, not an error."""
    return result_page(title_of(notice), sentence_of(notice), status=status)


def refusal_page(error: LangorchError) -> Page:
    """The page for a refused link or form, or a request that cannot be served: its status,
    title and sentence from the edge's table (:mod:`langorch.web.errors`).

    Raises:
        LookupError: the error has no row (not a request's fault: let it raise).
    """
    return result_page(title_of(error), sentence_of(error), status=http_status(error))


def outcome_page(outcome: ViewOutcome | DecideOutcome) -> Page:
    """The page for an approval use-case's outcome, with the status the table gives it."""
    status = outcome_status(outcome)
    if isinstance(outcome, Shown):
        return approval_page(
            outcome.approval, approver=outcome.approver, nonce=outcome.nonce, status=status
        )
    if isinstance(outcome, FormAgain):
        return approval_page(
            outcome.approval,
            approver=outcome.approver,
            nonce=outcome.nonce,
            error=sentence_of(outcome.error),
            values=outcome.values,
            status=status,
        )
    if isinstance(outcome, DecisionHeld):
        return held_page(outcome.approval, status=status)
    if isinstance(outcome, Decided):
        return decided_page(outcome.approval, status=status)
    return already_decided_page(outcome.notice, status=status)
