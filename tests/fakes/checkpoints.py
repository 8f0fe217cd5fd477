"""LangGraph's in-memory saver with the DynamoDB saver's ``flush`` and its fenced writes."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.memory import InMemorySaver

if TYPE_CHECKING:
    from tests.fakes.runs import InMemoryRuns

FENCE_KEY = "langorch_fence"
"""As ``DynamoCheckpointSaver``: the config key a segment's lease fence travels under."""


class InMemoryCheckpoints(InMemorySaver):
    """Checkpoints in memory; LangGraph's conformance suite covers the saver contract.

    Args:
        runs: the runs fake whose fences guard writes, as the DynamoDB saver's ``runs_table``
            does: a write whose config carries a fence is stored only while that fence is the
            run's, and is otherwise refused with ``LeaseLostError`` (nothing stored). A
            fenced ``put`` also notes a standing pause, as the DynamoDB saver's does.
    """

    def __init__(self, runs: InMemoryRuns | None = None) -> None:
        super().__init__()
        self._runs = runs
        self._paused: set[str] = set()

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint, only under the run's current fence when the config has one."""
        with self._fenced(config):
            stored = super().put(config, checkpoint, metadata, new_versions)
        run_id = str(config["configurable"]["thread_id"])
        fenced = self._runs is not None and config["configurable"].get(FENCE_KEY) is not None
        if fenced and self._runs is not None and self._runs.pause_of(run_id) is not None:
            self._paused.add(run_id)
        return stored

    def pause_seen(self, run_id: str) -> bool:
        """Whether a fenced ``put`` of ``run_id`` found a pause since the last call (forgot)."""
        seen = run_id in self._paused
        self._paused.discard(run_id)
        return seen

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store writes, only under the run's current fence when the config has one.

        The DynamoDB saver buffers writes until the next ``put``; this one stores them at
        once, so a stale segment's writes are refused here a superstep earlier.
        """
        with self._fenced(config):
            super().put_writes(config, writes, task_id, task_path)

    def flush(self) -> None:
        """Nothing is buffered in memory: every write is already stored."""

    def starts_empty(self, run_id: str, fence: int) -> None:
        """Nothing to note: its reads are local."""

    def claim_lease(self, run_id: str, fence: int) -> None:
        """Nothing to claim: each write checks the run's fence itself."""

    def claim_pause(self, run_id: str) -> None:
        """Nothing to claim: each fenced ``put`` looks for a pause itself."""

    def _fenced(self, config: RunnableConfig) -> AbstractContextManager[None]:
        fence = config.get("configurable", {}).get(FENCE_KEY)
        if self._runs is None or fence is None:
            return nullcontext()
        return self._runs.fenced(str(config["configurable"]["thread_id"]), int(fence))
