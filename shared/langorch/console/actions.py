"""What the console's buttons do, through the same use-cases as every other entry point, in the
name of the console's operator (:mod:`.operator`): timeline events name them and the channel
(``console:ana``), approval audit lines carry the channel ``console`` and the operator.

- Cancel: :func:`langorch.app.runs.cancel_run`.
- Pause and resume: :func:`langorch.app.pause.pause_run` and
  :func:`~langorch.app.pause.resume_run`, as ``langorch runs pause | resume`` call them.
- Start a run: :func:`langorch.app.runs.launch_run` (trigger ``manual``).
- Decide an approval: as the operator, and only where the approval names them (compared
  canonically); on another approver's behalf only with the admin override, which is audited.
  Through the approval page's own decide-once use-case
  (:func:`~langorch.app.approvals.decisions.view_approval` then
  :func:`~langorch.app.approvals.decisions.decide_approval`), so separation of duties,
  delegation and quorums hold here as on the emailed page. The console signs the operator's
  link itself, server-side, with the link-signing key from Secrets Manager — which the
  operator's IAM permissions may or may not allow: IAM decides. The link, its signature and the
  page's view token never leave this process; the browser only sends the decision, the
  comment, the edits and its CSRF token. The form dwell that stops mail scanners is not applied
  here (an operator's console is no mail scanner, and its forms are CSRF-protected).

- Redrive and fork an ended run: :func:`langorch.app.recovery.redrive.redrive` and
  :func:`langorch.app.recovery.forks.fork`, as ``langorch runs redrive | fork`` call them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langorch.console.http import Request
from langorch.console.operator import CHANNEL, Operator, OperatorError
from langorch.console.redact import shown
from langorch.domain.approvals.edits import (
    EDIT_PREFIX,
    MAX_EDIT_FIELD_BYTES,
    EditKind,
    as_text,
    edit_elsewhere,
    is_editable_here,
    kind_of,
)
from langorch.domain.approvals.record import (
    AlreadyDecidedError,
    Approval,
    ApprovalLinkError,
    bounded,
)
from langorch.domain.errors import (
    JsonInputError,
    JsonShapeError,
    JsonSyntaxError,
    LangorchError,
)
from langorch.domain.limits import loads_strict
from langorch.web.look import human_label

USER_AGENT = "langorch console"

_HINTS = {EditKind.lines: "one per line", EditKind.json: "JSON", EditKind.number: "a number"}


class ConsoleActionError(LangorchError):
    """A console action that cannot be done as asked (the message says why and what to do)."""


class NotYoursToDecideError(OperatorError):
    """The operator is not among the approval's approvers (and no admin override is on)."""


def cancel(container: Any, operator: Operator, run_id: str, reason: str) -> str:
    """Cancel a run (its execution stopped, a pending approval closed); returns its id."""
    from langorch.app.runs import cancel_run

    text = (reason or "").strip()[:500] or "cancelled from the console"
    run, _ = cancel_run(run_id, container, actor=operator.actor, reason=text)
    return str(run.run_id)


def pause(container: Any, operator: Operator, run_id: str, reason: str) -> str:
    """Ask a run to pause (at once when parked, else when its current step finishes);
    returns what happened: ``paused``, ``pausing`` or ``ended``.

    Raises:
        ConsoleActionError: the stack runs no state machine to park the run in.
    """
    from langorch.app.pause import pause_run

    _needs_state_machine(container, "pause runs")
    done = pause_run(run_id, container, actor=operator.actor, reason=(reason or "").strip()[:500])
    return done.state


def resume(container: Any, operator: Operator, run_id: str, reason: str) -> bool:
    """Go on with a paused run; returns whether this call resumed it.

    Raises:
        ConsoleActionError: the stack runs no state machine to wake the run in.
    """
    from langorch.app.pause import resume_run

    _needs_state_machine(container, "resume runs")
    done = resume_run(run_id, container, actor=operator.actor, reason=(reason or "").strip()[:500])
    return done.resumed


