"""OpenTelemetry traces of runs (issue 34, item 7): one trace per run across its segments, a
span per step, GenAI spans for LLM and tool calls, no content unless ``trace_content``.

On fakes, with the adapter exporting to OpenTelemetry's in-memory exporter.
"""

from __future__ import annotations

from datetime import timedelta

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from langorch.adapters.otel import OtelRunTraces
from langorch.app.runs import RunSegment, StartRun, run_segment, start_run
from langorch.app.traces import SegmentTrace
from tests.fakes import Fakes
from tests.integration.conftest import register_text
from tests.support.definitions import workflow

FLOW = """
blocks:
  - block_id: b_draft
    input_keys: [topic]
    output_keys: [draft]
    prompt_template: "A secret draft about {{topic}}"
""" + workflow("traced", approvers=["boss@example.com"]).steps("""
      - {step_id: draft, block_id: b_draft}
      - {step_id: gate, kind: approval, depends_on: [draft],
         approval: {title: "Publish?", timeout_seconds: 60},
         branches: {approved: publish, rejected: publish, timed_out: publish}}
      - {step_id: publish, kind: transform, transform: {published: "1"}}
""")


def _traced_run(content: bool = False) -> list[ReadableSpan]:
    """Run ``traced`` to its end in two segments (parked at the approval in between)."""
    exporter = InMemorySpanExporter()
    deps = Fakes()
    deps.traces = OtelRunTraces(exporter, content=content)
    register_text(deps, FLOW)  # type: ignore[arg-type]
    run, _ = start_run(StartRun("traced", input={"topic": "tea"}), deps)
    assert run_segment(RunSegment(run.run_id), deps).status == "waiting_approval"
    later = deps.another_process()  # the second segment runs in another sandbox
    decision = {"decision": "approved", "approver": "boss@example.com"}
    assert run_segment(RunSegment(run.run_id, resume=decision), later).status == "succeeded"
    return list(exporter.get_finished_spans())


def _named(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    (span,) = [s for s in spans if s.name == name]
    return span


def test_a_run_over_two_segments_is_one_trace_of_parent_and_child_spans() -> None:
    # Given a run that parks at an approval and is resumed by another process
    # When both of its segments have run
    spans = _traced_run()

    # Then every span is in one trace
    assert len({s.context.trace_id for s in spans}) == 1
    # And both segments are children of the run's root span, exported when the run ended
    root = _named(spans, "run traced")
    assert root.parent is None
    segments = [s for s in spans if s.name.startswith("segment ")]
    assert [s.name for s in segments] == ["segment 1", "segment 2"]
    assert all(s.parent is not None and s.parent.span_id == root.context.span_id for s in segments)
    # And each step's span is a child of the segment it ran in: the approval parked in the
    # first, decided in the second
    first, second = segments

    def steps_of(segment: ReadableSpan) -> list[tuple[str, object]]:
        children = [s for s in spans if s.parent and s.parent.span_id == segment.context.span_id]
        return [(s.name, (s.attributes or {})["langorch.step.outcome"]) for s in children]

    assert steps_of(first) == [("step draft", "finished"), ("step gate", "parked")]
    assert steps_of(second) == [("step gate", "finished"), ("step publish", "finished")]


def test_an_llm_call_is_a_genai_span_under_its_step() -> None:
    # Given a traced run whose first step asks the (offline) LLM
    spans = _traced_run()

    # Then the call is a chat span under the step, with the GenAI conventions' attributes
    step = _named(spans, "step draft")
    (chat,) = [s for s in spans if s.name.startswith("chat ")]
    assert chat.parent is not None and chat.parent.span_id == step.context.span_id
    attributes = dict(chat.attributes or {})
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == "offline"
    assert chat.name == f"chat {attributes['gen_ai.request.model']}"
    assert attributes["gen_ai.usage.input_tokens"] > 0
    assert attributes["gen_ai.usage.output_tokens"] > 0


def test_spans_carry_no_prompt_or_output_unless_trace_content_is_on() -> None:
    # Given a traced run whose prompt and outputs mention "secret"
    # When it runs with trace_content off, then on
    quiet, told = _traced_run(content=False), _traced_run(content=True)

    # Then no attribute of the quiet trace holds its content; the told one shows the outputs
    def texts(spans: list[ReadableSpan]) -> str:
        return " ".join(str(v) for s in spans for v in (s.attributes or {}).values())

    assert "secret" not in texts(quiet)
    assert "draft" in str(dict(_named(told, "step draft").attributes or {}))
    assert "langorch.step.outputs" in (_named(told, "step draft").attributes or {})


def test_a_tool_call_is_an_execute_tool_span_under_its_step() -> None:
    # Given a segment in which a step called a tool (its arguments are content)
    exporter = InMemorySpanExporter()
    traces = OtelRunTraces(exporter)
    deps = Fakes()
    register_text(deps, FLOW)  # type: ignore[arg-type]
    run, _ = start_run(StartRun("traced", input={"topic": "tea"}), deps)
    run = run.model_copy(update={"trace_context": traces.new_context(), "segment": 1})
    start = deps.clock()
    at = (start + timedelta(seconds=2)).isoformat()
    events = [
        {"event": "step_started", "step_id": "draft", "kind": "action", "at": start.isoformat()},
        {"event": "tool_called", "step_id": "draft", "at": at, "tool": "lookup",
         "args": "secret=1", "duration_ms": 500, "outcome": "ok"},
        {"event": "step_finished", "step_id": "draft", "kind": "action", "at": at,
         "duration_ms": 2000},
    ]  # fmt: skip

    # When the segment's spans are exported
    traces.segment(SegmentTrace(run, events, start, start + timedelta(seconds=3), "continue"))

    # Then the call is an execute_tool span under the step, half a second long, argument-free
    spans = list(exporter.get_finished_spans())
    tool = _named(spans, "execute_tool lookup")
    assert tool.parent is not None
    assert tool.parent.span_id == _named(spans, "step draft").context.span_id
    assert (tool.attributes or {})["gen_ai.tool.name"] == "lookup"
    assert (tool.end_time or 0) - (tool.start_time or 0) == 500_000_000
    assert "gen_ai.tool.call.arguments" not in (tool.attributes or {})


def test_tracing_off_stores_no_trace_context_with_the_run() -> None:
    # Given the default: no OpenTelemetry exporter configured
    deps = Fakes()
    register_text(deps, FLOW)  # type: ignore[arg-type]
    run, _ = start_run(StartRun("traced", input={"topic": "tea"}), deps)

    # When a segment runs
    run_segment(RunSegment(run.run_id), deps)

    # Then the run carries no trace context
    assert deps.runs.get_run(run.run_id).trace_context is None
