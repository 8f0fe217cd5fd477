"""The request_approval Lambda: invoked by ``AwaitApproval`` (``lambda:invoke.waitForTaskToken``).

Event (built by the state machine, ``statemachine.asl.json``)::

    {"run_id": "run-…", "approval": {…the approval request, with interrupt_id…},
     "task_token": "…"}

Answer: ``{"approval_id", "created", "emailed", "status"}`` (Step Functions ignores it: the run
resumes when the approver decides). The task token is stored server-side and never logged: the
event is not logged and the token is held as a ``SecretStr``. Infrastructure errors
(``StorageError``) propagate under their class name for the state machine's ``Retry``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel, ConfigDict, SecretStr

from langorch import observability
from langorch.app.approvals.decisions import RequestApproval, request_approval
from langorch.composition.bootstrap import SandboxContainer
from langorch.domain.errors import StorageError

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext


# Typed here so Powertools' decorators keep the handler's signature for mypy.
logger: Logger = observability.logger()
tracer: Tracer = observability.tracer()
metrics: Metrics = observability.metrics()
container = SandboxContainer()
"""The sandbox's container, built on the first invocation (``composition.bootstrap``)."""


class RequestApprovalEvent(BaseModel):
    """The ``AwaitApproval`` task's payload."""

    model_config = ConfigDict(extra="ignore")

    run_id: str
    approval: dict[str, Any]
    task_token: SecretStr


@logger.inject_lambda_context(clear_state=True, log_event=False)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Store the token, record the approval and email its approvers (see the module docstring)."""
    try:
        return _request(event)
    except Exception as exc:
        if not observability.retried_on_purpose(exc, RETRIED):
            observability.unexpected_error("request-approval")
        raise


RETRIED = (StorageError,)
"""Errors the state machine's ``Retry`` on AwaitApproval absorbs on purpose: not alarming."""


def _request(event: dict[str, Any]) -> dict[str, Any]:
    request = RequestApprovalEvent.model_validate(event)
    # Context-local keys, as in run_segment's handler (local mode runs invocations in threads).
    logger.thread_safe_clear_keys()
    logger.thread_safe_append_keys(run_id=request.run_id, step_id=request.approval.get("step_id"))
    result = request_approval(
        RequestApproval(
            run_id=request.run_id,
            approval=request.approval,
            task_token=request.task_token.get_secret_value(),
        ),
        container(),
    )
    logger.thread_safe_append_keys(approval_id=result.approval_id)
    if result.created:
        metrics.add_metric(name="ApprovalsRequested", unit=MetricUnit.Count, value=1)
    if result.emailed:
        metrics.add_metric(name="ApprovalEmails", unit=MetricUnit.Count, value=len(result.emailed))
    return {
        "approval_id": result.approval_id,
        "created": result.created,
        "emailed": len(result.emailed),
        "status": result.status.value,
    }
