"""A person's fix for a failed step (``on_error: ask``): what its form may answer, and what the
run reads back.

A fix is an approval — the same record, signed links, policy, console inbox and email — whose
request carries ``fix`` (:class:`~langorch.domain.approvals.record.FixAsk`: the step's error and
the choices). Its editable fields are the step's inputs (``input.<key>``, their values when it
failed) and, where skipping is offered, its outputs (``output.<key>``, empty). The form's
button is the choice:

======  ==========  ===================================================================
choice  decision    what the run does
======  ==========  ===================================================================
retry   approved    runs the step again, its inputs as edited (merged into the state)
skip    approved    goes on as if the step had given the outputs typed
fail    rejected    fails, with the step's error
======  ==========  ===================================================================

The choice, the values that go with it and the channel it came through travel in the
decision's ``edits`` under ``fix``, so the decide-once write, its delivery and any redelivery
carry them unchanged. A plain decision (a terminal's: ``runs start --local --approve --edit
input.people=3``) reads its edits by their prefix: ``approved`` retries with its ``input.``
edits (none: as it was), or skips giving its ``output.`` edits when it has only those;
``rejected`` fails. A timeout fails.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from langorch.domain.approvals.record import FixAsk, InvalidDecisionError

FIX = "fix"
"""The key of a fix's answer in a decision's ``edits``, and of the ask in a request."""
INPUT = "input."
"""Editable fields of a fix named ``input.<key>``: the step's inputs."""
OUTPUT = "output."
"""Editable fields of a fix named ``output.<key>``: the outputs a skip gives."""
Choice = Literal["retry", "skip", "fail"]
RETRY: Choice = "retry"
SKIP: Choice = "skip"
FAIL: Choice = "fail"
CHOICES: tuple[Choice, ...] = (RETRY, SKIP, FAIL)
LINK = "link"
"""The channel of a decision made on the emailed link's page."""

_DECISIONS: dict[str, Literal["approved", "rejected"]] = {
    RETRY: "approved",
    SKIP: "approved",
    FAIL: "rejected",
}
_PLAIN: dict[str, Choice] = {"approved": "retry", "rejected": "fail"}


def fix_decision(
    fix: FixAsk, value: str | None, edits: Mapping[str, Any], channel: str | None
) -> tuple[Literal["approved", "rejected"], dict[str, Any]]:
    """The decision and the edits to record for a fix form's button.

    Args:
        fix: what the approval offers.
        value: the button's ``decision`` value: a choice (``approved`` / ``rejected`` stand for
            ``retry`` / ``fail``).
        edits: the form's parsed edits (``input.<key>`` / ``output.<key>``).
        channel: where the form came from (``console``; ``None``: the emailed link).

    Returns:
        ``approved`` or ``rejected``, and ``{"fix": {choice, via, inputs | outputs}}``: the
        inputs with a retry, the outputs with a skip, nothing else.

    Raises:
        InvalidDecisionError: not a choice this fix offers.
    """
    choice = _PLAIN.get(value or "", value)
    if choice not in CHOICES or choice not in fix.choices:
        raise InvalidDecisionError(
            f"unknown choice {value!r:.40}: this fix offers {', '.join(fix.choices)}"
        )
    answer: dict[str, Any] = {"choice": choice, "via": channel or LINK}
    if choice == RETRY:
        answer["inputs"] = _under(INPUT, edits)
    elif choice == SKIP:
        answer["outputs"] = _under(OUTPUT, edits)
    return _DECISIONS[choice], {FIX: answer}


def _under(prefix: str, edits: Mapping[str, Any]) -> dict[str, Any]:
    return {k[len(prefix) :]: v for k, v in edits.items() if k.startswith(prefix)}


@dataclass(frozen=True)
class FixAnswer:
    """What the person chose for a failed step, as the run reads it from the resume value."""

    choice: Choice
    inputs: dict[str, Any] = field(default_factory=dict)
    """With ``retry``: the inputs the person changed (state keys and their new values)."""
    outputs: dict[str, Any] = field(default_factory=dict)
    """With ``skip``: the outputs the person gave."""
    by: str | None = None
    via: str | None = None
    """The channel: ``console``, ``link`` (the emailed page), ``timeout`` or ``None``."""
    comment: str = ""


def fix_answer(resume: Any) -> FixAnswer:
    """The answer to a fix from the value the run resumes with (a delivered decision).

    A form's answer (``edits.fix``) as chosen; a plain decision by its edits' prefixes (see the
    module); ``timed_out`` fails (nobody fixed it in time). Anything else is not an answer.

    Raises:
        InvalidDecisionError: not a decision.
    """
    if isinstance(resume, str):
        resume = {"decision": resume}
    if not isinstance(resume, Mapping):
        raise InvalidDecisionError(f"a fix resumes with a decision, got {resume!r:.200}")
    decision = resume.get("decision")
    by, comment = resume.get("approver"), str(resume.get("comment") or "")
    if decision == "timed_out":
        return FixAnswer(FAIL, by=None, via="timeout", comment=comment)
    if decision not in _PLAIN:
        raise InvalidDecisionError(f"a fix resumes with a decision, got {decision!r:.40}")
    edits = resume.get("edits")
    edits = edits if isinstance(edits, Mapping) else {}
    given = edits.get(FIX)
    if not isinstance(given, Mapping) or given.get("choice") not in CHOICES:
        return _plain(decision, edits, by, comment)
    choice: Choice = given["choice"]
    if _DECISIONS[choice] != decision:
        raise InvalidDecisionError(f"a fix's {choice!r} does not go with {decision!r}")
    return FixAnswer(
        choice,
        inputs=dict(given.get("inputs") or {}) if choice == RETRY else {},
        outputs=dict(given.get("outputs") or {}) if choice == SKIP else {},
        by=by,
        via=str(given.get("via") or "") or None,
        comment=comment,
    )


def _plain(decision: str, edits: Mapping[str, Any], by: Any, comment: str) -> FixAnswer:
    """A plain ``approved`` / ``rejected`` (a terminal's answer): ``input.`` edits retry with
    them, ``output.`` edits alone skip giving them."""
    if decision == "rejected":
        return FixAnswer(FAIL, by=by, comment=comment)
    inputs, outputs = _under(INPUT, edits), _under(OUTPUT, edits)
    if outputs and not inputs:
        return FixAnswer(SKIP, outputs=outputs, by=by, comment=comment)
    return FixAnswer(RETRY, inputs=inputs, by=by, comment=comment)
