"""Runs: the record of one execution, its status rules, its ids and its timeline.

Pure: no boto3, no LangGraph. The clock (``now``) and the id generator are passed in, so every
rule here is tested without AWS.

Status moves (ARCHITECTURE §1)::

    queued ──► running ──► waiting_approval ──► running …
                  │ ▲ ────► sleeping ─────────► running …
                  │ └─ running (the next segment of a long run)
                  └──► succeeded | failed | cancelled      (terminal: nothing leaves them)

    queued | running | waiting_approval | sleeping ──► paused ──► running | the park it left

Every non-terminal status may also go straight to ``failed`` (the state machine's catch-all) or
``cancelled`` (an operator). Entering ``running`` starts a new *segment*; entering
``waiting_approval`` or ``sleeping`` parks an interrupt in ``pending``, and leaving them clears it.

``paused`` is an operator's (``langorch runs pause``): the run stops at a step boundary, or at
once when it is parked. A run paused while parked keeps its ``pending`` interrupt (the approval
and the wait keep their timers); an answer that arrives while it is paused is kept in ``held``
and given to the run when it is resumed (:func:`paused`, :func:`holding`, :func:`unpaused`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from langorch.domain.errors import LangorchError, UnreadableRecordError
from langorch.domain.lineage import MAX_LINEAGE as MAX_LINEAGE  # the record's lineage
from langorch.domain.lineage import MAX_REASON_CHARS as _MAX_REASON_CHARS  # an operator's reason
from langorch.domain.lineage import ForkLink as ForkLink
from langorch.domain.lineage import Redrive as Redrive

# --------------------------------------------------------------------------------------------
# Status
# --------------------------------------------------------------------------------------------


class RunStatus(StrEnum):
    """Where a run is (ARCHITECTURE §1, seed 001 §8.2)."""

    queued = "queued"
    running = "running"
    waiting_approval = "waiting_approval"
    sleeping = "sleeping"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"
    paused = "paused"


TERMINAL: frozenset[RunStatus] = frozenset(
    {RunStatus.succeeded, RunStatus.failed, RunStatus.cancelled}
)
"""Statuses a run never leaves."""

PARKED: dict[RunStatus, frozenset[str]] = {
    RunStatus.waiting_approval: frozenset({"approval"}),
    # A run queued for a resource sleeps like a wait (seed 001 §7b).
    RunStatus.sleeping: frozenset({"wait", "resource"}),
}
"""Statuses that park an interrupt, and the interrupt kinds each one parks."""

PAUSABLE: frozenset[RunStatus] = frozenset(
    {RunStatus.queued, RunStatus.running, RunStatus.waiting_approval, RunStatus.sleeping}
)
"""Statuses a pause can stop: a run not yet started, running, or parked."""

_ALLOWED: dict[RunStatus, frozenset[RunStatus]] = {
    RunStatus.queued: frozenset(
        {RunStatus.running, RunStatus.paused, RunStatus.failed, RunStatus.cancelled}
    ),
    # running → running is the next segment of a run that used up its time budget.
    RunStatus.running: frozenset(
        {
            RunStatus.running,
            RunStatus.waiting_approval,
            RunStatus.sleeping,
            RunStatus.succeeded,
            RunStatus.failed,
            RunStatus.cancelled,
            RunStatus.paused,
        }
    ),
    RunStatus.waiting_approval: frozenset(
        {RunStatus.running, RunStatus.paused, RunStatus.failed, RunStatus.cancelled}
    ),
    RunStatus.sleeping: frozenset(
        {RunStatus.running, RunStatus.paused, RunStatus.failed, RunStatus.cancelled}
    ),
    # Resumed: on to the next segment, or back to the park it was paused in.
    RunStatus.paused: frozenset(
        {
            RunStatus.running,
            RunStatus.waiting_approval,
            RunStatus.sleeping,
            RunStatus.failed,
            RunStatus.cancelled,
        }
    ),
    RunStatus.succeeded: frozenset(),
    RunStatus.failed: frozenset(),
    RunStatus.cancelled: frozenset(),
}


class InvalidTransitionError(LangorchError):
    """A run was asked to move to a status it cannot reach from where it is."""

    def __init__(self, run_id: str, frm: RunStatus, to: RunStatus, why: str = "") -> None:
        self.run_id = run_id
        self.frm = frm
        self.to = to
        allowed = ", ".join(sorted(_ALLOWED[frm])) or "nothing (it has ended)"
        reason = why or f"from {frm} a run can go to: {allowed}"
        super().__init__(f"run {run_id} cannot go from {frm} to {to}: {reason}")


def can_transition(frm: RunStatus, to: RunStatus) -> bool:
    """Whether a run in status ``frm`` may move to ``to``."""
    return to in _ALLOWED[frm]


# --------------------------------------------------------------------------------------------
# Bounding what is stored (DynamoDB items stop at 400 KB; logs and pages show these)
# --------------------------------------------------------------------------------------------

MAX_ERROR_MESSAGE_CHARS = 2000
MAX_SUMMARY_CHARS = 500
MAX_DETAIL_CHARS = 1000
_SUMMARY_VALUE_CHARS = 120
_ELLIPSIS = "…"
_MARKER_ROOM = 16

_SECRET_MARKERS = (
    "password",
    "passwd",
    "secret",
    "token",
    "apikey",
    "authorization",
    "signature",
    "credential",
    "privatekey",
    "cookie",
)
"""Output keys containing one of these (case, ``_`` and ``-`` ignored) never have their values
copied into a summary (habit 7: never log secrets). Over-redacting is the safe mistake."""
REDACTED = "***"


def looks_secret(key: str) -> bool:
    """Whether an output key names something that must not be shown (a token, a password, …)."""
    flat = re.sub(r"[^a-z0-9]", "", key.lower())
    return any(marker in flat for marker in _SECRET_MARKERS)


def truncate(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, marked with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)] + _ELLIPSIS


def _short(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return truncate(text, limit)


def summarize_outputs(
    outputs: Mapping[str, Any] | None, *, limit: int = MAX_SUMMARY_CHARS
) -> dict[str, str]:
    """A bounded, secret-free summary of a step's outputs for the timeline.

    Keys are kept in order with their values shortened to a line each; keys that look like
    secrets show ``***``. When the budget runs out, the remaining keys are counted under ``"…"``.

    Args:
        outputs: the step's outputs (any JSON-like values).
        limit: the budget in characters for all keys and values together.

    Returns:
        ``{key: short value}``, at most about ``limit`` characters in total.
    """
    summary: dict[str, str] = {}
    if not outputs:
        return summary
    items = list(outputs.items())
    # Room for the "+N more" marker is kept back so the whole summary stays within the limit.
    budget = limit - _MARKER_ROOM
    used = 0
    for index, (key, value) in enumerate(items):
        name = truncate(str(key), 64)
        shown = REDACTED if looks_secret(name) else _short(value, _SUMMARY_VALUE_CHARS)
        is_last = index == len(items) - 1
        remaining = (limit if is_last else budget) - used - len(name)
        if remaining < 8:  # no room for even a stub: say how many were left out
            summary[_ELLIPSIS] = f"+{len(items) - index} more"
            break
        shown = truncate(shown, remaining)
        summary[name] = shown
        used += len(name) + len(shown)
    return summary


def _bound_summary(summary: Mapping[str, str], limit: int) -> dict[str, str]:
    # A summary built elsewhere is re-bounded, not trusted: the stored event must stay small.
    if sum(len(k) + len(v) for k, v in summary.items()) <= limit:
        return dict(summary)
    return summarize_outputs(summary, limit=limit)


# --------------------------------------------------------------------------------------------
# The run record
# --------------------------------------------------------------------------------------------


class _Stored(BaseModel):
    # Stored records are read back by newer and older code: unknown fields are ignored, not fatal.
    model_config = ConfigDict(extra="ignore")


class RunTrigger(_Stored):
    """What started the run."""

    type: Literal["schedule", "webhook", "s3", "manual", "subflow", "event"]
    detail: dict[str, Any] = Field(default_factory=dict)
    """Trigger facts for people: schedule name and time, delivery id, bucket and key, …"""


class RunError(_Stored):
    """Why a run failed, in the shape templates use (``error.step_id``, ``error.type``, …)."""

    step_id: str | None = None
    type: str
    message: str
    attempts: int | None = None

    @field_validator("message")
    @classmethod
    def _bounded(cls, message: str) -> str:
        return truncate(message, MAX_ERROR_MESSAGE_CHARS)


class PendingInterrupt(_Stored):
    """The interrupt a parked run waits on: a resume must address exactly this one."""

    interrupt_id: str
    kind: Literal["approval", "wait", "resource"]
    request: dict[str, Any] = Field(default_factory=dict)
    """What the interrupt asked for: the approval's prompt and fields, or the wait's deadline."""


class PauseRequest(_Stored):
    """An operator's request that a run pause (``langorch runs pause``, the console's button).

    Stored beside the record, not in it: any process may ask while a segment runs, and the
    segment's own writes of the record never drop the request. It stands until a resume lifts it.
    """

    by: str
    """Who asked (``cli:alice``, ``console:ana``)."""
    reason: str = ""
    at: datetime

    @field_validator("at")
    @classmethod
    def _timezone_aware(cls, value: datetime) -> datetime:
        _aware(value)
        return value

    @field_validator("reason")
    @classmethod
    def _bounded_reason(cls, reason: str) -> str:
        return truncate(reason, _MAX_REASON_CHARS)

    def said(self) -> str:
        """``paused by cli:alice: month-end freeze`` (the run's status reason while paused)."""
        return f"paused by {self.by}" + (f": {self.reason}" if self.reason else "")


def _aware(value: datetime | None) -> datetime | None:
    if value is not None and value.tzinfo is None:
        raise ValueError("timestamps must carry a timezone (use UTC)")
    return value


class RunRecord(_Stored):
    """One execution of one pinned workflow version. ``thread_id == run_id``."""

    run_id: str
    workflow_id: str
    workflow_version: int = Field(ge=1)
    status: RunStatus = RunStatus.queued
    status_reason: str | None = None
    trigger: RunTrigger
    dedupe_key: str | None = None
    input: dict[str, Any] = Field(default_factory=dict)
    user_id: str | None = None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None = None
    ended_at: datetime | None = None
    segment: int = Field(default=0, ge=0)
    """How many segments have started (each entry into ``running`` starts one)."""
    outputs: dict[str, Any] = Field(default_factory=dict)
    outputs_truncated: bool = False
    """The outputs were too large for the run record and were replaced by a summary; the full
    outputs stay in the run's last checkpoint."""
    error: RunError | None = None
    pending: PendingInterrupt | None = None
    execution_arn: str | None = None
    parent_run_id: str | None = None
    attempt: int = Field(default=0, ge=0)
    """How many times the run was redriven: its current execution is
    :func:`execution_name` ``(run_id, attempt)``."""
    continued: int = Field(default=0, ge=0)
    """How many times the run went on in a fresh execution within its attempt (continue-as-new,
    before an execution's history reaches its limit): its current execution is
    :func:`execution_name` ``(run_id, attempt, continued)``."""
    redrives: list[Redrive] = Field(default_factory=list)
    """The run's redrives, oldest first (the last :data:`MAX_LINEAGE` are kept)."""
    forked_from: ForkLink | None = None
    """The run this one was forked from (``langorch runs fork``)."""
    forks: list[ForkLink] = Field(default_factory=list)
    """Runs forked from this one (the last :data:`MAX_LINEAGE` are kept)."""
    pause: PauseRequest | None = None
    """The standing request to pause (read from beside the record: the stores keep it apart,
    so a segment's write of the record never drops it); ``None`` when nobody asked, or a resume
    lifted it."""
    held: dict[str, Any] | None = None
    """While ``paused``: the answer to ``pending`` that arrived meanwhile (an approval's
    decision, the end of a wait), given to the run when it is resumed."""
    cost_usd: float = Field(default=0.0, ge=0)
    """What the run's LLM calls cost so far, failed attempts included (US dollars): the sum
    of its timeline's ``cost_usd``, added by each segment as it is recorded."""
    trace_context: str | None = Field(default=None, max_length=55)
    """The run's OpenTelemetry trace (a W3C ``traceparent``), set by its first traced segment
    and continued by every later one, so a run over many segments is one trace."""

    @field_validator("created_at", "updated_at", "started_at", "ended_at")
    @classmethod
    def _timezone_aware(cls, value: datetime | None) -> datetime | None:
        return _aware(value)

    @field_validator("status_reason")
    @classmethod
    def _bounded_reason(cls, reason: str | None) -> str | None:
        return None if reason is None else truncate(reason, MAX_ERROR_MESSAGE_CHARS)

    @property
    def is_terminal(self) -> bool:
        """Whether the run has ended."""
        return self.status in TERMINAL


def transition(
    run: RunRecord,
    to: RunStatus,
    *,
    now: datetime,
    reason: str | None = None,
    pending: PendingInterrupt | None = None,
    error: RunError | None = None,
) -> RunRecord:
    """The run moved to ``to`` at ``now``; the input record is not changed.

    Entering ``running`` starts a new segment (and sets ``started_at`` the first time). Entering
    ``waiting_approval`` or ``sleeping`` needs the parked interrupt (``pending``) of the matching
    kind; leaving them clears it, so read ``run.pending`` before resuming. Entering a terminal
    status sets ``ended_at``.

    Args:
        run: the run as it is.
        to: the status to move to.
        now: the clock's time (timezone-aware).
        reason: a short human reason, kept in ``status_reason``.
        pending: the interrupt parked by ``waiting_approval`` / ``sleeping``.
        error: why the run failed (kept on the record).

    Returns:
        The updated copy of the run.

    Raises:
        InvalidTransitionError: the move is not allowed (e.g. ``succeeded → running``), or the
            parked interrupt is missing, of the wrong kind, or given for a status that parks none.
    """
    _aware(now)
    if not can_transition(run.status, to):
        raise InvalidTransitionError(run.run_id, run.status, to)
    parked_kinds = PARKED.get(to)
    if to is RunStatus.paused:
        pass  # keeps the park it was paused in, if any (see paused())
    elif parked_kinds is not None and (pending is None or pending.kind not in parked_kinds):
        raise InvalidTransitionError(
            run.run_id,
            run.status,
            to,
            f"{to} needs the parked {'/'.join(sorted(parked_kinds))} interrupt",
        )
    if parked_kinds is None and pending is not None and to is not RunStatus.paused:
        raise InvalidTransitionError(
            run.run_id, run.status, to, f"{to} parks no interrupt; pending must be None"
        )
    update: dict[str, Any] = {
        "status": to,
        "updated_at": now,
        "status_reason": reason,
        "pending": pending,
        # An answer held while paused leaves with the pause: the caller resumes with it.
        "held": run.held if to is RunStatus.paused else None,
    }
    if to is RunStatus.running:
        update["segment"] = run.segment + 1
        if run.started_at is None:
            update["started_at"] = now
    if to in TERMINAL:
        update["ended_at"] = now
    if error is not None:
        update["error"] = error
    # model_validate (not model_copy) so the validators run on the new values too.
    return RunRecord.model_validate({**run.model_dump(), **update})


def paused(run: RunRecord, pause: PauseRequest, *, now: datetime) -> RunRecord:
    """``run`` paused at ``now`` as ``pause`` asked: at a step boundary, or parked.

    A parked run keeps its ``pending`` interrupt (the approval stays open, the wait goes on):
    pausing changes what the run does next, not what it waits for.

    Raises:
        InvalidTransitionError: the run has ended (or is paused already).
    """
    return transition(run, RunStatus.paused, now=now, reason=pause.said(), pending=run.pending)


def holding(run: RunRecord, answer: dict[str, Any], *, now: datetime) -> RunRecord:
    """A paused ``run`` keeping ``answer`` to its ``pending`` interrupt until it is resumed.

    Raises:
        InvalidTransitionError: the run is not paused, or parks nothing to answer.
    """
    _aware(now)
    if run.status is not RunStatus.paused or run.pending is None:
        raise InvalidTransitionError(
            run.run_id, run.status, RunStatus.paused, "only a paused, parked run holds an answer"
        )
    return run.model_copy(update={"held": answer, "updated_at": now})


def unpaused(run: RunRecord, *, now: datetime) -> RunRecord:
    """A paused ``run`` resumed while its park still waits (nothing arrived meanwhile): back to
    ``waiting_approval`` or ``sleeping`` on the same interrupt.

    Raises:
        InvalidTransitionError: the run is not paused, holds an answer, or was paused at a step
            boundary (its next segment goes on instead).
    """
    pending = run.pending
    if run.status is not RunStatus.paused or pending is None or run.held is not None:
        raise InvalidTransitionError(
            run.run_id,
            run.status,
            RunStatus.waiting_approval,
            "only a paused run whose park still waits goes back to it",
        )
    to = RunStatus.waiting_approval if pending.kind == "approval" else RunStatus.sleeping
    return transition(run, to, now=now, pending=pending)


# --------------------------------------------------------------------------------------------
# Run ids
# --------------------------------------------------------------------------------------------

RUN_ID_PREFIX = "run-"
_ID_PART = re.compile(r"^[A-Za-z0-9_-]{1,76}$")
"""What may follow the prefix: also a valid Step Functions execution name (≤ 80 characters,
no spaces or punctuation that execution names forbid)."""


def dedupe_run_id(dedupe_key: str) -> str:
    """The run id for a trigger's dedupe key: the same key always yields the same id.

    The execution name is the run id, so a duplicate event maps to the same run and starts
    nothing (ARCHITECTURE §2 "Idempotent starts").

    Args:
        dedupe_key: the trigger's stable key (webhook delivery id; schedule + scheduled time;
            bucket + key + version).

    Returns:
        ``"run-"`` followed by 26 lowercase base32 characters of the key's SHA-256 (130 bits).

    Raises:
        ValueError: the key is empty.
    """
    if not dedupe_key:
        raise ValueError("a dedupe key must not be empty")
    digest = hashlib.sha256(dedupe_key.encode("utf-8")).digest()
    return RUN_ID_PREFIX + base64.b32encode(digest).decode("ascii").lower()[:26]


def new_run_id(id_gen: Callable[[], str]) -> str:
    """A fresh run id for a run without a dedupe key (a manual start).

    Args:
        id_gen: returns a unique token, e.g. ``lambda: uuid.uuid4().hex``.

    Raises:
        ValueError: the token is empty, too long or has characters an execution name forbids.
    """
    token = id_gen()
    if not _ID_PART.match(token):
        raise ValueError(f"id generator returned {token!r}: use 1-76 letters, digits, '_' or '-'")
    return RUN_ID_PREFIX + token


_EXECUTION_NAME_MAX = 80


def execution_name(run_id: str, attempt: int = 0, continued: int = 0) -> str:
    """The name of the run's Step Functions execution for ``attempt`` (0: its first).

    The first execution is named by the run id (a duplicate start starts nothing); a redrive's
    is ``<run_id>-r<attempt>``, so a repeated redrive of the same attempt starts nothing either;
    the ``continued``-th fresh execution of an attempt (continue-as-new) adds ``-c<continued>``.
    An id too long for the suffix keeps a hash of itself, so names never collide.
    """
    suffix = (f"-r{attempt}" if attempt else "") + (f"-c{continued}" if continued else "")
    if not suffix:
        return run_id
    if len(run_id) + len(suffix) <= _EXECUTION_NAME_MAX:
        return run_id + suffix
    digest = hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:10]
    keep = _EXECUTION_NAME_MAX - len(suffix) - len(digest) - 1
    return f"{run_id[:keep]}-{digest}{suffix}"


