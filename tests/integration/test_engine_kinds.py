"""The other step kinds end to end: subflow, wait, http, timeouts; long multi-segment runs.

Engine behaviour runs on the embedded stores (``make_embedded``: the SQLite adapters, held to the
DynamoDB adapters' contract suites); what is about DynamoDB runs on moto (``make_container``):
a storage fault in the checkpointer's requests, and 400 KB of state stored without offload.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from langorch.adapters.http import MAX_RESPONSE_BYTES
from langorch.app.runs import RunSegment, StartRun, run_segment, start_run
from langorch.domain.runs import TimelineEventType
from tests.support.definitions import together, workflow
from tests.support.loopback import JsonHandler, serving

from .conftest import MakeContainer, register_text, run_to_end

SUBFLOW = together(
    workflow("child", inputs={"n": "integer"}).steps("""
      - {step_id: square, kind: transform, transform: {squared: "n * n"}}
"""),
    workflow("parent", inputs={"x": "integer"}).steps("""
      - {step_id: prep, kind: transform, transform: {value: "x + 1"}}
      - step_id: call_child
        kind: subflow
        depends_on: [prep]
        subflow: {workflow_id: child, inputs: {n: value}, outputs: [squared]}
      - {step_id: after, kind: transform, depends_on: [call_child], transform: {result: "squared"}}
"""),
)


def test_a_subflow_runs_the_pinned_child_and_copies_its_outputs_back(
    make_embedded: MakeContainer,
):
    # Given a parent that calls a child workflow
    container = make_embedded()
    register_text(container, SUBFLOW)
    parent = container.definitions.get_workflow("parent")
    assert parent is not None and parent.step("call_child").subflow is not None

    # When the parent runs
    result = run_to_end(container, "parent", {"x": 2})

    # Then the child's output came back, and the stored parent pins the child's version
    assert result.outputs["result"] == 9
    assert parent.step("call_child").subflow.version == 1  # type: ignore[union-attr]


WAIT = workflow("sleeper").steps("""
      - {step_id: before, kind: transform, transform: {a: "1"}}
      - {step_id: nap, kind: wait, depends_on: [before], wait: {seconds: 90}}
      - {step_id: after, kind: transform, depends_on: [nap], transform: {b: "a + 1"}}
""")


def test_a_wait_parks_the_run_sleeping_and_it_continues_after(make_embedded: MakeContainer):
    # Given a workflow with a 90 s wait
    container = make_embedded()
    register_text(container, WAIT)
    run, _ = start_run(StartRun("sleeper"), container)

    # When the first segment reaches the wait
    parked = run_segment(RunSegment(run.run_id), container)

    # Then the run is sleeping, no segment is running, and the state machine is told how long
    assert parked.status == "sleeping"
    assert parked.seconds == 90
    assert container.runs.get_run(run.run_id).status == "sleeping"

    # And when the wake-up segment comes, the run goes on from after the wait
    done = run_segment(RunSegment(run.run_id, resume={"woke": True}), container)
    assert done.status == "succeeded"
    assert done.outputs["b"] == 2


class _Recorder(JsonHandler):
    calls: list[dict[str, Any]] = []
    fail_first = 0

    def do_POST(self) -> None:
        body = json.loads(self.body())
        type(self).calls.append({"key": self.headers["Idempotency-Key"], "body": body})
        status = 503 if len(type(self).calls) <= type(self).fail_first else 201
        payload = json.dumps({"id": "ord-1"}).encode()
        if self.path == "/huge":
            status, payload = 200, b"x" * (MAX_RESPONSE_BYTES + 1)
        if self.path == "/deep":
            status, payload = 200, b'{"tree": ' + b"[" * 250 + b"]" * 250 + b"}"
        if self.path == "/nan":
            status, payload = 200, b'{"price": NaN}'
        self.send_json(status, payload)


@pytest.fixture
def server() -> Iterator[str]:
    _Recorder.calls = []
    _Recorder.fail_first = 2
    with serving(_Recorder) as url:
        yield url


def test_http_retries_keep_one_idempotency_key(make_embedded: MakeContainer, server: str):
    # Given an http step against a service that fails twice with 503
    container = make_embedded()
    register_text(
        container,
        workflow("caller", inputs={"sku": "string"}).steps(f"""
      - step_id: order
        kind: http
        max_retries: 3
        retry_backoff_seconds: 0
        http: {{method: POST, url: "{server}/orders", body: {{sku: "{{{{ sku }}}}"}},
                response_key: order}}
