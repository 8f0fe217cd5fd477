"""EventBridge Scheduler: the schedules that fire workflows' schedule triggers.

Only I/O: which schedules a workflow needs, and their names and Input, are decided in
:mod:`langorch.domain.triggers`. The local emulator stores schedules but never fires them; the
local stack's tick reads them back through :meth:`Schedules.list` and :meth:`Schedules.get`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from botocore.exceptions import ClientError

from langorch.domain.errors import NotFoundError, StorageError

_MISSING = "ResourceNotFoundException"

ONE_TIME_PREFIX = "at("
"""A one-time schedule's expression (``at(2026-11-27T10:00:00)``): approvals' wake-ups."""

RETRY_POLICY = {"MaximumEventAgeInSeconds": 6 * 3600, "MaximumRetryAttempts": 20}
"""The Scheduler's retries when the trigger function cannot be invoked (throttled, failing
deploy): for up to six hours — a later start is better than none, and the run's dedupe key is
the slot, so a retried delivery starts nothing twice. After that the event goes to the DLQ."""


@dataclass(frozen=True)
class ScheduleInfo:
    """A stored schedule, as read back.

    Attributes:
        name: the schedule's name.
        expression: ``cron(…)`` (AWS form).
        timezone: IANA name.
        input: the target Input, parsed (``{}`` when none).
        state: ``ENABLED`` or ``DISABLED``.
        target_arn: what it invokes.
        role_arn: the role it invokes with.
        dead_letter_arn: the queue undeliverable events go to.
        description: free text.
    """

    name: str
    expression: str
    timezone: str
    input: dict[str, Any] = field(default_factory=dict)
    state: str = "ENABLED"
    target_arn: str | None = None
    role_arn: str | None = None
    dead_letter_arn: str | None = None
    description: str = ""


class Schedules:
    """Schedules in one schedule group that invoke one target.

    Args:
        client: a boto3 ``scheduler`` client.
        group: the schedule group (created by :meth:`ensure_group` when missing).
        role_arn: the role the Scheduler assumes to invoke the target.
        target_arn: the trigger function.
        dead_letter_arn: the SQS queue that keeps events the Scheduler could not deliver after
            its retries (the deployed stack's ``ScheduleDlqArn``); ``None`` in local mode.
    """

    def __init__(
        self,
        client: Any,
        *,
        group: str,
        role_arn: str | None,
        target_arn: str | None,
        dead_letter_arn: str | None = None,
    ) -> None:
        self._client = client
        self.group = group
        self._role_arn = role_arn
        self._target_arn = target_arn
        self.dead_letter_arn = dead_letter_arn

    @property
    def configured(self) -> bool:
        """Whether schedules can be written (a target and a role are configured)."""
        return bool(self._role_arn and self._target_arn)

    def ensure_group(self) -> None:
        """Create the schedule group when it does not exist."""
        try:
            self._client.get_schedule_group(Name=self.group)
            return
        except ClientError as exc:
            if _code(exc) != _MISSING:
                raise StorageError(f"cannot read schedule group {self.group}: {exc}") from exc
        try:
            self._client.create_schedule_group(Name=self.group)
        except ClientError as exc:
            # Another registration created it in between: what we wanted.
            if _code(exc) != "ConflictException":
                raise StorageError(f"cannot create schedule group {self.group}: {exc}") from exc

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

        A one-time schedule (``at(…)``) deletes itself once it has fired
        (``ActionAfterCompletion: DELETE``): it has nothing left to do, and kept it would count
        against the account's schedules for ever.

        Args:
            name: the schedule's name.
            cron: an AWS ``cron(…)`` expression, or ``at(…)`` for a one-time schedule.
            timezone: IANA name (``ScheduleExpressionTimezone``).
            input: the target Input (JSON object; may hold Scheduler context attributes).
            description: free text shown in the console.
            state: ``ENABLED``, or ``DISABLED`` to keep a paused schedule paused.

        Returns:
            Whether it was created (``False``: updated).

        Raises:
            NotFoundError: no target or role is configured.
            StorageError: the Scheduler refused.
        """
        if not self.configured:
            raise NotFoundError(
                "schedules need LANGORCH_TRIGGER_FUNCTION_ARN and LANGORCH_SCHEDULER_ROLE_ARN"
            )
        target: dict[str, Any] = {
            "Arn": self._target_arn,
            "RoleArn": self._role_arn,
            "Input": json.dumps(input, sort_keys=True),
            "RetryPolicy": RETRY_POLICY,
        }
        if self.dead_letter_arn:
            target["DeadLetterConfig"] = {"Arn": self.dead_letter_arn}
        request: dict[str, Any] = {
            "Name": name,
            "GroupName": self.group,
            "ScheduleExpression": cron,
            "ScheduleExpressionTimezone": timezone,
            # OFF: fire at the slot's time; the scheduled time is also the run's dedupe key.
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "Target": target,
            "State": state,
            "Description": description[:512],
            "ActionAfterCompletion": "DELETE" if cron.startswith(ONE_TIME_PREFIX) else "NONE",
        }
        try:
            self._client.create_schedule(**request)
            return True
        except ClientError as exc:
            if _code(exc) != "ConflictException":
                raise StorageError(f"cannot create schedule {name}: {exc}") from exc
        try:
            self._client.update_schedule(**request)
        except ClientError as exc:
            if _code(exc) != _MISSING:
                raise StorageError(f"cannot update schedule {name}: {exc}") from exc
            # The one-time schedule our create found has fired and deleted itself since (its
            # wake-up is often what asks for this next one): create it again.
            return self._create_again(name, request)
        return False

    def _create_again(self, name: str, request: dict[str, Any]) -> bool:
        try:
            self._client.create_schedule(**request)
        except ClientError as exc:
            raise StorageError(f"cannot create schedule {name}: {exc}") from exc
        return True

    def delete(self, name: str) -> bool:
        """Delete the schedule; a missing one is fine.

        Returns:
            Whether a schedule was deleted.
        """
        try:
            self._client.delete_schedule(Name=name, GroupName=self.group)
            return True
        except ClientError as exc:
            if _code(exc) == _MISSING:
                return False
            raise StorageError(f"cannot delete schedule {name}: {exc}") from exc

    def set_state(self, name: str, state: str) -> bool:
        """Pause (``DISABLED``) or resume (``ENABLED``) the schedule, keeping all else.

        ``UpdateSchedule`` replaces the whole schedule, so it is read first and written back
        with only its State changed.

        Returns:
            Whether the schedule exists.

        Raises:
            StorageError: the Scheduler refused.
        """
        try:
            item = self._client.get_schedule(Name=name, GroupName=self.group)
        except ClientError as exc:
            if _code(exc) == _MISSING:
                return False
            raise StorageError(f"cannot read schedule {name}: {exc}") from exc
        kept = (
            "ScheduleExpression",
            "ScheduleExpressionTimezone",
            "FlexibleTimeWindow",
            "Target",
            "Description",
            "StartDate",
            "EndDate",
            "ActionAfterCompletion",
            "KmsKeyArn",
        )
        request = {key: item[key] for key in kept if item.get(key) is not None}
        try:
            self._client.update_schedule(Name=name, GroupName=self.group, State=state, **request)
        except ClientError as exc:
            if _code(exc) == _MISSING:
                return False
            raise StorageError(f"cannot set schedule {name} {state}: {exc}") from exc
        return True

    def get(self, name: str) -> ScheduleInfo | None:
        """The schedule, or ``None`` when it does not exist."""
        try:
            item = self._client.get_schedule(Name=name, GroupName=self.group)
        except ClientError as exc:
            if _code(exc) == _MISSING:
                return None
            raise StorageError(f"cannot read schedule {name}: {exc}") from exc
        target = item.get("Target") or {}
        try:
            data = json.loads(target.get("Input") or "{}")
        except json.JSONDecodeError:
            data = {}
        return ScheduleInfo(
            name=str(item["Name"]),
            expression=str(item.get("ScheduleExpression", "")),
            timezone=str(item.get("ScheduleExpressionTimezone") or "UTC"),
            input=data if isinstance(data, dict) else {},
            state=str(item.get("State", "ENABLED")),
            target_arn=target.get("Arn"),
            role_arn=target.get("RoleArn"),
            dead_letter_arn=(target.get("DeadLetterConfig") or {}).get("Arn"),
            description=str(item.get("Description") or ""),
        )

    def list(self, prefix: str | None = None) -> list[ScheduleInfo]:
        """Every schedule in the group (optionally whose name starts with ``prefix``), by name.

        ``ListSchedules`` omits expressions and Input, so each schedule is read in full.
        """
        names: list[str] = []
        request: dict[str, Any] = {"GroupName": self.group}
        if prefix:
            request["NamePrefix"] = prefix
        try:
            while True:
                page = self._client.list_schedules(**request)
                names.extend(str(s["Name"]) for s in page.get("Schedules", []))
                token = page.get("NextToken")
                if not token:
                    break
                request["NextToken"] = token
        except ClientError as exc:
            if _code(exc) == _MISSING:
                return []
            raise StorageError(f"cannot list schedules in {self.group}: {exc}") from exc
        found = (self.get(name) for name in sorted(names))
        return [s for s in found if s is not None]


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


APPROVAL_TIMER_PREFIX = "approval-timer-"
APPROVAL_TIMER_KIND = "approval_timer"
"""The ``kind`` of a wake-up's Input: the trigger function hands it to the approval timers."""


class ScheduleWriter(Protocol):
    """What approval wake-ups need of :class:`Schedules` (its in-memory fake has the same)."""

    @property
    def configured(self) -> bool:
        """Whether schedules can be written."""
        ...

    def put(
        self, name: str, cron: str, timezone: str, input: dict[str, Any], *, description: str = ""
    ) -> bool:
        """Create or update a schedule."""
        ...

    def delete(self, name: str) -> bool:
        """Delete a schedule (a missing one is fine)."""
        ...


class ApprovalTimerSchedules:
    """Reminders and escalations as one-time schedules (``at(...)``), one per approval.

    No polling Lambda: each pending approval with timers has at most one schedule, due when its
    next reminder or escalation is; firing it sends what is due and schedules the next. It is
    deleted when the decision is reached. Without a configured target (no Scheduler), nothing
    is scheduled and the local ticker's scan stands in.

    Args:
        schedules: the stack's schedules (same group, target and role as triggers').
    """

    def __init__(self, schedules: ScheduleWriter) -> None:
        self._schedules = schedules

    @staticmethod
    def name(approval_id: str) -> str:
        """The schedule's name (at most 64 characters: approval ids are 30)."""
        return f"{APPROVAL_TIMER_PREFIX}{approval_id}"[:64]

    def schedule(self, approval_id: str, at: datetime) -> None:
        """Wake the approval's timers at ``at`` (an earlier wake-up is replaced)."""
        if not self._schedules.configured:
            return
        moment = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
        self._schedules.put(
            self.name(approval_id),
            f"at({moment})",
            "UTC",
            {"kind": APPROVAL_TIMER_KIND, "approval_id": approval_id},
            description="approval reminder/escalation",
        )

    def cancel(self, approval_id: str) -> None:
        """Delete the approval's wake-up (a missing one is fine)."""
        if self._schedules.configured:
            self._schedules.delete(self.name(approval_id))
