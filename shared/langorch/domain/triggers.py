"""What starts runs, as plain rules: trigger events, dedupe keys, schedules in AWS's cron.

Pure: no I/O. The use-cases in :mod:`langorch.app.triggers` apply these rules; the adapters
talk to EventBridge Scheduler and Secrets Manager.

Dedupe keys (ARCHITECTURE §2 "Idempotent starts") — the run id derives from the key and the
execution is named by the run id, so a repeated event starts nothing:

* webhook: ``webhook:<workflow_id>:<delivery id>``;
* schedule: ``schedule:<schedule name>:<scheduled time>`` — the Scheduler's execution id
  changes on every retry of one slot, the scheduled time does not;
* S3: ``s3:<workflow_id>:<bucket>/<key>@<version id | sequencer | etag>``;
* EventBridge event: ``event:<workflow_id>:<event id>`` — EventBridge keeps the id on every
  redelivery of one event.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from urllib.parse import unquote_plus

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator

from langorch.domain.cron import aws_cron
from langorch.domain.definitions import TaskPlan, Trigger
from langorch.domain.errors import Problem
from langorch.domain.event_patterns import matches

SCHEDULE_SOURCE = "langorch.schedule"
"""``source`` of the Input every langorch schedule sends to the trigger function."""
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"
"""EventBridge Scheduler replaces this context attribute in the target Input with the slot's
time (ISO-8601, UTC), the same on every retry of the slot."""
RECONCILE_SOURCE = "langorch.reconcile"
"""``source`` of the Input of the stack's own schedule that runs ``reconcile_runs``."""
EVENT_SOURCE = "langorch.event"
"""``source`` of the envelope an event trigger's rule sends: the workflow it is for, the bus and
the EventBridge event itself (the rule's input transformer; the local bus sends the same)."""
DEFAULT_BUS = "default"
SCHEDULE_NAME_PREFIX = "langorch-"
MAX_SCHEDULE_NAME = 64
"""EventBridge Scheduler's limit on schedule names."""

EventKind = Literal["http", "schedule", "reconcile", "s3", "event", "unknown"]
_RECORD_SOURCES = ("aws:s3", "aws:sqs", "aws:sns")


# --------------------------------------------------------------------------------------------
# Events
# --------------------------------------------------------------------------------------------


def event_kind(event: Mapping[str, Any]) -> EventKind:
    """Which of the trigger function's three event shapes ``event`` is.

    Args:
        event: the Lambda event.

    Returns:
        ``"http"`` (API Gateway HTTP API v2, or REST API v1), ``"schedule"`` (a langorch
        schedule's Input),
        ``"reconcile"`` (the stack's reconcile schedule),
        ``"s3"`` (EventBridge ``Object Created`` from S3, or a classic S3 notification direct
        or through SQS/SNS), ``"event"`` (an event trigger's envelope, or any other EventBridge
        event) or ``"unknown"``.
    """
    context = event.get("requestContext")
    if isinstance(context, Mapping) and ("http" in context or "httpMethod" in event):
        return "http"  # an HTTP API (2.0) or, with the waf option, a REST API (1.0) request
    if event.get("source") == SCHEDULE_SOURCE:
        return "schedule"
    if event.get("source") == RECONCILE_SOURCE:
        return "reconcile"
    if event.get("source") == "aws.s3" and event.get("detail-type") == "Object Created":
        return "s3"
    if event.get("source") == EVENT_SOURCE:
        return "event"
    # Classic S3 notifications, direct or through SQS/SNS (langorch.domain.s3_notifications).
    records = event.get("Records")
    first = records[0] if isinstance(records, list) and records else None
    if isinstance(first, Mapping) and first.get("eventSource", first.get("EventSource")) in (
        _RECORD_SOURCES
    ):
        return "s3"
    if all(key in event for key in ("id", "source", "detail-type", "detail")):
        return "event"  # EventBridge's own shape, sent to the function without the envelope
    return "unknown"


