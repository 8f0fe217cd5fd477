"""Work done in a separate process against the local SQLite store, as the local stack's sandboxes
do: each process opens its own :class:`~langorch.adapters.sqlite._db.Database` on the same file.

Module-level functions only (a ``spawn`` child imports this module to find them), and nothing
heavier than the SQLite adapters is imported, so a child starts quickly.
"""

from __future__ import annotations

from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier

from langorch.adapters.sqlite._db import Database
from langorch.adapters.sqlite.runs import SqliteRuns
from langorch.domain.errors import LeaseHeldError


def race_for_leases(
    path: str,
    run_ids: list[str],
    owner: str,
    start: Barrier,
    results: Queue[tuple[str, str, int | None]],
    *,
    now: float,
    ttl_seconds: float,
) -> None:
    """Ask for each run's lease as ``owner`` once every racer is at the barrier.

    Puts ``(run_id, owner, fence)`` on ``results`` for each run: the fence when this process
    took the lease, ``None`` when it was refused (held by another).
    """
    runs = SqliteRuns(Database(path))
    for run_id in run_ids:
        start.wait(timeout=60)
        try:
            fence: int | None = runs.acquire_lease(run_id, owner, now=now, ttl_seconds=ttl_seconds)
        except LeaseHeldError:
            fence = None
        results.put((run_id, owner, fence))
