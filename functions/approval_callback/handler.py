"""The approval_callback Lambda: ``GET|HEAD|POST /approvals/{id}`` from API Gateway (HTTP API v2).

``POST /slack/interactions`` takes Slack's button presses (see :func:`_slack`): verified,
handed on (this function invokes itself asynchronously; locally a worker thread) and
acknowledged within Slack's three seconds; the handed-on event decides.

``GET`` and ``HEAD`` show the page and never decide (mail scanners open links); only a ``POST``
from the page's form — signed query string, the page view's token, and the one-time code when
required — decides. The use-cases answer typed outcomes or raise named refusals; this module
alone picks the status code for each (Powertools' exception handlers map the errors) and
``web.pages`` renders. Answers are HTML with the approval pages' security headers. The source IP is
``requestContext.http.sourceIp``; the query string (a signed link) is never logged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from aws_lambda_powertools import Logger, Metrics, single_metric
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.metrics import MetricUnit

from langorch import observability
from langorch.adapters.slack import SlackSignatureError
from langorch.app.approvals.chat import FORM_JOB, PRESS_JOB
from langorch.app.approvals.decisions import (
    DecideApproval,
    ViewApproval,
    Visitor,
    decide_approval,
    view_approval,
)
from langorch.composition.bootstrap import SandboxContainer
from langorch.domain.approvals.outcomes import (
    ApprovalNotFoundError,
    Decided,
    DecideOutcome,
    DecisionNotDeliveredError,
    ViewOutcome,
)
from langorch.domain.approvals.record import ApprovalLinkError
from langorch.domain.errors import LangorchError
from langorch.web.http import (
    FormContentError,
    FormNotReadableError,
    FormTooLargeError,
    UnreadableBodyError,
    raw_body,
)
from langorch.web.proxy_events import answer_either
from langorch.web.slack import SlackPayloadError

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from langorch.domain.approvals.record import Approval
    from langorch.web.pages import Page

# Typed here so Powertools' decorators keep the handler's signature for mypy.
logger: Logger = observability.logger()
# No X-Ray SDK (as in the trigger): approvers wait on this function's cold start (P3);
# Lambda's active tracing still records each invocation.
metrics: Metrics = observability.metrics()
app = APIGatewayHttpResolver()
container = SandboxContainer()
"""The sandbox's container, built on the first invocation (``composition.bootstrap``)."""

MAX_FORM_BYTES = 512 * 1024
MAX_FORM_FIELDS = 500
"""More fields than any approval page has (parse_qs raises past it: a FormContentError)."""
FORM_TYPE = "application/x-www-form-urlencoded"


def _visitor() -> Visitor:
    http = app.current_event.request_context.http
    return Visitor(method=http.method, source_ip=http.source_ip, user_agent=http.user_agent)


def _link() -> dict[str, str]:
    """The signed link's values: the request's query string."""
    return dict(app.current_event.query_string_parameters or {})


def _view(approval_id: str) -> ViewApproval:
    return ViewApproval(approval_id, link=_link(), visitor=_visitor())


def _response(page: Page) -> Response[str]:
    headers = {k: v for k, v in page.headers.items() if k != "Content-Type"}
    metrics.add_metric(name=f"ApprovalPages{page.status // 100}xx", unit=MetricUnit.Count, value=1)
    # HEAD (mail scanners probing links) gets the same status and headers, and no body.
    head = app.current_event.request_context.http.method.upper() == "HEAD"
    return Response(
        status_code=page.status,
        content_type=page.headers.get("Content-Type", "text/html; charset=utf-8"),
        body="" if head else page.body,
        headers=headers,
    )


def _answer(outcome: ViewOutcome | DecideOutcome) -> Response[str]:
    from langorch.web.pages import outcome_page

    return _response(outcome_page(outcome))


def _refused(error: LangorchError) -> Response[str]:
    from langorch.web.pages import refusal_page

    return _response(refusal_page(error))


# Powertools' exception mapping: a named error raised by a use-case (or by the form checks
# below) becomes its page here, status and words from the one table. Registered by call: the
# decorator form is untyped for mypy.
REFUSALS: tuple[type[LangorchError], ...] = (
    ApprovalLinkError,
    ApprovalNotFoundError,
    DecisionNotDeliveredError,
    FormNotReadableError,
    FormTooLargeError,
    FormContentError,
)
"""The errors this function answers with a page; any other error is a fault (a 500)."""
app.exception_handler(list(REFUSALS))(_refused)