"""),
    )

    # When the run goes through
    result = run_to_end(container, "caller", {"sku": "A-1"})

    # Then three attempts reached the service with the same key, and the answer is in state
    assert [c["body"] for c in _Recorder.calls] == [{"sku": "A-1"}] * 3
    assert len({c["key"] for c in _Recorder.calls}) == 1
    assert result.outputs["order"] == {"status": 201, "body": {"id": "ord-1"}}


def test_a_failed_http_call_keeps_the_url_and_body_it_sent_on_the_timeline(
    make_embedded: MakeContainer, server: str
):
    # Given an http step with one retry against a service that keeps answering 503
    _Recorder.fail_first = 10
    container = make_embedded()
    register_text(
        container,
        workflow("refused", inputs={"sku": "string"}).steps(f"""
      - step_id: order
        kind: http
        max_retries: 1
        retry_backoff_seconds: 0
        http:
          method: POST
          url: "{server}/orders?sku={{{{ sku }}}}"
          body: {{sku: "{{{{ sku }}}}"}}
          headers: {{Authorization: "Bearer not-kept-anywhere"}}
"""),
    )

    # When the run fails after both attempts
    result = run_to_end(container, "refused", {"sku": "A-1"})

    # Then each attempt's timeline event says what it sent (and no header)
    assert result.status == "failed"
    tried = [
        e.detail.get("request")
        for e in container.runs.get_timeline(result.run_id)
        if e.type in ("step_retried", "step_failed")
    ]
    sent = {"method": "POST", "url": f"{server}/orders?sku=A-1", "body": {"sku": "A-1"}}
    assert tried == [sent, sent]
    assert "not-kept-anywhere" not in str(container.runs.get_timeline(result.run_id))


def test_an_oversized_http_response_is_not_asked_for_again(
    make_embedded: MakeContainer, server: str
):
    # Given an http step with retries against a service whose answer is over the size bound
    _Recorder.fail_first = 0
    container = make_embedded()
    register_text(
        container,
        workflow("greedy").steps(f"""
      - step_id: fetch
        kind: http
        max_retries: 3
        retry_backoff_seconds: 0
        on_error: note
        http: {{method: POST, url: "{server}/huge", body: {{}}}}
      - {{step_id: note, kind: transform, transform: {{why: "error.type"}}}}
"""),
    )

    # When the run goes through
    result = run_to_end(container, "greedy")

    # Then the service was asked once (the same question gets the same answer), and the
    # error routed on with its type
    assert len(_Recorder.calls) == 1
    assert result.outputs["why"] == "HttpResponseTooLargeError"


@pytest.mark.parametrize(
    ("path", "problem"),
    [("deep", "body.tree[0][0][0]…: is nested 251 levels deep"), ("nan", "body.price: is NaN")],
)
def test_an_http_response_too_deep_or_not_strict_fails_the_step_not_the_segment(
    make_embedded: MakeContainer, server: str, path: str, problem: str
):
    # Given an http step whose service answers JSON nested 250 levels deep, or with NaN
    # (before: read into the run's state, whose record then could not be read back)
    _Recorder.fail_first = 0
    container = make_embedded()
    register_text(
        container,
        workflow("fetcher").steps(f"""
      - step_id: fetch
        kind: http
        max_retries: 3
        retry_backoff_seconds: 0
        on_error: note
        http: {{method: POST, url: "{server}/{path}", body: {{}}}}
      - {{step_id: note, kind: transform, transform: {{why: "error.type", said: "error.message"}}}}
"""),
    )

    # When the run goes through
    result = run_to_end(container, "fetcher")

    # Then the service was asked once (the same question gets the same answer), and the
    # step's error routed on saying where and what
    assert len(_Recorder.calls) == 1
    assert result.outputs["why"] == "HttpResponseShapeError"
    assert problem in result.outputs["said"]


TIMEOUT = """
blocks:
  - {block_id: b_slow, name: Slow, output_keys: [x], prompt_template: "go", max_retries: 0,
     timeout_seconds: 1}
workflows:
  - plan_id: slow
    memory: false
    steps:
      - {step_id: slow_step, block_id: b_slow, on_error: recover}
      - {step_id: recover, kind: transform, transform: {why: "error.type"}}
