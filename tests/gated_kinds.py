"""Two test-only step kinds for segment races: ``gate`` pauses a segment, ``tally`` counts.

``gate`` parks the first segment that reaches it (between two supersteps: the checkpoint before
it is stored) until the test opens it; later segments pass straight through. ``tally`` is a
step with a side effect the test can count, one count per execution, by step id.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from langorch.domain.definitions import BlockDefinition, PlanStep
from langorch.domain.kinds.base import StepKind
from langorch.domain.lookup import DefinitionLookup
from langorch.engine.context import EngineContext
from langorch.engine.kinds import registry
from langorch.engine.kinds.base import Outcome, StepSpec
from langorch.engine.state import OrchestrationState

WAIT_SECONDS = 30.0
"""The longest a test waits for a segment to reach or leave the gate (a deadline, not a pace)."""


class Gate:
    """The first segment to reach a ``gate`` step waits there until :meth:`open` is called."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self._opened = threading.Event()
        self._lock = threading.Lock()
        self._armed = True

    def open(self) -> None:
        """Let the parked segment go on."""
        self._opened.set()

    async def pass_through(self) -> None:
        with self._lock:
            park, self._armed = self._armed, False
        if park:
            self.reached.set()
            if not await asyncio.to_thread(self._opened.wait, WAIT_SECONDS):
                raise TimeoutError("the test never opened the gate")


class GateKind(StepKind):
    """``gate``: no settings, no outputs; pauses the first segment (see :class:`Gate`)."""

    name = "gate"


class TallyKind(StepKind):
    """``tally``: a side effect per execution, counted by step id; writes ``<id>_n``."""

    name = "tally"

    def outputs(
        self, step_id: str, step: PlanStep, block: BlockDefinition | None, lookup: DefinitionLookup
    ) -> set[str]:
        return super().outputs(step_id, step, block, lookup) | {f"{step_id}_n"}


class GatedKinds:
    """The registered kinds' shared state: the gate and the side-effect counts."""

    def __init__(self) -> None:
        self.gate = Gate()
        self.effects: Counter[str] = Counter()

    async def run_gate(
        self, spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
    ) -> Outcome:
        await self.gate.pass_through()
        return Outcome(context={})

    async def run_tally(
        self, spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
    ) -> Outcome:
        self.effects[spec.step_id] += 1
        return Outcome(context={f"{spec.step_id}_n": self.effects[spec.step_id]})


GATED_WORKFLOW = """
workflows:
  - plan_id: gated
    memory: false
    steps:
      - {step_id: before, kind: tally}
      - {step_id: pause, kind: gate, depends_on: [before]}
      - {step_id: after, kind: tally, depends_on: [pause]}
"""
"""``before`` (a side effect) → ``pause`` (the gate) → ``after`` (a side effect)."""


@contextmanager
def registered() -> Iterator[GatedKinds]:
    """``gate`` and ``tally`` registered for the block (a test's fixture wraps it)."""
    kinds = GatedKinds()
    registry.register(GateKind(), kinds.run_gate)
    registry.register(TallyKind(), kinds.run_tally)
    try:
        yield kinds
    finally:
        kinds.gate.open()  # never leave a segment parked behind a failed test
        registry.unregister(GateKind.name)
        registry.unregister(TallyKind.name)


@dataclass
class Paused:
    """A run of :data:`GATED_WORKFLOW` whose first segment ran ``before`` and waits at the gate,
    on a thread of its own (another "Lambda")."""

    setup: Any
    """The container that registered the workflow and started the run."""
    run_id: str
    thread: threading.Thread
    outcome: list[Any]
    """What the paused segment ended with, once the thread ends: its result or its error."""


def paused_at_the_gate(kinds: GatedKinds, process: Callable[[], Any]) -> Paused:
    """Start a run of :data:`GATED_WORKFLOW` and run its first segment, in ``process()`` (each
    call another process over the same stores; the first one also sets up), to the gate."""
    from langorch.app.runs import RunSegment, StartRun, run_segment, start_run
    from tests.integration.conftest import register_text

    setup = process()
    register_text(setup, GATED_WORKFLOW)
    run, _ = start_run(StartRun("gated"), setup)
    outcome: list[Any] = []

    def segment() -> None:
        try:
            outcome.append(run_segment(RunSegment(run.run_id), process()))
        except Exception as exc:  # the test asserts on what was raised
            outcome.append(exc)

    thread = threading.Thread(target=segment)
    thread.start()
    assert kinds.gate.reached.wait(WAIT_SECONDS), "the segment never reached the gate"
    return Paused(setup, run.run_id, thread, outcome)