@app.get("/approvals/<approval_id>")
def _get(approval_id: str) -> Response[str]:
    logger.thread_safe_append_keys(approval_id=approval_id)
    return _answer(view_approval(_view(approval_id), container()))


@app.head("/approvals/<approval_id>")
def _head(approval_id: str) -> Response[str]:
    logger.thread_safe_append_keys(approval_id=approval_id)
    return _answer(view_approval(_view(approval_id), container()))


@app.post("/approvals/<approval_id>")
def _post(approval_id: str) -> Response[str]:
    logger.thread_safe_append_keys(approval_id=approval_id)
    event = app.current_event
    content_type = (event.headers.get("content-type") or "").split(";")[0].strip().lower()
    if content_type != FORM_TYPE:
        raise FormNotReadableError(f"approval {approval_id}: POST of {content_type or 'no type'}")
    try:
        raw = raw_body(event.get("body"), bool(event.get("isBase64Encoded")))
    except UnreadableBodyError as exc:
        raise FormContentError(f"approval {approval_id}: body not readable") from exc
    if len(raw) > MAX_FORM_BYTES:
        raise FormTooLargeError(f"approval {approval_id}: form over {MAX_FORM_BYTES} bytes")
    try:
        fields = parse_qs(
            raw.decode("utf-8"), keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS
        )
    except (UnicodeDecodeError, ValueError) as exc:  # not UTF-8, or more fields than a page has
        raise FormContentError(
            f"approval {approval_id}: form not UTF-8 or too many fields"
        ) from exc
    form = {key: values[0] for key, values in fields.items() if values}
    command = DecideApproval(approval_id, link=_link(), form=form, visitor=_visitor())
    outcome = decide_approval(command, container())
    if isinstance(outcome, Decided):
        _approval_wait(outcome.approval)
    return _answer(outcome)


@app.post("/slack/interactions")
def _slack() -> Response[str]:
    """A button pressed on a Slack message: verified (signature, timestamp window) and handed
    on, then acknowledged at once. Slack wants its 200 within three seconds whatever the
    stores are doing, so nothing here reads or writes them: the press is decided by the
    handed-on job (:func:`_decide_press`), which answers the person beside the message."""
    from langorch.app.approvals.chat import DecideInChat, open_form, press_job
    from langorch.domain.approvals.channels import PostedMessage
    from langorch.web.slack import FormOpened, FormSent, form_errors, read_interaction

    event = app.current_event
    try:
        raw = raw_body(event.get("body"), bool(event.get("isBase64Encoded")))
    except UnreadableBodyError as exc:
        raise SlackPayloadError("Slack interaction body not readable") from exc
    signature = container().slack_requests.verify(raw, dict(event.headers or {}))
    press = read_interaction(raw)
    if press is None:
        return Response(status_code=200, content_type="text/plain", body="")
    logger.thread_safe_append_keys(approval_id=press.approval_id)
    where = PostedMessage("slack", press.conversation, press.message_id)
    if isinstance(press, FormOpened):
        job = open_form(
            "slack", press.trigger_id, press.user_id, where, press.approval_id, container()
        )
        _hand_on(job)
        return Response(status_code=200, content_type="text/plain", body="")
    form: dict[str, str] = {}
    if isinstance(press, FormSent):
        # Checked before the modal closes (Slack shows each error under its field): the
        # edits' types only, from the modal itself; the store is the decision's to read.
        errors = form_errors(press.kinds, press.form)
        if errors:
            body = json.dumps({"response_action": "errors", "errors": errors})
            return Response(status_code=200, content_type="application/json", body=body)
        form = press.form
    decision = press.form.get("decision", "") if isinstance(press, FormSent) else press.decision
    command = DecideInChat(
        press.approval_id, decision, press.user_id, where, delivery_id=signature, form=form
    )
    _hand_on(press_job(command))
    return Response(status_code=200, content_type="text/plain", body="")


def _hand_on(job: Mapping[str, Any]) -> None:
    container().handoff.hand_off(
        job, function_arn=app.lambda_context.invoked_function_arn, run=_handed_on
    )
    logger.info("slack interaction handed on", extra={"kind": job["kind"]})