def current_execution(run: RunRecord) -> str:
    """The name of the execution the run is in now (its attempt's, continued or not)."""
    return execution_name(run.run_id, run.attempt, run.continued)


def reopened(
    run: RunRecord,
    redrive: Redrive,
    *,
    now: datetime,
    pending: PendingInterrupt | None = None,
) -> RunRecord:
    """``run`` reopened by a redrive: ``queued`` again on attempt ``redrive.attempt``.

    A redrive is the one way out of an ending (:func:`transition` never leaves one): the error,
    the ending and the outputs are cleared, the redrive is kept in ``redrives``, and the version
    moves to ``redrive.to_version``. ``pending`` keeps an approval parked at the redrive point
    (the next segment parks on it again, with the same links).

    Raises:
        InvalidTransitionError: ``redrive.attempt`` is not the run's next attempt.
    """
    _aware(now)
    if redrive.attempt != run.attempt + 1:
        raise InvalidTransitionError(
            run.run_id,
            run.status,
            RunStatus.queued,
            f"a redrive must be attempt {run.attempt + 1}, not {redrive.attempt}",
        )
    update: dict[str, Any] = {
        "status": RunStatus.queued,
        "status_reason": truncate(f"redriven: {redrive.reason or 'no reason given'}", 200),
        "updated_at": now,
        "ended_at": None,
        "error": None,
        "outputs": {},
        "outputs_truncated": False,
        "pending": pending,
        "attempt": redrive.attempt,
        "continued": 0,
        "workflow_version": redrive.to_version,
        "redrives": [*run.redrives, redrive][-MAX_LINEAGE:],
    }
    return RunRecord.model_validate({**run.model_dump(), **update})


