"""A step's recorded side effect (seed 001 §5): what one LLM, tool or HTTP call returned.

Records are keyed by run, step, visit (how many times the step finished before), attempt and
call index. When the step runs again after a crash or a retry, the recorder
(:mod:`langorch.app.tasks`) hands back the recorded result instead of repeating the call.

A call to a tool server is recorded twice: ``started`` (with its idempotency key) before it is
sent, ``done`` (with its result) once it returns. A record still ``started`` when the step runs
again is a call whose outcome is unknown: the process stopped between sending it and recording
what came back.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

TaskKind = Literal["llm", "turn", "tool", "http", "attach", "memory"]
"""``llm``: a step's structured answer; ``turn``: one model round of a tool loop; ``tool``:
one tool call; ``http``: an ``http`` step's response; ``attach``: the record of a file an
``attach`` step kept (so a step run again neither downloads nor writes it twice); ``memory``:
what a ``query_memory`` step read (a replay reads it again)."""

MEMORY_LOAD_STEP = "_load_memory"
"""The step id a run's memory load (before its first step) is recorded under: no step's id (an
id starts with a letter)."""

TaskState = Literal["started", "done"]
"""``started``: sent, nothing recorded back yet; ``done``: its result is recorded."""


@dataclass(frozen=True)
class TaskRecord:
    """One recorded call of one attempt of one visit of a step.

    Attributes:
        step_id: The step.
        visit: How many times the step had finished in the run before this visit.
        attempt: The step's attempt (1-based).
        index: The call's position among the attempt's calls (0-based).
        kind: What was called.
        fingerprint: A digest of what was asked (tool and arguments): a replay reuses a
            record only for the same question.
        result: What came back, JSON (bounded by the recorder); empty while ``started``.
        state: Whether the call returned (``done``) or was only sent (``started``).
        key: The call's idempotency key (:func:`call_key`), for calls to a tool server.
    """

    step_id: str
    visit: int
    attempt: int
    index: int
    kind: str
    fingerprint: str
    result: dict[str, Any] = field(default_factory=dict)
    state: TaskState = "done"
    key: str = ""

    @property
    def done(self) -> bool:
        """Whether the call's result is recorded."""
        return self.state == "done"


def fingerprint(*parts: Any) -> str:
    """A short, stable digest of JSON-able ``parts`` (never reversible to secrets)."""
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def call_key(run_id: str, step_id: str, visit: int, index: int, digest: str) -> str:
    """The idempotency key of one call: the same on every retry and replay of that call.

    Derived from the run, the step, its visit and the call's index, and from what is asked
    (``digest``): a later attempt that asks something else at the same index is another call,
    and must not be answered with the first one's result by a server that remembers keys.
    """
    text = f"{run_id}:{step_id}:{visit}:{index}:{digest}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