def _needs_state_machine(container: Any, what: str) -> None:
    if not container.settings.state_machine_arn:
        raise ConsoleActionError(
            f"this stack has no run state machine, so it cannot {what}: "
            "pausing parks a run's execution until it is resumed"
        )


def start(container: Any, operator: Operator, workflow_id: str, request: Request) -> str:
    """Start a run from the workflow page's form; returns the run id.

    Raises:
        ConsoleActionError: a field is not what the inputs schema asks for.
        ConsoleActionError: the stack cannot run it (no state machine).
    """
    from langorch.app.runs import StartRun, launch_run
    from langorch.console.listing import input_fields

    if not container.settings.state_machine_arn:
        raise ConsoleActionError(
            "this stack has no run state machine: start runs with `langorch runs start`"
        )
    plan = container.definitions.get_workflow(workflow_id)
    if plan is None:
        from langorch.domain.errors import NotFoundError

        raise NotFoundError(f"workflow {workflow_id} does not exist")
    data = start_input(input_fields(plan), request.form)
    run, _ = launch_run(
        StartRun(workflow_id, input=data, trigger="manual", trigger_detail={"by": operator.actor}),
        container,
    )
    return str(run.run_id)


def start_input(fields: list[dict[str, Any]], form: Mapping[str, list[str]]) -> dict[str, Any]:
    """The run's input from the form: each field typed as its schema says.

    Raises:
        ConsoleActionError: a number, a JSON value or a required field is wrong.
    """
    if not fields:
        raw = (form.get("input") or ["{}"])[0].strip() or "{}"
        try:
            value = loads_strict(raw, "input")
        except JsonInputError as exc:
            raise ConsoleActionError(str(exc)) from None
        if not isinstance(value, dict):
            raise ConsoleActionError('input: give a JSON object, e.g. {"key": "value"}')
        return value
    data: dict[str, Any] = {}
    for f in fields:
        name = f["name"]
        raw = (form.get(f"in.{name}") or [""])[0]
        if f["widget"] == "checkbox":
            data[name] = raw == "on"
            continue
        if raw.strip() == "":
            if f["required"]:
                raise ConsoleActionError(f"input.{name}: required; fill it in")
            continue
        data[name] = _typed(name, f["type"], f["widget"], raw)
    return data


def _typed(name: str, kind: str, widget: str, raw: str) -> Any:
    try:
        if kind == "integer":
            return int(raw)
        if kind == "number":
            return float(raw)
        if widget == "json":
            return loads_strict(raw, f"input.{name}")
    except JsonInputError as exc:
        raise ConsoleActionError(str(exc)) from None
    except ValueError:
        raise ConsoleActionError(f"input.{name}: {raw[:40]!r} is not a {kind}") from None
    return raw


@dataclass(frozen=True)
class Decision:
    """How a decision went: ``done`` (approved, rejected, already) or the form again (the
    sentence above it, what was typed, and the status of the page)."""

    done: str = ""
    again: str | None = None
    values: Mapping[str, str] | None = None
    status: int | None = None


