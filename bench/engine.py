"""langorch engine benchmark: prints figures for PERFORMANCE.md targets P1, P2, P3, P5 and P7.

Run with ``make bench`` (``.venv/bin/python bench/engine.py``). Fully offline: every AWS call goes
to moto in-process, with fake credentials, and every measurement gets fresh tables. Nothing is
asserted; the last line is ``BENCH_JSON {...}`` for machines. Times are medians of 3 runs after
one warm-up run; compare the ratios and counts, absolute times drift from run to run.

What each figure means
----------------------
P1 + P2  Linear workflows of 10/50/200 ``transform`` steps, run as ONE segment:
         * ``langorch run_segment`` — our runner: lease, run record, ``DynamoCheckpointSaver``
           (durability ``sync``), timeline. ms/step = segment wall time / steps (graph compile
           excluded: it is cached per Lambda sandbox and shown separately).
         * ``LangGraph + InMemorySaver`` / ``no checkpointer`` — the SAME compiled plan, run with
           ``graph.ainvoke(initial, config, context=EngineContext)`` (default durability).
         * ``LangGraph + DynamoDBSaver`` — langgraph-checkpoint-aws's saver on the same graph,
           durability ``sync`` (the reference the ~6 requests/superstep baseline comes from).
         A superstep is one stored checkpoint (steps + the input checkpoint). "ckpt req/ss" counts
         requests to the checkpoints table only (P1: <= 1.5); "all req/ss" adds the runs table (run
         record, lease, timeline) and the definitions table (issue 33: <= 1.2 at 10 steps, <= 1.05
         at 200). A step boundary reads nothing: an operator's pause leaves a marker in the slot
         the next checkpoint write takes. P2: ours / InMemorySaver <= 5x.
P3       Whole-process import time of three import sets, each in a fresh interpreter, alternated
         with ``python -c "import boto3"``; median over the rounds, as a multiple of boto3's median.
         Runner core <= 5.5x; trigger path <= 2x and must not load langgraph or langchain_core;
         ``langorch.llm`` must not load langchain_aws or langchain_openai.
P5       400 steps, each adding 1 KB of new, barely compressible state (a new key per step), with a
         small segment budget so the run needs several segments (``drive``; the later segments run
         in a fresh container). Prints completion, segments, state size, checkpoints offloaded to
         S3, then reads the state and outputs back from yet another fresh container.
P5w      The same 400 steps in one segment: bytes written per superstep (target: flat) and write
         units per superstep at step 10 / 100 / 400 as DynamoDB bills them (1 per KB, x2 in a
         transaction; a fenced superstep is one conditional PutItem now, and a ConditionCheck,
         were one sent, would be sized when it is sent and shown apart).
P7       Modelled AWS cost per 1,000 runs of a 10-block workflow with one approval (excluding LLM
         tokens), from the requests MEASURED on one run driven through the approval; request units
         are estimated from item sizes (moto does not report real consumed capacity). The model's
         other inputs (state transitions, Lambda invocations, emails) are printed with it, and
         each component beside the design's floor and why (``design_floors``).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _support import (
    REGION,
    DynamoMeter,
    RequestUnits,
    counting_steps,
    dynamo_meter,
    fake_aws_environment,
    fresh_stack,
    import_ratios,
    linear_workflow,
    median,
    new_container,
    register_yaml,
    segment_timer,
    table,
    timed,
)

REPEATS = 3
STEP_COUNTS = (10, 50, 200)
IMPORT_ROUNDS = 7


# ============================================================================================
# P1 + P2: per-step overhead and DynamoDB requests per superstep
# ============================================================================================


def _graph_config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}, "recursion_limit": 10_000}


def _initial(run_id: str, workflow_id: str) -> dict[str, Any]:
    """The first state, exactly as ``run_segment`` builds it."""
    return {
        "run_id": run_id,
        "agent_id": workflow_id,
        "user_id": "default",
        "shared_context": {"x0": 0},
        "status": "running",
    }


def _context(container: Any, plan: Any, run_id: str) -> Any:
    from langorch.engine.context import EngineContext

    return EngineContext(
        run_id=run_id,
        workflow_id=plan.plan_id,
        workflow_version=plan.version,
        user_id="default",
        llm=container.llm,
        http=container.http,
        subflows=container.compiler.subflow,
    )


def _stored_checkpoints(table_name: str, thread_pk: str, *, key: str = "PK") -> int:
    """How many checkpoints one thread has in our checkpoints table (uncounted client): a slot
    item may hold an earlier checkpoint of the same write (``pc``, a run's input checkpoint)."""
    import boto3

    client = boto3.client("dynamodb", region_name=REGION)
    pages = client.get_paginator("query").paginate(
        TableName=table_name,
        KeyConditionExpression=f"{key} = :pk",
        FilterExpression="k = :c",
        ExpressionAttributeValues={":pk": {"S": thread_pk}, ":c": {"S": "c"}},
        ProjectionExpression="pc",
    )
    return sum(1 + len(item.get("pc", {}).get("L", [])) for page in pages for item in page["Items"])


def measure_ours(n: int) -> dict[str, Any]:
    """One segment of an ``n``-step run through ``run_segment``, on fresh tables."""
    from langorch.app.runs import RunSegment, StartRun, run_segment, start_run

    workflow = f"linear{n}"
    with fresh_stack() as container:
        register_yaml(container, linear_workflow(workflow, counting_steps(n)))
        run, _ = start_run(StartRun(workflow, input={"x0": 0}), container)
        plan = container.compiler.workflow(workflow, run.workflow_version)
        compile_s, _ = timed(lambda: container.compiler.compile(plan))
        meter = dynamo_meter(container)
        seconds, result = timed(lambda: run_segment(RunSegment(run.run_id), container))
        meter.detach()
        settings = container.settings
        supersteps = _stored_checkpoints(settings.checkpoints_table, run.run_id)
        assert result.status == "succeeded" and result.outputs[f"x{n}"] == n, result
        ckpt = meter.use(settings.checkpoints_table)
        runs = meter.use(settings.runs_table)
        everything = meter.use()
        return {
            "seconds": seconds,
            "compile_seconds": compile_s,
            "supersteps": supersteps,
            "ckpt_requests": ckpt.total,
            "ckpt_ops": dict(ckpt.requests),
            "runs_requests": runs.total,
            "runs_ops": dict(runs.requests),
            "all_requests": everything.total,
            "ckpt_write_units": ckpt.write_units,
            "runs_write_units": runs.write_units,
            "runs_check_write_units": runs.op_write_units["ConditionCheck"],
            "dynamodb_seconds": everything.seconds,
        }


def measure_langgraph(n: int, reps: int) -> dict[str, list[dict[str, Any]]]:
    """Plain LangGraph on the same plan: no checkpointer, InMemorySaver, DynamoDBSaver (sync)."""
    from langgraph.checkpoint.memory import InMemorySaver

    from langorch.engine.compiler import build_graph, resolve_blocks

    workflow = f"linear{n}"
    out: dict[str, list[dict[str, Any]]] = {"none": [], "memory": [], "dynamodbsaver": []}
    with fresh_stack() as container:
        register_yaml(container, linear_workflow(workflow, counting_steps(n)))
        plan = container.definitions.get_workflow(workflow)
        builder = build_graph(plan, resolve_blocks(plan, container.definitions))
        memory_graph = builder.compile(checkpointer=InMemorySaver())
        plain_graph = builder.compile()
        for rep in range(reps):
            for name, graph in (("none", plain_graph), ("memory", memory_graph)):
                thread = f"{name}-{rep}"
                ctx = _context(container, plan, thread)
                seconds, values = timed(
                    lambda g=graph, t=thread, c=ctx: asyncio.run(
                        g.ainvoke(_initial(t, workflow), _graph_config(t), context=c)
                    )
                )
                assert values["shared_context"][f"x{n}"] == n
                entry: dict[str, Any] = {"seconds": seconds}
                if name == "memory":
                    history = memory_graph.get_state_history(_graph_config(thread))
                    entry["supersteps"] = sum(1 for _ in history)
                out[name].append(entry)
            out["dynamodbsaver"].append(_measure_dynamodbsaver(container, builder, plan, n, rep))
    return out


def _measure_dynamodbsaver(
    container: Any, builder: Any, plan: Any, n: int, rep: int
) -> dict[str, Any]:
    import boto3
    from langgraph_checkpoint_aws import DynamoDBSaver

    table_name = f"lg-checkpoints-{n}-{rep}"  # a fresh table per measurement
    peek = boto3.client("dynamodb", region_name=REGION)
    peek.create_table(
        TableName=table_name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": "PK", "AttributeType": "S"},
            {"AttributeName": "SK", "AttributeType": "S"},
        ],
        KeySchema=[
            {"AttributeName": "PK", "KeyType": "HASH"},
            {"AttributeName": "SK", "KeyType": "RANGE"},
        ],
    )
    saver = DynamoDBSaver(table_name, region_name=REGION)
    graph = builder.compile(checkpointer=saver)
    meter = DynamoMeter(saver.client, peek)
    thread = f"dynamodbsaver-{rep}"
    ctx = _context(container, plan, thread)
    seconds, values = timed(
        lambda: asyncio.run(
            graph.ainvoke(
                _initial(thread, plan.plan_id),
                _graph_config(thread),
                context=ctx,
                durability="sync",
            )
        )
    )
    meter.detach()
    assert values["shared_context"][f"x{n}"] == n
    use = meter.use(table_name)
    return {
        "seconds": seconds,
        "requests": use.total,
        "ops": dict(use.requests),
        "write_units": use.write_units,
    }


