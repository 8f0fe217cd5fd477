"""Records the stores keep, built with what a test does not care about filled in."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from langorch.domain.runs import RunRecord, RunTrigger
from tests.fakes.clock import T0


def a_run(
    run_id: str = "run-1",
    *,
    workflow_id: str = "lunch_order",
    trigger: str = "manual",
    at: datetime = T0,
    **fields: Any,
) -> RunRecord:
    """A queued run of version 1 of ``workflow_id``, created and last changed ``at``.

    Args:
        run_id: The run's id.
        workflow_id: The workflow it runs.
        trigger: How it was started (``manual``, ``webhook``, …).
        at: Its creation (and last change) time.
        **fields: Any other field of the record.
    """
    return RunRecord(
        run_id=run_id,
        workflow_id=workflow_id,
        workflow_version=1,
        trigger=RunTrigger(type=trigger),
        created_at=at,
        updated_at=at,
        **fields,
    )
