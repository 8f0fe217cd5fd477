"""AWS cron and classic cron, both ways: the one translator (pure).

EventBridge Scheduler's ``cron(minutes hours day-of-month month day-of-week year)`` differs from
the classic five-field cron that workflow definitions use (and croniter reads):

====================  ==================================  ===================================
                      AWS (EventBridge Scheduler)          classic (croniter)
====================  ==================================  ===================================
fields                six: a year field (1970-2199)        five
day-of-month/-week    exactly one is ``?``                 ``*``; both set means "either"
days of the week      1-7 = SUN-SAT                        0-7, 0 and 7 = SUN
last day of the week  ``L`` (Saturday), ``6L`` (last FRI)  ``6``, ``L5``
nth day of the week   ``6#3`` (third FRI)                  ``5#3``
weekday nearest       ``15W``, ``LW`` (last weekday)       ``15W``; no ``LW``
steps                 from a start value (``0/15``)        ``*/15``
====================  ==================================  ===================================

:func:`aws_cron` writes a definition's classic cron for the Scheduler; :func:`classic_cron` reads
a Scheduler expression back as classic cron plus its year field (the local ticker's view, and
how the two are checked against each other). Expressions are read case-insensitively (names
and the ``cron(`` prefix), as the Scheduler accepts them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_PLAIN_FIELD = re.compile(r"^[0-9A-Za-z,\-*/]+$")
_DAY_OF_MONTH = re.compile(r"^[0-9A-Za-z,\-*/?]+$")


def aws_cron(expression: str) -> str:
    """A five-field cron as EventBridge Scheduler's ``cron(m h dom mon dow year)``.

    AWS differs from classic cron: a sixth field (year); exactly one of day-of-month and
    day-of-week must be ``?``; days of the week count 1-7 from Sunday (classic: 0-7, 0 and 7
    Sunday) and take no ``/`` steps. Days are written as names (``MON-FRI``), which both
    read the same.

    Args:
        expression: ``minute hour day-of-month month day-of-week`` (already valid cron).

    Returns:
        The AWS expression, e.g. ``cron(0 12 ? * TUE *)`` for ``0 12 * * 2``.

    Raises:
        ValueError: the expression restricts both day-of-month and day-of-week (classic cron
            runs when either matches; AWS cannot say that), or uses syntax AWS has not.
    """
    fields = expression.split()
    if len(fields) != 5:
        raise ValueError(f"{expression!r} has {len(fields)} fields, not 5")
    minute, hour, dom, month, dow = fields
    for name, value in (("minute", minute), ("hour", hour), ("month", month)):
        if not _PLAIN_FIELD.match(value):
            raise ValueError(f"{name} {value!r} uses syntax EventBridge Scheduler does not accept")
    if not _DAY_OF_MONTH.match(dom):
        raise ValueError(f"day-of-month {dom!r} uses syntax EventBridge Scheduler does not accept")
    days = _aws_days(dow)
    dom_free = dom in ("*", "?")
    if days is None:
        dom_aws, dow_aws = (dom if not dom_free else "*"), "?"
    elif dom_free:
        dom_aws, dow_aws = "?", days
    else:
        raise ValueError(
            f"{expression!r} restricts both day-of-month and day-of-week, "
            "which EventBridge Scheduler cannot express"
        )
    # AWS documents steps from a start value (0/15); classic */15 starts at the field's first.
    minute, hour = _from_first(minute, "0"), _from_first(hour, "0")
    dom_aws, month = _from_first(dom_aws, "1"), _from_first(month, "1")
    return f"cron({minute} {hour} {dom_aws} {month.upper()} {dow_aws} *)"


def _from_first(field: str, first: str) -> str:
    return ",".join(
        first + item[1:] if item.startswith("*/") else item for item in field.split(",")
    )


def _aws_days(field: str) -> str | None:
    """Classic day-of-week -> AWS's, or ``None`` when it does not restrict the day."""
    if field in ("*", "?"):
        return None
    days: set[int] = set()
    special: list[str] = []
    for item in field.split(","):
        upper = item.upper()
        if "#" in upper:
            day, _, nth = upper.partition("#")
            special.append(f"{_day(day) + 1}#{nth}")
        elif len(upper) > 1 and upper.endswith("L"):
            special.append(f"{_day(upper[:-1]) + 1}L")
        elif len(upper) > 1 and upper.startswith("L"):
            special.append(f"{_day(upper[1:]) + 1}L")  # croniter's "last Friday": L5
        else:
            days |= _expand(upper)
    if not special and len(days) == 7:
        return None
    return ",".join([*_ranges(days), *special])


def _day(token: str) -> int:
    """A classic day token (0-7 or a name) -> 0 (Sunday) … 6 (Saturday)."""
    if token.isdigit() and int(token) <= 7:
        return int(token) % 7
    if token[:3] in _DAYS:
        return _DAYS.index(token[:3])
    raise ValueError(f"day-of-week {token!r} is not a day (0-7 or SUN-SAT)")


def _expand(item: str) -> set[int]:
    body, _, step_text = item.partition("/")
    step = int(step_text) if step_text else 1
    if step < 1:
        raise ValueError(f"day-of-week step {item!r} must be positive")
    if body == "*":
        start, end = 0, 6
    elif "-" in body:
        first, _, last = body.partition("-")
        start, end = _day(first), _day(last)
        if end < start or (end == 0 and last.strip() == "7"):
            # 5-7 (Friday to Sunday) or a range that wraps past Saturday.
            end += 7
    else:
        start = _day(body)
        end = 6 if step_text else start
    return {d % 7 for d in range(start, end + 1, step)}