def bench_steps() -> dict[str, Any]:
    """P1 + P2 for every step count; prints two tables."""
    measure_ours(10)  # warm-up: imports, template and compile caches, moto models
    measure_langgraph(10, 1)
    results: dict[str, Any] = {}
    for n in STEP_COUNTS:
        ours = [measure_ours(n) for _ in range(REPEATS)]
        lg = measure_langgraph(n, REPEATS)
        supersteps = lg["memory"][0]["supersteps"]
        ours_ms = median([o["seconds"] for o in ours]) * 1000 / n
        memory_ms = median([r["seconds"] for r in lg["memory"]]) * 1000 / n
        none_ms = median([r["seconds"] for r in lg["none"]]) * 1000 / n
        dds_ms = median([r["seconds"] for r in lg["dynamodbsaver"]]) * 1000 / n
        results[str(n)] = {
            "steps": n,
            "supersteps": supersteps,
            "ours_supersteps_stored": ours[0]["supersteps"],
            "ms_per_step": {
                "langorch": ours_ms,
                "inmemory": memory_ms,
                "no_checkpointer": none_ms,
                "dynamodbsaver_sync": dds_ms,
            },
            "ratio_langorch_vs_inmemory": ours_ms / memory_ms,
            "compile_ms": median([o["compile_seconds"] for o in ours]) * 1000,
            "langorch_ms_per_step_in_dynamodb_calls": median([o["dynamodb_seconds"] for o in ours])
            * 1000
            / n,
            "langorch_ckpt_requests_per_superstep": ours[0]["ckpt_requests"] / supersteps,
            "langorch_runs_requests_per_superstep": ours[0]["runs_requests"] / supersteps,
            "langorch_all_requests_per_superstep": ours[0]["all_requests"] / supersteps,
            "langorch_ckpt_write_units_per_superstep": ours[0]["ckpt_write_units"] / supersteps,
            "langorch_fence_check_write_units_per_superstep": ours[0]["runs_check_write_units"]
            / supersteps,
            "langorch_runs_write_units_per_superstep": ours[0]["runs_write_units"] / supersteps,
            "langorch_ckpt_ops": ours[0]["ckpt_ops"],
            "langorch_runs_ops": ours[0]["runs_ops"],
            "dynamodbsaver_requests_per_superstep": lg["dynamodbsaver"][0]["requests"] / supersteps,
            "dynamodbsaver_write_units_per_superstep": lg["dynamodbsaver"][0]["write_units"]
            / supersteps,
            "dynamodbsaver_ops": lg["dynamodbsaver"][0]["ops"],
        }
    _print_steps(results)
    return results


