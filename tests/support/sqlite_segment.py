"""A segment's checkpoint write in a process of its own, for tests that spawn one: this module
imports only the SQLite saver, so a fresh interpreter is ready quickly."""

from __future__ import annotations

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint

from langorch.adapters.sqlite._db import Database
from langorch.adapters.sqlite.checkpointer import FENCE_KEY, SqliteCheckpointSaver
from langorch.domain.errors import LeaseLostError


def put_checkpoint(path: str, run_id: str, fence: int) -> str:
    """Store a checkpoint of ``run_id`` under ``fence`` with a saver of this process's own:
    ``"stored"``, or ``"refused"`` when the fence is no longer the run's."""
    saver = SqliteCheckpointSaver(Database(path))
    config: RunnableConfig = {
        "configurable": {"thread_id": run_id, "checkpoint_ns": "", FENCE_KEY: fence}
    }
    try:
        saver.put(config, empty_checkpoint(), {"source": "loop", "step": 0}, {})
    except LeaseLostError:
        return "refused"
    return "stored"
