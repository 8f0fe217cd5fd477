"""A run's Step Functions execution history, counted from the shipped state machine.

A Standard execution's history holds at most 25,000 events; past that the execution fails. A
run with many segments (a for-each with an approval per item, a long sleep-polling loop) would
reach it, so a segment counts the events its execution has so far and, before the next round
could cross the limit, the run continues in a fresh execution (continue-as-new,
:mod:`langorch.app.continuation`).

The count is read from ``statemachine.asl.json`` as shipped, not guessed: a round is
``RunSegment`` and ``Route`` and the states its status leads through, back to ``RunSegment``
(as ``bench/engine.py`` walks it for the cost model), and each state's events follow from its
type. A state machine's retries add events the walk cannot see; the limit the count is held to
leaves room for them (``Settings.execution_history_limit``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

AWS_HISTORY_LIMIT = 25_000
"""The events one Standard execution's history may hold (Step Functions quotas)."""

STARTED_EVENTS = 1
"""``ExecutionStarted``: every execution's first event."""

CONTINUED = "continued"
"""The status a segment answers when the run went on in a fresh execution."""

_TASK_EVENTS = 5
"""Entered, Scheduled, Started, Succeeded, Exited."""
_TOKEN_TASK_EVENTS = 6
"""A ``.waitForTaskToken`` task also records ``TaskSubmitted``."""
_FLOW_EVENTS = 2
"""Pass, Choice, Wait: Entered and Exited."""
_END_EVENTS = 3
"""Succeed or Fail: Entered, Exited (Succeed) and the execution's own last event."""


def state_events(state: dict[str, Any]) -> int:
    """The history events one pass through ``state`` records (no retries)."""
    kind = state.get("Type")
    if kind == "Task":
        token = str(state.get("Resource", "")).endswith(".waitForTaskToken")
        return _TOKEN_TASK_EVENTS if token else _TASK_EVENTS
    if kind in ("Succeed", "Fail"):
        return _END_EVENTS
    return _FLOW_EVENTS


def round_events(states: dict[str, Any], status: str) -> int:
    """The events of one round whose segment answers ``status``.

    ``RunSegment`` and ``Route``, then the states ``Route``'s branch for ``status`` goes
    through until the next ``RunSegment`` or an end (a status ``Route`` does not know takes
    its ``Default``).
    """
    route = states["Route"]
    name = next(
        (c["Next"] for c in route["Choices"] if c.get("StringEquals") == status),
        route.get("Default"),
    )
    events = state_events(states["RunSegment"]) + state_events(route)
    while name is not None and name != "RunSegment":
        events += state_events(states[name])
        name = states[name].get("Next")
    return events


@cache
def shipped_states() -> dict[str, Any]:
    """The ``States`` of the state machine shipped in the package (read once per process)."""
    text = resources.files("langorch").joinpath("statemachine.asl.json").read_text("utf-8")
    states: dict[str, Any] = json.loads(text)["States"]
    return states


@dataclass(frozen=True)
class HistoryBudget:
    """How many events an execution may reach before its run continues in a fresh one.

    Args:
        limit: the events an execution may reach (AWS's hard limit is
            :data:`AWS_HISTORY_LIMIT`; a deployment keeps some below it for retries' events).
        states: the state machine's ``States`` (the shipped one by default).
    """

    limit: int
    states: dict[str, Any]

    @classmethod
    def shipped(cls, limit: int) -> HistoryBudget:
        """The budget for the shipped state machine."""
        return cls(limit, shipped_states())

    def round(self, status: str) -> int:
        """The events of a round whose segment answers ``status``."""
        return round_events(self.states, status)

    @property
    def widest_round(self) -> int:
        """The most events any one round records (an approval round, a resource wait)."""
        statuses = [c["StringEquals"] for c in self.states["Route"]["Choices"]]
        return max(self.round(status) for status in statuses if status != CONTINUED)

    def due(self, events: int) -> bool:
        """Whether a run whose execution has ``events`` so far must continue in a fresh one now.

        Now, before the segment: the next round may be the widest, and after it there must
        still be room for the hand-over round (``RunSegment``, ``Route``, the end). An
        execution that has run nothing yet never hands over, so a limit too small for one
        round cannot make runs hand over forever.
        """
        if events <= STARTED_EVENTS:
            return False
        return events + self.widest_round + self.round(CONTINUED) > self.limit
