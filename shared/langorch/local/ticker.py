"""The local scheduler tick: fires the schedules the local store keeps, as EventBridge Scheduler.

The local stack keeps its schedules in its own store (``Container.schedules``, SQLite), so it
fires them itself. Every tick reads the schedules, works out which of their slots fell due since
the previous tick — with croniter, in each schedule's ``ScheduleExpressionTimezone`` — and
invokes the trigger handler with the schedule's target ``Input``, exactly as Scheduler does: the
context attributes ``<aws.scheduler.scheduled-time>`` (the slot, ISO-8601 UTC),
``<aws.scheduler.schedule-arn>``, ``<aws.scheduler.execution-id>`` (new on every attempt, as in
AWS) and ``<aws.scheduler.attempt-number>`` are substituted in the Input text.

Rules that keep it honest:

- The first tick fires nothing from the past: the window starts when the ticker starts (a stack
  that was down for a day does not back-fill a day of runs).
- A slot fires at most once per ticker, however often :meth:`Ticker.fire_due` is called for the
  same moment; a failed invocation is retried on the next ticks (at most
  :data:`MAX_ATTEMPTS` attempts), with a new execution id each time. A delivery that reaches the
  trigger twice anyway is the trigger's to dedupe (schedule name + scheduled time).
- ``DISABLED`` schedules, slots before ``StartDate`` and after ``EndDate`` do not fire.

Scheduler's expressions are ``cron(min hour day-of-month month day-of-week year)`` with ``?``,
``L``, ``W`` and ``#`` and days of week numbered 1-7 from Sunday; croniter takes five fields with
days numbered 0-6 from Sunday, so expressions are translated by the one translator,
:func:`langorch.domain.cron.classic_cron`; ``rate(...)`` and ``at(...)`` are supported too.
"""

from __future__ import annotations

import logging
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from langorch.config import Settings
from langorch.domain.cron import classic_cron
from langorch.local._invoke import ACCOUNT_ID

logger = logging.getLogger(__name__)

Invoke = Callable[[dict[str, Any]], Any]
"""Delivers one schedule's target input (the trigger Lambda's event)."""

MAX_ATTEMPTS = 3
"""Invocations of one slot before it is given up (Scheduler retries longer; locally, three
attempts show the behaviour without hiding a broken handler)."""
MAX_SLOTS_PER_TICK = 100
"""A schedule due more often than this within one tick is fired this many times and warned
about: a stalled process must not turn into a storm of runs."""

SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"
SCHEDULE_ARN = "<aws.scheduler.schedule-arn>"
EXECUTION_ID = "<aws.scheduler.execution-id>"
ATTEMPT_NUMBER = "<aws.scheduler.attempt-number>"

_RATE = re.compile(r"^rate\(\s*(\d+)\s+(minutes?|hours?|days?)\s*\)$", re.IGNORECASE)
_AT = re.compile(r"^at\(\s*([0-9T:\-]+)\s*\)$", re.IGNORECASE)


@dataclass(frozen=True)
class Schedule:
    """What the tick needs of one Scheduler schedule."""

    name: str
    expression: str
    timezone: str = "UTC"
    input: str = "{}"
    enabled: bool = True
    arn: str = ""
    start: datetime | None = None
    end: datetime | None = None
    created: datetime | None = None


@dataclass
class _Pending:
    schedule: Schedule
    slot: datetime
    attempts: int = 0


