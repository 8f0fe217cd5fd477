"""``verification``: evaluate the checks in order; the first failing check decides — fail the
node (``VerificationFailedError``, which its error routes and the procedure's ``on_failure``
handle), or take its branch; a failing check that only warns is put on the timeline."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from langorch.domain.ckp.errors import VerificationFailedError
from langorch.domain.kinds.verification import PASSED, VerificationSettings
from langorch.domain.templates import evaluate, render
from langorch.engine.context import EngineContext
from langorch.engine.kinds.base import Executor, Outcome, StepSpec, scope_of
from langorch.engine.state import OrchestrationState


async def run_verification(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    """Check; ``<step_id>_failed_checks`` lists the ids of the checks that failed."""
    from langgraph.config import get_stream_writer

    settings = VerificationSettings.model_validate(spec.step.settings or {})
    scope = scope_of(spec, state)
    failed: list[str] = []
    for check in settings.checks:
        if evaluate(check.condition, scope):
            continue
        failed.append(check.id)
        message = render(check.message, scope) if check.message else check.condition
        if check.on_fail == "fail":
            raise VerificationFailedError(
                f"node {spec.step_id}: check {check.id} failed: {message}"
            )
        if check.on_fail == "route":
            context = {f"{spec.step_id}_failed_checks": failed}
            return Outcome(label=check.id, context=context)
        get_stream_writer()(_warning(spec, check.id, message, attempt))
    label = PASSED if PASSED in spec.branch_targets else None
    return Outcome(label=label, context={f"{spec.step_id}_failed_checks": failed})


def _warning(spec: StepSpec, check: str, message: str, attempt: int) -> dict[str, Any]:
    return {
        "event": "tool_called",
        "step_id": spec.step_id,
        "at": datetime.now(UTC).isoformat(),
        "attempt": attempt,
        "tool": f"check {check}",
        "args": "",
        "duration_ms": 0,
        "outcome": "warn",
        "tool_error": message[:300],
    }


EXECUTORS: dict[str, Executor] = {"verification": run_verification}
