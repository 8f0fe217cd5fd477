"""A burst of starts above Step Functions' StartExecution limit loses none and doubles none.

StartExecution is a token bucket (us-east-1: 1,300, refilling 300 a second); a start past it is
refused with ``ThrottlingException``. Here the bucket is small and runs on the fakes' clock, so
1,000 starts in 10 s of that clock take no wall time: each start that is refused leaves its run
``queued`` (the record is written first), the caller's retry of the same event finds it, and
the reconcile pass every 15 minutes starts what is still without an execution.
"""

from __future__ import annotations

import contextlib
import math
from datetime import datetime
from typing import Any

import pytest

from langorch.app.recovery.reconcile import reconcile_runs
from langorch.app.runs import StartRun, launch_run
from langorch.domain.errors import StorageError
from langorch.domain.runs import RunStatus
from tests.fakes import Fakes
from tests.fakes.clock import FakeClock
from tests.fakes.executions import InMemoryExecutions
from tests.integration.conftest import register_text
from tests.support.definitions import workflow

FLOW = workflow("flow").steps("""
      - {step_id: double, kind: transform, transform: {twice: "n * 2"}}
""")

BURST = 1_000
BUCKET, REFILL_PER_SECOND = 100, 10.0
"""The emulated StartExecution quota: 200 starts in the burst's 10 s, then 10 a second."""


class ThrottledExecutions:
    """The fake executions behind StartExecution's token bucket, on the fakes' clock."""

    def __init__(self, inner: InMemoryExecutions, clock: FakeClock) -> None:
        self._inner = inner
        self._clock = clock
        self._tokens = float(BUCKET)
        self._at: datetime = clock()
        self.throttled = 0

    def start(self, name: str, payload: dict[str, Any]) -> tuple[str, bool]:
        now = self._clock()
        elapsed = (now - self._at).total_seconds()
        self._tokens, self._at = min(BUCKET, self._tokens + elapsed * REFILL_PER_SECOND), now
        if self._tokens < 1:
            self.throttled += 1
            raise StorageError(f"cannot start execution {name}: ThrottlingException")
        self._tokens -= 1
        return self._inner.start(name, payload)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@pytest.mark.slow  # 2,000 launches through the fakes: about 10 s on a loaded machine
def test_a_burst_over_the_start_limit_starts_every_run_once():
    # Given StartExecution throttled past 100 starts (10 a second after)
    deps = Fakes()
    register_text(deps, FLOW)  # type: ignore[arg-type]
    inner = deps.executions
    deps.executions = ThrottledExecutions(inner, deps.clock)  # type: ignore[assignment]

    # When 1,000 webhook deliveries arrive in 10 s, each sent twice (a sender's retry)
    for i in range(BURST):
        deps.clock.advance(10 / BURST)
        for _ in range(2):
            # A refused start answers the webhook 5xx; the record is kept, queued.
            with contextlib.suppress(StorageError):
                launch_run(StartRun("flow", input={"n": i}, dedupe_key=f"delivery-{i}"), deps)
    started_in_burst = len(inner.names)

    # And the reconcile pass runs every 15 minutes until no run is left without an execution
    passes = 0
    while len(inner.names) < BURST and passes < 100:
        deps.clock.advance(15 * 60)
        with contextlib.suppress(StorageError):  # throttled part-way: the next pass goes on
            reconcile_runs(deps, limit=BURST)
        passes += 1

    # Then every delivery has one run, and every run one execution: none lost, none doubled
    runs = deps.runs.list_runs(limit=BURST)
    assert len(runs) == BURST
    assert sorted(inner.names) == sorted(r.run_id for r in runs)
    assert len(set(inner.names)) == BURST
    assert all(r.status is RunStatus.queued for r in runs)  # started, not yet driven here
    assert deps.executions.throttled > 0  # the limit was met
    # And the backlog drained a full bucket per pass
    assert started_in_burst < BURST
    assert passes == math.ceil((BURST - started_in_burst) / BUCKET)
