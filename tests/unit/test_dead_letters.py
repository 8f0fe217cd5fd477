"""``langorch queues redrive``'s use-case: each letter's event delivered to its target again, then
deleted; letters that hold no event stay; a bound per queue; an unknown queue named clearly."""

from __future__ import annotations

import json
from typing import Any

import pytest

from langorch.app.dead_letters import Letter, RedriveQueues, redrive_queues, target_event
from langorch.domain.errors import NotFoundError

SCHEDULE_EVENT = {
    "source": "langorch.schedule",
    "workflow_id": "nightly",
    "schedule": "langorch-nightly",
    "scheduled_time": "2026-11-24T17:00:00Z",
}


class InMemoryDeadLetters:
    """Queues of letters; what was delivered again, in order."""

    def __init__(self, queues: dict[str, list[str]]) -> None:
        self.queues = {name: list(bodies) for name, bodies in queues.items()}
        self.hidden: dict[str, set[str]] = {name: set() for name in queues}
        self.delivered: list[tuple[str, dict[str, Any]]] = []

    def names(self) -> list[str]:
        return sorted(self.queues)

    def receive(self, name: str, most: int) -> list[Letter]:
        visible = [
            Letter(f"{name}#{i}", body)
            for i, body in enumerate(self.queues[name])
            if body and f"{name}#{i}" not in self.hidden[name]
        ][:most]
        self.hidden[name].update(letter.receipt for letter in visible)
        return visible

    def delete(self, name: str, receipt: str) -> None:
        self.queues[name][int(receipt.split("#")[1])] = ""

    def redeliver(self, name: str, event: dict[str, Any]) -> None:
        self.delivered.append((name, event))

    def left(self, name: str) -> int:
        return sum(1 for body in self.queues[name] if body)


class Deps:
    def __init__(self, letters: InMemoryDeadLetters) -> None:
        self.dead_letters = letters


def test_every_letter_is_delivered_again_and_deleted():
    # Given a schedule's event in the Scheduler's DLQ and a failed async invocation's record
    record = {"requestContext": {"condition": "RetriesExhausted"}, "requestPayload": {"a": 1}}
    letters = InMemoryDeadLetters(
        {"schedules": [json.dumps(SCHEDULE_EVENT)], "trigger": [json.dumps(record)]}
    )

    # When every queue is redriven
    done = redrive_queues(RedriveQueues(), Deps(letters))

    # Then each event went to its target (the record's own event, not the record) and is gone
    assert [d.to_dict() for d in done] == [
        {"queue": "schedules", "moved": 1, "unreadable": 0},
        {"queue": "trigger", "moved": 1, "unreadable": 0},
    ]
    assert letters.delivered == [("schedules", SCHEDULE_EVENT), ("trigger", {"a": 1})]
    assert letters.left("schedules") == letters.left("trigger") == 0


def test_a_letter_that_holds_no_event_stays_in_its_queue():
    # Given a letter that is not a JSON object beside one that is
    letters = InMemoryDeadLetters({"events": ["not json", json.dumps(SCHEDULE_EVENT)]})

    # When the queue is redriven
    (done,) = redrive_queues(RedriveQueues("events"), Deps(letters))

    # Then the event went again, and the other letter is left for a person
    assert (done.moved, done.unreadable) == (1, 1)
    assert letters.queues["events"] == ["not json", ""]


def test_max_bounds_the_letters_moved_per_queue():
    # Given 25 letters
    letters = InMemoryDeadLetters({"trigger": [json.dumps({"n": i}) for i in range(25)]})

    # When at most 12 are redriven
    (done,) = redrive_queues(RedriveQueues("trigger", most=12), Deps(letters))

    # Then 12 went, oldest first, and 13 wait
    assert done.moved == 12
    assert [event["n"] for _, event in letters.delivered] == list(range(12))
    assert letters.left("trigger") == 13


def test_an_unknown_queue_is_refused_with_the_stack_queues_named():
    # Given a stack with two queues
    letters = InMemoryDeadLetters({"schedules": [], "trigger": []})

    # When a misspelt queue is redriven, then the error names the queues there are
    with pytest.raises(NotFoundError, match=r"no dead-letter queue 'trigers'.*schedules, trigger"):
        redrive_queues(RedriveQueues("trigers"), Deps(letters))


def test_a_lambda_failure_record_gives_back_the_event_it_carried():
    # Given Lambda's on-failure record, the event itself, and a list: only objects are events
    record = {"version": "1.0", "requestContext": {}, "requestPayload": SCHEDULE_EVENT}

    assert target_event(json.dumps(record)) == SCHEDULE_EVENT
    assert target_event(json.dumps(SCHEDULE_EVENT)) == SCHEDULE_EVENT
    assert target_event("[1, 2]") is None
