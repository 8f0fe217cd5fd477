"""Asking a person to fix a failed step (``on_error: ask``, the workflow's ``on_failure: ask``;
seed 000 verification 6).

After its last attempt a step that asks does not fail the run. Its node records the failure in
the state (``fixes``: the error and the round) and routes to itself. Run again, the node finds
the failure and parks on an approval — an interrupt of kind ``approval`` whose request carries
``fix`` — before doing any work, so the failed call is not repeated while the person decides.
On resume the same node reads the answer (:func:`~langorch.domain.approvals.fixes.fix_answer`)
and retries with the inputs as edited (merged into ``shared_context``), goes on with the outputs
the person gave (skip), or fails the run with the step's error. A retry that fails again after
its own retries asks again, as the next round.

Parking on the approval machinery gives a fix everything an approval has: signed links, the
console's inbox, email, reminders and escalation, ``langorch dev``'s outbox; the decision's
channel and who made it reach the timeline through the run's resume.
"""

from __future__ import annotations

from typing import Any

from langorch.domain.approvals.fixes import FAIL, INPUT, OUTPUT, RETRY, SKIP, FixAnswer
from langorch.domain.definitions import AskSpec
from langorch.domain.templates import TemplateError, render
from langorch.engine.context import EngineContext
from langorch.engine.kinds.base import StepSpec, resolve_input, scope_of
from langorch.engine.state import OrchestrationState

_EMPTY: dict[str, Any] = {"number": 0, "integer": 0, "boolean": False, "array": [], "object": {}}
"""A skip's output field starts as its declared type's empty value (text: nothing yet)."""


def pending_fix(spec: StepSpec, state: OrchestrationState) -> dict[str, Any] | None:
    """The step's failure awaiting a person's answer (``{"error", "round"}``), if any."""
    if spec.ask is None:
        return None
    pending = (state.get("fixes") or {}).get(spec.step_id)
    return pending if isinstance(pending, dict) else None


def asked(spec: StepSpec, error: dict[str, Any], before: dict[str, Any] | None) -> dict[str, Any]:
    """The state update that records a failure to ask about: round 1, or the round after
    ``before`` (the failure an answered round's retry was fixing)."""
    number = int(before.get("round") or 1) + 1 if before is not None else 1
    return {"fixes": {spec.step_id: {"error": dict(error), "round": number}}}


def settled(spec: StepSpec) -> dict[str, Any]:
    """The state update once the person's answer is acted on: nothing is pending."""
    return {"fixes": {spec.step_id: None}}


def with_inputs(state: OrchestrationState, inputs: dict[str, Any]) -> OrchestrationState:
    """``state`` with the person's edited inputs in ``shared_context`` (for the retry)."""
    if not inputs:
        return state
    shared = {**(state.get("shared_context") or {}), **inputs}
    return {**state, "shared_context": shared}  # type: ignore[typeddict-item]


def choices(spec: StepSpec) -> list[str]:
    """What the person may do: skip only where the step does not choose a branch."""
    return [RETRY, FAIL] if spec.branching else [RETRY, SKIP, FAIL]


def fix_request(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, pending: dict[str, Any]
) -> dict[str, Any]:
    """The approval request the run parks on: the error, the inputs (editable), the outputs a
    skip gives (editable, empty), who is asked and until when.

    Args:
        spec: the failed step (``spec.ask`` set).
        state: the run's state when it failed.
        ctx: the segment's context (the deployment's default approvers).
        pending: the failure (``{"error", "round"}``).
    """
    ask = spec.ask if spec.ask is not None else AskSpec()
    error = pending["error"]
    offered = choices(spec)
    names = scope_of(spec, state)
    editable = {INPUT + k: _shown(resolve_input(k, names)) for k in spec.inputs}
    if SKIP in offered:
        types = spec.block.output_types if spec.block else {}
        editable |= {OUTPUT + k: _EMPTY.get(types.get(k, "string")) for k in spec.outputs}
    said = f"{error.get('type', 'Error')}: {error.get('message', '')}"
    scope = scope_of(spec, {**state, "error": error})  # type: ignore[typeddict-item]
    request: dict[str, Any] = {
        "kind": "approval",
        "step_id": spec.step_id,
        "title": _render(ask.title, scope) or f"Step {spec.step.name or spec.step_id} failed",
        "message": _render(ask.message, scope) or said,
        "context": {},
        "editable": editable,
        "approvers": list(ask.approvers or spec.approvers or ctx.default_approvers),
        "timeout_seconds": ask.timeout_seconds,
        "on_timeout": "fail",
        "require_code": ask.require_code,
        "iteration": int(pending.get("round") or 1),
        "fix": {
            "error_type": str(error.get("type", "Error")),
            "error_message": str(error.get("message", "")),
            "attempts": int(error.get("attempts") or 1),
            "choices": offered,
            "kind": spec.kind.value,
        },
    }
    policy = ask.policy()
    if policy != type(policy)():
        request["policy"] = policy.model_dump(mode="json", exclude_defaults=True)
    return request


def _shown(value: Any) -> Any:
    """An input's value for its field: an empty one is a text box to fill in."""
    return None if value == "" else value


def _render(template: str, scope: dict[str, Any]) -> str:
    """A title or message the workflow declares; a failure to render it leaves the default
    (the person must be asked all the same)."""
    if not template:
        return ""
    try:
        return render(template, scope)
    except TemplateError:
        return ""


def answered(answer: FixAnswer) -> dict[str, Any]:
    """What the step's events say of the answer: the choice, who, and where from."""
    said: dict[str, Any] = {"choice": answer.choice}
    if answer.by:
        said["by"] = answer.by
    if answer.via:
        said["via"] = answer.via
    return said


__all__ = [
    "FAIL",
    "RETRY",
    "SKIP",
    "answered",
    "asked",
    "choices",
    "fix_request",
    "pending_fix",
    "settled",
    "with_inputs",
]
