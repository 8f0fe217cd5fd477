"""The approval_callback Lambda: ``GET|HEAD|POST /approvals/{id}`` from API Gateway (HTTP API v2).

``GET`` and ``HEAD`` show the page and never decide (mail scanners open links); only a ``POST``
from the page's form — signed query string, nonce, and the one-time code when required —
decides. Answers are HTML with the approval pages' security headers. The source IP is
``requestContext.http.sourceIp``; the query string (a signed link) is never logged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.metrics import MetricUnit

from langorch import observability
from langorch.app.approvals import ApprovalHttpRequest, decide_approval, view_approval
from langorch.config import Settings
from langorch.web.http import UnreadableBodyError, raw_body

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from langorch.app.container import Container
    from langorch.web.pages import Page

# Typed here so Powertools' decorators keep the handler's signature for mypy.
logger: Logger = observability.logger()
# No X-Ray SDK (as in the trigger): approvers wait on this function's cold start (P3);
# Lambda's active tracing still records each invocation.
metrics: Metrics = observability.metrics()
app = APIGatewayHttpResolver()

MAX_FORM_BYTES = 512 * 1024
MAX_FORM_FIELDS = 500
"""More fields than any approval page has (parse_qs raises past it: answered 400, not 500)."""
FORM_TYPE = "application/x-www-form-urlencoded"

_container: Container | None = None


def container() -> Container:
    """The sandbox's container, built on first use from the environment's settings."""
    global _container
    if _container is None:
        from langorch.app.container import Container

        _container = Container(Settings())
    return _container


def _request(approval_id: str, form: dict[str, str] | None = None) -> ApprovalHttpRequest:
    event = app.current_event
    http = event.request_context.http
    return ApprovalHttpRequest(
        approval_id=approval_id,
        method=http.method,
        query=dict(event.query_string_parameters or {}),
        form=form or {},
        source_ip=http.source_ip,
        user_agent=http.user_agent,
    )


def _response(page: Page) -> Response[str]:
    headers = {k: v for k, v in page.headers.items() if k != "Content-Type"}
    metrics.add_metric(name=f"ApprovalPages{page.status // 100}xx", unit=MetricUnit.Count, value=1)
    return Response(
        status_code=page.status,
        content_type=page.headers.get("Content-Type", "text/html; charset=utf-8"),
        body=page.body,
        headers=headers,
    )


@app.get("/approvals/<approval_id>")
def _get(approval_id: str) -> Response[str]:
    logger.thread_safe_append_keys(approval_id=approval_id)
    return _response(view_approval(_request(approval_id), container()))


@app.head("/approvals/<approval_id>")
def _head(approval_id: str) -> Response[str]:
    logger.thread_safe_append_keys(approval_id=approval_id)
    return _response(view_approval(_request(approval_id), container()))


@app.post("/approvals/<approval_id>")
def _post(approval_id: str) -> Response[str]:
    from langorch.web.pages import result_page

    logger.thread_safe_append_keys(approval_id=approval_id)
    event = app.current_event
    content_type = (event.headers.get("content-type") or "").split(";")[0].strip().lower()
    if content_type != FORM_TYPE:
        return _response(
            result_page(
                "The form could not be read",
                "Decisions are sent from the approval page's form; nothing was changed.",
                status=415,
            )
        )
    unreadable = result_page(
        "The form could not be read",
        "The form's content is not what an approval page sends; nothing was changed. "
        "Open the link from your email and press a button again.",
        status=400,
    )
    try:
        raw = raw_body(event.get("body"), bool(event.get("isBase64Encoded")))
    except UnreadableBodyError:
        return _response(unreadable)
    if len(raw) > MAX_FORM_BYTES:
        return _response(
            result_page(
                "The form is too large",
                "The form is larger than an approval accepts; nothing was changed.",
                status=413,
            )
        )
    try:
        fields = parse_qs(
            raw.decode("utf-8"), keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS
        )
    except (UnicodeDecodeError, ValueError):  # not UTF-8, or more fields than a page has
        return _response(unreadable)
    form = {key: values[0] for key, values in fields.items() if values}
    before = container().approvals.get(approval_id)
    page = decide_approval(_request(approval_id, form), container())
    if page.status == 200 and before is not None and before.decided_at is None:
        _approval_wait(approval_id)
    return _response(page)


def _approval_wait(approval_id: str) -> None:
    # Emitted when this request saw the approval undecided and it is decided now: a later
    # visit shows the same page for an approval decided earlier and emits nothing. (Two
    # racing POSTs could both count it; the decision itself is still made once.)
    approval = container().approvals.get(approval_id)
    if approval is None or approval.decided_at is None:
        return
    waited = (approval.decided_at - approval.created_at).total_seconds()
    metrics.add_metric(name="ApprovalWait", unit=MetricUnit.Seconds, value=max(waited, 0.0))


@logger.inject_lambda_context(clear_state=True, log_event=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Route the API Gateway v2 event to the page (GET/HEAD) or the decision (POST)."""
    # Request keys are context-local (see run_segment's handler): locally many invocations
    # share this process, and a line must never carry another request's ids.
    logger.thread_safe_clear_keys()
    return app.resolve(event, context)
