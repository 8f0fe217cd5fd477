"""What a tool call costs a step: wall time and DynamoDB requests, against a real MCP server.

Run with ``.venv/bin/python bench/tools.py [--list]``. AWS is moto in-process (``mock_aws``), the
tool server is the order_status example's MCP server over streamable HTTP on 127.0.0.1 (a thread
of this process: it shares the GIL with the client, so call times are an upper bound), and the
LLM is the offline provider scripted to make N calls of ``lookup_order``. Per variant, after a
warm-up, the median over ``RUNS`` runs of one ``action`` step:

* ``step_ms``   — the step's duration on the timeline (its LLM and tool calls, recording);
* ``call_ms``   — the median ``tool_called`` duration (one MCP ``tools/call`` plus its record);
* ``ddb``       — DynamoDB requests the whole segment made (lease, run, checkpoints, timeline,
  recorded tasks, the tool registration);
* ``replay_ms`` / ``replay_ddb`` — the step run again after a crash that lost its checkpoint:
  every call answered from its record, none reaching the server.

Variants: no tools bound; 1 call; 3 calls. The per-call cost is the difference to "no tools"
divided by the calls. Nothing is asserted; the last line is ``BENCH_JSON {...}``.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

ALLOW: tuple[str, ...] = ("lookup_order",) if "--list" not in sys.argv else ()
"""With an allow list the step binds the tool without listing the server's tools (and a replay
opens no session); ``--list`` measures a registration without one."""
RUNS = 15
WARMUP = 3
TOKEN = "bench-token"  # noqa: S105 - a local test server's token


def _desk() -> Any:
    path = ROOT / "examples" / "order_status" / "mcp_server.py"
    spec = importlib.util.spec_from_file_location("bench_order_desk", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _container(script: dict[str, Any]) -> Any:
    from langorch.composition.container import Container
    from langorch.config import Settings
    from langorch.llm import LLMRegistry

    return Container(Settings(), llm=LLMRegistry(default_provider="offline", offline_script=script))


def _setup(url: str) -> None:
    from langorch.domain.definitions import BlockDefinition, PlanStep, TaskPlan
    from langorch.domain.tool_servers import ToolServer

    container = _container({})
    container.ensure_resources()
    container.secrets.put_json("langorch/tools/orders", {"value": f"Bearer {TOKEN}"})
    container.tool_servers.put(
        ToolServer(
            name="orders",
            url=url,
            allow=ALLOW,
            headers={"Authorization": "langorch/tools/orders"},
        )
    )
    for block_id, tools in (("b_plain", []), ("b_tools", ["orders"])):
        container.definitions.put_block(
            BlockDefinition(
                block_id=block_id,
                input_keys=["order_id"],
                output_keys=["status_text"],
                prompt_template="Where is order {{ order_id }}?",
                tools_required=tools,
            )
        )
        container.definitions.put_workflow(
            TaskPlan(
                plan_id=f"wf_{block_id}",
                memory=False,
                steps=[PlanStep(step_id="look", block_id=block_id)],
            )
        )


def _one_run(workflow: str, calls: int, counter: Counter[str]) -> dict[str, Any]:
    from langorch.app.runs import RunSegment, StartRun, run_segment, start_run
    from langorch.domain.runs import TimelineEventType

    lookup = {"tool": "lookup_order", "args": {"order_id": "A100"}, "result_key": "status_text"}
    script = {"look": {"tool_calls": [lookup] * calls}} if calls else {}
    container = _container(script)
    run, _ = start_run(StartRun(workflow, input={"order_id": "A100"}), container)
    counter.clear()
    container.client("dynamodb").meta.events.register(
        "before-call.dynamodb.*", lambda **kw: counter.update(["ddb"])
    )
    run_segment(RunSegment(run.run_id), container)
    timeline = container.runs.get_timeline(run.run_id)
    step = next(e for e in timeline if e.type == TimelineEventType.step_finished)
    tool_ms = [e.duration_ms or 0 for e in timeline if e.type == TimelineEventType.tool_called]
    return {"step_ms": step.duration_ms or 0, "call_ms": tool_ms, "ddb": counter["ddb"]}


def _replay(calls: int, counter: Counter[str]) -> dict[str, Any]:
    """A step run again after its checkpoint was lost: every call comes from its record."""
    import time

    from langorch.app.step_tools import RecordedSideEffects

    container = _container({})
    counter.clear()
    container.client("dynamodb").meta.events.register(
        "before-call.dynamodb.*", lambda **kw: counter.update(["ddb"])
    )
    effects = RecordedSideEffects(
        "bench-replay",
        tasks=container.tasks,
        tool_servers=container.tool_servers,
        secrets=container.secrets,
        max_calls=calls,
        call_timeout=30,
    )
    import asyncio

    async def attempt() -> float:
        started = time.perf_counter()
        step = effects.begin(step_id="look", visit=0, attempt=1, tools=["orders"], emit=print_none)
        assert step.toolbox is not None
        for _ in range(calls):
            await step.toolbox.call("lookup_order", {"order_id": "A100"})
        await step.aclose()
        return (time.perf_counter() - started) * 1000

    asyncio.run(attempt())  # the first attempt: real calls, recorded
    before = counter["ddb"]
    replay_ms = asyncio.run(attempt())  # the step again: answered from the records
    return {"replay_ms": replay_ms, "replay_ddb": counter["ddb"] - before}


def print_none(_: Any) -> None:
    """Timeline events are dropped here (the engine collects them in a run)."""


def main() -> None:
    from moto import mock_aws

    module = _desk()
    desk = module.serve(TOKEN)
    counter: Counter[str] = Counter()
    results: dict[str, Any] = {}
    try:
        with mock_aws():
            _setup(desk.url)
            for label, workflow, calls in (
                ("no_tools", "wf_b_plain", 0),
                ("1_call", "wf_b_tools", 1),
                ("3_calls", "wf_b_tools", 3),
            ):
                for _ in range(WARMUP):
                    _one_run(workflow, calls, counter)
                samples = [_one_run(workflow, calls, counter) for _ in range(RUNS)]
                row: dict[str, Any] = {
                    "step_ms": statistics.median(s["step_ms"] for s in samples),
                    "ddb": statistics.median(s["ddb"] for s in samples),
                }
                call_ms = [ms for s in samples for ms in s["call_ms"]]
                if call_ms:
                    row["call_ms"] = statistics.median(call_ms)
                if calls:
                    replays = [_replay(calls, counter) for _ in range(5)]
                    row["replay_ms"] = statistics.median(r["replay_ms"] for r in replays)
                    row["replay_ddb"] = statistics.median(r["replay_ddb"] for r in replays)
                results[label] = row
                print(f"{label:<9} " + "  ".join(f"{k}={v:g}" for k, v in row.items()))
    finally:
        desk.stop()
    base = results["no_tools"]
    for label, calls in (("1_call", 1), ("3_calls", 3)):
        row = results[label]
        print(
            f"per call ({label}): +{(row['step_ms'] - base['step_ms']) / calls:.1f} ms, "
            f"+{(row['ddb'] - base['ddb']) / calls:.1f} DynamoDB requests"
        )
    print("BENCH_JSON " + json.dumps(results, sort_keys=True))


if __name__ == "__main__":
    main()