# --------------------------------------------------------------------------------------------
# Timeline
# --------------------------------------------------------------------------------------------


class TimelineEventType(StrEnum):
    """What happened in a run (``langorch runs show``)."""

    run_started = "run_started"
    segment_started = "segment_started"
    step_started = "step_started"
    step_finished = "step_finished"
    step_failed = "step_failed"
    step_retried = "step_retried"
    step_skipped = "step_skipped"
    loop_limit_reached = "loop_limit_reached"
    """A bound stopped a step or a loop (``LoopLimitReached``): where the run went, or how
    many items a for-each left out."""
    tool_called = "tool_called"
    tool_call_denied = "tool_call_denied"
    """A tool-call policy denied a call, or a person refused it: the model was told."""
    tool_policy_shadow = "tool_policy_shadow"
    """A ``shadow`` tool-call policy matched a call: what it would have done, nothing else."""
    approval_requested = "approval_requested"
    approval_decided = "approval_decided"
    approval_timed_out = "approval_timed_out"
    wait_started = "wait_started"
    wait_finished = "wait_finished"
    resource_waiting = "resource_waiting"
    resource_acquired = "resource_acquired"
    resource_released = "resource_released"
    segment_ended = "segment_ended"
    run_finished = "run_finished"
    run_cancelled = "run_cancelled"
    run_paused = "run_paused"
    run_resumed = "run_resumed"
    run_redriven = "run_redriven"
    run_forked = "run_forked"
    run_continued = "run_continued"
    """The run went on in a fresh execution (continue-as-new): ``detail`` names both."""