def decide(container: Any, operator: Operator, approval_id: str, request: Request) -> Decision:
    """Decide an approval as the operator, through the decide-once use-case.

    Raises:
        NotYoursToDecideError: the approval does not name the operator (and no admin override),
            or the override names someone the approval does not.
        ConsoleActionError: the use-case's refusals (separation of duties, expired, ended…).
    """
    from langorch.app.approvals.decisions import (
        DecideApproval,
        ViewApproval,
        Visitor,
        decide_approval,
        view_approval,
    )
    from langorch.app.approvals.driver import audit
    from langorch.app.approvals.keys import load_signing_keys
    from langorch.domain.approvals.outcomes import AlreadyDecided, Decided, Shown
    from langorch.domain.approvals.record import sign_link
    from langorch.web.errors import outcome_status, sentence_of

    approval = container.approvals.get(approval_id)
    if approval is None:
        from langorch.domain.errors import NotFoundError

        raise NotFoundError(f"approval {approval_id} does not exist")
    allowed = operator.may_decide_for(approval)
    if not allowed:
        raise NotYoursToDecideError(why_not(operator, approval))
    # The operator's own address; the browser names an approver only under the admin override.
    approver = request.field("approver", allowed[0]) if operator.admin else allowed[0]
    if approver not in allowed:
        raise NotYoursToDecideError(
            f"on behalf of: choose one of this approval's approvers ({', '.join(allowed)})"
        )

    def seen(method: str) -> Visitor:
        return Visitor(
            method,
            source_ip="127.0.0.1",
            user_agent=USER_AGENT,
            channel=CHANNEL,
            operator=operator.described,
        )

    if approver != operator.approver_in(approval):
        audit(
            container.approvals,
            approval_id,
            "override",
            "admin_on_behalf",
            at=container.clock(),
            actor=approver,
            visitor=seen("POST"),
        )
    ports = _console_ports(container)
    keys = load_signing_keys(ports.secrets, ports.settings.link_signing_secret)
    link = sign_link(
        approval_id,
        approver,
        approval.expires_at,
        keys.current,
        keys.current_key,
        generation=approval.link_generation,
    )
    # The form decides; the page view before it is the one the decide-once use-case expects.
    try:
        view = view_approval(ViewApproval(approval_id, link, seen("GET")), ports)
        if isinstance(view, AlreadyDecided):
            return Decision(done="already")
        if not isinstance(view, Shown):
            raise ConsoleActionError(f"approval {approval_id} cannot be decided now")
        form = {
            k: v[0]
            for k, v in request.form.items()
            if k in ("decision", "comment", "code") or k.startswith(EDIT_PREFIX)
        }
        form["nonce"] = view.nonce
        outcome = decide_approval(DecideApproval(approval_id, link, form, seen("POST")), ports)
    except AlreadyDecidedError:
        return Decision(done="already")
    except ApprovalLinkError as exc:
        raise ConsoleActionError(sentence_of(exc)) from exc
    if isinstance(outcome, Decided):
        return Decision(done=_done(outcome.approval))
    if isinstance(outcome, AlreadyDecided):
        return Decision(done="already")
    kept = {k: v for k, v in form.items() if k != "nonce"}
    return Decision(again=sentence_of(outcome.error), values=kept, status=outcome_status(outcome))


def _done(approval: Approval) -> str:
    """What the page says was done: the decision, or a fix's choice (``retry``, …)."""
    if approval.fix is None:
        return approval.status.value
    from langorch.domain.approvals.fixes import fix_answer
    from langorch.domain.approvals.record import decision_output

    return fix_answer(decision_output(approval)).choice


def why_not(operator: Operator, approval: Approval) -> str:
    """Why the operator cannot decide ``approval`` here, and who can, and how."""
    names = ", ".join(approval.named()) or "nobody"
    if operator.address is None:
        known = (
            "restart the console with --email YOUR_ADDRESS"
            if operator.source == "OS user"
            else "use credentials whose session name is your address"
        )
        who = f"You are {operator.described}, and the console knows no address of yours"
    else:
        known = ""
        who = f"You are {operator.described}, known as {operator.address}"
    how = f"; if you are one of them, {known}" if known else ""
    return (
        f"{who}: this approval names {names}. They decide it, from their emailed link{how}. "
        "An admin can decide on an approver's behalf with `langorch console --admin` (audited)."
    )


def _console_ports(container: Any) -> Any:
    """The container with the form dwell off (see the module docstring)."""
    from langorch.composition.container import Container

    if not isinstance(container, Container):
        return container
    settings = container.settings.model_copy(update={"approval_form_dwell_seconds": 0.0})
    return type(container)(settings, session=container._session, clock=container.clock)


