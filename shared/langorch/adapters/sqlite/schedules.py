"""The schedules of workflows' schedule triggers and approvals' wake-ups, in the local store.

The same store as :class:`~langorch.adapters.scheduler.Schedules` (EventBridge Scheduler), on
SQLite: schedules by name in one group, each invoking one target with a role, read back as
:class:`~langorch.adapters.scheduler.ScheduleInfo`. Nothing here fires them; the local stack's
scheduler tick reads them and fires the due slots.

EventBridge Scheduler refuses a schedule it could not run (an unknown expression or timezone, a
bad name); the adapter relies on that and reports the refusal. moto accepts anything, so this
store refuses the same before storing, with what was wrong and how to write it; and ``LW`` (the
last weekday of the month), which the Scheduler runs but the tick cannot. A schedule stored here
is one the cloud accepts and the tick fires.
"""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from langorch.adapters.scheduler import ScheduleInfo
from langorch.adapters.sqlite._db import Database
from langorch.domain.cron import classic_cron
from langorch.domain.errors import NotFoundError, StorageError

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS schedule_groups (name TEXT PRIMARY KEY)",
    "CREATE TABLE IF NOT EXISTS schedules ("
    " group_name TEXT NOT NULL, name TEXT NOT NULL, expression TEXT NOT NULL,"
    " timezone TEXT NOT NULL, input TEXT NOT NULL, state TEXT NOT NULL,"
    " target_arn TEXT, role_arn TEXT, dead_letter_arn TEXT, description TEXT NOT NULL,"
    " PRIMARY KEY (group_name, name))",
)
"""``input`` is the target's Input as JSON text, as the Scheduler keeps it."""

MAX_DESCRIPTION = 512
"""The Scheduler's limit on a description (longer ones are cut, as the adapter cuts them)."""

_NAME = re.compile(r"^[0-9A-Za-z_.\-]{1,64}$")
_RATE = re.compile(r"^rate\((\d+) (minute|hour|day)(s?)\)$", re.IGNORECASE)
_AT = re.compile(r"^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$", re.IGNORECASE)
_CRON = re.compile(r"^cron\((.*)\)$", re.IGNORECASE)
_YEAR = re.compile(r"^(\*|\d{4}(-\d{4})?)(/\d+)?$")
_FIRST_YEAR, _LAST_YEAR = 1970, 2199

_EXPRESSION_HINT = (
    "write cron(minutes hours day-of-month month day-of-week year) with ? as one of the two "
    "day fields, e.g. cron(0 9 ? * MON-FRI *); rate(5 minutes); or at(2026-01-31T09:00:00)"
)

# Both read the same columns, in the order _from_row takes them.
_SELECT_ONE = (
    "SELECT name, expression, timezone, input, state, target_arn, role_arn, dead_letter_arn,"
    " description FROM schedules WHERE group_name = ? AND name = ?"
)
# substr, not LIKE: a name may hold "_", which LIKE reads as a wildcard.
_SELECT_PREFIXED = (
    "SELECT name, expression, timezone, input, state, target_arn, role_arn, dead_letter_arn,"
    " description FROM schedules WHERE group_name = ? AND substr(name, 1, ?) = ? ORDER BY name"
)
_UPSERT = (
    "INSERT INTO schedules (group_name, name, expression, timezone, input, state, target_arn,"
    " role_arn, dead_letter_arn, description) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (group_name, name) DO UPDATE SET expression = excluded.expression,"
    " timezone = excluded.timezone, input = excluded.input, state = excluded.state,"
    " target_arn = excluded.target_arn, role_arn = excluded.role_arn,"
    " dead_letter_arn = excluded.dead_letter_arn, description = excluded.description"
)