class TokenUsage(_Stored):
    """LLM tokens a step used."""

    input: int = Field(default=0, ge=0)
    output: int = Field(default=0, ge=0)


class TimelineEvent(_Stored):
    """One entry of a run's timeline, small enough to store many per run.

    ``outputs_summary``, ``error.message`` and ``detail`` are bounded on construction, so an
    event never carries a whole output or a stack trace (use :func:`summarize_outputs`).
    """

    seq: int = Field(ge=1)
    """Position in the run's timeline, strictly increasing across segments."""
    at: datetime
    type: TimelineEventType
    step_id: str | None = None
    segment: int | None = None
    duration_ms: int | None = Field(default=None, ge=0)
    tokens: TokenUsage | None = None
    outputs_summary: dict[str, str] | None = None
    error: RunError | None = None
    actor: str | None = None
    """Who decided an approval (or cancelled, paused or resumed the run)."""
    detail: dict[str, Any] = Field(default_factory=dict)

    @field_validator("at")
    @classmethod
    def _timezone_aware(cls, value: datetime) -> datetime:
        _aware(value)
        return value

    @field_validator("outputs_summary")
    @classmethod
    def _bounded_summary(cls, summary: dict[str, str] | None) -> dict[str, str] | None:
        return None if summary is None else _bound_summary(summary, MAX_SUMMARY_CHARS)

    @field_validator("detail")
    @classmethod
    def _bounded_detail(cls, detail: dict[str, Any]) -> dict[str, Any]:
        from langorch.domain.limits import json_shape_problem

        # Shape as well as size: a model's tool arguments nested 250 levels deep fit in 1,000
        # characters, and the event would then not read back.
        if json_shape_problem(detail) is None and (
            len(json.dumps(detail, default=str, ensure_ascii=False)) <= MAX_DETAIL_CHARS
        ):
            return detail
        return dict(summarize_outputs(detail, limit=MAX_DETAIL_CHARS))


