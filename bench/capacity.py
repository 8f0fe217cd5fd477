"""langorch capacity model: for a stated mix, what one run asks of each AWS service, and which
quota binds first at what rate.

Run with ``make capacity`` (``.venv/bin/python bench/capacity.py [--runs-per-hour N ...]``).
Offline: one run of the mix's workflow is driven through its approvals on moto in-process (as
``bench/engine.py`` P7 does), with the offline LLM and a local HTTP service for the tool calls,
and every request it makes is counted: DynamoDB per table and per hot index key, S3, the LLM
calls, the HTTP calls. What the in-process drive does not exercise is derived from the shipped
definitions, not guessed: Step Functions transitions walk ``statemachine.asl.json`` with the
statuses the segments answered; Lambda invocations are one per state that invokes one; the API
requests are the webhook that starts the run and, per approval, its page and its decision.

Each quota is the AWS default for us-east-1 with the documentation page it comes from. Quotas
that vary per account (SES out of the sandbox, Bedrock per model) are stated as assumptions:
pass your account's values (``--ses-rate``, ``--bedrock-rpm``, ``--bedrock-tpm``). The rate a
quota allows is ``quota / use per run`` (per second), or for concurrency ``quota / busy seconds
per run`` (Little's law). The lowest binds first.

The last line is ``CAPACITY_JSON {...}``; README "Capacity" is this script's table.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _support import (
    dynamo_meter,
    fake_aws_environment,
    fresh_stack,
    register_yaml,
    segment_timer,
    table,
    timed,
)
from engine import states_entered

# --------------------------------------------------------------------------------------------
# The mix
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mix:
    """The workload the model is about (one workflow shape, at one rate)."""

    runs_per_hour: float = 36_000.0
    steps: int = 10
    """Plain (transform) steps per run, besides the LLM, tool and approval steps."""
    approvals: int = 1
    llm_calls: int = 3
    llm_seconds: float = 4.0
    """Latency of one LLM call: the runner is busy (and billed) while it waits."""
    llm_tokens: int = 2_000
    """Input + output tokens of one LLM call."""
    tool_calls: int = 2
    tool_seconds: float = 0.3
    workflows: int = 1
    """How many workflows share the traffic evenly (each is one ``wf#`` index key)."""

    @property
    def runs_per_second(self) -> float:
        return self.runs_per_hour / 3600


# --------------------------------------------------------------------------------------------
# Quotas (us-east-1 defaults), each with its page
# --------------------------------------------------------------------------------------------

SFN_QUOTAS = "https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html"
LAMBDA_CONCURRENCY = "https://docs.aws.amazon.com/lambda/latest/dg/lambda-concurrency.html"
LAMBDA_SCALING = "https://docs.aws.amazon.com/lambda/latest/dg/scaling-behavior.html"
DDB_PARTITIONS = (
    "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html"
)
DDB_QUOTAS = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html"
SES_QUOTAS = "https://docs.aws.amazon.com/ses/latest/dg/quotas.html"
SCHEDULER_QUOTAS = "https://docs.aws.amazon.com/scheduler/latest/UserGuide/scheduler-quotas.html"
APIGW_THROTTLING = (
    "https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-throttling.html"
)
BEDROCK_QUOTAS = "https://docs.aws.amazon.com/bedrock/latest/userguide/quotas-runtime.html"


@dataclass(frozen=True)
class Quotas:
    """Default quotas; the two that vary per account are assumptions to override."""

    sfn_start_refill: float = 300.0  # StartExecution, Standard: bucket 1,300, refill 300/s
    sfn_start_bucket: float = 1_300.0
    sfn_transition_refill: float = 5_000.0  # StateTransition: bucket 5,000, refill 5,000/s
    lambda_concurrency: float = 1_000.0  # per account and Region
    lambda_scaling_per_10s: float = 1_000.0  # new environments per function per 10 s
    ddb_partition_wcu: float = 1_000.0  # per partition (table or index), per second
    ddb_table_wru: float = 40_000.0  # on-demand, per table, per second
    ses_rate: float = 14.0  # ASSUMED: out of the sandbox it "varies" (sandbox: 1/s)
    scheduler_invocations: float = 1_000.0  # invocations throttle limit, per second
    api_rate: float = 50.0  # the stack's own HTTP API stage throttle (infra/config.py)
    bedrock_rpm: float = 500.0  # ASSUMED: per model, per account (Service Quotas)
    bedrock_tpm: float = 1_000_000.0  # ASSUMED: input + output tokens, per model


# --------------------------------------------------------------------------------------------
# One real run of the mix
# --------------------------------------------------------------------------------------------


def mix_workflow(mix: Mix, service: str) -> str:
    """YAML of a linear workflow with the mix's LLM, tool (http), plain and approval steps."""
    blocks = [
        f"  - {{block_id: b_llm{i}, name: Llm{i}, input_keys: [ticket], output_keys: [a{i}],"
        f' prompt_template: "Answer {{ticket}} ({i})"}}'
        for i in range(mix.llm_calls)
    ]
    steps: list[str] = []
    steps += [f"{{step_id: llm{i}, block_id: b_llm{i}}}" for i in range(mix.llm_calls)]
    steps += [
        f'{{step_id: tool{i}, kind: http, http: {{method: GET, url: "{service}/t{i}",'
        f" response_key: t{i}}}}}"
        for i in range(mix.tool_calls)
    ]
    steps += [
        f'{{step_id: s{i}, kind: transform, transform: {{x{i}: "{i}"}}}}' for i in range(mix.steps)
    ]
    # Approvals spread through the run: each after an equal share of the other steps.
    every = max(1, len(steps) // (mix.approvals + 1))
    for k in range(mix.approvals, 0, -1):
        steps.insert(
            min(len(steps), k * every),
            f'{{step_id: ok{k}, kind: approval, approval: {{title: "Go on? ({k})",'
            f" timeout_seconds: 86400}}}}",
        )
    lines = ["blocks:", *blocks] if blocks else []
    lines += [
        "workflows:",
        "  - plan_id: mix",
        "    memory: false",
        "    approvers: [lead@example.com]",
        "    inputs_schema: {properties: {ticket: {type: string}}}",
        "    steps:",
    ]
    ids = [step.split("step_id:", 1)[1].split(",", 1)[0].strip() for step in steps]
    for i, (step, step_id) in enumerate(zip(steps, ids, strict=True)):
        extra = ""
        if step_id.startswith("ok") and i + 1 < len(ids):
            # An approval leads on by its branches; the step after it names no dependency.
            target = ids[i + 1]
            extra = f", branches: {{approved: {target}, rejected: {target}, timed_out: {target}}}"
        if i and not ids[i - 1].startswith("ok"):
            extra += f", depends_on: [{ids[i - 1]}]"
        lines.append(f"      - {step[:-1]}{extra}}}")
    return "\n".join(lines) + "\n"


class _Service(BaseHTTPRequestHandler):
    """The tool calls' service: answers every GET with a small JSON body, and counts them."""

    calls = 0

    def do_GET(self) -> None:
        type(self).calls += 1
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        pass


@contextmanager
def tool_service() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Service)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@dataclass
class RunUse:
    """What one run of the mix asked for, counted."""

    dynamodb: dict[str, Counter[str]]
    dynamodb_write_units: dict[str, float]
    run_item_writes: int
    index_write_units: dict[str, float]
    """Index write units per run on the hot keys (``status#running``, ``wf#``), before
    sharding spreads them."""
    s3: Counter[str]
    llm_calls: int
    http_calls: int
    segments: list[tuple[str, float]]
    transitions: list[str]

    @property
    def approvals(self) -> int:
        return sum(1 for status, _ in self.segments if status == "waiting_approval")


def measure_run(mix: Mix) -> RunUse:
    """Drive one run of the mix on moto and count what it asked for."""
    from langorch.adapters.dynamodb._run_items import RUN_SK
    from langorch.adapters.request_counter import RequestCounter
    from langorch.app import runs as runs_app
    from langorch.llm.registry import LLMRegistry

    llm_calls = 0
    original = LLMRegistry._checked  # every answer, sync or async, passes here once

    def counted(request: Any, result: Any) -> Any:
        nonlocal llm_calls
        llm_calls += 1
        return original(request, result)

    LLMRegistry._checked = staticmethod(counted)  # type: ignore[method-assign,assignment]
    _Service.calls = 0
    try:
        with tool_service() as service, fresh_stack() as container:
            register_yaml(container, mix_workflow(mix, service))
            meter = dynamo_meter(container)
            s3 = RequestCounter(container.client("s3"))
            runs_table = container.settings.runs_table
            run_item_writes: list[tuple[dict[str, Any], str | None]] = []

            def note(params: dict[str, Any], model: Any, **_: Any) -> None:
                run_item_writes.extend(_run_item_writes(model.name, params, runs_table, RUN_SK))

            client = container.client("dynamodb")
            client.meta.events.register("before-parameter-build.dynamodb", note)
            run, _ = runs_app.start_run(
                runs_app.StartRun("mix", input={"ticket": "T-1"}, trigger="webhook"), container
            )
            with segment_timer() as segments:
                result = runs_app.drive(
                    run.run_id,
                    container,
                    on_approval=lambda _: {"decision": "approved", "approver": "lead@example.com"},
                )
            client.meta.events.unregister("before-parameter-build.dynamodb", note)
            meter.detach()
            s3.detach()
            assert result.status == "succeeded", result
            # The run item as it ends: what an index with projection ALL copies on each write.
            stored = meter._stored_size(runs_table, run_item_writes[-1][0])
            index = _index_writes([status for _, status in run_item_writes], stored)
            tables = {
                "runs": runs_table,
                "checkpoints": container.settings.checkpoints_table,
                "definitions": container.settings.definitions_table,
            }
            per_table = {name: meter.use(t) for name, t in tables.items()}
            other = meter.use()
            return RunUse(
                dynamodb={
                    **{name: Counter(u.requests) for name, u in per_table.items()},
                    "other": other.requests
                    - sum((u.requests for u in per_table.values()), Counter()),
                },
                dynamodb_write_units={name: u.write_units for name, u in per_table.items()},
                run_item_writes=len(run_item_writes),
                index_write_units=index,
                s3=Counter(s3.counts),
                llm_calls=llm_calls,
                http_calls=_Service.calls,
                segments=list(segments),
                transitions=states_entered([status for status, _ in segments]),
            )
    finally:
        LLMRegistry._checked = staticmethod(original)  # type: ignore[method-assign,assignment]


def _run_item_writes(
    op: str, params: dict[str, Any], runs_table: str, run_sk: str
) -> Iterator[tuple[dict[str, Any], str | None]]:
    """``(key, status written or None)`` of each run item (``sk = run``) a request writes."""
    actions: list[tuple[str, dict[str, Any]]] = []
    if op in ("PutItem", "UpdateItem") and params.get("TableName") == runs_table:
        actions = [(op, params)]
    elif op == "TransactWriteItems":
        actions = [next(iter(entry.items())) for entry in params["TransactItems"]]
    for kind, body in actions:
        key = body.get("Key") or body.get("Item") or {}
        if kind == "ConditionCheck" or body.get("TableName") != runs_table:
            continue
        if key.get("sk", {}).get("S") != run_sk:
            continue
        values = body.get("Item") or body.get("ExpressionAttributeValues") or {}
        status = (values.get("status") or values.get(":status") or {}).get("S")
        yield {"pk": key["pk"], "sk": key["sk"]}, status


def _index_writes(statuses: list[str | None], stored: int) -> dict[str, float]:
    """Index write units one run costs on its ``wf#`` key and on ``status#running``.

    Under projection ALL every write of the run item rewrites its entry in both indexes, a unit
    per KB of the whole item. With the keys and ``run_id``/``status`` projected, only a write
    that creates the run or changes its status writes an index, one unit: the ``wf#`` entry
    is updated in place, a ``status#`` entry moves (out of the old key, into the new one).
    """
    from langorch.adapters.dynamodb._run_items import table_definition

    projection = table_definition()["GlobalSecondaryIndexes"][0]["Projection"]
    if projection["ProjectionType"] == "ALL":
        units = float(len(statuses) * math.ceil(stored / 1024))
        return {"status#running": units, "wf#": units}
    changes: list[tuple[str | None, str]] = []
    current: str | None = None
    for status in statuses:
        if status is not None and status != current:
            changes.append((current, status))
            current = status
    running = sum((old == "running") + (new == "running") for old, new in changes)
    return {"status#running": float(running), "wf#": float(len(changes))}


# --------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------


def index_shards() -> int:
    """How many keys the runs table spreads each ``status#``/``wf#`` index key over."""
    from langorch.adapters.dynamodb import _run_items

    return int(getattr(_run_items, "INDEX_SHARDS", 1))


DYNAMODB_SECONDS = 0.006
"""A DynamoDB request's latency from Lambda in the same Region (single-digit milliseconds)."""
SEGMENT_SECONDS = 0.05
"""A segment's own work besides its requests and calls (graph step, serialisation): warm."""
SMALL_FUNCTION_SECONDS = 0.1
"""Trigger, request_approval, the approval page and the decision: each ~0.1 s warm."""


def busy_seconds(mix: Mix, use: RunUse) -> float:
    """Seconds the runner function is busy per run, in Lambda (not moto's in-process times):
    its DynamoDB requests, the LLM and tool calls it waits on, and each segment's own work."""
    requests = sum(sum(ops.values()) for ops in use.dynamodb.values())
    return (
        requests * DYNAMODB_SECONDS
        + use.llm_calls * mix.llm_seconds
        + use.http_calls * mix.tool_seconds
        + len(use.segments) * SEGMENT_SECONDS
    )


def limits(mix: Mix, use: RunUse, quotas: Quotas) -> list[dict[str, Any]]:
    """Each quota, what one run uses of it, and the runs per second it allows."""
    approvals = use.approvals
    runner_seconds = busy_seconds(mix, use)
    lambda_seconds = runner_seconds + (3 * approvals + 1) * SMALL_FUNCTION_SECONDS
    shards = index_shards()
    status_wcu = use.index_write_units["status#running"] / shards
    workflow_wcu = use.index_write_units["wf#"] / shards
    checkpoint_wru = use.dynamodb_write_units["checkpoints"]
    api_requests = 1 + 2 * approvals
    tokens = use.llm_calls * mix.llm_tokens
    rows = [
        _row(
            "API Gateway",
            "the stack's HTTP API throttle, requests/s (infra/config.py api_rate_limit)",
            quotas.api_rate,
            api_requests,
            "requests",
            APIGW_THROTTLING,
        ),
        _row(
            "Step Functions",
            "StartExecution refill (/s)",
            quotas.sfn_start_refill,
            1,
            "starts",
            SFN_QUOTAS,
        ),
        _row(
            "Step Functions",
            "StateTransition refill (/s)",
            quotas.sfn_transition_refill,
            len(use.transitions),
            "transitions",
            SFN_QUOTAS,
        ),
        _row(
            "Lambda",
            "account concurrency",
            quotas.lambda_concurrency,
            lambda_seconds,
            "busy seconds",
            LAMBDA_CONCURRENCY,
        ),
        _row(
            "DynamoDB",
            f"index key status#running ({shards} shard(s), WCU/s per partition)",
            quotas.ddb_partition_wcu,
            status_wcu,
            "index WCU per shard",
            DDB_PARTITIONS,
        ),
        _row(
            "DynamoDB",
            f"index key wf#<id> ({shards} shard(s); {mix.workflows} workflow(s))",
            quotas.ddb_partition_wcu * mix.workflows,
            workflow_wcu,
            "index WCU per shard",
            DDB_PARTITIONS,
        ),
        _row(
            "DynamoDB",
            "checkpoints table on-demand WRU/s",
            quotas.ddb_table_wru,
            checkpoint_wru,
            "WRU",
            DDB_QUOTAS,
        ),
        _row(
            "SES",
            "emails/s (ASSUMED: out of the sandbox it varies; sandbox 1/s)",
            quotas.ses_rate,
            approvals,
            "emails",
            SES_QUOTAS,
        ),
        _row(
            "EventBridge Scheduler",
            "invocations (/s)",
            quotas.scheduler_invocations,
            0,
            "invocations (webhook-started mix)",
            SCHEDULER_QUOTAS,
        ),
        _row(
            "Bedrock",
            f"requests/s ({quotas.bedrock_rpm:,.0f} RPM ASSUMED, per model)",
            quotas.bedrock_rpm / 60,
            use.llm_calls,
            "calls",
            BEDROCK_QUOTAS,
        ),
        _row(
            "Bedrock",
            f"tokens/s ({quotas.bedrock_tpm:,.0f} TPM ASSUMED, per model)",
            quotas.bedrock_tpm / 60,
            tokens,
            "tokens",
            BEDROCK_QUOTAS,
        ),
    ]
    for row in rows:
        row["load_at_mix"] = (
            mix.runs_per_second / row["max_runs_per_second"]
            if row["max_runs_per_second"] not in (0, math.inf)
            else 0.0
        )
    return rows


def _row(
    service: str, quota: str, value: float, per_run: float, unit: str, source: str
) -> dict[str, Any]:
    return {
        "service": service,
        "quota": quota,
        "value": value,
        "per_run": per_run,
        "unit": unit,
        "max_runs_per_second": value / per_run if per_run else math.inf,
        "source": source,
    }


def _rate(value: float) -> str:
    return "unbounded" if value == math.inf else f"{value:,.1f}"


def report(mix: Mix, use: RunUse, rows: list[dict[str, Any]]) -> None:
    ddb = {name: sum(ops.values()) for name, ops in use.dynamodb.items()}
    print(
        table(
            f"Requests per run, counted (mix: {mix.steps} plain steps, {mix.llm_calls} LLM "
            f"calls, {mix.tool_calls} tool calls, {mix.approvals} approval(s))",
            ["service", "requests per run", "detail"],
            [
                [
                    "DynamoDB (all tables)",
                    sum(ddb.values()),
                    ", ".join(f"{name} {n}" for name, n in ddb.items() if n),
                ],
                *[
                    [
                        f"  {name}",
                        sum(ops.values()),
                        " ".join(f"{op}={n}" for op, n in sorted(ops.items())),
                    ]
                    for name, ops in use.dynamodb.items()
                    if ops
                ],
                [
                    "  run-item writes",
                    use.run_item_writes,
                    f"index WCU: status#running {use.index_write_units['status#running']:g}, "
                    f"wf# {use.index_write_units['wf#']:g} (before sharding)",
                ],
                ["S3", sum(use.s3.values()), " ".join(f"{op}={n}" for op, n in use.s3.items())],
                ["Step Functions transitions", len(use.transitions), " > ".join(use.transitions)],
                ["Step Functions StartExecution", 1, "the trigger's"],
                [
                    "Lambda invocations",
                    1 + len(use.segments) + 3 * use.approvals,
                    "trigger + one per segment + request_approval, page, decision per approval",
                ],
                ["SES emails", use.approvals, "one per approval"],
                ["API Gateway requests", 1 + 2 * use.approvals, "webhook + page + decision"],
                ["Bedrock calls", use.llm_calls, "offline provider, counted"],
                ["tool (HTTP) calls", use.http_calls, "local service, counted"],
            ],
        )
    )
    print()
    ordered = sorted(rows, key=lambda r: r["max_runs_per_second"])
    print(
        table(
            f"Which quota binds first (us-east-1 defaults; mix at {mix.runs_per_second:,.1f} "
            "runs/s)",
            ["service", "quota", "value", "per run", "max runs/s", "load at mix", "source"],
            [
                [
                    r["service"],
                    r["quota"],
                    f"{r['value']:,.0f}",
                    f"{r['per_run']:,.2f}",
                    _rate(r["max_runs_per_second"]),
                    f"{r['load_at_mix']:.0%}",
                    r["source"],
                ]
                for r in ordered
            ],
        )
    )
    runner = mix.runs_per_second * busy_seconds(mix, use)
    ramp = runner / (Quotas().lambda_scaling_per_10s / 10)
    print(
        f"\n  ramp: the runner needs ~{runner:,.0f} concurrent environments at the mix; Lambda "
        f"adds at most 1,000 per function per 10 s ({LAMBDA_SCALING}): ~{ramp:,.1f} s from cold"
    )
    first = ordered[0]
    print(
        f"\n  binds first: {first['service']} {first['quota']} at "
        f"{first['max_runs_per_second']:,.1f} runs/s "
        f"({first['max_runs_per_second'] * 3600:,.0f} runs/hour)"
    )


def markdown(mix: Mix, rows: list[dict[str, Any]]) -> str:
    """The binding table as Markdown (README "Capacity" is this, pasted)."""
    lines = [
        "| service | quota | per run | max runs/s | source |",
        "|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: r["max_runs_per_second"]):
        name = r["source"].rsplit("/", 1)[-1]
        lines.append(
            f"| {r['service']} | {r['quota']}: {r['value']:,.0f} | {r['per_run']:,.2f} "
            f"{r['unit']} | {_rate(r['max_runs_per_second'])} | [{name}]({r['source']}) |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    defaults, quota_defaults = Mix(), Quotas()
    for name, value in asdict(defaults).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    parser.add_argument("--ses-rate", type=float, default=quota_defaults.ses_rate)
    parser.add_argument("--bedrock-rpm", type=float, default=quota_defaults.bedrock_rpm)
    parser.add_argument("--bedrock-tpm", type=float, default=quota_defaults.bedrock_tpm)
    parser.add_argument("--markdown", action="store_true", help="also print README's table")
    args = vars(parser.parse_args(argv))
    as_markdown = args.pop("markdown")
    quotas = Quotas(
        ses_rate=args.pop("ses_rate"),
        bedrock_rpm=args.pop("bedrock_rpm"),
        bedrock_tpm=args.pop("bedrock_tpm"),
    )
    mix = Mix(**args)
    fake_aws_environment()
    seconds, use = timed(lambda: measure_run(mix))
    rows = limits(mix, use, quotas)
    report(mix, use, rows)
    if as_markdown:
        print("\n" + markdown(mix, rows) + "\n")
    out = {
        "mix": asdict(mix),
        "quotas": asdict(quotas),
        "per_run": {
            "dynamodb": {k: dict(v) for k, v in use.dynamodb.items()},
            "s3": dict(use.s3),
            "sfn_transitions": len(use.transitions),
            "llm_calls": use.llm_calls,
            "http_calls": use.http_calls,
            "index_write_units": use.index_write_units,
        },
        "limits": rows,
        "seconds": seconds,
    }
    print("CAPACITY_JSON " + json.dumps(out, default=str, separators=(",", ":")))


if __name__ == "__main__":
    main()