def approval_form(approval: Approval, values: Mapping[str, str] | None) -> dict[str, Any]:
    """The console's decision form: context shown and typed edit fields."""
    typed = values or {}
    editable = []
    for key, value in list(approval.editable.items())[:50]:
        text = as_text(value)
        name = EDIT_PREFIX + str(key)
        if is_editable_here(value) and name in typed:
            text = bounded(typed[name], MAX_EDIT_FIELD_BYTES)
        kind = kind_of(value)
        # A fix's fields are the step's inputs and outputs: input.<key>, output.<key>.
        group, _, named = str(key).partition(".") if approval.fix else ("", "", str(key))
        editable.append(
            {
                "key": str(key),
                "label": human_label(named),
                "group": group,
                "name": name,
                "value": text,
                "kind": kind.value,
                "hint": _HINTS.get(kind, ""),
                "too_long": not is_editable_here(value),
                "why": edit_elsewhere(approval.run_id, approval.step_id, str(key)),
                "rows": min(max(text.count("\n") + 2, 3), 20),
            }
        )
    return {
        "context": [
            (human_label(str(k)), shown(v, key=str(k)))
            for k, v in list(approval.context.items())[:50]
        ],
        "editable": editable,
        "comment": typed.get("comment", ""),
        "pending": approval.is_pending,
    }


def redrive(container: Any, operator: Operator, run_id: str, from_step: str, reason: str) -> str:
    """Redrive a run (from a step, or from its last good checkpoint); returns its id.

    Raises:
        LangorchError: the recovery use-case's own refusals (still running, unknown step, …).
    """
    from langorch.app.recovery.redrive import redrive as redrive_run

    done = redrive_run(
        container,
        run_id,
        from_step=from_step.strip() or None,
        reason=(reason or "").strip()[:500] or "redriven from the console",
        actor=operator.actor,
    )
    return str(done.run_id)


def fork_edits(text: str) -> dict[str, Any]:
    """The ``KEY=JSON`` lines of the fork form as state edits (``langorch runs fork --set``).

    Raises:
        ConsoleActionError: a line without ``=``, an empty key, or a value that is not JSON,
            naming the line and how to write it.
    """
    edits: dict[str, Any] = {}
    for number, line in enumerate((text or "").splitlines(), start=1):
        if not line.strip():
            continue
        key, equals, value = line.partition("=")
        if not equals or not key.strip():
            raise ConsoleActionError(
                f'edits line {number}: write KEY=JSON, e.g. amount=120 or note="late"'
            )
        try:
            edits[key.strip()] = loads_strict(value, f"edits line {number}")
        except JsonShapeError as exc:
            raise ConsoleActionError(str(exc)) from None
        except JsonSyntaxError as exc:
            raise ConsoleActionError(
                f"edits line {number}: the value of {bounded(key.strip(), 100)!r} is not JSON "
                f'({exc.problems[0].message}); quote text: {key.strip()}="…"'
            ) from None
    return edits


def fork(
    container: Any, operator: Operator, run_id: str, at_step: str, edits: str, reason: str
) -> str:
    """Start a new run from ``run_id``'s checkpoint before ``at_step``, with edited state.

    Returns:
        The new run's id.

    Raises:
        ConsoleActionError: the edits cannot be read, or no step was chosen.
        LangorchError: the fork use-case's own refusals (unknown step, never reached, …).
    """
    from langorch.app.recovery.forks import fork as fork_run

    if not at_step.strip():
        raise ConsoleActionError(f"choose the step the fork of {run_id} starts at")
    done = fork_run(
        container,
        run_id,
        at_step=at_step.strip(),
        edits=fork_edits(edits),
        reason=(reason or "").strip()[:500] or "forked from the console",
        actor=operator.actor,
    )
    return str(done.run_id)