def iso_utc(moment: datetime) -> str:
    """``2026-11-22T09:00:00Z``: how Scheduler writes ``<aws.scheduler.scheduled-time>``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def render_input(schedule: Schedule, slot: datetime, *, attempt: int, execution_id: str) -> Any:
    """The event the target receives for one attempt at one slot (the Input, substituted).

    Raises:
        ValueError: the Input is not JSON after substitution.
    """
    import json

    text = (schedule.input or "{}").replace(SCHEDULED_TIME, iso_utc(slot))
    text = text.replace(SCHEDULE_ARN, schedule.arn).replace(EXECUTION_ID, execution_id)
    text = text.replace(ATTEMPT_NUMBER, str(attempt))
    return json.loads(text)


# --------------------------------------------------------------------------------------------
# Expressions
# --------------------------------------------------------------------------------------------


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown timezone {name!r}") from exc


def slots_between(schedule: Schedule, after: datetime, until: datetime) -> Iterator[datetime]:
    """The schedule's slots in ``(after, until]``, oldest first (UTC, timezone-aware).

    Raises:
        ValueError: the expression or timezone is not understood.
    """
    zone = _zone(schedule.timezone)
    expression = schedule.expression.strip()
    if rate := _RATE.match(expression):
        unit = rate.group(2).lower().rstrip("s")
        period = timedelta(**{f"{unit}s": int(rate.group(1))})
        # Scheduler counts a rate from when the schedule starts (StartDate, else its creation).
        anchor = schedule.start or schedule.created or datetime(1970, 1, 1, tzinfo=UTC)
        if period <= timedelta(0):
            raise ValueError(f"rate must be positive: {expression!r}")
        steps = max(0, int((after - anchor) / period))
        slot = anchor + steps * period
        while slot <= until:
            if slot > after:
                yield slot.astimezone(UTC)
            slot += period
        return
    if at := _AT.match(expression):
        moment = datetime.fromisoformat(at.group(1)).replace(tzinfo=zone)
        if after < moment <= until:
            yield moment.astimezone(UTC)
        return
    from croniter import croniter

    cron = classic_cron(expression)
    iterator = croniter(cron.fields, after.astimezone(zone))
    while True:
        slot = iterator.get_next(datetime)
        if slot > until:
            return
        if cron.year_matches(slot.year):
            yield slot.astimezone(UTC)


# --------------------------------------------------------------------------------------------
# Reading schedules from the adapter
# --------------------------------------------------------------------------------------------


def _get(source: Any, *names: str) -> Any:
    # The Schedules adapter may hand back boto3-shaped dicts or its own models.
    for name in names:
        if isinstance(source, dict):
            if name in source:
                return source[name]
        elif hasattr(source, name):
            return getattr(source, name)
    return None


def _moment(value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def to_schedule(source: Any, *, region: str, group: str) -> Schedule | None:
    """A :class:`Schedule` from a ``get_schedule``-shaped dict or an adapter model.

    Returns:
        ``None`` when it has no expression.
    """
    name = _get(source, "Name", "name")
    expression = _get(source, "ScheduleExpression", "schedule_expression", "expression")
    if not name or not expression:
        return None
    target = _get(source, "Target", "target") or {}
    raw_input = _get(target, "Input", "input")
    if raw_input is None:
        raw_input = _get(source, "Input", "input")
    if raw_input is not None and not isinstance(raw_input, str):
        import json

        raw_input = json.dumps(raw_input)
    state = _get(source, "State", "state") or "ENABLED"
    group_name = _get(source, "GroupName", "group_name", "group") or group
    arn = _get(source, "Arn", "arn") or (
        f"arn:aws:scheduler:{region}:{ACCOUNT_ID}:schedule/{group_name}/{name}"
    )
    return Schedule(
        name=str(name),
        expression=str(expression),
        timezone=str(
            _get(source, "ScheduleExpressionTimezone", "schedule_expression_timezone", "timezone")
            or "UTC"
        ),
        input=raw_input or "{}",
        enabled=str(getattr(state, "value", state)).upper() == "ENABLED",
        arn=str(arn),
        start=_moment(_get(source, "StartDate", "start_date")),
        end=_moment(_get(source, "EndDate", "end_date")),
        created=_moment(_get(source, "CreationDate", "creation_date")),
    )


def _read_schedules(settings: Settings, adapter: Any) -> Callable[[], list[Schedule]]:
    def read() -> list[Schedule]:
        found: list[Schedule] = []
        for listed in adapter.list():
            detailed: Any = listed
            # A bare list_schedules summary has no expression or input: read the whole schedule.
            if _get(listed, "ScheduleExpression", "expression") is None:
                detailed = adapter.get(str(_get(listed, "Name", "name")))
            schedule = to_schedule(detailed, region=settings.region, group=settings.scheduler_group)
            if schedule is not None:
                found.append(schedule)
        return found

    return read


# --------------------------------------------------------------------------------------------
# The ticker
# --------------------------------------------------------------------------------------------


class Ticker:
    """Fires due schedule slots; :meth:`fire_due` is one tick (tests call it with their clock).

    Args:
        read_schedules: returns the schedules as they are now.
        invoke: delivers a schedule's rendered input to the trigger.
        since: the start of the first tick's window (default: now — nothing in the past fires).
        new_id: execution ids (default: random UUIDs, as Scheduler's).
    """

    def __init__(
        self,
        read_schedules: Callable[[], list[Schedule]],
        invoke: Invoke,
        *,
        since: datetime | None = None,
        new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self._read = read_schedules
        self._invoke = invoke
        self._since = since or datetime.now(UTC)
        self._new_id = new_id
        self._fired: dict[tuple[str, datetime], datetime] = {}
        self._retry: list[_Pending] = []
        self._lock = threading.Lock()
        self.stopped = threading.Event()

    @property
    def since(self) -> datetime:
        """Where the next tick's window starts."""
        return self._since

    def fire_due(self, now: datetime) -> list[tuple[str, datetime]]:
        """Fire every slot that fell due in ``(since, now]`` and was not fired before.

        Args:
            now: the tick's time (timezone-aware).

        Returns:
            The ``(schedule name, slot)`` pairs delivered successfully by this tick.
        """
        with self._lock:
            try:
                schedules = self._read()
            except Exception:
                # The window is kept, so the next tick fires what this one could not read.
                logger.exception("cannot read the schedules; retrying on the next tick")
                return []
            due = [_Pending(s, slot) for s in schedules for slot in self._due(s, now)]
            pending, self._retry = [*self._retry, *due], []
            self._since = max(self._since, now)
            delivered = [p for p in pending if self._deliver(p)]
            self._forget_before(now - timedelta(days=1))
            return [(p.schedule.name, p.slot) for p in delivered]

    def _due(self, schedule: Schedule, now: datetime) -> list[datetime]:
        if not schedule.enabled or now <= self._since:
            return []
        try:
            slots = []
            for slot in slots_between(schedule, self._since, now):
                if (schedule.start and slot < schedule.start) or (
                    schedule.end and slot > schedule.end
                ):
                    continue
                if (schedule.name, slot) in self._fired:
                    continue
                slots.append(slot)
                if len(slots) >= MAX_SLOTS_PER_TICK:
                    logger.warning("schedule %s: capped at %d slots", schedule.name, len(slots))
                    break
        except ValueError as exc:
            logger.warning("schedule %s not fired: %s", schedule.name, exc)
            return []
        for slot in slots:
            self._fired[(schedule.name, slot)] = slot
        return slots

    def _deliver(self, pending: _Pending) -> bool:
        pending.attempts += 1
        schedule = pending.schedule
        try:
            event = render_input(
                schedule, pending.slot, attempt=pending.attempts - 1, execution_id=self._new_id()
            )
        except ValueError as exc:
            logger.warning("schedule %s: its Input is not JSON (%s); not fired", schedule.name, exc)
            return False
        try:
            self._invoke(event)
        except Exception:
            logger.exception(
                "schedule %s slot %s: the trigger failed (attempt %d of %d)",
                schedule.name,
                iso_utc(pending.slot),
                pending.attempts,
                MAX_ATTEMPTS,
            )
            if pending.attempts < MAX_ATTEMPTS:
                self._retry.append(pending)
            return False
        logger.info("schedule %s fired for %s", schedule.name, iso_utc(pending.slot))
        return True

    def _forget_before(self, horizon: datetime) -> None:
        # Slots older than the window can never be due again; keep the memory bounded.
        for key in [k for k, slot in self._fired.items() if slot < horizon]:
            del self._fired[key]

    def run(self, interval: float) -> None:
        """Tick every ``interval`` seconds until :attr:`stopped` is set."""
        while not self.stopped.wait(interval):
            self.fire_due(datetime.now(UTC))

    def __call__(self) -> None:
        """Stop ticking (the ticker is its own stop function)."""
        self.stopped.set()


def start_ticker(
    settings: Settings, schedules: Any, *, invoke: Invoke, interval: float = 1.0
) -> Ticker:
    """Tick in a background thread: fire due schedules at the trigger handler.

    Args:
        settings: the stack's settings (region, schedule group).
        schedules: where the schedules are (the local store's ``Schedules``).
        invoke: delivers one event (the trigger function).
        interval: seconds between ticks.

    Returns:
        A function that stops the ticker; it is the :class:`Ticker` itself, so a caller can also
        call ``fire_due(now)`` on it.
    """
    ticker = Ticker(_read_schedules(settings, schedules), invoke)
    thread = threading.Thread(
        target=ticker.run, args=(interval,), name="langorch-ticker", daemon=True
    )
    thread.start()
    return ticker
