"""The trigger Lambda: one function for the three things that start runs.

* API Gateway HTTP API (v2) ``POST /hooks/{workflow_id}`` — a signed webhook delivery (or
  the REST API's 1.0 event of the ``waf`` option, answered alike: ``web.proxy_events``);
* the Input of a langorch EventBridge Scheduler schedule (``source: langorch.schedule``);
* an EventBridge ``Object Created`` event from S3 (``source: aws.s3``);
* an event trigger's rule (``source: langorch.event``, the EventBridge event inside), or a bare
  EventBridge event;
* the stack's reconcile schedule (``source: langorch.reconcile``), which ends runs whose
  execution ended without their record following (:mod:`langorch.app.recovery.reconcile`).

An adapter only: it parses the event, calls one use-case of :mod:`langorch.app.triggers` and
maps the result (a webhook's status from the web edge's one table, :mod:`langorch.web.errors`).
It never imports LangGraph or LangChain (ARCHITECTURE §2 "Cold starts"), and it logs delivery
ids and run ids, never signatures or secrets.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import single_metric
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.metrics import MetricUnit

from langorch import observability
from langorch.adapters.scheduler import APPROVAL_TIMER_KIND
from langorch.app.approvals.bounces import (
    record_undeliverable,
    ses_notifications,
    undeliverable_of,
)
from langorch.app.approvals.votes import fire_timers
from langorch.app.recovery.reconcile import reconcile_runs
from langorch.app.triggers import (
    TriggerOutcome,
    WebhookRequest,
    accept_webhook,
    handle_event,
    handle_s3_object,
    handle_schedule,
)
from langorch.composition.bootstrap import SandboxContainer
from langorch.domain.errors import LangorchError
from langorch.domain.s3_notifications import S3EventError, objects_created
from langorch.domain.triggers import EventDelivered, S3ObjectCreated, ScheduleFired, event_kind
from langorch.web.errors import answer_for, http_status, outcome_status
from langorch.web.http import error_body, raw_body
from langorch.web.proxy_events import answer_either

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext


logger = observability.logger()
# No X-Ray SDK here: it alone costs more than boto3 to import, and this function answers
# webhooks on a cold start (PERFORMANCE P3, <= 2x boto3). Lambda's active tracing still records
# every invocation; the runner, where the time goes, keeps full Tracer subsegments.
app = APIGatewayHttpResolver()
container = SandboxContainer()
"""The sandbox's container, built on the first invocation (``composition.bootstrap``)."""


@app.post("/hooks/<workflow_id>")
def _webhook(workflow_id: str) -> Response[str]:
    event = app.current_event
    try:
        body = raw_body(event.get("body"), bool(event.get("isBase64Encoded")))
        request = WebhookRequest(
            workflow_id=workflow_id,
            headers=dict(event.headers),
            body=body,
            source_ip=event.request_context.http.source_ip,
        )
        started = accept_webhook(request, container())
    except LangorchError as exc:
        if answer_for(exc) is None:
            raise  # not the sender's fault (a backend failed): a 5xx, and the sender retries
        status = http_status(exc)
        logger.warning(
            "webhook rejected",
            extra={"workflow_id": workflow_id, "status": status, "reason": str(exc)[:200]},
        )
        _count("WebhookRejected", 1, status=str(status))
        return _response(status, error_body(exc))
    logger.info(
        "webhook run",
        extra={
            "workflow_id": workflow_id,
            "run_id": started.run_id,
            "run_created": started.created,
        },
    )
    if started.created:
        _count("RunsStarted", 1, trigger="webhook")
    answer = {"run_id": started.run_id, "created": started.created}
    return _response(outcome_status(started), answer)


def _response(status: int, body: dict[str, Any]) -> Response[str]:
    return Response(status_code=status, content_type="application/json", body=json.dumps(body))


def _count(name: str, value: int, **dimensions: str) -> None:
    # One metric with its own dimension (not the process's shared dimension set).
    with single_metric(
        name=name, unit=MetricUnit.Count, value=value, namespace=observability.NAMESPACE
    ) as metric:
        metric.add_dimension("service", observability.SERVICE)
        for key, dim in dimensions.items():
            metric.add_dimension(key, dim)


def _outcome(outcome: TriggerOutcome) -> dict[str, Any]:
    created = sum(1 for r in outcome.started if r.created)
    if created:
        _count("RunsStarted", created, trigger=outcome.trigger)
    for run in outcome.started:
        logger.info(
            "trigger run",
            extra={
                "workflow_id": run.workflow_id,
                "run_id": run.run_id,
                "run_created": run.created,
            },
        )
    return outcome.to_dict()


