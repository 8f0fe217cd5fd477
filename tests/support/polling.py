"""Waiting for a condition that another thread or process makes true, without a wall-clock
assertion: the deadline only stops a hung test, and scales with ``LANGORCH_TEST_PATIENCE``."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

PATIENCE = float(os.environ.get("LANGORCH_TEST_PATIENCE", "1"))
"""Multiplies every deadline (a busy machine may set 3)."""


def wait_for(
    condition: Callable[[], T | bool | None],
    *,
    what: str,
    timeout: float = 60.0,
    interval: float = 0.05,
    max_interval: float | None = None,
) -> T:
    """Poll ``condition`` until it returns something truthy, and return that.

    With ``max_interval`` the pause doubles after each miss up to it: a condition that is
    costly to check (an execution's history) is asked a few times a second while it is
    young, and rarely over a long wait, so the CPU it costs does not grow with a busy
    machine's wall time.

    Raises:
        TimeoutError: ``timeout * PATIENCE`` seconds passed first (naming ``what``).
    """
    deadline = time.monotonic() + timeout * PATIENCE
    while True:
        value = condition()
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        time.sleep(interval)
        if max_interval is not None:
            interval = min(interval * 2, max_interval)
