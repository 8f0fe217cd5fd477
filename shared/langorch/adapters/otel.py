"""OpenTelemetry traces of runs (:class:`langorch.app.traces.RunTraces` on the OpenTelemetry SDK).

One trace per run, however many segments and days it takes::

    run <workflow>                    the root; exported when the run ends
      segment <n>                     one per Lambda invocation of the runner
        step <step_id>                one per attempt of a step
          chat <model>                an LLM call (GenAI semantic conventions)
          execute_tool <tool>         a tool call (GenAI semantic conventions)

The run's ``traceparent`` (stored with the run) names the trace and the root span's id, chosen
when the first segment starts; each segment's spans are built afterwards from its engine events
(their times are the events'), parented under that id, and the root span is exported with that
very id when the run ends. No span is held open across invocations, and the engine knows nothing
of tracing.

Content stays out of spans — prompts, outputs, tool arguments, error messages — unless
``trace_content`` is on; ids, names, models, token counts, costs and durations go in.

Only the composition root imports this module, and only when tracing is configured: the SDK is
never loaded by a process that does not trace.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from langorch.app.traces import SegmentTrace
from langorch.domain.runs import RunRecord

logger = logging.getLogger(__name__)

Exporter = Literal["console", "otlp"]
SCOPE = "langorch"
FLUSH_MILLIS = 5_000
"""The longest a segment waits for its spans to be sent (a Lambda sandbox freezes after)."""
_ENDED = frozenset({"succeeded", "failed"})
_FORCED: ContextVar[tuple[int, int] | None] = ContextVar("langorch_forced_ids", default=None)


class _RunIds(RandomIdGenerator):
    """Random ids, except for the root span of a run: the ids its ``traceparent`` chose."""

    def generate_trace_id(self) -> int:
        forced = _FORCED.get()
        return forced[0] if forced else super().generate_trace_id()

    def generate_span_id(self) -> int:
        forced = _FORCED.get()
        return forced[1] if forced else super().generate_span_id()


@contextmanager
def _ids_of(traceparent: str) -> Iterator[None]:
    _, trace_id, span_id, _ = traceparent.split("-")
    token = _FORCED.set((int(trace_id, 16), int(span_id, 16)))
    try:
        yield
    finally:
        _FORCED.reset(token)


def new_traceparent() -> str:
    """A fresh W3C ``traceparent`` (sampled) naming a new trace and its root span."""
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


def _ns(at: datetime) -> int:
    return int(at.timestamp() * 1_000_000_000)


@dataclass
class _Attempt:
    """One attempt of a step, gathered from its events."""

    step_id: str
    kind: str | None = None
    started: datetime | None = None
    ended: datetime | None = None
    outcome: str = "parked"
    """``finished``, ``failed``, ``retried``, or ``parked`` (still running when the segment
    ended: an approval, a wait)."""
    end_event: dict[str, Any] = field(default_factory=dict)
    tools: list[dict[str, Any]] = field(default_factory=list)


_STEP_ENDS = {"step_finished": "finished", "step_failed": "failed", "step_retried": "retried"}


def _attempts(events: Sequence[dict[str, Any]], segment_end: datetime) -> list[_Attempt]:
    """The step attempts of a segment, in the order they started."""
    done: list[_Attempt] = []
    open_: dict[str, _Attempt] = {}
    for event in events:
        name, step_id = event.get("event"), event.get("step_id")
        if not isinstance(step_id, str) or "at" not in event:
            continue
        at = datetime.fromisoformat(event["at"])
        base = step_id.split(".", 1)[0]  # a hook's calls (``<step>.pre``) are its step's
        if name == "step_started":
            open_[step_id] = _Attempt(step_id, kind=event.get("kind"), started=at)
        elif name == "tool_called":
            attempt = open_.setdefault(base, _Attempt(base, started=at))
            attempt.tools.append(event)
        elif name in _STEP_ENDS:
            attempt = open_.pop(step_id) if step_id in open_ else _Attempt(step_id)
            attempt.kind = attempt.kind or event.get("kind")
            attempt.ended, attempt.outcome, attempt.end_event = at, _STEP_ENDS[name], event
            if attempt.started is None:
                attempt.started = at - timedelta(milliseconds=event.get("duration_ms") or 0)
            done.append(attempt)
    for attempt in open_.values():
        attempt.ended = segment_end
        done.append(attempt)
    return sorted(done, key=lambda a: a.started or segment_end)


class OtelRunTraces:
    """Runs' spans through an OpenTelemetry ``TracerProvider`` of its own (the global one is
    left alone: a process may instrument other things its own way).

    Args:
        exporter: where spans go (an OTLP exporter, the console, an in-memory one in tests).
        content: put prompts, outputs, tool arguments and error messages in spans.
        batch: batch spans (flushed at the end of each segment: a Lambda sandbox freezes after
            the invocation) instead of exporting each as it ends.
    """

    def __init__(self, exporter: SpanExporter, *, content: bool = False, batch: bool = False):
        self.provider = TracerProvider(
            resource=Resource.create({"service.name": SCOPE}), id_generator=_RunIds()
        )
        processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
        self.provider.add_span_processor(processor)
        self._tracer = self.provider.get_tracer(SCOPE)
        self._content = content

    def new_context(self) -> str | None:
        """A new ``traceparent`` for a run."""
        return new_traceparent()

    def segment(self, trace_: SegmentTrace) -> None:
        """Export the segment's spans (and the run's root span when the run ended); a failure
        to trace is logged, never raised."""
        if trace_.run.trace_context is None:
            return
        try:
            self._export(trace_, trace_.run.trace_context)
            # Bounded: an unreachable collector delays the segment by seconds, never more.
            self.provider.force_flush(FLUSH_MILLIS)
        except Exception:  # a trace must never fail the run it describes
            logger.warning("could not export the run's spans", exc_info=True)

    def _export(self, seg: SegmentTrace, traceparent: str) -> None:
        run = seg.run
        parent = TraceContextTextMapPropagator().extract({"traceparent": traceparent})
        span = self._tracer.start_span(
            f"segment {run.segment}",
            context=parent,
            start_time=_ns(seg.started),
            attributes={**_run_attributes(run), "langorch.segment.status": seg.status},
        )
        if seg.status == "failed":
            span.set_status(Status(StatusCode.ERROR))
        inside = trace.set_span_in_context(span)
        for attempt in _attempts(seg.events, seg.ended):
            self._step(attempt, run, inside)
        span.end(end_time=_ns(seg.ended))
        if seg.status in _ENDED:
            self._root(run, seg, traceparent)

    def _root(self, run: RunRecord, seg: SegmentTrace, traceparent: str) -> None:
        with _ids_of(traceparent):
            root = self._tracer.start_span(
                f"run {run.workflow_id}",
                context=Context(),  # no parent: the root, under the ids chosen at the start
                start_time=_ns(run.created_at),
                attributes={**_run_attributes(run), "langorch.run.status": seg.status},
            )
        if seg.status == "failed":
            root.set_status(Status(StatusCode.ERROR))
        root.end(end_time=_ns(seg.ended))

    def _step(self, attempt: _Attempt, run: RunRecord, parent: Context) -> None:
        end = attempt.end_event
        attributes: dict[str, Any] = {
            "langorch.run_id": run.run_id,
            "langorch.step.id": attempt.step_id,
            "langorch.step.outcome": attempt.outcome,
        }
        for key, name in (("kind", "langorch.step.kind"), ("attempt", "langorch.step.attempt")):
            value = attempt.kind if key == "kind" else end.get(key)
            if value is not None:
                attributes[name] = value
        if isinstance(end.get("cost_usd"), int | float):
            attributes["langorch.cost_usd"] = end["cost_usd"]
        if self._content and end.get("outputs_summary"):
            attributes["langorch.step.outputs"] = _text(end["outputs_summary"])
        assert attempt.started is not None and attempt.ended is not None
        span = self._tracer.start_span(
            f"step {attempt.step_id}",
            context=parent,
            start_time=_ns(attempt.started),
            attributes=attributes,
        )
        if attempt.outcome in ("failed", "retried"):
            self._error(span, end.get("error") or {})
        inside = trace.set_span_in_context(span)
        for call in end.get("llm_calls") or ():
            self._llm(call, run, attempt, inside)
        for tool in attempt.tools:
            self._tool(tool, run, inside)
        span.end(end_time=_ns(attempt.ended))

    def _llm(
        self, call: dict[str, Any], run: RunRecord, attempt: _Attempt, parent: Context
    ) -> None:
        """An LLM call: its own times are not recorded, so it spans its step's attempt."""
        model = str(call.get("model") or "unknown")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": str(call.get("provider") or "unknown"),
            "gen_ai.request.model": model,
            "gen_ai.conversation.id": run.run_id,
        }
        for key, name in (
            ("input", "gen_ai.usage.input_tokens"),
            ("output", "gen_ai.usage.output_tokens"),
            ("cost_usd", "langorch.cost_usd"),
        ):
            if isinstance(call.get(key), int | float):
                attributes[name] = call[key]
        assert attempt.started is not None and attempt.ended is not None
        span = self._tracer.start_span(
            f"chat {model}",
            context=parent,
            kind=SpanKind.CLIENT,
            start_time=_ns(attempt.started),
            attributes=attributes,
        )
        span.end(end_time=_ns(attempt.ended))

    def _tool(self, event: dict[str, Any], run: RunRecord, parent: Context) -> None:
        ended = datetime.fromisoformat(event["at"])
        started = ended - timedelta(milliseconds=event.get("duration_ms") or 0)
        tool = str(event.get("tool") or "unknown")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.conversation.id": run.run_id,
            "langorch.tool.outcome": str(event.get("outcome") or "ok"),
        }
        if event.get("replayed"):
            attributes["langorch.tool.replayed"] = True
        if self._content and event.get("args") is not None:
            attributes["gen_ai.tool.call.arguments"] = _text(event["args"])
        span = self._tracer.start_span(
            f"execute_tool {tool}", context=parent, start_time=_ns(started), attributes=attributes
        )
        if event.get("outcome") not in (None, "ok"):
            failure = event.get("tool_error") if self._content else None
            span.set_status(Status(StatusCode.ERROR, failure))
            span.set_attribute("error.type", str(event.get("outcome")))
        span.end(end_time=_ns(ended))

    def _error(self, span: Any, error: dict[str, Any]) -> None:
        span.set_attribute("error.type", str(error.get("type") or "StepFailed"))
        message = str(error.get("message")) if self._content and error.get("message") else None
        span.set_status(Status(StatusCode.ERROR, message))


def _run_attributes(run: RunRecord) -> dict[str, Any]:
    return {
        "langorch.run_id": run.run_id,
        "langorch.workflow.id": run.workflow_id,
        "langorch.workflow.version": run.workflow_version,
        "langorch.segment": run.segment,
    }


def _text(value: Any) -> str:
    import json

    return value if isinstance(value, str) else json.dumps(value, default=str)


def otel_traces(exporter: Exporter, *, endpoint: str, content: bool) -> OtelRunTraces:
    """The traces of a configured process.

    Args:
        exporter: ``console`` prints each span as JSON on stdout (``langorch dev --trace
            console``); ``otlp`` sends them over OTLP/HTTP to ``endpoint`` (a collector, or the
            ADOT Lambda layer's on ``localhost:4318``).
        endpoint: the OTLP/HTTP traces URL.
        content: put prompts, outputs and tool arguments in spans.
    """
    if exporter == "console":
        return OtelRunTraces(ConsoleSpanExporter(), content=content)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    exporter_ = OTLPSpanExporter(endpoint=endpoint, timeout=FLUSH_MILLIS / 1000)
    return OtelRunTraces(exporter_, content=content, batch=True)
