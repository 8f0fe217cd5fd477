"""Go back in a run's checkpoint history: find the checkpoint before a step, copy it forward.

Recovery (:mod:`langorch.app.recovery.redrive`) uses these to redrive a run from a step and to fork
a run into a new one. A *copy* makes an older checkpoint the newest of a thread (the same run's, or
a new run's), optionally with edited ``shared_context`` keys; the next segment then continues from
it exactly as from any checkpoint: the steps before it keep their outputs and are not run again.
This is LangGraph's own ``update_state(..., as_node="__copy__")`` generalised to a copy into another
thread, which LangGraph's API does not offer (a thread's ``update_state`` can only copy within it),
so the checkpoint is read and written through the saver's public API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, copy_checkpoint, create_checkpoint

from langorch.engine.segments import FENCE_KEY


@dataclass(frozen=True)
class Point:
    """A checkpoint of a run's graph: its id, the steps due next, and the state there."""

    checkpoint_id: str | None
    next: tuple[str, ...]
    values: dict[str, Any] = field(default_factory=dict)
    interrupts: tuple[Any, ...] = ()
    """The interrupts pending there (an approval parked at this point)."""
    ran: tuple[str, ...] = ()
    """Steps that ran before this point, oldest first (from the history, for messages)."""

    @property
    def ended(self) -> bool:
        """Nothing is due: the graph ended here."""
        return not self.next and not self.interrupts


def _config(thread_id: str, checkpoint_id: str | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def _point(snapshot: Any, ran: tuple[str, ...] = ()) -> Point:
    checkpoint_id = (snapshot.config or {}).get("configurable", {}).get("checkpoint_id")
    return Point(
        checkpoint_id=checkpoint_id,
        next=tuple(snapshot.next or ()),
        values=dict(snapshot.values or {}),
        interrupts=tuple(snapshot.interrupts or ()),
        ran=ran,
    )


async def head(graph: Any, thread_id: str) -> Point | None:
    """The newest checkpoint of the run (``None``: it has none, it never ran)."""
    snapshot = await graph.aget_state(_config(thread_id))
    if snapshot.created_at is None:
        return None
    return _point(snapshot)


async def before_step(graph: Any, thread_id: str, step_id: str) -> Point | None:
    """The newest checkpoint at which ``step_id`` was due next (``None``: it never was).

    That is the state just before the step ran (its latest run, for a step in a loop).
    """
    history = [s async for s in graph.aget_state_history(_config(thread_id))]
    ran = tuple(dict.fromkeys(n for s in reversed(history) for n in (s.next or ())))
    for snapshot in history:  # newest first
        if step_id in (snapshot.next or ()):
            return _point(snapshot, ran)
    return Point(None, (), ran=ran) if ran else None


def copy_to_head(
    saver: BaseCheckpointSaver[Any],
    *,
    source_thread: str,
    checkpoint_id: str,
    target_thread: str,
    edits: dict[str, Any] | None = None,
    fence: int | None = None,
    metadata: dict[str, Any] | None = None,
) -> str:
    """Copy a checkpoint to be the newest of ``target_thread``; returns the copy's id.

    The copy keeps the channel versions, so the same steps are due next; its pending writes are
    not copied, so every step due there runs again. ``edits`` are merged into
    ``shared_context`` (the merge reducer's own semantics).

    Args:
        saver: the checkpointer.
        source_thread: the run whose checkpoint is copied.
        checkpoint_id: which checkpoint.
        target_thread: the run it becomes the head of (the same run, or a fork).
        edits: ``shared_context`` keys to set in the copy.
        fence: the target run's lease fence; the write is refused once it is stale.
        metadata: kept in the copy's metadata (who, why).

    Raises:
        LookupError: the checkpoint does not exist.
    """
    saved = saver.get_tuple(_config(source_thread, checkpoint_id))
    if saved is None:
        raise LookupError(f"checkpoint {checkpoint_id} of run {source_thread} does not exist")
    checkpoint = copy_checkpoint(saved.checkpoint)
    if edits:
        values = checkpoint["channel_values"]
        values["shared_context"] = {**(values.get("shared_context") or {}), **edits}
    step = int(saved.metadata.get("step", -1))
    copied = create_checkpoint(checkpoint, None, step)
    parent = saver.get_tuple(_config(target_thread))
    target = parent.config if parent is not None else _config(target_thread)
    if fence is not None:
        target = {**target, "configurable": {**target.get("configurable", {}), FENCE_KEY: fence}}
    meta: dict[str, Any] = {
        "source": "fork",
        "step": step + 1,
        "parents": {},
        **(metadata or {}),
    }
    # Every channel's value is written (not only changed ones): the target thread may have
    # none of them yet.
    stored = saver.put(target, copied, meta, dict(copied["channel_versions"]))  # type: ignore[arg-type]  # the metadata's extra keys
    flush = getattr(saver, "flush", None)
    if callable(flush):
        flush()
    return str(stored["configurable"]["checkpoint_id"])
