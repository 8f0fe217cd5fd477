"""``approval``: park the run on an interrupt carrying what the approver sees; on resume,
apply the decision (edits, feedback) and route by its label, bounded by ``max_iterations``."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from langgraph.types import interrupt

from langorch.domain.approvals.edits import empty_value
from langorch.domain.errors import ReviewLoopExhaustedError, StepFailedError
from langorch.domain.step_settings import APPROVAL_LABELS, ApprovalSpec
from langorch.domain.templates import render
from langorch.engine.context import EngineContext
from langorch.engine.kinds.base import (
    Executor,
    Outcome,
    StepSpec,
    scope_of,
    summarize,
    visits_of,
)
from langorch.engine.state import OrchestrationState


async def run_approval(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    """Ask, then apply the answer; ``<step_id>_decision`` records who decided what."""
    approval = spec.step.approval
    if approval is None:
        raise StepFailedError(f"step {spec.step_id}: approval settings missing")
    iteration = visits_of(spec, state) + 1
    request = _request(spec, state, ctx, approval, iteration)
    decision = _decision_of(interrupt(request))
    label = decision["decision"]
    if label == "timed_out":
        label = _timeout_label(spec, approval.on_timeout)
    edits = decision.get("edits") or {}
    unknown = sorted(set(edits) - set(approval.editable_keys))
    if unknown:
        raise StepFailedError(
            f"step {spec.step_id}: edits to keys that are not editable: {unknown}"
        )
    context: dict[str, Any] = dict(edits)
    if decision.get("comment"):
        context[approval.feedback_key] = decision["comment"]
    context[f"{spec.step_id}_decision"] = {
        "decision": decision["decision"],
        "approver": decision.get("approver"),
        "comment": decision.get("comment", ""),
        "iteration": iteration,
        # What this round showed, as digests: the next round tells the approver what changed.
        "shown": {k: _digest(v) for k, v in request["context"].items()},
    }
    if decision.get("votes"):
        # Every vote of a counted decision, for the next steps (who approved, who rejected).
        context[f"{spec.step_id}_decision"]["votes"] = list(decision["votes"])
    if label == "rejected" and approval.max_iterations and iteration >= approval.max_iterations:
        return _exhausted(spec, approval, context, iteration)
    return Outcome(context=context, label=label)


def _exhausted(
    spec: StepSpec, approval: ApprovalSpec, context: dict[str, Any], iteration: int
) -> Outcome:
    """The last allowed round was rejected: follow ``on_max_iterations``, else fail the run.

    Going on with the rejected draft (what the approved branch would do) would let a run the
    approver refused end as a success.
    """
    if approval.on_max_iterations is None:
        raise ReviewLoopExhaustedError(
            f"review loop exhausted after {iteration} rounds: step {spec.step_id} was rejected "
            f"{iteration} times (max_iterations {approval.max_iterations}); declare "
            "approval.on_max_iterations to route it"
        )
    decision = dict(context[f"{spec.step_id}_decision"], exhausted=True)
    context[f"{spec.step_id}_decision"] = decision
    summary = {
        "exhausted": f"after {iteration} rounds -> {approval.on_max_iterations}",
        **summarize(context),
    }
    return Outcome(
        context=context, label="exhausted", goto=[approval.on_max_iterations], summary=summary
    )


def _request(
    spec: StepSpec,
    state: OrchestrationState,
    ctx: EngineContext,
    approval: ApprovalSpec,
    iteration: int,
) -> dict[str, Any]:
    scope = scope_of(spec, state)
    shared = state.get("shared_context") or {}
    shown = {k: shared.get(k) for k in approval.show_keys}
    request: dict[str, Any] = {
        "kind": "approval",
        "step_id": spec.step_id,
        "title": render(approval.title, scope)
        if approval.title
        else spec.step.name or spec.step_id,
        "message": render(approval.message, scope) if approval.message else "",
        "context": shown,
        "editable": {k: _editable(shared.get(k), approval, k) for k in approval.editable_keys},
        "approvers": _approvers(approval, spec, ctx),
        "timeout_seconds": approval.timeout_seconds,
        "on_timeout": approval.on_timeout,
        "require_code": approval.require_code,
        "iteration": iteration,
        "max_iterations": approval.max_iterations,
    }
    if approval.channels:
        request["channels"] = list(approval.channels)
    policy = approval.policy()
    if policy != type(policy)():
        # Only a non-default policy travels: requests of plain steps stay as they were.
        request["policy"] = policy.model_dump(mode="json", exclude_defaults=True)
    previous = _previous_round(shared.get(f"{spec.step_id}_decision"), shown, iteration)
    if previous is not None:
        request["previous"] = previous
    return request


def _editable(value: Any, approval: ApprovalSpec, key: str) -> Any:
    """A key's current value for the approver's field; a declared key nothing provided yet
    starts as its type's empty value (an empty list is a list editor, not a text box)."""
    declared = approval.editable_types.get(key)
    return empty_value(declared) if value is None and declared is not None else value


def _approvers(approval: ApprovalSpec, spec: StepSpec, ctx: EngineContext) -> list[str]:
    """The step's approvers, then its quorum groups' (each once)."""
    groups = approval.policy().group_approvers()
    defaults = [] if groups else ctx.default_approvers
    base = list(approval.approvers or spec.approvers or defaults)
    return base + [a for a in dict.fromkeys(groups) if a not in base]


def _previous_round(last: Any, shown: dict[str, Any], iteration: int) -> dict[str, Any] | None:
    """What the approver said when they rejected the previous round, and which shown keys
    changed since (``None`` in round 1, or when the previous round was not a rejection)."""
    if not isinstance(last, dict) or iteration < 2:
        return None
    if last.get("iteration") != iteration - 1 or last.get("decision") != "rejected":
        return None
    recorded = last.get("shown")
    before: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
    return {
        "iteration": iteration - 1,
        "approver": last.get("approver"),
        "comment": str(last.get("comment") or ""),
        "changed": [k for k, v in shown.items() if before.get(k) != _digest(v)],
    }


def _digest(value: Any) -> str:
    return shown_digest(value)


def shown_digest(value: Any) -> str:
    """A short, stable fingerprint of a shown value (the values themselves may be large); a
    decision keeps these under ``shown``, so ``langorch replay`` knows what it was about."""
    text = json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _decision_of(answer: Any) -> dict[str, Any]:
    if isinstance(answer, str):
        answer = {"decision": answer}
    if not isinstance(answer, dict) or answer.get("decision") not in APPROVAL_LABELS:
        raise StepFailedError(
            f"an approval resume must be {{'decision': one of {list(APPROVAL_LABELS)}}}, "
            f"got {answer!r:.200}"
        )
    return answer


def _timeout_label(spec: StepSpec, on_timeout: str) -> str:
    if on_timeout == "approve":
        return "approved"
    if on_timeout == "reject":
        return "rejected"
    if on_timeout == "fail":
        raise StepFailedError(f"approval {spec.step_id} timed out")
    return "timed_out" if "timed_out" in spec.branch_targets else "rejected"


EXECUTORS: dict[str, Executor] = {"approval": run_approval}
