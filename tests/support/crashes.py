"""A process that dies mid-step, for the tests of what the next process replays: the task
records it kept, and the death itself (``Crash``, which nothing in langorch catches)."""

from __future__ import annotations

from langorch.domain.tasks import TaskRecord
from tests.fakes import InMemoryTasks


class Crash(BaseException):
    """The process dies (not an error anything handles)."""


class DyingTasks(InMemoryTasks):
    """Task records of a process that dies at the first record of one kind.

    Args:
        kind: The record's kind (``tool``, ``llm``, ``http``, ``attach``, …).
        kept: Whether that record is written before the process dies (it died just after
            recording it) or not (it died just before).
        done_only: Wait for the record that says the call ended, not the one that says it
            started.
    """

    def __init__(self, kind: str, *, kept: bool, done_only: bool = False) -> None:
        super().__init__()
        self._kind, self._kept, self._done_only = kind, kept, done_only

    def put(self, run_id: str, record: TaskRecord) -> None:
        dies = record.kind == self._kind and (record.done or not self._done_only)
        if dies and not self._kept:
            raise Crash
        super().put(run_id, record)
        if dies:
            raise Crash

    def left_behind(self) -> InMemoryTasks:
        """What the store holds for the next process."""
        survivor = InMemoryTasks()
        survivor._records = dict(self._records)
        return survivor