def _print_steps(results: dict[str, Any]) -> None:
    rows = []
    for r in results.values():
        ms = r["ms_per_step"]
        rows.append(
            [
                r["steps"],
                ms["no_checkpointer"],
                ms["inmemory"],
                ms["langorch"],
                f"{r['ratio_langorch_vs_inmemory']:.2f}x",
                r["langorch_ms_per_step_in_dynamodb_calls"],
                ms["dynamodbsaver_sync"],
                r["compile_ms"],
            ]
        )
    print(
        table(
            f"P2  ms per step (median of {REPEATS}; target: langorch / InMemorySaver <= 5x)",
            [
                "steps",
                "no ckpt",
                "InMemory",
                "langorch",
                "ours/InMem",
                "of which DDB calls",
                "DynamoDBSaver",
                "compile ms",
            ],
            rows,
        )
    )
    print()
    rows = []
    for r in results.values():
        rows.append(
            [
                r["steps"],
                r["supersteps"],
                r["langorch_ckpt_requests_per_superstep"],
                r["langorch_runs_requests_per_superstep"],
                r["langorch_all_requests_per_superstep"],
                r["langorch_ckpt_write_units_per_superstep"],
                r["langorch_fence_check_write_units_per_superstep"],
                r["dynamodbsaver_requests_per_superstep"],
                r["dynamodbsaver_write_units_per_superstep"],
            ]
        )
    print(
        table(
            "P1  DynamoDB requests per superstep (targets: ckpt req/ss <= 1.5; "
            "all req/ss <= 1.2 at 10 steps, <= 1.05 at 200)",
            [
                "steps",
                "supersteps",
                "ckpt req/ss",
                "runs req/ss",
                "all req/ss",
                "ckpt WRU/ss",
                "fence check WRU/ss",
                "DDBSaver req/ss",
                "DDBSaver WRU/ss",
            ],
            rows,
        )
    )
    for r in results.values():
        print(
            f"  {r['steps']:>3} steps  langorch checkpoints {r['langorch_ckpt_ops']}, "
            f"runs {r['langorch_runs_ops']};  DynamoDBSaver {r['dynamodbsaver_ops']}"
        )
    print()


# ============================================================================================
# P3: import time
# ============================================================================================

IMPORT_SETS = {
    "runner core": (
        "import langorch.app.runs, langorch.engine.compiler, langorch.engine.segments, "
        "langorch.adapters.dynamodb.checkpointer, langorch.composition.container"
    ),
    "trigger path": (
        "import langorch.composition.container, langorch.domain.definitions, langorch.domain.runs, "
        "langorch.adapters.dynamodb.runs, langorch.adapters.dynamodb.definitions"
    ),
    "langorch.llm": "import langorch.llm",
}
IMPORT_TARGETS = {"runner core": 5.5, "trigger path": 2.0}
HEAVY_MODULES = ("langgraph", "langchain_core", "langchain_aws", "langchain_openai", "openai")


def bench_imports() -> dict[str, Any]:
    """P3: whole-process import times, alternated with ``import boto3`` in one run."""
    # Byte-compile langorch first, as the deployed asset is: with PYTHONDONTWRITEBYTECODE set
    # (or stale .pyc files), every import below would compile our modules from source.
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(Path(__file__).parents[1] / "shared")],
        check=True,
    )
    results = import_ratios(
        IMPORT_SETS,
        rounds=IMPORT_ROUNDS,
        targets=IMPORT_TARGETS,
        watched=HEAVY_MODULES,
        title=f"P3  whole-process import, median of {IMPORT_ROUNDS} rounds alternated with boto3",
    )
    print(
        "  trigger path must load none of langgraph, langchain_core; "
        "langorch.llm none of langchain_aws, langchain_openai"
    )
    print()
    return results