def _ranges(days: set[int]) -> list[str]:
    """Sorted days as names, consecutive runs as ``MON-FRI``."""
    ordered = sorted(days)
    parts: list[str] = []
    run: list[int] = []
    for day in ordered:
        if run and day != run[-1] + 1:
            parts.append(_run_text(run))
            run = []
        run.append(day)
    if run:
        parts.append(_run_text(run))
    return parts


def _run_text(run: list[int]) -> str:
    if len(run) >= 3:
        return f"{_DAYS[run[0]]}-{_DAYS[run[-1]]}"
    return ",".join(_DAYS[d] for d in run)


@dataclass(frozen=True)
class ClassicCron:
    """An AWS cron expression as classic cron: five fields, and the year field apart."""

    fields: str
    """``minute hour day-of-month month day-of-week``, as croniter reads it."""
    year: str = "*"
    """AWS's year field (``*``, ``2027``, ``2026-2030``, ``2026/2``, lists of those)."""

    def year_matches(self, year: int) -> bool:
        """Whether a slot in ``year`` fires (classic cron has no year field to say it)."""
        if self.year in ("*", "?"):
            return True
        for part in self.year.split(","):
            body, _, step_text = part.partition("/")
            step = int(step_text) if step_text else 1
            if body == "*":
                low, high = 1970, 2199
            elif "-" in body:
                low_text, _, high_text = body.partition("-")
                low, high = int(low_text), int(high_text)
            else:
                low = int(body)
                high = low if not step_text else 2199
            if low <= year <= high and (year - low) % step == 0:
                return True
        return False


_AWS_CRON = re.compile(r"^cron\((.*)\)$", re.IGNORECASE)


def classic_cron(expression: str) -> ClassicCron:
    """The classic cron of an EventBridge Scheduler ``cron(…)`` expression.

    Days of the week are renumbered (AWS 1-7 from Sunday, classic 0-6), ``?`` becomes ``*``,
    a bare ``L`` day of the week becomes Saturday and ``nL`` croniter's ``L{n-1}``.

    Args:
        expression: ``cron(m h dom mon dow year)``.

    Returns:
        The five classic fields and the year field.

    Raises:
        ValueError: not a six-field ``cron(…)`` expression, or ``LW`` (the last weekday of the
            month), which classic cron cannot say.
    """
    found = _AWS_CRON.match(expression.strip())
    fields = found.group(1).split() if found else []
    if len(fields) != 6:
        raise ValueError(
            f"{expression!r} is not an AWS cron(…) expression "
            "(six fields: minutes hours day-of-month month day-of-week year)"
        )
    minute, hour, dom, month, dow, year = fields
    if dom.upper() == "LW":
        raise ValueError(
            f"{expression!r}: day-of-month LW (the last weekday) has no classic cron form "
            "(hint: EventBridge Scheduler runs it; the local ticker cannot)"
        )
    dom = "*" if dom == "?" else dom
    dow = "*" if dow == "?" else ",".join(_classic_day_item(item) for item in dow.split(","))
    return ClassicCron(f"{minute} {hour} {dom} {month} {dow}", year)


def _classic_day_item(item: str) -> str:
    """One AWS day-of-week list item as classic cron's."""
    upper = item.upper()
    if upper == "L":
        return "6"  # AWS: the last day of the week, Saturday
    if len(upper) > 1 and upper.endswith("L"):
        day = upper[:-1]
        # croniter writes "last Friday" as L5, with a number only
        return f"L{_DAYS.index(day[:3])}" if day[:3] in _DAYS else f"L{_classic_days(day)}"
    body, sep, rest = upper.partition("#") if "#" in upper else upper.partition("/")
    return f"{_classic_days(body)}{sep}{rest}"


def _classic_days(text: str) -> str:
    # AWS numbers days of week 1-7 from Sunday, classic 0-6 from Sunday; names need nothing.
    def shift(match: re.Match[str]) -> str:
        day = int(match.group(0))
        if not 1 <= day <= 7:
            raise ValueError(f"day-of-week {day} is not an AWS day (1-7 = SUN-SAT)")
        return str(day - 1)

    return re.sub(r"\d+", shift, text)


def cron_slots(
    expression: str, timezone: str, start: datetime, end: datetime, *, limit: int
) -> list[datetime]:
    """The slots of a classic five-field cron in ``[start, end]``, oldest first, in UTC.

    Slots are computed in ``timezone`` (as the Scheduler fires them: ``0 17 * * *`` in
    Europe/Paris is 16:00 or 15:00 UTC with the season).

    Args:
        expression: a definition's ``cron_expression`` (five fields).
        timezone: an IANA name.
        start: the first moment (timezone-aware; a slot at exactly ``start`` counts).
        end: the last moment (timezone-aware; a slot at exactly ``end`` counts).
        limit: at most this many slots plus one are returned, so a caller can tell "more".

    Raises:
        ValueError: the expression or timezone is not understood.
    """
    # Imported here: croniter costs ~0.5x an `import boto3`, and only a backfill needs it.
    from croniter import croniter

    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown timezone {timezone!r}") from exc
    # croniter yields slots after its start: begin one second early so `start` itself counts.
    iterator = croniter(expression, (start - timedelta(seconds=1)).astimezone(zone))
    slots: list[datetime] = []
    while len(slots) <= limit:
        slot = iterator.get_next(datetime).astimezone(UTC)
        if slot > end:
            break
        slots.append(slot)
    return slots