def timeline_cost(events: list[TimelineEvent]) -> float:
    """What ``events`` record as spent: the ``cost_usd`` of every priced attempt (US dollars)."""
    costs = (e.detail.get("cost_usd") for e in events)
    return round(sum(c for c in costs if isinstance(c, int | float)), 9)


def fitted_record(run: RunRecord, limit: int) -> RunRecord:
    """``run`` with the parts that grow with the work bounded, so it fits ``limit`` bytes.

    Outputs over :data:`~langorch.domain.limits.MAX_OUTPUTS_BYTES` are summarised
    (``outputs_truncated``; the checkpoint keeps them whole); a pending request over
    :data:`~langorch.domain.limits.MAX_PENDING_BYTES` has its long values cut with a marker.
    Either one nested deeper than :data:`~langorch.domain.limits.MAX_JSON_DEPTH` or not strict
    JSON is bounded the same way, so what is written is read back by the same parser within
    the same limits (a transform can build what no door would accept).

    Raises:
        RecordTooLargeError: the bounded record is still over ``limit`` (its input is).
    """
    from langorch.domain.errors import RecordTooLargeError
    from langorch.domain.limits import (
        MAX_OUTPUTS_BYTES,
        MAX_PENDING_BYTES,
        bounded_request,
        json_bytes,
        json_shape_problem,
    )

    update: dict[str, Any] = {}
    if run.outputs and (
        json_shape_problem(run.outputs) is not None or json_bytes(run.outputs) > MAX_OUTPUTS_BYTES
    ):
        update["outputs"] = summarize_outputs(run.outputs, limit=4000)
        update["outputs_truncated"] = True
    if run.pending is not None and (
        json_shape_problem(run.pending.request) is not None
        or json_bytes(run.pending.request) > MAX_PENDING_BYTES
    ):
        request = bounded_request(run.pending.request, MAX_PENDING_BYTES)
        update["pending"] = run.pending.model_copy(update={"request": request})
    fitted = run.model_copy(update=update) if update else run
    size = len(fitted.model_dump_json().encode("utf-8"))
    if size > limit:
        raise RecordTooLargeError(
            f"run {run.run_id}: the record is {size} bytes with its outputs and pending request "
            f"bounded (limit {limit}); its input is {json_bytes(run.input)} bytes — pass large "
            "data as a file (S3 key) instead"
        )
    return fitted