# ============================================================================================
# P5: 400 steps, 1 KB of new state per step, several segments, resume in a fresh container
# ============================================================================================

GROWTH_STEPS = 400
GROWTH_BUDGET_SECONDS = 2.0
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
# 1,024 random characters of a 64-letter alphabet: 1 KB that zlib shrinks only to ~76 %.
RANDOM_KB = "([alphabet] * 1024) | map('random') | join"


def growth_steps(n: int) -> list[str]:
    """Step ``i`` adds a new 1 KB key ``c{i}`` to the shared context."""
    return [
        f'step_id: s{i}, kind: transform, transform: {{c{i}: "{RANDOM_KB}"}}'
        for i in range(1, n + 1)
    ]


def _checkpoint_sizes(container: Any, run_id: str) -> dict[str, int]:
    """Serialized size of the run's latest checkpoint, raw and as stored (zlib)."""
    import zlib

    saver = container.checkpointer
    latest = saver.get_tuple({"configurable": {"thread_id": run_id, "checkpoint_ns": ""}})
    _, raw = saver.serde.dumps_typed(latest.checkpoint)
    return {"raw_bytes": len(raw), "zlib_bytes": len(zlib.compress(raw, 6))}


def _offloaded(container: Any) -> dict[str, int]:
    """Objects under the checkpoint prefix: checkpoints and writes offloaded to S3."""
    s3 = container.client("s3")
    settings = container.settings
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket=settings.bucket, Prefix=f"{settings.checkpoint_prefix}/"
    ):
        keys += [obj["Key"] for obj in page.get("Contents", [])]
    return {
        "checkpoints": sum(k.endswith("/checkpoint") for k in keys),
        "writes": sum("/writes/" in k for k in keys),
    }


def growing_string_sizes(steps: int = 50) -> dict[str, int]:
    """Checkpoint size when ONE string grows 1 KB per step (``blob: "blob ~ payload"``).

    Every step's full outputs are also appended to ``block_results``, so the checkpoint holds
    every intermediate copy of the string: it grows quadratically, not by 1 KB per step.
    """
    from langgraph.checkpoint.memory import InMemorySaver

    from langorch.domain.loading import load_text
    from langorch.engine.compiler import build_graph

    step_text = [
        f'step_id: s{i}, kind: transform, transform: {{blob: "blob ~ payload"}}'
        for i in range(1, steps + 1)
    ]
    yaml_text = linear_workflow("blob", step_text, inputs=["blob", "payload"])
    plan = load_text(yaml_text, source="bench.yaml", fmt="yaml").workflows[0]
    saver = InMemorySaver()
    graph = build_graph(plan, dict.fromkeys((s.step_id for s in plan.steps), None)).compile(
        checkpointer=saver
    )
    config = _graph_config("blob")
    initial = {"shared_context": {"blob": "", "payload": "x" * 1024}, "status": "running"}
    ctx = _context_for_plan(plan, "blob")
    asyncio.run(graph.ainvoke(initial, config, context=ctx))
    checkpoint = saver.get_tuple(config).checkpoint
    return {"steps": steps, "checkpoint_bytes": len(saver.serde.dumps_typed(checkpoint)[1])}


def _context_for_plan(plan: Any, run_id: str) -> Any:
    from langorch.engine.context import EngineContext
    from langorch.llm import LLMRegistry

    return EngineContext(
        run_id=run_id,
        workflow_id=plan.plan_id,
        workflow_version=plan.version,
        user_id="default",
        llm=LLMRegistry(default_provider="offline"),
    )