class SqliteSchedules:
    """Schedules in one group that invoke one target, in the local store; satisfies
    ``ScheduleStore`` and ``ScheduleWriter``.

    Args:
        db: the home's database.
        group: the schedule group (created by :meth:`ensure_group` when missing).
        role_arn: the role the schedules invoke the target with.
        target_arn: the trigger function.
        dead_letter_arn: where undeliverable events would go (``None`` in local mode).
    """

    def __init__(
        self,
        db: Database,
        *,
        group: str,
        role_arn: str | None,
        target_arn: str | None,
        dead_letter_arn: str | None = None,
    ) -> None:
        self._db = db
        self.group = group
        self._role_arn = role_arn
        self._target_arn = target_arn
        self.dead_letter_arn = dead_letter_arn
        db.ensure_schema("schedules", SCHEMA)

    @property
    def configured(self) -> bool:
        """Whether schedules can be written (a target and a role are configured)."""
        return bool(self._role_arn and self._target_arn)

    def ensure_group(self) -> None:
        """Create the schedule group when it does not exist."""
        with self._db.write() as connection:
            connection.execute(
                "INSERT OR IGNORE INTO schedule_groups (name) VALUES (?)", (self.group,)
            )

    def put(
        self,
        name: str,
        cron: str,
        timezone: str,
        input: dict[str, Any],
        *,
        description: str = "",
        state: str = "ENABLED",
    ) -> bool:
        """Create the schedule, or update it to these settings.

        Args:
            name: the schedule's name (1-64 letters, digits, ``-``, ``_``, ``.``).
            cron: an AWS ``cron(…)`` expression (or ``rate(…)``, ``at(…)``).
            timezone: IANA name.
            input: the target Input (JSON object; may hold Scheduler context attributes).
            description: free text.
            state: ``ENABLED``, or ``DISABLED`` to keep a paused schedule paused.

        Returns:
            Whether it was created (``False``: updated).

        Raises:
            NotFoundError: no target or role is configured.
            StorageError: the group does not exist, or the Scheduler would refuse the schedule
                (its name, expression or timezone; the message says which and how to fix it).
        """
        if not self.configured:
            raise NotFoundError(
                "schedules need LANGORCH_TRIGGER_FUNCTION_ARN and LANGORCH_SCHEDULER_ROLE_ARN"
            )
        problem = _name_problem(name) or _expression_problem(cron) or _timezone_problem(timezone)
        if problem:
            raise StorageError(f"cannot store schedule {name!r}: {problem}")
        row = (
            self.group,
            name,
            cron,
            timezone,
            json.dumps(input, sort_keys=True),
            state,
            self._target_arn,
            self._role_arn,
            self.dead_letter_arn,
            description[:MAX_DESCRIPTION],
        )
        with self._db.write() as connection:
            if not _group_exists(connection, self.group):
                raise StorageError(
                    f"cannot store schedule {name!r}: schedule group {self.group!r} does not "
                    "exist (ensure_group creates it)"
                )
            existed = connection.execute(
                "SELECT 1 FROM schedules WHERE group_name = ? AND name = ?", (self.group, name)
            ).fetchone()
            connection.execute(_UPSERT, row)
        return existed is None

    def delete(self, name: str) -> bool:
        """Delete the schedule; a missing one is fine.

        Returns:
            Whether a schedule was deleted.
        """
        with self._db.write() as connection:
            cursor = connection.execute(
                "DELETE FROM schedules WHERE group_name = ? AND name = ?", (self.group, name)
            )
        return cursor.rowcount > 0

    def set_state(self, name: str, state: str) -> bool:
        """Pause (``DISABLED``) or resume (``ENABLED``) the schedule; the tick skips a paused one.

        Returns:
            Whether the schedule exists.
        """
        with self._db.write() as connection:
            cursor = connection.execute(
                "UPDATE schedules SET state = ? WHERE group_name = ? AND name = ?",
                (state, self.group, name),
            )
        return cursor.rowcount > 0

    def get(self, name: str) -> ScheduleInfo | None:
        """The schedule, or ``None`` when it does not exist."""
        with self._db.read() as connection:
            row = connection.execute(_SELECT_ONE, (self.group, name)).fetchone()
        return None if row is None else _from_row(row)

    def list(self, prefix: str | None = None) -> list[ScheduleInfo]:
        """Every schedule in the group (optionally whose name starts with ``prefix``), by name."""
        start = prefix or ""
        with self._db.read() as connection:
            rows = connection.execute(_SELECT_PREFIXED, (self.group, len(start), start)).fetchall()
        return [_from_row(row) for row in rows]


def _group_exists(connection: sqlite3.Connection, group: str) -> bool:
    found = connection.execute("SELECT 1 FROM schedule_groups WHERE name = ?", (group,))
    return found.fetchone() is not None


def _from_row(row: tuple[Any, ...]) -> ScheduleInfo:
    name, expression, timezone, text, state, target_arn, role_arn, dead_letter, description = row
    data = json.loads(text)
    return ScheduleInfo(
        name=name,
        expression=expression,
        timezone=timezone,
        input=data if isinstance(data, dict) else {},
        state=state,
        target_arn=target_arn,
        role_arn=role_arn,
        dead_letter_arn=dead_letter,
        description=description,
    )


# --------------------------------------------------------------------------------------------
# What the Scheduler accepts (it validates on the server; here nothing else would)
# --------------------------------------------------------------------------------------------


def _name_problem(name: str) -> str | None:
    if _NAME.match(name):
        return None
    return "a schedule's name is 1 to 64 letters, digits, '-', '_' or '.'"


def _timezone_problem(timezone: str) -> str | None:
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        return f"unknown timezone {timezone!r} (use an IANA name such as 'UTC' or 'Europe/Paris')"
    return None


def _expression_problem(expression: str) -> str | None:
    """Why the Scheduler would refuse ``expression`` (``None``: it accepts it)."""
    if rate := _RATE.match(expression):
        value, plural = int(rate.group(1)), bool(rate.group(3))
        if value < 1:
            return f"{expression!r}: a rate is at least 1 ({_EXPRESSION_HINT})"
        if plural != (value > 1):
            return (
                f"{expression!r}: the unit is singular for 1 and plural above ({_EXPRESSION_HINT})"
            )
        return None
    if at := _AT.match(expression):
        try:
            datetime.fromisoformat(at.group(1))
        except ValueError:
            return f"{expression!r} is not a date and time ({_EXPRESSION_HINT})"
        return None
    cron = _CRON.match(expression)
    if cron is None:
        return f"{expression!r} is not a cron(…), rate(…) or at(…) expression ({_EXPRESSION_HINT})"
    problem = _cron_problem(expression, cron.group(1).split())
    return None if problem is None else f"{problem} ({_EXPRESSION_HINT})"


def _cron_problem(expression: str, fields: list[str]) -> str | None:
    try:
        classic = classic_cron(expression)  # six fields, the days of the week, no LW
    except ValueError as exc:
        return str(exc)
    day_of_month, day_of_week = fields[2], fields[4]
    if (day_of_month == "?") == (day_of_week == "?"):
        return f"{expression!r}: exactly one of day-of-month and day-of-week must be ?"
    # Imported here: croniter costs ~0.5x an `import boto3`, and only `put` needs it.
    from croniter import croniter

    if not croniter.is_valid(classic.fields):
        return f"{expression!r} is not a valid cron expression"
    for item in classic.year.split(","):
        years = [int(year) for year in re.findall(r"\d{4}", item.partition("/")[0])]
        if not _YEAR.match(item) or not all(_FIRST_YEAR <= y <= _LAST_YEAR for y in years):
            return f"{expression!r}: the year field takes {_FIRST_YEAR}-{_LAST_YEAR}, * and /"
    return None
