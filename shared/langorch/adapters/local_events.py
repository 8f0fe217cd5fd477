"""The local event bus: an event put with ``langorch events send`` reaches the workflows whose
event trigger matches it, as EventBridge's rules would deliver it to the trigger function.

EventBridge builds the event (``version``, ``id``, ``detail-type``, ``source``, ``account``,
``time``, ``region``, ``resources``, ``detail``), matches every rule on the bus, and invokes each
matching rule's target with the stack's envelope (``langorch.domain.triggers.event_envelope``).
This bus does the same with the same pattern matcher the trigger function re-checks with, and
hands each envelope to ``deliver`` (the trigger's use-case, wired by the composition root), at
once: a local ``put`` returns after the runs were started, so a script can wait on them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from langorch.domain.definitions import TaskPlan
from langorch.domain.triggers import PutEvent, event_envelope, event_trigger_matches

ACCOUNT_ID = "000000000000"
"""The local account (the same the emulator's ARNs carry)."""


class _Workflows(Protocol):
    def list_workflows(self) -> list[TaskPlan]: ...


class LocalEventBus:
    """Puts events on local buses and delivers them to the matching event triggers.

    Args:
        definitions: the stored workflows (latest versions).
        deliver: what a rule's target receives, one envelope per matching workflow.
        region: the region the events name.
        ids: new event ids.
        clock: the events' ``time``.
    """

    def __init__(
        self,
        definitions: _Workflows,
        deliver: Callable[[dict[str, Any]], Any],
        *,
        region: str,
        ids: Callable[[], str] = lambda: str(uuid.uuid4()),
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._definitions = definitions
        self._deliver = deliver
        self._region = region
        self._ids = ids
        self._clock = clock

    def put(self, bus: str, source: str, detail_type: str, detail: dict[str, Any]) -> PutEvent:
        """Put one event and deliver it to every workflow whose trigger matches."""
        event = {
            "version": "0",
            "id": self._ids(),
            "detail-type": detail_type,
            "source": source,
            "account": ACCOUNT_ID,
            "time": self._clock().strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": self._region,
            "resources": [],
            "detail": detail,
        }
        reached = []
        for plan in self._definitions.list_workflows():
            if any(event_trigger_matches(t, bus, event) for t in plan.all_triggers()):
                self._deliver(event_envelope(plan.plan_id, bus, event))
                reached.append(plan.plan_id)
        return PutEvent(str(event["id"]), bus, sorted(reached))
