"""``http`` steps' responses are recorded side effects (seed 001 §5), like LLM answers and tool
calls: a step run again after a crash gets the recorded response, and the service is called
once."""

from __future__ import annotations

from typing import Any

import pytest

from langorch.app.runs import RunSegment, StartRun, run_segment, start_run
from tests.fakes import Fakes
from tests.fakes.tools import InMemoryTasks
from tests.integration.conftest import drive, register_text
from tests.support.crashes import Crash, DyingTasks
from tests.support.definitions import workflow

ORDERING = workflow("ordering", inputs={"sku": "string"}).steps("""
      - step_id: order
        kind: http
        http: {method: POST, url: "https://shop.example/orders", body: {sku: "{{ sku }}"},
               response_key: order}
""")


class Shop:
    """The ordering service: counts the orders it took, answers each with a new id."""

    def __init__(self) -> None:
        self.orders: list[Any] = []

    def __call__(
        self, method: str, url: str, *, headers: dict[str, str], body: Any, timeout: float
    ) -> tuple[int, Any]:
        self.orders.append(body)
        return 201, {"id": f"ord-{len(self.orders)}"}


def test_a_step_run_again_after_a_crash_replays_the_recorded_response() -> None:
    # Given an http step whose process dies right after the service answered
    shop = Shop()
    fakes = Fakes(http=shop)
    register_text(fakes, ORDERING)
    fakes.tasks = crashing = DyingTasks("http", kept=True)
    run, _ = start_run(StartRun("ordering", input={"sku": "A-1"}), fakes)
    with pytest.raises(Crash):
        run_segment(RunSegment(run.run_id), fakes)
    assert len(shop.orders) == 1
    # When a new process runs the segment again
    again = fakes.another_process()
    again.tasks = InMemoryTasks()
    again.tasks._records = crashing._records
    result = drive(run.run_id, again, on_approval=lambda r: {}, sleep=lambda s: None)
    # Then the run finished with the first answer, and the service took one order
    assert result.status == "succeeded"
    assert result.outputs["order"] == {"status": 201, "body": {"id": "ord-1"}}
    assert shop.orders == [{"sku": "A-1"}]