def _s3_outcomes(objects: list[S3ObjectCreated]) -> dict[str, Any]:
    """Start the runs for each created object; one answer for the batch."""
    answers = []
    for created in objects:
        logger.thread_safe_append_keys(bucket=created.bucket, key=created.key)
        answers.append(_outcome(handle_s3_object(created, container())))
    if len(answers) == 1:
        return answers[0]
    return {
        "trigger": "s3",
        "runs": [run for answer in answers for run in answer.get("runs", [])],
        "skipped": [skip for answer in answers for skip in answer.get("skipped", [])],
    }


def _approval_timer(event: dict[str, Any]) -> dict[str, Any]:
    """An approval's one-time wake-up (reminders, escalations): send what is due, schedule
    the next. Safe to repeat: the Scheduler retries, and a timer sends only once."""
    approval_id = str(event.get("approval_id") or "")
    logger.thread_safe_append_keys(approval_id=approval_id)
    done = fire_timers(approval_id, container())
    return {
        "approval_timer": approval_id,
        "fired": [f"{t.kind} {t.index + 1}" for t in done.fired],
        "next": done.next_at.isoformat() if done.next_at else None,
    }


def _email_events(notifications: list[dict[str, Any]]) -> dict[str, Any]:
    """SES bounces and complaints of approval emails: mark the recipient undeliverable on the
    approval and escalate it (``langorch.app.approvals.bounces``)."""
    escalated = []
    for notification in notifications:
        for notice in undeliverable_of(notification):
            logger.thread_safe_append_keys(approval_id=notice.approval_id)
            if record_undeliverable(notice, container()):
                escalated.append(notice.approval_id)
    return {"email_events": len(notifications), "escalated": escalated}


def _reconcile() -> dict[str, Any]:
    """End the runs whose execution ended without their record following; count them."""
    repairs = reconcile_runs(container())
    repaired = sum(1 for repair in repairs if repair.repaired)
    _count("RunsReconciled", repaired)
    logger.info("reconcile done", extra={"found": len(repairs), "repaired": repaired})
    return {"reconciled": [repair.to_dict() for repair in repairs]}


def _handle(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Route the event by its shape to the matching use-case.

    Args:
        event: an API Gateway HTTP API v2 request, a schedule's Input or an S3 EventBridge
            event.
        context: the Lambda context.

    Returns:
        The HTTP response (webhooks), or ``{"trigger", "runs", "skipped"}``.
    """
    logger.thread_safe_clear_keys()  # context-local keys, as in run_segment's handler
    if event.get("kind") == APPROVAL_TIMER_KIND:
        return _approval_timer(event)
    notifications = ses_notifications(event)
    if notifications is not None:
        return _email_events(notifications)
    kind = event_kind(event)
    if kind == "http":
        return answer_either(app.resolve, event, context)
    if kind == "schedule":
        try:
            fired = ScheduleFired.model_validate(event)
        except ValueError as exc:
            # A malformed Input never gets better on retry: drop it loudly.
            logger.error("malformed schedule event", extra={"reason": str(exc)[:300]})
            return {"ignored": "malformed schedule event"}
        logger.thread_safe_append_keys(workflow_id=fired.workflow_id, schedule=fired.schedule)
        return _outcome(handle_schedule(fired, container()))
    if kind == "reconcile":
        return _reconcile()
    if kind == "s3":
        try:
            objects = objects_created(event)
        except S3EventError as exc:
            # A malformed event never gets better on retry: refuse it loudly, start nothing.
            logger.error("malformed S3 event", extra={"reason": str(exc)[:300]})
            return {"ignored": "malformed S3 event", "reason": str(exc)[:300]}
        if not objects:
            logger.info("S3 event names no created object (test event or other type)")
            return {"trigger": "s3", "runs": [], "skipped": []}
        return _s3_outcomes(objects)
    if kind == "event":
        try:
            delivered = EventDelivered.from_lambda_event(event)
        except ValueError as exc:
            logger.error("malformed EventBridge event", extra={"reason": str(exc)[:300]})
            return {"ignored": "malformed EventBridge event", "reason": str(exc)[:300]}
        logger.thread_safe_append_keys(event_id=delivered.event_id, bus=delivered.bus)
        return _outcome(handle_event(delivered, container()))
    logger.error("unsupported event", extra={"keys": sorted(event)[:20]})
    return {"ignored": "unsupported event"}


handler: Callable[[dict[str, Any], LambdaContext], dict[str, Any]] = logger.inject_lambda_context(
    clear_state=True
)(_handle)
"""The Lambda entry point: :func:`_handle` with Powertools' logging context."""
