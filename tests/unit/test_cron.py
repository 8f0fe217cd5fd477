"""The one AWS-cron translator (``langorch.domain.cron``), both ways.

Before it there were two readers of AWS cron with different behaviour: the trigger domain's
(numbers shifted only before ``#``/``L``, so ``cron(0 12 ? * 2 *)`` — Monday in AWS — read as
Tuesday; the year dropped; a lowercase-only ``cron(`` prefix) and the local ticker's (every number
shifted, year kept). Both wrote AWS's "last Friday" ``6L`` as ``5L``, which croniter refuses.
The kept behaviour is AWS's documented semantics, read as croniter reads classic cron.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from croniter import croniter

from langorch.domain.cron import ClassicCron, aws_cron, classic_cron


@pytest.mark.parametrize(
    ("aws", "classic"),
    [
        # AWS numbers days 1-7 from Sunday, classic 0-6: every number shifts, in lists and ranges
        ("cron(0 12 ? * 2 *)", "0 12 * * 1"),
        ("cron(0 12 ? * 2-6 *)", "0 12 * * 1-5"),
        ("cron(0 12 ? * 1,7 *)", "0 12 * * 0,6"),
        # names read the same in both
        ("cron(0 12 ? * MON-FRI *)", "0 12 * * MON-FRI"),
        # nth day of the month: the day shifts, the count does not
        ("cron(0 12 ? * 6#3 *)", "0 12 * * 5#3"),
        # last given day of the month: AWS 6L, croniter L5
        ("cron(0 18 ? * 6L *)", "0 18 * * L5"),
        ("cron(0 18 ? * FRIL *)", "0 18 * * L5"),
        # a bare L is the last day of the week: Saturday
        ("cron(0 18 ? * L *)", "0 18 * * 6"),
        # ? is classic's *, day-of-month L and W pass through
        ("cron(0 12 L * ? *)", "0 12 L * *"),
        ("cron(0 12 15W * ? *)", "0 12 15W * *"),
        # steps, months, and the prefix in any case
        ("cron(0/15 * * JAN,JUL ? *)", "0/15 * * JAN,JUL *"),
        ("CRON(0 9 ? * 2 *)", "0 9 * * 1"),
    ],
)
def test_an_aws_expression_reads_as_classic_cron(aws: str, classic: str):
    # Given an EventBridge Scheduler expression, when read, then it is the classic cron
    assert classic_cron(aws) == ClassicCron(classic, "*")
    croniter(classic_cron(aws).fields)  # and croniter accepts it


def test_the_year_field_is_kept_apart_and_limits_the_years():
    # Given expressions with a year field
    once = classic_cron("cron(0 0 1 1 ? 2027)")
    span = classic_cron("cron(0 0 1 1 ? 2026-2028)")
    every_other = classic_cron("cron(0 0 1 1 ? 2026/2)")
    listed = classic_cron("cron(0 0 1 1 ? 2026,2030)")

    # Then the five fields carry no year and the year field decides
    assert once == ClassicCron("0 0 1 1 *", "2027")
    assert [y for y in range(2025, 2032) if once.year_matches(y)] == [2027]
    assert [y for y in range(2025, 2032) if span.year_matches(y)] == [2026, 2027, 2028]
    assert [y for y in range(2025, 2032) if every_other.year_matches(y)] == [2026, 2028, 2030]
    assert [y for y in range(2025, 2032) if listed.year_matches(y)] == [2026, 2030]


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("cron(0 12 * * ?)", "six fields"),
        ("rate(5 minutes)", "not an AWS cron"),
        ("cron(0 12 LW * ? *)", "LW"),
        ("cron(0 12 ? * 0 *)", "1-7 = SUN-SAT"),
        ("cron(0 12 ? * 2-8 *)", "1-7 = SUN-SAT"),
    ],
)
def test_what_classic_cron_cannot_say_is_refused_with_the_reason(expression: str, message: str):
    with pytest.raises(ValueError, match=message):
        classic_cron(expression)


def test_a_monday_in_aws_fires_on_mondays():
    # Given AWS's Monday by number (2) — the old domain reader took it for Tuesday
    cron = classic_cron("cron(0 12 ? * 2 *)")

    # When its next slots are computed from a Sunday
    slots = croniter(cron.fields, datetime(2026, 11, 22, tzinfo=UTC))

    # Then they are Mondays
    assert {slots.get_next(datetime).strftime("%a") for _ in range(4)} == {"Mon"}


def test_croniter_s_last_friday_becomes_aws_s_and_back():
    # Given croniter's "last Friday of the month"
    # When written for the Scheduler and read back
    # Then it is AWS's 6L, and classic L5 again
    assert aws_cron("0 18 * * L5") == "cron(0 18 ? * 6L *)"
    assert classic_cron(aws_cron("0 18 * * L5")).fields == "0 18 * * L5"