def bench_growing_state() -> dict[str, Any]:
    """P5: a 400-step run whose state grows 1 KB per step, over several segments."""
    from langorch.app import runs as runs_app

    workflow = "growing"
    settings = {"segment_budget_seconds": GROWTH_BUDGET_SECONDS}
    started = time.perf_counter()
    with fresh_stack(**settings) as first:
        register_yaml(
            first,
            linear_workflow(workflow, growth_steps(GROWTH_STEPS), inputs=["alphabet"]),
        )
        run, _ = runs_app.start_run(
            runs_app.StartRun(workflow, input={"alphabet": ALPHABET}), first
        )
        error = None
        with segment_timer() as segments:
            # The first segment in one container, the rest in another (a new Lambda sandbox).
            result = runs_app.run_segment(runs_app.RunSegment(run.run_id), first)
            try:
                second = new_container(**settings)
                if result.status == "continue":
                    result = runs_app.drive(
                        run.run_id, second, on_approval=lambda r: {}, sleep=lambda s: None
                    )
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"[:300]
        total_s = time.perf_counter() - started
        # Read everything back from yet another fresh container.
        third = new_container(**settings)
        record = third.runs.get_run(run.run_id)
        plan = third.compiler.workflow(workflow, record.workflow_version)
        graph = third.compiler.compile(plan)
        read_s, snapshot = timed(
            lambda: graph.get_state({"configurable": {"thread_id": run.run_id}})
        )
        context = snapshot.values.get("shared_context", {})
        new_keys = sum(
            1 for i in range(1, GROWTH_STEPS + 1) if len(context.get(f"c{i}", "")) == 1024
        )
        sizes = _checkpoint_sizes(third, run.run_id)
        offloaded = _offloaded(third)
        outputs = record.outputs
    out = {
        "steps": GROWTH_STEPS,
        "segment_budget_seconds": GROWTH_BUDGET_SECONDS,
        "completed": result.status == "succeeded" and new_keys == GROWTH_STEPS,
        "status": result.status,
        "error": error,
        "segments": record.segment,
        "segment_seconds": [round(sec, 2) for _, sec in segments],
        "seconds": total_s,
        "final_checkpoint_raw_bytes": sizes["raw_bytes"],
        "final_checkpoint_zlib_bytes": sizes["zlib_bytes"],
        "checkpoints_offloaded_to_s3": offloaded["checkpoints"],
        "writes_offloaded_to_s3": offloaded["writes"],
        "fresh_container_get_state_seconds": read_s,
        "fresh_container_keys_read": new_keys,
        "fresh_container_outputs_keys": len(outputs),
        "fresh_container_run_status": record.status.value,
        "one_growing_string": growing_string_sizes(),
    }
    rows = [
        ["completed", "yes" if out["completed"] else f"NO ({result.status}) {error or ''}"],
        ["segments used", out["segments"]],
        ["segment durations (s)", " ".join(f"{sec:.1f}" for sec in out["segment_seconds"])],
        ["total time (s)", total_s],
        ["final checkpoint, serialized (KB)", sizes["raw_bytes"] / 1024],
        ["final checkpoint, zlib (KB)", sizes["zlib_bytes"] / 1024],
        ["checkpoints offloaded to S3", offloaded["checkpoints"]],
        ["pending writes offloaded to S3", offloaded["writes"]],
        ["fresh container: run status", out["fresh_container_run_status"]],
        ["fresh container: get_state (ms)", read_s * 1000],
        [f"fresh container: 1 KB keys read (of {GROWTH_STEPS})", new_keys],
        ["fresh container: run outputs keys", len(outputs)],
        [
            "one string +1 KB/step instead: checkpoint after "
            f"{out['one_growing_string']['steps']} steps (KB)",
            out["one_growing_string"]["checkpoint_bytes"] / 1024,
        ],
    ]
    print(
        table(
            f"P5  {GROWTH_STEPS} steps x 1 KB new state, "
            f"segment budget {GROWTH_BUDGET_SECONDS:g} s",
            ["figure", "value"],
            rows,
        )
    )
    print()
    return out


# ============================================================================================
# P5 writes: bytes written per superstep as the state grows (1 KB of new state per step)
# ============================================================================================

WRITE_SAMPLES = (10, 100, 400)


def bench_superstep_bytes() -> dict[str, Any]:
    """Bytes each superstep writes (checkpoints table items + S3 offloads), at 1 KB per step.

    One segment runs all 400 growth steps; every write request to the checkpoints table is one
    superstep's (the input checkpoint first), and an S3 offload belongs to the superstep whose
    write follows it. Flat is the target (issue 33 item 5): each checkpoint item holds only
    what changed since its parent (the saver's deltas), so the figure stays near the 1 KB a
    step adds (plus its pending writes and bookkeeping) however large the state grows.
    """
    from langorch.app import runs as runs_app

    workflow = "growing"
    steps = max(WRITE_SAMPLES)
    with fresh_stack(segment_budget_seconds=3600.0) as container:
        register_yaml(
            container, linear_workflow(workflow, growth_steps(steps), inputs=["alphabet"])
        )
        run, _ = runs_app.start_run(
            runs_app.StartRun(workflow, input={"alphabet": ALPHABET}), container
        )
        meter = dynamo_meter(container)
        units = _write_units_per_request(container)
        offloads: list[int] = []
        s3 = container.client("s3")

        def put(params: dict[str, Any], **_: Any) -> None:
            body = params.get("Body", b"")
            offloads.append(len(body) if isinstance(body, bytes | str) else 0)
            meter.writes.append(("(s3)", offloads[-1]))

        s3.meta.events.register("before-parameter-build.s3.PutObject", put)
        result = runs_app.run_segment(runs_app.RunSegment(run.run_id), container)
        s3.meta.events.unregister("before-parameter-build.s3.PutObject", put)
        units.detach()
        meter.detach()
        assert result.status == "succeeded", result
        checkpoints_table = container.settings.checkpoints_table
        per_superstep: list[int] = []
        pending = 0
        for table_name, size in meter.writes:
            if table_name == "(s3)":
                pending += size
            elif table_name == checkpoints_table:
                per_superstep.append(size + pending)
                pending = 0
        wru = [(w, check) for table_name, w, check in units.log if table_name == checkpoints_table]
    # Index k is the superstep of step k; the first request carried the input checkpoint too
    # when the saver held it back (then one request fewer than checkpoints: align from the end).
    per_superstep = per_superstep[-steps - 1 :]
    wru = [(0.0, 0.0)] * (steps + 1 - len(wru)) + wru[-steps - 1 :]
    samples = {k: per_superstep[k] for k in WRITE_SAMPLES if k < len(per_superstep)}
    unit_samples = {k: wru[k] for k in WRITE_SAMPLES if k < len(wru)}
    total = sum(per_superstep)
    rows = [[k, size / 1024, unit_samples[k][0], unit_samples[k][1]] for k, size in samples.items()]
    rows.append(
        [
            f"whole run ({len(per_superstep)} supersteps), MB / WRU",
            total / 2**20,
            sum(w for w, _ in wru),
            sum(c for _, c in wru),
        ]
    )
    print(
        table(
            "P5w  bytes and write units per superstep at 1 KB of new state per step "
            "(checkpoints table + S3 offloads; target: flat +-20 %; WRU as DynamoDB bills: "
            "1 per KB, x2 in a transaction, the fence's check included)",
            ["step", "KB written", "WRU", "of which fence check"],
            rows,
        )
    )
    print(f"  S3 offloads: {len(offloads)} ({sum(offloads) / 2**20:.1f} MB)")
    print()
    return {
        "bytes_per_superstep": {str(k): v for k, v in samples.items()},
        "write_units_per_superstep": {str(k): w for k, (w, _) in unit_samples.items()},
        "fence_check_write_units_per_superstep": {str(k): c for k, (_, c) in unit_samples.items()},
        "supersteps": len(per_superstep),
        "total_bytes": total,
        "s3_offloads": len(offloads),
    }


