"""Use-cases for what starts runs — webhooks, schedules, S3 drops — and for registering them.

Every start goes through :func:`langorch.app.runs.launch_run` with the trigger's dedupe key
(:mod:`langorch.domain.triggers`), so a duplicated, retried or late event starts nothing new.
Nothing here imports LangGraph or LangChain: the trigger function's cold start stays light
(ARCHITECTURE §2 "Cold starts").

* :func:`accept_webhook` — ``POST /hooks/{workflow_id}``: checks in the order size (413),
  media type (415), signature (401), workflow with a webhook trigger (404), JSON body (415, 422),
  input (422); nothing is started on any 4xx. The signature comes before the workflow, so a
  prober learns nothing from an unknown workflow id: it gets the 401 of an unsigned request.
* :func:`handle_schedule` — the Input of a langorch schedule, once per slot.
* :func:`handle_s3_object` — an object created in a watched bucket: every matching workflow.
* :func:`handle_event` — an EventBridge event: the workflow its rule matched (or every event
  trigger whose pattern matches), once per event id.
* :func:`sync_triggers` / :func:`register_and_sync` — after a workflow is stored: its webhook
  secret (created once, shown once) and its EventBridge Scheduler schedules.
* :func:`rotate_webhook_secret` — a new current secret; the old one stays valid as previous.
"""

from __future__ import annotations

import logging
import re
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from langorch.app.runs import LaunchDeps, StartRun, launch_run, record_cancelled, start_run
from langorch.domain.artifacts import ARTIFACTS_PREFIX
from langorch.domain.definitions import IDENTIFIER, TaskPlan, Trigger
from langorch.domain.errors import (
    InputValidationError,
    JsonSyntaxError,
    NotFoundError,
    PayloadTooLargeError,
    Problem,
    SecretNotFoundError,
    SignatureError,
    StorageError,
    UnsupportedMediaTypeError,
)
from langorch.domain.inputs import ensure_valid_input, with_defaults
from langorch.domain.limits import MAX_INPUT_BYTES, json_bytes, loads_strict
from langorch.domain.triggers import (
    EventDelivered,
    S3ObjectCreated,
    ScheduleFired,
    StartedRun,
    event_trigger_matches,
    s3_trigger_matches,
    schedule_name,
    schedule_triggers,
    webhook_dedupe_key,
)
from langorch.domain.webhooks import SignedDelivery, header, secret_values

if TYPE_CHECKING:
    from langorch.app.ports import SecretsStore
    from langorch.config import Settings

logger = logging.getLogger(__name__)

CACHE_TTL_SECONDS = 30.0
"""How long a process reuses what it read about workflows' triggers. Stored versions never
change, so the only staleness is a newly registered version taking up to this long to count."""
SECRET_REFRESH_SECONDS = 10.0
"""After a signature fails, the secret is re-read (it may just have been rotated) at most this
often per workflow, so forged requests cannot turn into a Secrets Manager call each."""

_IDENTIFIER = re.compile(IDENTIFIER)


# --------------------------------------------------------------------------------------------
# The ports each use-case needs (the container satisfies them; tests pass fakes)
# --------------------------------------------------------------------------------------------


class ReadSecret(Protocol):
    """``SecretsStore.get_json``: a secret's JSON value, re-read when ``fresh``."""

    def __call__(self, name: str, *, fresh: bool = False) -> dict[str, Any]: ...


class TriggerDeps(LaunchDeps, Protocol):
    """What schedule and S3 events need: starting runs, and the settings."""

    @property
    def settings(self) -> Settings: ...


class WebhookDeps(TriggerDeps, Protocol):
    """What a webhook delivery needs: :class:`TriggerDeps` and the webhook secrets."""

    @property
    def secrets(self) -> SecretsStore: ...


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WebhookRequest:
    """A delivery to ``POST /hooks/{workflow_id}``.

    Attributes:
        workflow_id: from the path.
        headers: the request headers (any case).
        body: the raw body, byte for byte as sent (base64 already decoded).
        source_ip: the caller's address, for the run's trigger detail.
    """

    workflow_id: str
    headers: Mapping[str, str]
    body: bytes
    source_ip: str | None = None


