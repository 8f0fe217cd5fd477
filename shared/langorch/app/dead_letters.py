"""Dead-letter redrive (``langorch queues redrive``): events that failed every delivery go again.

Every dead-letter queue of the stack catches events meant for the trigger function: the
Scheduler's (a schedule's Input), the file-drop and event rules' (the EventBridge event) and the
trigger's own asynchronous invocations (Lambda's failure record, the event in its
``requestPayload``). None has an SQS queue as its source, so SQS's own ``StartMessageMoveTask``
does not apply: a redrive delivers each event to its target again (an asynchronous invocation,
as the service that gave up would have made) and deletes the letter once delivered. A letter
delivered twice starts nothing twice: every trigger dedupes (delivery id, schedule and time,
bucket key and sequencer).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from langorch.domain.errors import NotFoundError

logger = logging.getLogger(__name__)

BATCH = 10
"""Letters read per receive (SQS's most)."""


class Letter(NamedTuple):
    """One message of a dead-letter queue."""

    receipt: str
    body: str


class DeadLetters(Protocol):
    """The stack's dead-letter queues, by name, and the target each one's events were for."""

    def names(self) -> list[str]:
        """The queues' names (``schedules``, ``file-events``, ``trigger``, ``events``)."""
        ...

    def receive(self, name: str, most: int) -> list[Letter]:
        """Up to ``most`` (≤ :data:`BATCH`) letters of queue ``name``, hidden while handled."""
        ...

    def delete(self, name: str, receipt: str) -> None:
        """Delete a handled letter."""
        ...

    def redeliver(self, name: str, event: dict[str, Any]) -> None:
        """Deliver ``event`` to queue ``name``'s target again (asynchronously)."""
        ...


class RedriveDeps(Protocol):
    """What a redrive needs."""

    @property
    def dead_letters(self) -> DeadLetters: ...


@dataclass(frozen=True)
class RedriveQueues:
    """Move letters back: from ``queue`` (``None``: every queue), at most ``most`` per queue."""

    queue: str | None = None
    most: int = 1_000


@dataclass(frozen=True)
class QueueRedriven:
    """What one queue's redrive did."""

    queue: str
    moved: int
    unreadable: int
    """Letters left in the queue: not an event (not JSON, not an object)."""

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` shape."""
        return {"queue": self.queue, "moved": self.moved, "unreadable": self.unreadable}


def redrive_queues(cmd: RedriveQueues, deps: RedriveDeps) -> list[QueueRedriven]:
    """Deliver the letters of the stack's dead-letter queues to their targets again.

    Raises:
        NotFoundError: ``cmd.queue`` names no queue of the stack (the message lists them).
        StorageError: SQS or Lambda failed; the letters not yet delivered stay queued.
    """
    names = deps.dead_letters.names()
    if cmd.queue is not None and cmd.queue not in names:
        known = ", ".join(names) or "none"
        raise NotFoundError(f"no dead-letter queue {cmd.queue!r}; the stack's queues: {known}")
    chosen = [cmd.queue] if cmd.queue is not None else names
    return [_redrive(name, cmd.most, deps.dead_letters) for name in chosen]


def _redrive(name: str, most: int, queues: DeadLetters) -> QueueRedriven:
    moved = unreadable = 0
    while moved + unreadable < most:
        letters = queues.receive(name, min(BATCH, most - moved - unreadable))
        if not letters:
            break
        for letter in letters:
            event = target_event(letter.body)
            if event is None:
                unreadable += 1  # left for a person: hidden until its visibility times out
                continue
            queues.redeliver(name, event)
            queues.delete(name, letter.receipt)  # after the delivery: at least once
            moved += 1
    logger.info(
        "dead letters redriven", extra={"queue": name, "moved": moved, "unreadable": unreadable}
    )
    return QueueRedriven(name, moved, unreadable)


def target_event(body: str) -> dict[str, Any] | None:
    """The event a letter held for its target (``None``: not an event).

    A Lambda asynchronous-invocation failure record carries the event in ``requestPayload``;
    the Scheduler and EventBridge put the event itself.
    """
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    if "requestContext" in data and isinstance(data.get("requestPayload"), dict):
        payload: dict[str, Any] = data["requestPayload"]
        return payload
    return data
