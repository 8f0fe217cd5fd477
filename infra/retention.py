"""Log retention in days -> the CloudWatch Logs setting (only some values are allowed)."""

from __future__ import annotations

from aws_cdk import aws_logs as logs

_ALLOWED = {
    1: "ONE_DAY",
    3: "THREE_DAYS",
    5: "FIVE_DAYS",
    7: "ONE_WEEK",
    14: "TWO_WEEKS",
    30: "ONE_MONTH",
    60: "TWO_MONTHS",
    90: "THREE_MONTHS",
    120: "FOUR_MONTHS",
    150: "FIVE_MONTHS",
    180: "SIX_MONTHS",
    365: "ONE_YEAR",
    400: "THIRTEEN_MONTHS",
    545: "EIGHTEEN_MONTHS",
    731: "TWO_YEARS",
    1827: "FIVE_YEARS",
    3653: "TEN_YEARS",
}


def retention_days(days: int) -> logs.RetentionDays:
    """The ``RetentionDays`` for ``days``.

    Raises:
        ValueError: CloudWatch Logs does not offer that retention; the message lists those
            it does.
    """
    if days not in _ALLOWED:
        allowed = ", ".join(str(d) for d in _ALLOWED)
        raise ValueError(f"log_retention_days {days}: CloudWatch Logs allows {allowed}")
    return getattr(logs.RetentionDays, _ALLOWED[days])
