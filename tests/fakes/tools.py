"""In-memory registered tools and recorded tasks (``ToolServerStore``, ``TaskStore``)."""

from __future__ import annotations

import copy
import json

from langorch.domain.tasks import TaskRecord
from langorch.domain.tool_servers import ToolServer
from tests.support.by_name import InMemoryByName


class InMemoryToolServers(InMemoryByName[ToolServer]):
    """Registrations by name (``tests/contracts/test_tool_server_store.py``)."""


class InMemoryTasks:
    """Recorded tasks by run and key (``tests/contracts/test_task_store.py``).

    Results go through JSON as they do in DynamoDB, so a non-JSON value fails here too.
    """

    def __init__(self) -> None:
        self._records: dict[tuple[str, str, int, int, int], TaskRecord] = {}
        self.puts = 0

    def load(self, run_id: str, step_id: str, visit: int) -> list[TaskRecord]:
        """Every record of this visit of the step, in key order."""
        keys = sorted(k for k in self._records if k[:3] == (run_id, step_id, visit))
        return [copy.deepcopy(self._records[k]) for k in keys]

    def put(self, run_id: str, record: TaskRecord) -> None:
        """Store one record (replacing one with the same key)."""
        stored = TaskRecord(
            **{**record.__dict__, "result": json.loads(json.dumps(record.result, default=str))}
        )
        self._records[(run_id, record.step_id, record.visit, record.attempt, record.index)] = stored
        self.puts += 1

    def all(self, run_id: str) -> list[TaskRecord]:
        """Every record of the run (for assertions)."""
        return [self._records[k] for k in sorted(self._records) if k[0] == run_id]