def _write_units_per_request(container: Any) -> Any:
    """Write units of each write request as DynamoDB bills it, the items a transaction checks
    sized when it is sent (see :class:`_support.RequestUnits`)."""
    import boto3

    return RequestUnits(container.client("dynamodb"), boto3.client("dynamodb", region_name=REGION))


# ============================================================================================
# P7: modelled AWS cost per 1,000 runs (10 blocks, 1 approval, excluding LLM tokens)
# ============================================================================================

COST_WORKFLOW = """
blocks:
  - {block_id: b_extract, name: Extract, input_keys: [ticket], output_keys: [summary],
     prompt_template: "Summarise {ticket}"}
  - {block_id: b_classify, name: Classify, input_keys: [summary], output_keys: [category],
     prompt_template: "Classify {summary}"}
  - {block_id: b_draft, name: Draft, input_keys: [summary, category], output_keys: [reply],
     prompt_template: "Draft a reply to {summary} ({category})"}
  - {block_id: b_polish, name: Polish, input_keys: [reply], output_keys: [final],
     prompt_template: "Polish {reply}"}
  - {block_id: b_note, name: Note, input_keys: [final], output_keys: [note],
     prompt_template: "Write a note about {final}"}
workflows:
  - plan_id: support_reply
    memory: false
    approvers: [lead@example.com]
    inputs_schema: {properties: {ticket: {type: string}}, required: [ticket]}
    steps:
      - {step_id: extract, block_id: b_extract}
      - {step_id: size, kind: transform, depends_on: [extract],
         transform: {summary_len: "summary | length"}}
      - {step_id: classify, block_id: b_classify, depends_on: [size]}
      - {step_id: label, kind: transform, depends_on: [classify],
         transform: {label: "category ~ '/' ~ summary_len"}}
      - {step_id: draft, block_id: b_draft, depends_on: [label]}
      - {step_id: measure, kind: transform, depends_on: [draft],
         transform: {reply_len: "reply | length"}}
      - step_id: review
        kind: approval
        depends_on: [measure]
        approval: {title: "Send the reply to {{ ticket }}?", show_keys: [reply],
                   editable_keys: [reply], timeout_seconds: 86400}
        branches: {approved: polish, rejected: stamp, timed_out: stamp}
      - {step_id: polish, block_id: b_polish}
      - {step_id: mark, kind: transform, depends_on: [polish], transform: {sent: "true"}}
      - {step_id: note, block_id: b_note, depends_on: [mark]}
      - {step_id: stamp, kind: transform, depends_on: [note],
         transform: {outcome: "'sent' if sent else 'held'"}}
"""

PRICES = {
    "dynamodb_wru": 0.625 / 1e6,
    "dynamodb_rru": 0.125 / 1e6,
    "sfn_transition": 0.025 / 1e3,
    "ses_email": 0.10 / 1e3,
    "lambda_request": 0.20 / 1e6,
    "lambda_gb_second_arm64": 0.0000133334,
    "s3_put": 0.005 / 1e3,
    "s3_get": 0.0004 / 1e3,
    "apigw_http_request": 1.00 / 1e6,
}
LAMBDA_GB = 0.5
SMALL_FUNCTION_SECONDS = 0.1
"""Assumed billed duration of trigger-free functions not run here (request_approval, callback)."""
# The approvals table is not exercised by the in-process drive (no request_approval or callback
# runs): modelled as one PutItem of a ~2 KB approval (2 WRU) by request_approval, a GetItem by
# the confirmation page and by the POST (1 RRU each), and the decide-once conditional UpdateItem
# (2 WRU).
APPROVAL_TABLE = {"wru": 4.0, "rru": 2.0, "requests": 4}


def states_entered(statuses: list[str]) -> list[str]:
    """The states an execution enters when its segments answer ``statuses`` in turn.

    Walked through ``statemachine.asl.json`` as shipped: from ``RunSegment``, ``Route``
    picks the branch of each status, then each state's ``Next`` is followed until the next
    ``RunSegment`` or an end (a Task's success path; a Wait's ``Next``).
    """
    from langorch.local.statemachine import asl_text

    states = json.loads(asl_text())["States"]
    entered: list[str] = []
    for status in statuses:
        entered += ["RunSegment", "Route"]
        choices = states["Route"]["Choices"]
        name = next((c["Next"] for c in choices if c["StringEquals"] == status), None)
        while name is not None and name != "RunSegment":
            entered.append(name)
            name = states[name].get("Next")
    return entered