def unreadable_record(run_id: str, exc: ValueError) -> UnreadableRecordError:
    """The error for run ``run_id``'s stored record, which the parser refused with ``exc``.

    The reason says what the parser refused and where (``Invalid JSON: recursion limit
    exceeded at line 1 column 385``), never the stored values: the record holds the run's input.
    """
    if isinstance(exc, ValidationError):
        first = exc.errors(include_url=False, include_context=False, include_input=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        reason = f"{where}: {first['msg']}" if where else first["msg"]
    else:
        reason = type(exc).__name__  # its name only: no other parser is known to hide values
    return UnreadableRecordError(
        f"run {run_id}: its stored record cannot be read ({reason}); listings skip it; "
        "remove the record from the runs store to clear it"
    )


def minimal_failed(run: RunRecord, error: RunError, *, now: datetime) -> RunRecord:
    """The smallest terminal record of ``run``: ``failed`` with a short reason, nothing else.

    Written when the full failed record cannot be (it is too large): a run must never stay
    ``queued``/``running``/``waiting_approval`` after its execution ended. The input, outputs
    and pending request are dropped (the checkpoint and the timeline keep what there was).
    """
    from langorch.domain.limits import MAX_REASON_CHARS, cut

    short = RunError(step_id=error.step_id, type=error.type, message=cut(error.message, 400))
    return run.model_copy(
        update={
            "status": RunStatus.failed,
            "status_reason": cut(error.message, MAX_REASON_CHARS),
            "error": short,
            "input": {},
            "outputs": {},
            "outputs_truncated": bool(run.outputs) or run.outputs_truncated,
            "pending": None,
            "updated_at": now,
            "ended_at": now,
        }
    )