@dataclass
class TriggerOutcome:
    """What one schedule or S3 event did.

    Attributes:
        trigger: ``"schedule"`` or ``"s3"``.
        started: runs started (``created``) or found from an earlier delivery of the event.
        skipped: ``(workflow_id, reason)`` for workflows that matched but cannot start a run
            from this event (a retry would not help, so the event is not retried).
    """

    trigger: Literal["schedule", "s3", "event"]
    started: list[StartedRun] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable summary (the Lambda's return value)."""
        return {
            "trigger": self.trigger,
            "runs": [
                {"workflow_id": r.workflow_id, "run_id": r.run_id, "created": r.created}
                for r in self.started
            ],
            "skipped": [{"workflow_id": w, "reason": why} for w, why in self.skipped],
        }


# --------------------------------------------------------------------------------------------
# A per-process view of workflows' triggers
# --------------------------------------------------------------------------------------------


class TriggerIndex:
    """Workflows by id and by trigger type, reread after ``ttl_seconds``.

    Args:
        definitions: anything with ``get_workflow(id)`` and ``list_workflows()``.
        ttl_seconds: how long a read is reused.
        monotonic: the clock (injected in tests).
    """

    def __init__(
        self,
        definitions: Any,
        *,
        ttl_seconds: float = CACHE_TTL_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._definitions = definitions
        self._ttl = ttl_seconds
        self._now = monotonic
        self._by_id: dict[str, tuple[float, TaskPlan | None]] = {}
        self._listed: tuple[float, list[TaskPlan]] | None = None
        self._secret_refreshed: dict[str, float] = {}
        self._no_secret: dict[str, float] = {}

    def workflow(self, workflow_id: str) -> TaskPlan | None:
        """The latest version of the workflow, or ``None`` (absences are cached too)."""
        now = self._now()
        hit = self._by_id.get(workflow_id)
        if hit is not None and now - hit[0] < self._ttl:
            return hit[1]
        if len(self._by_id) >= 1024:
            # Bounded: requests for random ids must not grow the sandbox's memory.
            self._by_id.clear()
        plan: TaskPlan | None = self._definitions.get_workflow(workflow_id)
        self._by_id[workflow_id] = (now, plan)
        return plan

    def with_trigger(self, kind: str) -> list[TaskPlan]:
        """The latest version of every workflow that has a trigger of this type."""
        now = self._now()
        if self._listed is None or now - self._listed[0] >= self._ttl:
            self._listed = (now, list(self._definitions.list_workflows()))
        return [p for p in self._listed[1] if any(t.type == kind for t in p.all_triggers())]

    def webhook_secrets(self, name: str, read: ReadSecret, *, fresh: bool = False) -> list[str]:
        """The secrets that verify deliveries under ``name``, current first (``[]``: none).

        ``read`` is the store's ``get_json``: the index only reads, so the trigger's role is
        granted ``GetSecretValue`` and nothing more.

        A missing secret is remembered like an absent workflow, and counts as just re-read:
        deliveries to random workflow ids must not each cost Secrets Manager calls.
        """
        now = self._now()
        missing = self._no_secret.get(name)
        if not fresh and missing is not None and now - missing < self._ttl:
            return []
        try:
            values = secret_values(read(name, fresh=fresh))
        except SecretNotFoundError:
            if len(self._no_secret) >= 1024:
                self._no_secret.clear()  # bounded, like the workflows
            self._no_secret[name] = self._secret_refreshed[name] = now
            return []
        self._no_secret.pop(name, None)
        return values

    def may_refresh_secret(self, name: str) -> bool:
        """Whether the secret may be re-read now (and note that it is)."""
        now = self._now()
        last = self._secret_refreshed.get(name)
        if last is not None and now - last < SECRET_REFRESH_SECONDS:
            return False
        if len(self._secret_refreshed) >= 1024:
            self._secret_refreshed.clear()  # bounded: any id may be asked for
        self._secret_refreshed[name] = now
        return True


# One index per container: a container is one process's composition root (one Lambda
# sandbox), so the cache lives exactly as long as the sandbox does, without a global.
_INDEXES: weakref.WeakKeyDictionary[Any, TriggerIndex] = weakref.WeakKeyDictionary()


MAX_VERSIONS_BACK = 50
"""How many earlier versions a trigger looks through for one that may run (CKP drafts)."""


def runnable_version(plan: TaskPlan, deps: TriggerDeps) -> TaskPlan:
    """The version a trigger starts: ``plan`` (the latest) when it may run now, else the latest
    earlier version that may (a CKP procedure's ``status`` and ``effective_date``).

    Raises:
        ProcedureInactiveError: no version may run now; the message says why.
    """
    from langorch.domain.ckp.errors import ProcedureInactiveError
    from langorch.domain.ckp.lifecycle import inactive_reason

    today = deps.clock().date()
    reason = inactive_reason(plan, today)
    if reason is None:
        return plan
    for version in range(plan.version - 1, max(0, plan.version - MAX_VERSIONS_BACK), -1):
        earlier = deps.definitions.get_workflow(plan.plan_id, version)
        if earlier is not None and inactive_reason(earlier, today) is None:
            return earlier
    raise ProcedureInactiveError(
        f"procedure {plan.plan_id} has no version a trigger may start today: the latest, "
        f"version {plan.version}, has {reason}; set status active (and an effective_date of "
        "today or earlier) and store it again, or start it by hand with `langorch runs start`"
    )


def trigger_index(deps: TriggerDeps) -> TriggerIndex:
    """The container's :class:`TriggerIndex` (built on first use)."""
    index = _INDEXES.get(deps)
    if index is None:
        index = TriggerIndex(deps.definitions)
        _INDEXES[deps] = index
    return index


# --------------------------------------------------------------------------------------------
# Webhooks
# --------------------------------------------------------------------------------------------


def accept_webhook(request: WebhookRequest, deps: WebhookDeps) -> StartedRun:
    """Verify a webhook delivery and start its run (once per delivery id).

    Checks, in order: body size, JSON content type, the signature (against the secret of the
    workflow the URL names), a workflow with a webhook trigger, the JSON body, the input against
    the inputs schema. Nothing is written or started when any check fails; the trigger handler
    answers each refusal with its 4xx (``web.errors``). An unknown workflow has no secret, so its
    deliveries fail the signature like unsigned ones (the same 401 and message: workflow ids
    cannot be probed); a delivery signed with a workflow's secret whose workflow is gone or has
    no webhook trigger gets a clear 404.

    Args:
        request: the delivery.
        deps: the ports it needs.

    Returns:
        The run; ``created`` is false for a repeated delivery id, which starts nothing.

    Raises:
        PayloadTooLargeError: the body is over the limit (413).
        UnsupportedMediaTypeError: not JSON (415, with the line and column).
        SignatureError: the signature, its timestamp or the secret does not verify, or the URL
            names a workflow that has no secret (401).
        NotFoundError: signed, but no such workflow, or it has no webhook trigger (404).
        JsonShapeError: the body nests deeper than ``MAX_JSON_DEPTH`` or is not strict JSON
            (NaN, Infinity, 1e999, a lone surrogate) (422, with the field path).
        DefinitionError: the input does not fit the inputs schema (422, with paths).
        StorageError: a backend failed (a 5xx: the sender should retry, and may safely).
    """
    settings = deps.settings
    limit = settings.webhook_max_body_bytes
    if len(request.body) > limit:
        raise PayloadTooLargeError(
            f"the body is {len(request.body)} bytes; the limit is {limit} bytes"
        )
    _check_media_type(request)
    delivery = _verified(request, deps)
    plan, trigger = _webhook_workflow(request.workflow_id, deps)
    plan = runnable_version(plan, deps)
    payload = _json_body(request)
    data = (
        with_defaults(plan, {**trigger.input, **payload}) if isinstance(payload, dict) else payload
    )
    _ensure_body_fits(data)
    ensure_valid_input(plan, data)
    run, created = launch_run(
        StartRun(
            plan.plan_id,
            input=data,
            version=plan.version,
            dedupe_key=webhook_dedupe_key(plan.plan_id, delivery.delivery_id),
            trigger="webhook",
            trigger_concurrency=trigger.concurrency,
            # Facts for people reading the run; the signature is never stored.
            trigger_detail={
                "delivery_id": delivery.delivery_id,
                "timestamp": int(delivery.timestamp),
                "source_ip": request.source_ip,
                **_sender(trigger, payload),
            },
        ),
        deps,
    )
    logger.info(
        "webhook accepted" if created else "duplicate webhook delivery",
        extra={
            "workflow_id": plan.plan_id,
            "delivery_id": delivery.delivery_id,
            "run_id": run.run_id,
        },
    )
    return StartedRun(plan.plan_id, run.run_id, created)


def _sender(trigger: Trigger, payload: Any) -> dict[str, str]:
    """``{"started_by": …}`` when the trigger names the body's sender field and it holds an
    address (signed with the body, so it can be trusted as who started the run)."""
    field = (trigger.sender_field or "").strip()
    value = payload.get(field) if field and isinstance(payload, dict) else None
    if isinstance(value, str) and "@" in value and len(value) <= MAX_SENDER_CHARS:
        return {"started_by": value.strip()}
    return {}


MAX_SENDER_CHARS = 254
"""The longest email address SMTP carries."""


def _ensure_body_fits(data: Any) -> None:
    """Refuse (413) a body whose input the run record could not carry, before anything starts.

    The raw body limit (``webhook_max_body_bytes``) guards parsing; this one is the run's
    budget (:mod:`langorch.domain.limits`), so an accepted delivery always runs.
    """
    size = json_bytes(data)
    if size > MAX_INPUT_BYTES:
        raise PayloadTooLargeError(
            f"the run input is {size} bytes of JSON; the limit is {MAX_INPUT_BYTES} bytes",
            problems=[
                Problem(
                    "body",
                    f"is {size} bytes as JSON (limit {MAX_INPUT_BYTES})",
                    "send large data as a file (an S3 key) instead of inline",
                )
            ],
        )


def _check_media_type(request: WebhookRequest) -> None:
    content_type = header(request.headers, "Content-Type") or ""
    media = content_type.split(";", 1)[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        raise UnsupportedMediaTypeError(
            f"Content-Type is {media or 'missing'}; send application/json"
        )


def _json_body(request: WebhookRequest) -> Any:
    try:
        return loads_strict(request.body, "body")
    except JsonSyntaxError as exc:
        # Not JSON at all is the media type's refusal (415); JSON too deep or not strict
        # (JsonShapeError) is unprocessable input (422), raised as it is.
        raise UnsupportedMediaTypeError(str(exc), problems=exc.problems) from None


def _webhook_workflow(workflow_id: str, deps: TriggerDeps) -> tuple[TaskPlan, Trigger]:
    plan = trigger_index(deps).workflow(workflow_id) if _IDENTIFIER.match(workflow_id) else None
    if plan is None:
        raise NotFoundError(f"no workflow {workflow_id!r}")
    trigger = next((t for t in plan.all_triggers() if t.type == "webhook"), None)
    if trigger is None:
        raise NotFoundError(
            f"workflow {workflow_id!r} has no webhook trigger; add `- type: webhook` to its "
            "triggers and register it again"
        )
    return plan, trigger


NOT_VERIFIED = (
    "the webhook signature does not verify: sign each delivery with the current secret of the "
    "workflow the URL names (`langorch workflows rotate-secret WORKFLOW_ID` makes a new one)"
)
"""The one refusal of a delivery no secret verifies: the same for a wrong signature, a workflow
without a secret and an unknown workflow, so none of them tells a prober which ids exist."""


def _verified(request: WebhookRequest, deps: WebhookDeps) -> SignedDelivery:
    """The delivery, verified against the secret of the workflow the URL names (401 else)."""
    settings = deps.settings
    delivery = SignedDelivery.from_headers(
        request.headers,
        now=deps.clock().timestamp(),
        tolerance_seconds=settings.webhook_tolerance_seconds,
    )
    if _IDENTIFIER.match(request.workflow_id):
        name = settings.webhook_secret_prefix + request.workflow_id
        index = trigger_index(deps)
        if delivery.verifies(request.body, index.webhook_secrets(name, deps.secrets.get_json)):
            return delivery
        # The cached secret may predate a rotation: read it again, but not for every forgery.
        if index.may_refresh_secret(name) and delivery.verifies(
            request.body, index.webhook_secrets(name, deps.secrets.get_json, fresh=True)
        ):
            return delivery
    raise SignatureError(NOT_VERIFIED)


# --------------------------------------------------------------------------------------------
# Schedules and S3
# --------------------------------------------------------------------------------------------


def handle_schedule(
    event: ScheduleFired,
    deps: TriggerDeps,
    *,
    detail: dict[str, Any] | None = None,
    skip: str | None = None,
) -> TriggerOutcome:
    """Start the run for one schedule slot (once, however often the slot is delivered).

    Args:
        event: the schedule's Input with the scheduled time substituted.
        deps: the ports it needs.
        detail: more facts for the run's ``trigger.detail`` (a caught-up slot's).
        skip: record the slot's run without starting it: ended ``cancelled`` with this reason
            (its dedupe key then holds the slot, so it never starts later).

    Returns:
        The run started or found; a skip when the workflow or its schedule trigger is gone or
        the trigger's input does not fit the inputs schema.

    Raises:
        StorageError: a backend failed (the Scheduler retries the slot; the run id is stable).
    """
    outcome = TriggerOutcome("schedule")
    plan = deps.definitions.get_workflow(event.workflow_id)
    trigger = None
    if plan is not None:
        names = {schedule_name(plan.plan_id, i): t for i, t in enumerate(schedule_triggers(plan))}
        trigger = names.get(event.schedule)
    if plan is None or trigger is None:
        reason = (
            "workflow not found"
            if plan is None
            else f"schedule {event.schedule} is no longer one of the workflow's triggers"
        )
        logger.warning(
            "schedule skipped",
            extra={"workflow_id": event.workflow_id, "schedule": event.schedule, "reason": reason},
        )
        outcome.skipped.append((event.workflow_id, reason))
        return outcome
    try:
        plan = runnable_version(plan, deps)
    except NotFoundError as exc:
        logger.warning(
            "schedule skipped",
            extra={
                "workflow_id": event.workflow_id,
                "schedule": event.schedule,
                "reason": str(exc),
            },
        )
        outcome.skipped.append((event.workflow_id, str(exc)))
        return outcome
    command = StartRun(
        plan.plan_id,
        input=dict(trigger.input),
        version=plan.version,
        dedupe_key=event.dedupe_key,
        trigger="schedule",
        trigger_concurrency=trigger.concurrency,
        trigger_detail={
            "schedule": event.schedule,
            "scheduled_time": event.scheduled_time,
            **(detail or {}),
        },
    )
    if skip is None:
        _start(outcome, command, deps)
        return outcome
    run, created = start_run(command, deps)
    if created:
        record_cancelled(run.run_id, deps, actor="catch_up", reason=skip)
    outcome.started.append(StartedRun(plan.plan_id, run.run_id, created))
    return outcome


def handle_s3_object(event: S3ObjectCreated, deps: TriggerDeps) -> TriggerOutcome:
    """Start one run of every workflow whose s3 trigger matches the object.

    A trigger matches on its bucket (default: the deployment's drop bucket), prefix and
    suffix. Checkpoint payloads that langorch itself offloads to the drop bucket, and the files
    runs attach there (``artifacts/``), never match.

    Args:
        event: the object (key already URL-decoded).
        deps: the ports it needs.

    Returns:
        The runs started or found, and the workflows skipped with the reason.

    Raises:
        StorageError: a backend failed for some workflow (after the others were tried; a
            redelivery starts only what is still missing).
    """
    outcome = TriggerOutcome("s3")
    settings = deps.settings
    # Objects langorch writes itself: checkpoint offloads and runs' artifacts.
    own_prefixes = (settings.checkpoint_prefix.rstrip("/") + "/", f"{ARTIFACTS_PREFIX}/")
    if event.bucket == settings.bucket and event.key.startswith(own_prefixes):
        return outcome
    failures: list[StorageError] = []
    for plan in trigger_index(deps).with_trigger("s3"):
        trigger = next(
            (
                t
                for t in plan.all_triggers()
                if s3_trigger_matches(t, event, default_bucket=settings.bucket)
            ),
            None,
        )
        if trigger is None:
            continue
        try:
            dedupe_key = event.dedupe_key(plan.plan_id)
            plan = runnable_version(plan, deps)
        except (ValueError, NotFoundError) as exc:
            outcome.skipped.append((plan.plan_id, str(exc)))
            continue
        command = StartRun(
            plan.plan_id,
            input={**trigger.input, **event.run_input()},
            version=plan.version,
            dedupe_key=dedupe_key,
            trigger="s3",
            trigger_concurrency=trigger.concurrency,
            trigger_detail={
                "bucket": event.bucket,
                "key": event.key,
                "version_id": event.version_id,
                "sequencer": event.sequencer,
            },
        )
        try:
            _start(outcome, command, deps)
        except StorageError as exc:
            failures.append(exc)
    if failures:
        raise failures[0]
    return outcome


def handle_event(event: EventDelivered, deps: TriggerDeps) -> TriggerOutcome:
    """Start one run per workflow whose event trigger matches the event (once per event id).

    The rule that delivered it already matched in the cloud; the pattern is checked again
    against the workflow's latest version, so a pattern changed since the rule was deployed
    starts nothing it no longer names.

    Args:
        event: the event, the bus it came from and, from a rule, the workflow it is for.
        deps: the ports it needs.

    Returns:
        The runs started or found; workflows skipped with the reason.

    Raises:
        StorageError: a backend failed for some workflow (after the others were tried;
            EventBridge retries, and a redelivery starts only what is still missing).
    """
    outcome = TriggerOutcome("event")
    index = trigger_index(deps)
    if event.workflow_id is not None:
        plan = index.workflow(event.workflow_id) if _IDENTIFIER.match(event.workflow_id) else None
        if plan is None:
            outcome.skipped.append((event.workflow_id, "workflow not found"))
            return outcome
        plans = [plan]
    else:
        plans = index.with_trigger("event")
    failures: list[StorageError] = []
    for plan in plans:
        trigger = next(
            (t for t in plan.all_triggers() if event_trigger_matches(t, event.bus, event.event)),
            None,
        )
        if trigger is None:
            if event.workflow_id is not None:
                outcome.skipped.append(
                    (plan.plan_id, f"no event trigger on bus {event.bus} matches the event")
                )
            continue
        try:
            plan = runnable_version(plan, deps)
        except NotFoundError as exc:
            outcome.skipped.append((plan.plan_id, str(exc)))
            continue
        command = StartRun(
            plan.plan_id,
            input=event.run_input(trigger),
            version=plan.version,
            dedupe_key=event.dedupe_key(plan.plan_id),
            trigger="event",
            trigger_concurrency=trigger.concurrency,
            trigger_detail={
                "event_id": event.event_id,
                "bus": event.bus,
                "source": event.event.get("source"),
                "detail_type": event.event.get("detail-type"),
            },
        )
        try:
            _start(outcome, command, deps)
        except StorageError as exc:
            failures.append(exc)
    if failures:
        raise failures[0]
    return outcome


def _start(outcome: TriggerOutcome, command: StartRun, deps: TriggerDeps) -> None:
    """Launch one run; record a skip for what a retry cannot fix."""
    try:
        run, created = launch_run(command, deps)
    except (InputValidationError, NotFoundError) as exc:
        logger.error(
            "trigger cannot start a run",
            extra={
                "workflow_id": command.workflow_id,
                "trigger": command.trigger,
                "reason": str(exc),
            },
        )
        outcome.skipped.append((command.workflow_id, str(exc).splitlines()[0]))
        return
    outcome.started.append(StartedRun(command.workflow_id, run.run_id, created))


# --------------------------------------------------------------------------------------------
# Registering triggers
# --------------------------------------------------------------------------------------------