def transaction_write_units(per_table: dict[str, Any]) -> float:
    """Write units the run spent in ``TransactWriteItems`` (DynamoDB bills a transaction's
    writes twice)."""
    return float(sum(use.op_write_units.get("TransactWriteItems", 0) for use in per_table.values()))


def design_floors(
    approvals: int, write_units: float, transaction_wru: float
) -> dict[str, tuple[float | None, str]]:
    """Per cost item, the design's floor per run in USD (``None``: none to hold it to) and why.

    Args:
        approvals: the run's approvals.
        write_units: the run's DynamoDB write units, as measured.
        transaction_wru: those spent in transactions (billed twice).
    """
    transitions = 2 * (approvals + 1) + approvals + 1
    calls = 1 + (approvals + 1) + 3 * approvals
    return {
        "DynamoDB writes": (
            (write_units - transaction_wru / 2) * PRICES["dynamodb_wru"],
            "each write once at its size (1 WRU per KB); a transaction (the runs table's start "
            "and record+timeline writes; fenced checkpoints are single PutItems) bills twice: "
            f"{transaction_wru:g} WRU for {transaction_wru / 2:g} of writes",
        ),
        "DynamoDB reads": (None, "a fifth of a write's price; not held to a floor"),
        "Step Functions": (
            transitions * PRICES["sfn_transition"],
            f"{transitions} transitions: Standard bills every state entered, and the approval "
            "must park as a task token; per segment its Task and the Route choice, per approval "
            "the park, then the end state",
        ),
        "SES": (approvals * PRICES["ses_email"], "one email per approval"),
        "Lambda requests": (
            calls * PRICES["lambda_request"],
            f"{calls} invocations: the trigger, one per segment, per approval its request, "
            "page and decision",
        ),
        "Lambda duration": (None, "timed on this machine's emulator, not in Lambda"),
        "S3": (0.0, "nothing offloaded: state under the 350,000-byte threshold"),
        "API Gateway (HTTP API)": (
            (1 + 2 * approvals) * PRICES["apigw_http_request"],
            f"{1 + 2 * approvals} requests: the webhook, per approval its page and decision",
        ),
    }


def bench_cost() -> dict[str, Any]:
    """P7: one run measured on moto, then the per-1,000-runs cost model."""
    from langorch.adapters.request_counter import RequestCounter
    from langorch.app import runs as runs_app

    with fresh_stack() as container:
        register_yaml(container, COST_WORKFLOW)
        # Untimed: each updated item is sized as it was billed (a run item grows at its end).
        meter = dynamo_meter(container, size_at_once=True)
        s3 = RequestCounter(container.client("s3"))
        trigger_s, (run, _) = timed(
            lambda: runs_app.start_run(
                runs_app.StartRun(
                    "support_reply",
                    input={"ticket": "T-1: the export button does nothing"},
                    dedupe_key="webhook-delivery-1",
                    trigger="webhook",
                ),
                container,
            )
        )
        approvals: list[dict[str, Any]] = []

        def approve(request: dict[str, Any]) -> dict[str, Any]:
            approvals.append(request)
            return {"decision": "approved", "approver": "lead@example.com"}

        with segment_timer() as segments:
            result = runs_app.drive(run.run_id, container, on_approval=approve)
        meter.detach()
        s3.detach()
        settings = container.settings
        per_table = {
            name: meter.use(table_name)
            for name, table_name in (
                ("checkpoints", settings.checkpoints_table),
                ("runs", settings.runs_table),
                ("definitions", settings.definitions_table),
            )
        }
        everything = meter.use()
    return _cost_model(result, trigger_s, segments, approvals, per_table, everything, s3.counts)


