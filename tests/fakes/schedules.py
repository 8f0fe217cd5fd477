"""In-memory EventBridge Scheduler schedules (one group, one target)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from langorch.adapters.scheduler import ScheduleInfo
from langorch.domain.errors import NotFoundError


class InMemorySchedules:
    """Schedules by name, stored as the Scheduler stores them (Input as JSON text).

    Args:
        role_arn: the role schedules invoke with (``None``: not configured).
        target_arn: the trigger function (``None``: not configured).
        dead_letter_arn: the DLQ (optional).
    """

    def __init__(
        self,
        *,
        role_arn: str | None = "arn:aws:iam::123456789012:role/langorch-scheduler",
        target_arn: str | None = "arn:aws:lambda:us-east-1:123456789012:function:trigger",
        dead_letter_arn: str | None = None,
    ) -> None:
        self._role_arn = role_arn
        self._target_arn = target_arn
        self.dead_letter_arn = dead_letter_arn
        self.group_exists = False
        self._schedules: dict[str, ScheduleInfo] = {}
        self.writes = 0
        """Creates, updates and deletes (an unchanged schedule costs none)."""

    def configured_as(
        self,
        *,
        role_arn: str | None,
        target_arn: str | None,
        dead_letter_arn: str | None,
    ) -> InMemorySchedules:
        """The same schedules written by a deployment configured otherwise."""
        other = InMemorySchedules(
            role_arn=role_arn, target_arn=target_arn, dead_letter_arn=dead_letter_arn
        )
        other._schedules = self._schedules
        other.group_exists = self.group_exists
        return other

    @property
    def configured(self) -> bool:
        """Whether schedules can be written."""
        return bool(self._role_arn and self._target_arn)

    def ensure_group(self) -> None:
        """Create the group (idempotent)."""
        self.group_exists = True

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
        """Create or update the schedule; returns whether it was created."""
        if not self.configured:
            raise NotFoundError(
                "schedules need LANGORCH_TRIGGER_FUNCTION_ARN and LANGORCH_SCHEDULER_ROLE_ARN"
            )
        created = name not in self._schedules
        self._schedules[name] = ScheduleInfo(
            name=name,
            expression=cron,
            timezone=timezone,
            input=json.loads(json.dumps(input, sort_keys=True)),
            state=state,
            target_arn=self._target_arn,
            role_arn=self._role_arn,
            dead_letter_arn=self.dead_letter_arn,
            description=description[:512],
        )
        self.writes += 1
        return created

    def delete(self, name: str) -> bool:
        """Delete the schedule; returns whether one was deleted."""
        if self._schedules.pop(name, None) is None:
            return False
        self.writes += 1
        return True

    def set_state(self, name: str, state: str) -> bool:
        """Pause (``DISABLED``) or resume (``ENABLED``); returns whether it exists."""
        found = self._schedules.get(name)
        if found is None:
            return False
        self._schedules[name] = replace(found, state=state)
        self.writes += 1
        return True

    def get(self, name: str) -> ScheduleInfo | None:
        """The schedule, or ``None``."""
        return self._schedules.get(name)

    def list(self, prefix: str | None = None) -> list[ScheduleInfo]:
        """Schedules whose name starts with ``prefix``, by name."""
        return [
            self._schedules[name]
            for name in sorted(self._schedules)
            if not prefix or name.startswith(prefix)
        ]