class _Event(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class ScheduleFired(_Event):
    """The Input a langorch schedule sends (see :func:`schedule_input`)."""

    source: Literal["langorch.schedule"]
    workflow_id: str = Field(min_length=1)
    schedule: str = Field(min_length=1)
    scheduled_time: str

    @field_validator("scheduled_time")
    @classmethod
    def _a_time(cls, value: str) -> str:
        # An unsubstituted placeholder would make every slot share one dedupe key.
        datetime.fromisoformat(value.replace("Z", "+00:00"))
        return value

    @property
    def dedupe_key(self) -> str:
        """``schedule:<name>:<scheduled time>``."""
        return f"schedule:{self.schedule}:{self.scheduled_time}"


class _S3Bucket(_Event):
    name: str = Field(min_length=1)


class _S3Object(_Event):
    key: str = Field(min_length=1)
    size: int | None = None
    etag: str | None = Field(default=None, validation_alias=AliasChoices("etag", "eTag"))
    version_id: str | None = Field(
        default=None, validation_alias=AliasChoices("version-id", "version_id")
    )
    sequencer: str | None = None


class _S3Detail(_Event):
    bucket: _S3Bucket
    object: _S3Object


class _S3EventBridge(_Event):
    id: str | None = None
    source: Literal["aws.s3"]
    detail_type: Literal["Object Created"] = Field(validation_alias="detail-type")
    detail: _S3Detail


@dataclass(frozen=True)
class S3ObjectCreated:
    """An object landed in a bucket (from an EventBridge ``Object Created`` event).

    Attributes:
        bucket: the bucket name.
        key: the object key, URL-decoded (S3 events carry it URL-encoded).
        size: bytes, when known.
        etag: the object's ETag, when known.
        version_id: the version id on a versioned bucket.
        sequencer: orders events for one key; unique per write.
        event_id: the EventBridge event id (the same on a redelivery).
    """

    bucket: str
    key: str
    size: int | None = None
    etag: str | None = None
    version_id: str | None = None
    sequencer: str | None = None
    event_id: str | None = None

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> S3ObjectCreated:
        """Parse an EventBridge S3 ``Object Created`` event.

        Raises:
            ValueError: the event does not have that shape.
        """
        try:
            parsed = _S3EventBridge.model_validate(event)
        except ValidationError as exc:
            raise ValueError(f"not an S3 Object Created event: {exc}") from exc
        obj = parsed.detail.object
        return cls.from_notified(
            parsed.detail.bucket.name,
            obj.key,
            size=obj.size,
            etag=obj.etag,
            version_id=obj.version_id,
            sequencer=obj.sequencer,
            event_id=parsed.id,
        )

    @classmethod
    def from_notified(
        cls,
        bucket: str,
        encoded_key: str,
        *,
        size: int | None = None,
        etag: str | None = None,
        version_id: str | None = None,
        sequencer: str | None = None,
        event_id: str | None = None,
    ) -> S3ObjectCreated:
        """The object as an S3 event spells it: key URL-encoded, etag quoted, ``"null"`` version."""
        return cls(
            bucket=bucket,
            key=unquote_plus(encoded_key),
            size=size,
            etag=etag.strip('"') if etag else None,
            version_id=version_id if version_id not in (None, "", "null") else None,
            sequencer=sequencer or None,
            event_id=event_id,
        )

    @property
    def identity(self) -> str:
        """What tells this write of the key from any other: version id, else sequencer, etag.

        Raises:
            ValueError: the event carries none of them (nor an event id).
        """
        for label, value in (
            ("v", self.version_id),
            ("seq", self.sequencer),
            ("etag", self.etag),
            ("event", self.event_id),
        ):
            if value:
                return f"{label}={value}"
        raise ValueError(
            f"the event for s3://{self.bucket}/{self.key} has no version id, sequencer or etag"
        )

    def dedupe_key(self, workflow_id: str) -> str:
        """``s3:<workflow_id>:<bucket>/<key>@<identity>`` (one run per workflow and write)."""
        return f"s3:{workflow_id}:{self.bucket}/{self.key}@{self.identity}"

    def run_input(self) -> dict[str, Any]:
        """What a run started by this object gets, over the trigger's fixed input."""
        return {
            "bucket": self.bucket,
            "key": self.key,
            "size": self.size,
            "etag": self.etag,
            "version_id": self.version_id,
        }


class _BusEvent(_Event):
    id: str = Field(min_length=1, max_length=256)
    source: str = Field(min_length=1)
    detail_type: str = Field(validation_alias="detail-type")
    detail: dict[str, Any]


@dataclass(frozen=True)
class EventDelivered:
    """An EventBridge event delivered to the trigger function.

    Attributes:
        event: the event as EventBridge shaped it (``id``, ``source``, ``detail-type``,
            ``detail``, ``time`` …).
        bus: the bus it was put on.
        workflow_id: the workflow whose rule matched it (``None``: an event sent without the
            envelope, matched against every event trigger on ``bus``).
    """

    event: dict[str, Any]
    bus: str = DEFAULT_BUS
    workflow_id: str | None = None

    @classmethod
    def from_lambda_event(cls, event: Mapping[str, Any]) -> EventDelivered:
        """Parse the envelope (``source: langorch.event``) or a bare EventBridge event.

        Raises:
            ValueError: it has neither shape (no ``id``, ``source``, ``detail-type``, object
                ``detail``).
        """
        if event.get("source") == EVENT_SOURCE:
            inner = event.get("event")
            workflow_id = event.get("workflow_id")
            bus = event.get("bus") or DEFAULT_BUS
        else:
            inner, workflow_id, bus = event, None, DEFAULT_BUS
        if not isinstance(inner, Mapping):
            raise ValueError("the envelope carries no event")
        try:
            _BusEvent.model_validate(inner)
        except ValidationError as exc:
            raise ValueError(f"not an EventBridge event: {exc}") from exc
        return cls(
            event=dict(inner),
            bus=str(bus),
            workflow_id=str(workflow_id) if workflow_id else None,
        )

    @property
    def event_id(self) -> str:
        """EventBridge's id: the same on every delivery of the event."""
        return str(self.event["id"])

    def dedupe_key(self, workflow_id: str) -> str:
        """``event:<workflow_id>:<event id>`` (one run per workflow and event)."""
        return f"event:{workflow_id}:{self.event_id}"

    def run_input(self, trigger: Trigger) -> dict[str, Any]:
        """What the run gets over the trigger's fixed input: ``detail`` or the whole event."""
        part = self.event if trigger.event_input == "event" else self.event.get("detail", {})
        return {**trigger.input, **part}


@dataclass(frozen=True)
class PutEvent:
    """What was put: the event's id and, where the bus is local, the workflows it reached.

    Attributes:
        event_id: EventBridge's id (every delivery of the event carries it).
        bus: the bus it was put on.
        delivered_to: workflows whose trigger matched (local bus only; ``None`` on AWS, where
            the rules decide out of sight).
    """

    event_id: str
    bus: str
    delivered_to: list[str] | None = None


def event_trigger_matches(trigger: Trigger, bus: str, event: Mapping[str, Any]) -> bool:
    """Whether an event trigger listens on ``bus`` and its pattern matches ``event``."""
    return (
        trigger.type == "event"
        and trigger.pattern is not None
        and (trigger.bus or DEFAULT_BUS) == bus
        and matches(trigger.pattern, event)
    )


def event_envelope(workflow_id: str, bus: str, event: Mapping[str, Any]) -> dict[str, Any]:
    """What an event trigger's rule hands the trigger function (the local bus sends the same)."""
    return {"source": EVENT_SOURCE, "workflow_id": workflow_id, "bus": bus, "event": dict(event)}


@dataclass(frozen=True)
class StartedRun:
    """A run a trigger started, or found already started (``created`` false)."""

    workflow_id: str
    run_id: str
    created: bool


def webhook_dedupe_key(workflow_id: str, delivery_id: str) -> str:
    """``webhook:<workflow_id>:<delivery id>``."""
    return f"webhook:{workflow_id}:{delivery_id}"


def s3_trigger_matches(trigger: Trigger, obj: S3ObjectCreated, *, default_bucket: str) -> bool:
    """Whether an s3 trigger watches this object (bucket, then prefix and suffix)."""
    return (
        trigger.type == "s3"
        and (trigger.bucket or default_bucket) == obj.bucket
        and obj.key.startswith(trigger.prefix)
        and obj.key.endswith(trigger.suffix)
    )


# --------------------------------------------------------------------------------------------
# Schedules
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DesiredSchedule:
    """One EventBridge Scheduler schedule a workflow's schedule trigger needs.

    Attributes:
        name: the schedule's name in the langorch group.
        cron: the trigger's five-field cron.
        expression: the same in AWS's form, ``cron(m h dom mon dow year)``.
        timezone: IANA name.
        input: the target Input (see :func:`schedule_input`).
        trigger: the trigger it comes from.
    """

    name: str
    cron: str
    expression: str
    timezone: str
    input: dict[str, Any]
    trigger: Trigger


def schedule_name(workflow_id: str, index: int = 0) -> str:
    """The schedule's name: ``langorch-<workflow_id>`` (``-2``, ``-3`` … for more triggers).

    Names longer than Scheduler's 64 characters keep a readable head and a hash of the id.
    """
    suffix = f"-{index + 1}" if index else ""
    name = f"{SCHEDULE_NAME_PREFIX}{workflow_id}{suffix}"
    if len(name) <= MAX_SCHEDULE_NAME:
        return name
    digest = hashlib.sha256(workflow_id.encode()).hexdigest()[:8]
    room = MAX_SCHEDULE_NAME - len(SCHEDULE_NAME_PREFIX) - len(suffix) - len(digest) - 1
    return f"{SCHEDULE_NAME_PREFIX}{workflow_id[:room]}-{digest}{suffix}"


def schedule_input(workflow_id: str, name: str) -> dict[str, Any]:
    """The Input a schedule sends to the trigger function.

    ``scheduled_time`` is the Scheduler's context attribute, substituted per slot.
    """
    return {
        "source": SCHEDULE_SOURCE,
        "workflow_id": workflow_id,
        "schedule": name,
        "scheduled_time": SCHEDULED_TIME,
    }


def schedule_triggers(plan: TaskPlan) -> list[Trigger]:
    """The plan's schedule triggers, seed 000's ``schedule`` shorthand included."""
    return [t for t in plan.all_triggers() if t.type == "schedule" and t.schedule is not None]


def desired_schedules(plan: TaskPlan) -> list[DesiredSchedule]:
    """The schedules the plan needs, one per schedule trigger.

    Raises:
        ValueError: a cron expression cannot be written in AWS's form (see
            :func:`schedule_problems` to report it before storing).
    """
    desired = []
    for index, trigger in enumerate(schedule_triggers(plan)):
        assert trigger.schedule is not None  # filtered by schedule_triggers
        name = schedule_name(plan.plan_id, index)
        desired.append(
            DesiredSchedule(
                name=name,
                cron=trigger.schedule.cron_expression,
                expression=aws_cron(trigger.schedule.cron_expression),
                timezone=trigger.schedule.timezone,
                input=schedule_input(plan.plan_id, name),
                trigger=trigger,
            )
        )
    return desired


def schedule_problems(plan: TaskPlan) -> list[Problem]:
    """Schedule triggers EventBridge Scheduler cannot run, each with its path."""
    located: list[tuple[str, Trigger]] = [
        (f"triggers[{i}].schedule.cron_expression", t)
        for i, t in enumerate(plan.triggers)
        if t.type == "schedule"
    ]
    if not located and plan.schedule is not None:
        located = [("schedule.cron_expression", Trigger(type="schedule", schedule=plan.schedule))]
    problems = []
    for path, trigger in located:
        if trigger.schedule is None:
            continue  # reported by the definition validator
        try:
            aws_cron(trigger.schedule.cron_expression)
        except ValueError as exc:
            problems.append(
                Problem(
                    path,
                    str(exc),
                    "restrict day-of-month or day-of-week, not both (use two schedule "
                    "triggers for both)",
                )
            )
    return problems
