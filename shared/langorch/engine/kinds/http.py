"""``http``: render the call, send it with a stable ``Idempotency-Key``, keep the response.

The response is a recorded side effect (seed 001 §5), like an LLM answer or a tool call: a step
run again after a crash, or a replay, gets the recorded response instead of calling again. Only
an answer that is kept is recorded; an error status is not, so a retry asks again.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

from langorch.domain.egress import EgressRefusedError, egress_refusal
from langorch.domain.errors import LangorchError, StepFailedError
from langorch.domain.kinds.http import http_spec
from langorch.domain.tasks import fingerprint
from langorch.domain.templates import render, render_value
from langorch.engine.context import EngineContext
from langorch.engine.kinds.base import (
    TRIED,
    Executor,
    Outcome,
    StepSpec,
    input_scope,
    output_key,
    recorded_once,
    visits_of,
)
from langorch.engine.state import OrchestrationState


class HttpStepError(LangorchError):
    """An ``http`` step got an error status."""

    def __init__(self, status: int, url_host: str) -> None:
        """Record the status; 429 and 5xx are worth another attempt."""
        self.status = status
        self.retryable = status == 429 or status >= 500
        super().__init__(f"HTTP {status} from {url_host}")


def idempotency_key(run_id: str, step_id: str, visit: int, fix: int = 0) -> str:
    """Stable across retries and resumed segments: the same run, step and round.

    ``fix``: the round of a person's fix being retried (``on_error: ask``). Their retry is a new
    request, often with other inputs: under the old key a service that keeps its answers per
    key would give back the failure (or refuse the changed body) instead of trying again.
    """
    fixed = f":fix{fix}" if fix else ""
    return hashlib.sha256(f"{run_id}:{step_id}:{visit}{fixed}".encode()).hexdigest()[:32]


async def run_http(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    """Make the call; an error status fails the attempt (retryable for 429 and 5xx)."""
    http = http_spec(spec.step, spec.block)
    if http is None or ctx.http is None:
        raise StepFailedError(f"step {spec.step_id}: no http settings or no http client")
    scope = input_scope(spec, state)
    url = render(http.url, scope)
    headers = {k: render(v, scope) for k, v in http.headers.items()}
    visit = visits_of(spec, state)
    fixing = (state.get("fixes") or {}).get(spec.step_id)
    fix = int(fixing.get("round") or 0) if isinstance(fixing, dict) else 0
    headers.setdefault("Idempotency-Key", idempotency_key(ctx.run_id, spec.step_id, visit, fix))
    body = render_value(http.body, scope) if http.body is not None else None
    timeout = spec.timeout_seconds or 30.0
    tried = {"method": http.method, "url": url, "body": body}
    host = url.split("/")[2] if "//" in url else url

    refused = egress_refusal(url, ctx.http_allowed_domains)
    if refused is not None:
        raise EgressRefusedError(
            f"step {spec.step_id}: {http.method} {url.split('?')[0]}: {refused}"
        )
    _gate(spec, ctx, http.method, url, host, body)
    caller = ctx.http

    async def send() -> dict[str, Any]:
        status, payload = await asyncio.to_thread(
            caller, http.method, url, headers=headers, body=body, timeout=timeout
        )
        if status >= 400:
            raise HttpStepError(status, host)
        return {"status": status, "body": payload}

    try:
        response = await recorded_once(
            spec,
            ctx,
            kind="http",
            visit=visit,
            attempt=attempt,
            digest=fingerprint(tried),
            call=send,
        )
    except Exception as exc:
        setattr(exc, TRIED, tried)  # the error keeps its type (and retry rule): only noted
        raise
    key = output_key(spec, http.response_key, f"{spec.step_id}_response")
    return Outcome(context={key: response})


def _gate(spec: StepSpec, ctx: EngineContext, method: str, url: str, host: str, body: Any) -> None:
    """The run's tool policies on this request (``tool == "http"``); refused, the step fails.

    Asked before the recorded call: a request approved and made is replayed from its record,
    the approval's answer is kept by the checkpoint, so neither is asked or sent twice.
    """
    from langorch.engine.kinds._tool_gate import check_call, gated

    if not gated(ctx):
        return
    from langgraph.config import get_stream_writer

    from langorch.domain.tool_policies import ToolCallRefusedError

    args = {"method": method, "url": url, "host": host, "body": body}
    refused = check_call(spec, ctx, get_stream_writer(), "http", args)
    if refused is not None:
        raise ToolCallRefusedError(f"step {spec.step_id}: {refused}")


EXECUTORS: dict[str, Executor] = {"http": run_http}