def _handed_on(job: Mapping[str, Any]) -> None:
    """Run a job this function handed on (the same here as in the asynchronous invocation)."""
    from langorch.app.approvals.chat import fill_form

    if job.get("kind") == FORM_JOB:
        shown = fill_form(job, container())
        logger.info(
            "slack form filled", extra={"approval_id": job.get("approval_id"), "outcome": shown}
        )
        return
    _decide_press(job)


def _decide_press(job: Mapping[str, Any]) -> None:
    """Decide a handed-on press as its Slack user and tell them (the same here as in the
    asynchronous invocation). A store's error raises, so the press is run again."""
    from langorch.app.approvals.chat import decide_in_chat, press_of

    command = press_of(job)
    answer = decide_in_chat(command, container())
    logger.info(
        "slack press decided",
        extra={"approval_id": command.approval_id, "outcome": answer.outcome},
    )
    if answer.outcome == "decided" and answer.approval is not None:
        _approval_wait(answer.approval)


def _slack_refused(error: LangorchError) -> Response[str]:
    from langorch.web.errors import http_status

    status = http_status(error)
    logger.warning("slack interaction refused", extra={"error": type(error).__name__})
    return Response(status_code=status, content_type="text/plain", body=str(error))


app.exception_handler([SlackSignatureError, SlackPayloadError])(_slack_refused)


def _approval_wait(approval: Approval) -> None:
    # Decided: this request made the decision (a later visit is AlreadyDecided and emits
    # nothing), so each approval's wait is counted once.
    if approval.decided_at is None:
        return
    waited = (approval.decided_at - approval.created_at).total_seconds()
    metrics.add_metric(name="ApprovalWait", unit=MetricUnit.Seconds, value=max(waited, 0.0))
    _approval_quality(approval)


_QUALITY_UNITS = {
    "ApprovalDecideSeconds": MetricUnit.Seconds,
    "ApprovalRubberStamp": MetricUnit.Count,
    "ApprovalApproved": MetricUnit.Count,
}
"""The per-decision figures ``langorch approvals stats`` aggregates; CloudWatch's Average of
the 0/1 series is the rubber-stamp and approve rate."""


def _approval_quality(approval: Approval) -> None:
    """One decision's quality figures, per policy (``workflow/step``).

    The policy dimension is bounded by the deployed workflows' approval steps; the approver is
    not a dimension (any address may decide: one paid series per person, without bound) —
    per approver is ``langorch approvals stats`` and the console's quality page.
    """
    from langorch.domain.approvals.quality import RUBBER_STAMP_SECONDS, decision_facts

    facts = decision_facts(approval, container().approvals.audit(approval.approval_id))
    if facts is None:
        return
    stamp = facts.rubber_stamp(RUBBER_STAMP_SECONDS)
    _per_policy("ApprovalDecideSeconds", max(facts.seconds_to_decide, 0.0), policy=facts.policy)
    _per_policy("ApprovalRubberStamp", float(stamp), policy=facts.policy)
    _per_policy("ApprovalApproved", float(facts.approved), policy=facts.policy)


def _per_policy(name: str, value: float, **dimensions: str) -> None:
    """A metric with its own dimensions (``policy``), not the process's shared set."""
    with single_metric(
        name=name, unit=_QUALITY_UNITS[name], value=value, namespace=observability.NAMESPACE
    ) as metric:
        metric.add_dimension("service", observability.SERVICE)
        for key, dimension in dimensions.items():
            metric.add_dimension(key, dimension)


@logger.inject_lambda_context(clear_state=True, log_event=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Route the API Gateway event (v2, or the ``waf`` option's v1) to the page (GET/HEAD)
    or the decision (POST); decide a Slack press handed on by ``POST /slack/interactions``."""
    # Request keys are context-local (see run_segment's handler): locally many invocations
    # share this process, and a line must never carry another request's ids.
    logger.thread_safe_clear_keys()
    if isinstance(event, dict) and event.get("kind") in (PRESS_JOB, FORM_JOB):
        # A job this function handed to itself (Lambda's asynchronous invocation).
        _handed_on(event)
        return {"handled": event["kind"]}
    return answer_either(app.resolve, event, context)