def _cost_model(
    result: Any,
    trigger_s: float,
    segments: list[tuple[str, float]],
    approvals: list[dict[str, Any]],
    per_table: dict[str, Any],
    everything: Any,
    s3_counts: dict[str, int],
) -> dict[str, Any]:
    n_segments = len(segments)
    n_approvals = len(approvals)
    # Step Functions Standard bills every state entered: walked through the shipped ASL from
    # the statuses the segments answered (an approval round is AwaitApproval, then RunSegment
    # + Route: the execution history's StateEntered events).
    entered = states_entered([status for status, _ in segments])
    transitions = len(entered)
    lambda_calls = {
        "trigger": 1,
        "run_segment": n_segments,
        "request_approval": n_approvals,
        "approval_callback (GET page + POST decision)": 2 * n_approvals,
    }
    lambda_seconds = (
        trigger_s + sum(sec for _, sec in segments) + 3 * n_approvals * SMALL_FUNCTION_SECONDS
    )
    wru = everything.write_units + APPROVAL_TABLE["wru"] * n_approvals
    rru = everything.read_units + APPROVAL_TABLE["rru"] * n_approvals
    s3_puts = sum(n for op, n in s3_counts.items() if op in ("PutObject", "DeleteObjects"))
    s3_gets = sum(n for op, n in s3_counts.items() if op in ("GetObject", "ListObjectsV2"))
    per_run = {
        "DynamoDB writes": wru * PRICES["dynamodb_wru"],
        "DynamoDB reads": rru * PRICES["dynamodb_rru"],
        "Step Functions": transitions * PRICES["sfn_transition"],
        "SES": n_approvals * PRICES["ses_email"],
        "Lambda requests": sum(lambda_calls.values()) * PRICES["lambda_request"],
        "Lambda duration": lambda_seconds * LAMBDA_GB * PRICES["lambda_gb_second_arm64"],
        "S3": s3_puts * PRICES["s3_put"] + s3_gets * PRICES["s3_get"],
        "API Gateway (HTTP API)": (1 + 2 * n_approvals) * PRICES["apigw_http_request"],
    }
    per_1000 = {k: v * 1000 for k, v in per_run.items()}
    total = sum(per_1000.values())
    table_rows = [
        [
            name,
            use.total,
            use.reads,
            use.writes,
            use.write_units,
            use.read_units,
            " ".join(
                f"{op}={n} ({use.op_write_units.get(op, 0):g} WRU)"
                if op in use.op_write_units
                else f"{op}={n}"
                for op, n in sorted(use.requests.items())
            ),
        ]
        for name, use in per_table.items()
    ]
    table_rows.append(
        [
            "approvals (modelled)",
            APPROVAL_TABLE["requests"] * n_approvals,
            2 * n_approvals,
            2 * n_approvals,
            APPROVAL_TABLE["wru"] * n_approvals,
            APPROVAL_TABLE["rru"] * n_approvals,
            "PutItem, GetItem x2, UpdateItem (cond.)",
        ]
    )
    print(
        table(
            f"P7  measured DynamoDB use of one run (status {result.status}, "
            f"{n_segments} segments, {n_approvals} approval; units estimated from item sizes)",
            ["table", "requests", "reads", "writes", "WRU", "RRU", "operations"],
            table_rows,
        )
    )
    print(
        f"  S3 requests: {s3_counts or 'none'}; segments (s): "
        + " ".join(f"{status}:{sec:.2f}" for status, sec in segments)
        + f"; trigger (start_run) {trigger_s:.2f} s"
    )
    print(f"  Step Functions transitions (states entered) = {transitions}: {' > '.join(entered)}")
    print(
        f"  Lambda: {sum(lambda_calls.values())} invocations {lambda_calls}, "
        f"{lambda_seconds:.2f} s at {LAMBDA_GB:g} GB arm64 (segments as measured on moto, "
        f"approval functions assumed {SMALL_FUNCTION_SECONDS:g} s, warm starts)"
    )
    print(
        f"  SES: {n_approvals} email; API Gateway: {1 + 2 * n_approvals} requests "
        "(webhook, approval page, decision)"
    )
    floors = design_floors(n_approvals, wru, transaction_write_units(per_table))
    rows = []
    for item, usd in per_1000.items():
        floor = floors[item][0]
        floor_usd = None if floor is None else floor * 1000
        over = f"{(usd / floor_usd - 1) * 100:+.0f} %" if floor_usd else ""
        rows.append([item, f"${usd:.4f}", "-" if floor_usd is None else f"${floor_usd:.4f}", over])
    rows.append(["TOTAL", f"${total:.4f}", "", ""])
    rows.append(["P7 target", "$0.1500", "", ""])
    print(
        table(
            "P7  modelled cost per 1,000 runs (us-east-1 on-demand, no free tier), beside the "
            "design's floor",
            ["item", "USD", "floor", "over"],
            rows,
        )
    )
    for item, (_, why) in floors.items():
        print(f"  floor of {item}: {why}")
    print(
        "  excluded: LLM tokens, CloudWatch Logs/metrics/X-Ray, Secrets Manager, data transfer, "
        "Lambda INIT of cold starts"
    )
    floor = per_1000["Step Functions"] + per_1000["SES"]
    print(
        f"  set by the design, not by request counts: Step Functions Standard (every state "
        f"entered bills; the approval must park as a task token) + one email per approval = "
        f"${floor:.4f}; everything else = ${total - floor:.4f}"
    )
    print()
    return {
        "status": result.status,
        "segments": n_segments,
        "approvals": n_approvals,
        "dynamodb_requests": everything.total,
        "dynamodb_write_units": wru,
        "dynamodb_read_units": rru,
        "dynamodb_per_table": {
            name: {
                "requests": dict(use.requests),
                "write_units": use.write_units,
                "write_units_per_operation": dict(use.op_write_units),
                "read_units": use.read_units,
            }
            for name, use in per_table.items()
        },
        "s3_requests": s3_counts,
        "sfn_transitions": transitions,
        "lambda_invocations": sum(lambda_calls.values()),
        "lambda_seconds": lambda_seconds,
        "cost_per_1000_runs": per_1000,
        "floor_per_1000_runs": {
            item: None if floor is None else floor * 1000 for item, (floor, _) in floors.items()
        },
        "total_per_1000_runs": total,
        "target": 0.15,
    }


def main() -> None:
    fake_aws_environment()
    started = time.perf_counter()
    results: dict[str, Any] = {
        "steps": bench_steps(),
        "imports": bench_imports(),
        "growing_state": bench_growing_state(),
        "superstep_bytes": bench_superstep_bytes(),
        "cost": bench_cost(),
    }
    results["seconds"] = time.perf_counter() - started
    print(f"bench finished in {results['seconds']:.0f} s")
    print("BENCH_JSON " + json.dumps(results, default=str, separators=(",", ":")))


if __name__ == "__main__":
    main()
