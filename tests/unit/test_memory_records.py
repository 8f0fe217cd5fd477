"""What a run reads from memory is recorded with its calls (so a replay reads it again), and a
replay's memory reports every read no record served."""

from __future__ import annotations

from typing import Any

from langorch.app.replay import ReplayMemory, Unrecorded
from langorch.domain.tasks import MEMORY_LOAD_STEP
from tests.integration.conftest import register_text, run_to_end
from tests.support.definitions import workflow
from tests.unit.conftest import MakeFakes

RECALL = workflow("recall", inputs={"memory_query": "string"}, memory=True).steps("""
      - {step_id: recall, block_id: query_memory}
""")


def test_what_a_run_read_from_memory_is_recorded_with_its_calls(
    make_container: MakeFakes,
) -> None:
    # Given a user with a lunch preference
    container = make_container()
    register_text(container, RECALL)
    container.memory.update_preferences("u1", {"restaurant": "Sushi Go"})
    # When a run loads its memory and asks it about lunch
    result = run_to_end(container, "recall", {"memory_query": "restaurant"})
    # Then both reads are recorded: the load before the first step, and the step's query
    [loaded] = container.tasks.load(result.run_id, MEMORY_LOAD_STEP, 0)
    [queried] = container.tasks.load(result.run_id, "recall", 0)
    assert (loaded.kind, loaded.result["user_preferences"]) == (
        "memory",
        {"restaurant": "Sushi Go"},
    )
    assert queried.kind == "memory"
    assert queried.result["extra"]["user_preferences"] == {"restaurant": "Sushi Go"}


class _Memory:
    def __init__(self) -> None:
        self.saved: dict[str, Any] = {}

    def get_preferences(self, user_id: str) -> dict[str, Any]:
        return dict(self.saved)

    def update_preferences(self, user_id: str, values: dict[str, Any]) -> None:
        self.saved.update(values)

    def get_history(self, user_id: str, workflow_id: str, limit: int = 10) -> list[Any]:
        return []

    def save_history(self, user_id: str, workflow_id: str, run_id: str, summary: Any) -> None:
        return None

    def search_preferences(self, user_id: str, query: str, keys: Any = ()) -> dict[str, Any]:
        return {}

    def search_history(
        self, user_id: str, workflow_id: str, query: str, limit: int = 10
    ) -> list[Any]:
        return []


def test_a_replays_memory_reports_reads_and_keeps_its_own_saves() -> None:
    # Given a replay's memory over an empty scratch store
    unrecorded = Unrecorded()
    memory = ReplayMemory(_Memory(), unrecorded)
    # When the replay saves a preference, then reads preferences with no record to serve them
    memory.update_preferences("u1", {"restaurant": "Sushi Go"})
    read = memory.get_preferences("u1")
    # Then the read is answered from the replay's own saves, and reported
    assert read == {"restaurant": "Sushi Go"}
    assert unrecorded.calls == [
        "memory read (preferences) with no record; read from the replay's own memory"
    ]