"""


class _SlowLLM:
    def invoke(self, request: Any) -> Any:
        import time

        time.sleep(3)
        raise AssertionError("the step should have timed out first")


def test_a_step_past_its_timeout_routes_on_error(make_embedded: MakeContainer):
    container = make_embedded()
    container.__dict__["llm"] = _SlowLLM()
    register_text(container, TIMEOUT)

    result = run_to_end(container, "slow")

    # (an LLM step's timeout is named for what ran out: the model call, a StepTimeoutError)
    assert result.outputs["why"] == "LLMTimeoutError"


def test_compiled_graphs_are_cached_per_workflow_version(make_embedded: MakeContainer):
    container = make_embedded()
    register_text(container, WAIT)
    plan = container.definitions.get_workflow("sleeper")
    assert plan is not None

    assert container.compiler.compile(plan) is container.compiler.compile(plan)
    assert len(list(container.compiler.cached())) == 1


@pytest.mark.slow
def test_a_400_step_run_with_growing_state_completes_across_segments(
    make_container: MakeContainer,
):
    # Given 400 steps each adding 1 KB to the state, and a segment budget of 100 supersteps
    # (a budget in work: the run is cut the same way on a quiet or a loaded machine)
    steps = "\n".join(
        f"      - {{step_id: s{i}, kind: transform, "
        + (f"depends_on: [s{i - 1}], " if i else "")
        + 'transform: {blob: "blob ~ chunk"}}'
        for i in range(400)
    )
    container = make_container(segment_budget_supersteps=100)
    register_text(
        container,
        "workflows:\n  - plan_id: grow\n    memory: false\n"
        "    inputs_schema: {properties: {blob: {type: string}, chunk: {type: string}}}\n"
        f"    steps:\n{steps}\n",
    )

    # When it is driven to the end
    result = run_to_end(container, "grow", {"blob": "", "chunk": "x" * 1024})

    # Then it finished over five segments (the graph's start and 400 steps, 100 supersteps a
    # segment), each resuming the last one's checkpoint, with all
    # 400 KB in the final state (offload to S3 of incompressible state: test_checkpointer.py)
    assert result.status == "succeeded"
    assert (
        len(result.outputs.get("blob", "")) == 400 * 1024
        or container.runs.get_run(result.run_id).outputs_truncated
    )
    assert result.segment == 5
    finished = [
        e
        for e in container.runs.get_timeline(result.run_id)
        if e.type == TimelineEventType.step_finished
    ]
    assert len(finished) == 400


@pytest.mark.parametrize("failing_write", [1, 2, 3, 4])
def test_a_storage_fault_mid_segment_leaves_the_run_resumable_not_failed(
    make_container: MakeContainer, failing_write: int
):
    # Given a run whose n-th checkpoint write fails once (each superstep is one write; the
    # input checkpoint goes with the first: 4 writes in all)
    from botocore.exceptions import ClientError

    from langorch.domain.errors import StorageError

    container = make_container()
    register_text(
        container,
        WAIT.replace("nap, kind: wait", "nap, kind: transform").replace(
            "wait: {seconds: 90}", 'transform: {c: "2"}'
        ),
    )
    run, _ = start_run(StartRun("sleeper"), container)
    writes = {"n": 0}

    def throttle_one_batch(params: dict[str, Any], **_: Any) -> None:
        # A segment's superstep is one fenced PutItem of a slot (unfenced: a BatchWriteItem)
        table = container.settings.checkpoints_table
        slot = params.get("TableName") == table
        if table in params.get("RequestItems", {}) or slot:
            writes["n"] += 1
            if writes["n"] == failing_write:
                raise ClientError(
                    {
                        "Error": {
                            "Code": "ProvisionedThroughputExceededException",
                            "Message": "slow down",
                        }
                    },
                    "PutItem" if slot else "BatchWriteItem",
                )

    events = container.client("dynamodb").meta.events
    events.register("provide-client-params.dynamodb.BatchWriteItem", throttle_one_batch)
    events.register("provide-client-params.dynamodb.PutItem", throttle_one_batch)

    # When the segment hits the fault
    with pytest.raises(StorageError):
        run_segment(RunSegment(run.run_id), container)

    # Then the run is not failed, and the retried segment finishes it without losing a step
    assert container.runs.get_run(run.run_id).status == "running"
    done = run_segment(RunSegment(run.run_id), container)
    assert done.status == "succeeded"
    assert done.outputs["b"] == 2


def test_a_segment_budget_smaller_than_any_step_still_makes_progress(
    make_embedded: MakeContainer,
):
    # Given a segment budget far shorter than a single step
    container = make_embedded(segment_budget_seconds=0.000_001)
    register_text(
        container,
        WAIT.replace("nap, kind: wait", "nap, kind: transform").replace(
            "wait: {seconds: 90}", 'transform: {c: "2"}'
        ),
    )

    # When the run is driven
    result = run_to_end(container, "sleeper")

    # Then every segment ran at least one superstep and the run finished with all its steps
    assert result.status == "succeeded"
    assert result.outputs["b"] == 2
    assert result.segment > 1
