"""The run_segment Lambda: one segment of a run per Step Functions iteration, and MarkFailed.

Events (built by the state machine, ``statemachine.asl.json``)::

    {"action": "segment", "run_id": "run-…", "resume": null | {"woke": true} | {decision…},
     "owner": "<execution name>/<time it entered RunSegment>", "carried": {…, "events": N}}
    {"action": "fail", "run_id": "run-…", "state": {…, "error": {"Error": …, "Cause": …}}}
    {"action": "park", "run_id": "run-…", "resource": {"name": …, "holder": …}, "task_token": …}
    {"action": "park_paused", "run_id": "run-…", "task_token": …}

A segment answers the state machine's payload: ``run_id``, ``status`` (what ``Route`` branches
on: ``continued`` when the run went on in a fresh execution, continue-as-new), ``events`` (the
history events its execution will have at the next ``RunSegment``), ``segment``, ``seconds`` for
a sleep, ``approval`` (with ``timeout_seconds``) for an approval, ``resource`` (with
``seconds``) for a run queued for a resource, and ``resume: null``
for the next ``RunSegment``. ``park`` keeps a queued run's task token with its place in the
resource's queue, so the release that makes it its turn wakes it (``AwaitResource``);
``park_paused`` keeps a paused run's token with its pause request, so ``langorch runs resume``
wakes it (``AwaitResume``).
Infrastructure errors (``StorageError``, ``LeaseHeldError``, ``LeaseLostError``) are not
caught: Lambda reports them under their class name, which the state machine's ``Retry`` matches.
A sandbox that dies mid-segment is reported as ``Runtime.ExitError``, also retried: the retry
carries the same ``owner``, so it takes back the run's lease its dead attempt still holds.
"""

from __future__ import annotations

import json
import time
from typing import Annotated, Any, Literal

from aws_lambda_powertools import Logger, Metrics, Tracer, single_metric
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from langorch.app.continuation import CountedSegment, counted_segment
from langorch.app.run_failures import note_segment_error
from langorch.app.runs import RunSegment, mark_failed
from langorch.composition.bootstrap import SandboxContainer
from langorch.domain.errors import LeaseHeldError, LeaseLostError, StorageError
from langorch.domain.history import STARTED_EVENTS
from langorch.domain.runs import RunError
from langorch.observability import (
    NAMESPACE,
    SERVICE,
    logger,
    metrics,
    retried_on_purpose,
    tracer,
    unexpected_error,
)


def load_engine() -> None:
    """Import the engine — LangGraph, the compiler, the checkpointer: most of the runner's code.

    Registered to run before SnapStart takes the function's snapshot, so a restored runner has
    the engine in memory while importing this module stays light (PERFORMANCE P3); where no
    snapshot is taken (SnapStart off, ``langorch dev``, tests) the first segment loads it.
    """
    import langorch.adapters.dynamodb.checkpointer
    import langorch.composition.container
    import langorch.domain._jinja_sandbox  # Jinja2: the templates import it on first use
    import langorch.engine.compiler
    import langorch.engine.segments
    import langorch.llm.builtin_tools
    import langorch.llm.registry  # noqa: F401  (the package imports its modules on first use)


def reseed_random() -> None:
    """Give ``random`` fresh entropy after a SnapStart restore.

    Every sandbox restored from one snapshot starts from the snapshot's generator state: without
    a reseed they would all draw the same numbers, in step (LangGraph's retry jitter among them,
    so retries of many runs would collide at the same moments). ``random.seed()`` takes fresh
    entropy from the OS (AWS's SnapStart guidance for Python).
    """
    import random

    random.seed()


try:  # AWS's runtime-hooks library, shipped in Lambda's managed Python runtimes
    from snapshot_restore_py import register_after_restore, register_before_snapshot
except ImportError:  # not on Lambda: nothing takes a snapshot
    pass
else:
    register_before_snapshot(load_engine)
    register_after_restore(reseed_random)

log: Logger = logger()
measure: Metrics = metrics()
trace: Tracer = tracer()
container = SandboxContainer()
"""The sandbox's container, built on the first invocation (``composition.bootstrap``)."""


class SegmentEvent(BaseModel):
    """Run the next segment, answering the parked interrupt with ``resume`` if any."""

    model_config = ConfigDict(extra="ignore")

    action: Literal["segment"]
    run_id: str
    resume: Any = None
    owner: str | None = None
    """The execution and the time it entered RunSegment: the same on the state machine's
    retries of this segment, so a retry after a crash takes back the lease its dead attempt
    held (``None``: a fresh owner)."""
    carried: dict[str, Any] = Field(default_factory=dict)
    """The state data as it entered RunSegment: ``events``, the history events its execution
    has so far (absent on an execution's first entry)."""

    @property
    def events(self) -> int:
        """The history events the execution has so far (counted from the shipped ASL)."""
        events = self.carried.get("events")
        return events if isinstance(events, int) and events > 0 else STARTED_EVENTS

    @property
    def execution(self) -> str | None:
        """The execution asking (its name is the owner's first part)."""
        return self.owner.split("/", 1)[0] if self.owner else None


