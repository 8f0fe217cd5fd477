"""langorch console benchmark: PERFORMANCE.md P9.

Run with ``.venv/bin/python bench/console.py``. Offline: the stores are moto in-process with
fake credentials. Nothing is asserted; the last line is ``BENCH_JSON {...}``.

P9a  The run page of a 400-step run (a linear plan of 400 ``transform`` steps, each with a
     started and a finished event and a small output summary): ``GET /runs/{id}`` through the
     console app — run record, timeline, pinned workflow and its topology, approvals, the graph
     SVG, the waterfall and the page. Target <= 1 s.
P9b  The runs page with 10,000 runs in the table: ``GET /runs`` (first page) and a page deep
     in the listing (``before`` = the cursor after run 9,000), and a filtered page
     (``?status=failed``). Target <= 300 ms. moto's Query scans the whole table on every call
     (EMULATOR-NOTES) and an unfiltered listing is one Query per status (8), so the moto
     figures are mostly those scans; DynamoDB's indexed Query reads only the page. The
     DynamoDB requests each page makes and the render alone are printed beside them.

Times are medians of 5 after one warm-up.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "shared")]
sys.path[:0] = [str(Path(__file__).resolve().parents[1])]

from bench._support import fake_aws_environment, fresh_stack  # noqa: E402

STEPS = 400
RUNS = 10_000
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def median_ms(action: Callable[[], Any], rounds: int = 5) -> float:
    action()
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        action()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def _sessions() -> Any:
    from langorch.console.http import Sessions

    return Sessions(b"k" * 32, token="bench")  # noqa: S106 - the bench's own console


def request(path: str, query: str = "") -> Any:
    from urllib.parse import parse_qs

    from langorch.console.http import Request

    # A signed-in browser's request: a session the bench's console issued for its token.
    return Request("GET", path, parse_qs(query), {}, session=_sessions().open("bench") or "")


def app_on(container: Any) -> Any:
    from langorch.console.app import ConsoleApp
    from langorch.console.operator import Operator

    operator = Operator("bench", "OS user", "bench@example.com")
    return ConsoleApp(container, "bench", frozenset({"http://127.0.0.1:1"}), operator, _sessions())


def run_page(container: Any) -> dict[str, float]:
    import yaml

    from langorch.domain.definitions import TaskPlan
    from langorch.domain.runs import (
        RunRecord,
        RunStatus,
        RunTrigger,
        TimelineEvent,
        TimelineEventType,
    )

    steps = [{"step_id": "s0", "kind": "transform", "transform": {"v0": "1"}}] + [
        {
            "step_id": f"s{i}",
            "kind": "transform",
            "depends_on": [f"s{i - 1}"],
            "transform": {f"v{i}": f"v{i - 1} + 1"},
        }
        for i in range(1, STEPS)
    ]
    plan = TaskPlan.model_validate(
        yaml.safe_load(yaml.safe_dump({"plan_id": "long", "memory": False, "steps": steps}))
    )
    stored, _ = container.definitions.put_workflow(plan)
    run = RunRecord(
        run_id="run-long",
        workflow_id="long",
        workflow_version=stored.version,
        status=RunStatus.succeeded,
        trigger=RunTrigger(type="manual"),
        created_at=T0,
        updated_at=T0,
        ended_at=T0 + timedelta(seconds=STEPS),
    )
    container.runs.create_run(run)
    events = []
    for i in range(STEPS):
        at = T0 + timedelta(seconds=i)
        events.append(
            TimelineEvent(
                seq=2 * i + 1, at=at, type=TimelineEventType.step_started, step_id=f"s{i}"
            )
        )
        events.append(
            TimelineEvent(
                seq=2 * i + 2,
                at=at + timedelta(milliseconds=700),
                type=TimelineEventType.step_finished,
                step_id=f"s{i}",
                duration_ms=700,
                outputs_summary={f"v{i}": str(i)},
            )
        )
    container.runs.append_events("run-long", events)
    app = app_on(container)
    page = app.handle(request("/runs/run-long"))
    assert page.status == 200, page.body[:500]
    total = median_ms(lambda: app.handle(request("/runs/run-long")))

    from langorch.console.listing import graph_of
    from langorch.console.runview import build_run_view

    record = container.runs.get_run("run-long")
    timeline = container.runs.get_timeline("run-long")
    graph = graph_of(container, "long", stored.version)

    def render() -> None:
        view = build_run_view(record, timeline, graph, T0)
        app.page(
            "run.html",
            request("/runs/run-long"),
            view=view,
            approvals=[],
            recovery=False,
            message="",
        )

    return {
        "run_page_400_steps_ms": total,
        "run_page_render_only_ms": median_ms(render),
        "run_page_kb": len(page.body) / 1024,
    }


def runs_pages(container: Any) -> dict[str, float]:
    from langorch.adapters.dynamodb._run_items import run_item
    from langorch.domain.runs import RunRecord, RunStatus, RunTrigger

    statuses = [RunStatus.succeeded] * 8 + [RunStatus.failed, RunStatus.running]
    items = []
    for n in range(RUNS):
        at = T0 + timedelta(seconds=n)
        run = RunRecord(
            run_id=f"run-{n:05d}",
            workflow_id=f"wf{n % 5}",
            workflow_version=1,
            status=statuses[n % 10],
            trigger=RunTrigger(type="webhook"),
            created_at=at,
            updated_at=at,
        )
        items.append({"PutRequest": {"Item": run_item(run, fence=0)}})
    client = container.client("dynamodb")
    for i in range(0, len(items), 25):
        client.batch_write_item(RequestItems={container.settings.runs_table: items[i : i + 25]})
    app = app_on(container)
    deep = f"{(T0 + timedelta(seconds=RUNS - 9_000)).isoformat()}|run-{RUNS - 9_000:05d}"
    from urllib.parse import urlencode

    figures = {
        "runs_page_first_ms": median_ms(lambda: app.handle(request("/runs"))),
        "runs_page_deep_ms": median_ms(
            lambda: app.handle(request("/runs", urlencode({"before": deep})))
        ),
        "runs_page_failed_ms": median_ms(lambda: app.handle(request("/runs", "status=failed"))),
    }
    # What DynamoDB would do for each page: requests and items read (moto scans instead).
    calls: list[int] = []

    def count(params: dict[str, Any], **_: Any) -> None:
        calls.append(1)

    client.meta.events.register("before-call.dynamodb.*", count)
    for name, query in (
        ("first", ""),
        ("deep", urlencode({"before": deep})),
        ("failed", "status=failed"),
    ):
        calls.clear()
        app.handle(request("/runs", query))
        figures[f"runs_page_{name}_requests"] = float(len(calls))
    client.meta.events.unregister("before-call.dynamodb.*", count)

    from langorch.console.listing import STATUSES, TRIGGERS, RunsPage

    runs = container.runs.list_runs(limit=50)
    page = RunsPage(runs, {"workflow": "", "status": "", "trigger": "", "since": ""}, "x", True)
    figures["runs_page_render_only_ms"] = median_ms(
        lambda: app.page(
            "runs.html",
            request("/runs"),
            listing=page,
            workflows=[],
            statuses=STATUSES,
            triggers=TRIGGERS,
        )
    )
    return figures


def main() -> None:
    fake_aws_environment()
    with fresh_stack() as container:
        figures = run_page(container)
    with fresh_stack() as container:
        figures.update(runs_pages(container))
    print("P9  console pages (median of 5, ms)")
    for name, value in figures.items():
        print(f"  {name:<30} {value:8.1f}")
    print("BENCH_JSON " + json.dumps({k: round(v, 1) for k, v in figures.items()}))


if __name__ == "__main__":
    main()