class FailEvent(BaseModel):
    """The state machine's catch-all: the whole state, with ``error`` when a task failed."""

    model_config = ConfigDict(extra="ignore")

    action: Literal["fail"]
    run_id: str
    state: dict[str, Any] = Field(default_factory=dict)

    def run_error(self) -> RunError:
        """Why the run failed, from the Step Functions error (``Error`` / ``Cause``)."""
        raw = self.state.get("error")
        if not isinstance(raw, dict):
            # Route's Default: the segment answered a status the state machine cannot route.
            return RunError(
                type="UnroutableStatus",
                message=f"the segment answered status {self.state.get('status')!r}, "
                "which the state machine does not route",
            )
        name = str(raw.get("Error") or "States.Runtime")
        cause = str(raw.get("Cause") or "")
        return RunError(type=name, message=_lambda_error_message(cause) or cause or name)


class ParkEvent(BaseModel):
    """A run queued for a resource parks on a task token (``AwaitResource``)."""

    model_config = ConfigDict(extra="ignore")

    action: Literal["park"]
    run_id: str
    resource: dict[str, str]
    task_token: str = Field(repr=False)


class ParkPausedEvent(BaseModel):
    """A paused run parks on a task token until it is resumed (``AwaitResume``)."""

    model_config = ConfigDict(extra="ignore")

    action: Literal["park_paused"]
    run_id: str
    task_token: str = Field(repr=False)


Request = SegmentEvent | FailEvent | ParkEvent | ParkPausedEvent
Event = Annotated[Request, Field(discriminator="action")]
_EVENT: TypeAdapter[Request] = TypeAdapter(Event)


def _lambda_error_message(cause: str) -> str | None:
    # A failed Lambda task's Cause is the function's error payload as JSON.
    try:
        payload = json.loads(cause)
    except ValueError:
        return None
    if isinstance(payload, dict) and payload.get("errorMessage"):
        return str(payload["errorMessage"])
    return None


_ENDED_METRIC = {"succeeded": "RunsSucceeded", "failed": "RunsFailed"}
RETRIED = (StorageError, LeaseHeldError, LeaseLostError)
"""Errors the state machine's ``Retry`` on RunSegment absorbs on purpose: not alarming."""


@log.inject_lambda_context(clear_state=True)
@trace.capture_lambda_handler(capture_response=False)
@measure.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Run one segment, or mark the run failed (see the module docstring for the events)."""
    try:
        request = _EVENT.validate_python(event)
        # Context-local keys: locally many invocations share this process (one per thread),
        # and a line must never carry another run's id. In Lambda it is append_keys.
        log.thread_safe_clear_keys()
        log.thread_safe_append_keys(run_id=request.run_id)
        if isinstance(request, FailEvent):
            return _fail(request)
        if isinstance(request, ParkEvent):
            return _park(request)
        if isinstance(request, ParkPausedEvent):
            return _park_paused(request)
        return _segment(request)
    except Exception as exc:
        if not retried_on_purpose(exc, RETRIED):
            unexpected_error("run-segment")
        raise


def _segment(request: SegmentEvent) -> dict[str, Any]:
    started = time.perf_counter()
    deps = container()
    try:
        segment = RunSegment(request.run_id, resume=request.resume, owner=request.owner)
        result, events = counted_segment(
            CountedSegment(segment, request.events, request.execution), deps
        )
    except Exception as exc:
        # Kept before the retry, so MarkFailed reports this first cause, not a retry's symptom.
        note_segment_error(request.run_id, exc, deps)
        raise
    log.thread_safe_append_keys(
        workflow_id=result.workflow_id,
        workflow_version=result.workflow_version,
        segment=result.segment,
    )
    measure.add_metric("SegmentDuration", MetricUnit.Milliseconds, _ms_since(started))
    measure.add_metric("StepsRun", MetricUnit.Count, result.steps_run)
    measure.add_metric("LLMTokens", MetricUnit.Count, result.llm_tokens)
    ended = _ENDED_METRIC.get(result.status) if result.ended else None
    if ended:
        measure.add_metric(ended, MetricUnit.Count, 1)
    if result.ended and result.workflow_id:
        _dollars("RunCost", result.cost_usd, workflow=result.workflow_id)
    log.info("segment answered", extra={"status": result.status})
    return {**result.to_dict(), "resume": None, "events": events}


def _dollars(name: str, value: float, **dimensions: str) -> None:
    """A metric in US dollars (``RunCost``) with its own dimensions, not the process's shared
    set (as the trigger's ``RunsStarted`` per trigger)."""
    with single_metric(
        name=name, unit=MetricUnit.NoUnit, value=value, namespace=NAMESPACE
    ) as metric:
        metric.add_dimension("service", SERVICE)
        for key, dimension in dimensions.items():
            metric.add_dimension(key, dimension)


def _fail(request: FailEvent) -> dict[str, Any]:
    error = request.run_error()
    failed = mark_failed(request.run_id, error, container())
    if failed:
        measure.add_metric("RunsFailed", MetricUnit.Count, 1)
    log.info(
        "run marked failed" if failed else "run had already ended", extra={"error": error.type}
    )
    return {"run_id": request.run_id, "status": "failed", "marked": failed}


def _park(request: ParkEvent) -> dict[str, Any]:
    from langorch.app.resources import ParkForResource, park_for_resource

    command = ParkForResource(
        request.run_id,
        request.resource.get("name", ""),
        request.resource.get("holder", ""),
        request.task_token,
    )
    woken = park_for_resource(command, container())
    return {"run_id": request.run_id, "parked": True, "woken": woken}


def _park_paused(request: ParkPausedEvent) -> dict[str, Any]:
    from langorch.app.pause import ParkOnPause, park_on_pause

    woken = park_on_pause(ParkOnPause(request.run_id, request.task_token), container())
    return {"run_id": request.run_id, "parked": True, "woken": woken}


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)
