"""Helpers for the benchmarks: a fresh moto stack, request meters, workflow text, printing.

Nothing here asserts; everything measures or formats.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

REGION = "us-east-1"

# --------------------------------------------------------------------------------------------
# Environment and stack
# --------------------------------------------------------------------------------------------


def fake_aws_environment() -> None:
    """Fake credentials, so nothing here can reach a real AWS account."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        os.environ.pop(name, None)
    for name in [n for n in os.environ if n.startswith("LANGORCH_")]:
        os.environ.pop(name)
    os.environ["AWS_ACCESS_KEY_ID"] = "testing"
    os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"  # noqa: S105 - moto's, not a secret
    os.environ["AWS_DEFAULT_REGION"] = REGION


HOST_LOOP = 20_000_000
"""The iterations of :func:`host_speed`'s loop."""


def host_speed() -> float:
    """Seconds one fixed pure-Python loop takes in this process, now.

    0.50-0.57 s on this 2-core machine type on a quiet day (2026-11-25); the same machine type
    ran such loops twice as slowly on other days (shared hosts). A figure measured beside this
    reading compares with another only at a similar reading.
    """
    began = time.perf_counter()
    total = 0
    for i in range(HOST_LOOP):
        total += i & 7
    return time.perf_counter() - began


@contextmanager
def fresh_stack(**settings: Any) -> Iterator[Any]:
    """A new moto account with langorch's tables and bucket, and a container on it.

    DynamoDB is moto's, in-process: request counts are exact, times are moto's. Every
    measurement gets its own (empty) tables.
    """
    from moto import mock_aws

    with mock_aws():
        container = new_container(**settings)
        container.ensure_resources()
        yield container


def new_container(**settings: Any) -> Any:
    """A container on the current moto account: a new container is a new process."""
    from langorch.composition.container import Container
    from langorch.config import Settings
    from langorch.llm import LLMRegistry

    return Container(
        Settings(endpoint_url=None, **settings),
        llm=LLMRegistry(default_provider="offline"),
    )


def register_yaml(container: Any, text: str) -> None:
    """Register the blocks, then the workflows, of a YAML document."""
    from langorch.app.definitions import register_block, register_workflow
    from langorch.domain.loading import load_text

    loaded = load_text(text, source="bench.yaml", fmt="yaml")
    for block in loaded.blocks:
        register_block(container.definitions, block)
    for plan in loaded.workflows:
        register_workflow(container.definitions, plan)


def linear_workflow(
    plan_id: str, steps: Sequence[str], *, inputs: Sequence[str] = ("x0",), blocks: str = ""
) -> str:
    """YAML of a linear workflow: each flow-style step depends on the one before it."""
    lines = [blocks] if blocks else []
    properties = ", ".join(f"{name}: {{}}" for name in inputs)
    lines += [
        "workflows:",
        f"  - plan_id: {plan_id}",
        "    memory: false",
        f"    inputs_schema: {{properties: {{{properties}}}}}",
        "    steps:",
    ]
    previous: str | None = None
    for step in steps:
        step_id = step.split("step_id:", 1)[1].split(",", 1)[0].strip()
        depends = f", depends_on: [{previous}]" if previous else ""
        lines.append(f"      - {{{step.strip()}{depends}}}")
        previous = step_id
    return "\n".join(lines) + "\n"


def counting_steps(n: int) -> list[str]:
    """``x_i = x_{i-1} + 1`` transform steps (input ``x0``)."""
    return [
        f'step_id: s{i}, kind: transform, transform: {{x{i}: "x{i - 1} + 1"}}'
        for i in range(1, n + 1)
    ]


# --------------------------------------------------------------------------------------------
# DynamoDB request and capacity meter
# --------------------------------------------------------------------------------------------

_READS = {"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"}
_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}


def attribute_size(value: dict[str, Any]) -> int:
    """Approximate stored size of one attribute value in DynamoDB's wire format."""
    kind, inner = next(iter(value.items()))
    if kind == "S":
        return len(str(inner).encode())
    if kind == "B":
        return len(inner) if isinstance(inner, bytes | bytearray) else len(str(inner))
    if kind == "N":
        return (len(str(inner).lstrip("-").replace(".", "")) + 1) // 2 + 1
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "NS", "BS"):
        return sum(attribute_size({kind[0]: v}) for v in inner)
    if kind == "L":
        return 3 + sum(1 + attribute_size(v) for v in inner)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + attribute_size(v) for k, v in inner.items())
    return 0


def item_size(item: dict[str, Any]) -> int:
    """Approximate size of an item as DynamoDB bills it (names + values)."""
    return sum(len(name.encode()) + attribute_size(value) for name, value in item.items())


def write_units(size: int, *, transactional: bool = False) -> int:
    """On-demand write request units for one item write (1 KB each, 2 in a transaction)."""
    return max(1, math.ceil(size / 1024)) * (2 if transactional else 1)


def read_units(size: int, *, consistent: bool, transactional: bool = False) -> float:
    """On-demand read request units for one read of ``size`` bytes (4 KB each)."""
    units = max(1, math.ceil(size / 4096))
    if transactional:
        return units * 2.0
    return float(units) if consistent else units / 2


@dataclass
class TableUse:
    """Requests and estimated request units on one table."""

    requests: Counter[str] = field(default_factory=Counter)
    write_units: float = 0.0
    read_units: float = 0.0
    written_bytes: int = 0
    seconds: float = 0.0
    """Wall time inside the client calls (botocore + moto), summed over threads."""
    op_write_units: Counter[str] = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return sum(self.requests.values())

    @property
    def reads(self) -> int:
        return sum(n for op, n in self.requests.items() if op in _READS)

    @property
    def writes(self) -> int:
        return sum(n for op, n in self.requests.items() if op in _WRITES)


class DynamoMeter:
    """Counts a DynamoDB client's requests per table and estimates the request units they bill.

    moto's ``ReturnConsumedCapacity`` is a constant (1.0 or 0.5 whatever the size), so units
    are estimated from item sizes: writes from the items sent (an ``UpdateItem``'s result is
    read back through a separate, uncounted client), reads from the items returned.

    Args:
        client: The counted client (the one the adapters were given).
        peek: An uncounted client on the same account, for sizing updated items.
        size_at_once: size each updated or checked item right after its request, as it was
            billed then (a read inside the hook, so not for timed measurements); by default
            they are sized once the measurement is over, at their final size, which bills an
            early update of an item that grew later (a run item) at the larger size.
    """

    def __init__(self, client: Any, peek: Any, *, size_at_once: bool = False) -> None:
        self._client = client
        self._peek = peek
        self._size_at_once = size_at_once
        self._lock = threading.Lock()
        self.tables: dict[str, TableUse] = {}
        self.writes: list[tuple[str, int]] = []
        """(table, bytes) of each write request that sent whole items, in order: a superstep's
        checkpoint write is one entry on the checkpoints table."""
        # Updated items are sized after the measurement (a read inside the hook would be timed).
        self._unsized: list[tuple[str, dict[str, Any], str]] = []
        client.meta.events.register("before-parameter-build.dynamodb", self._before)
        client.meta.events.register("after-call.dynamodb", self._after)

    def detach(self) -> None:
        self._client.meta.events.unregister("before-parameter-build.dynamodb", self._before)
        self._client.meta.events.unregister("after-call.dynamodb", self._after)

    def reset(self) -> None:
        with self._lock:
            self.tables = {}
            self._unsized = []

    def use(self, table: str | None = None) -> TableUse:
        """One table's use, or all tables summed (``None``)."""
        self._size_updates()
        with self._lock:
            picked = [u for t, u in self.tables.items() if table is None or t == table]
        total = TableUse()
        for u in picked:
            total.requests.update(u.requests)
            total.write_units += u.write_units
            total.read_units += u.read_units
            total.written_bytes += u.written_bytes
            total.seconds += u.seconds
            total.op_write_units.update(u.op_write_units)
        return total

    # -- hooks

    @staticmethod
    def _before(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["bench_params"] = params
        context["bench_started"] = time.perf_counter()

    def _after(self, parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        params = context.get("bench_params") or {}
        elapsed = time.perf_counter() - context.get("bench_started", time.perf_counter())
        op = model.name
        sent: Counter[str] = Counter()
        for table, wru, rru, written in self._units(op, params, parsed):
            with self._lock:
                use = self.tables.setdefault(table, TableUse())
                use.write_units += wru
                use.read_units += rru
                use.written_bytes += written
                sent[table] += written
                if wru:
                    use.op_write_units[op] += wru
        if self._size_at_once:
            self._size_updates()
        with self._lock:
            self.writes.extend((table, size) for table, size in sent.items() if size)
            # One request is one request: a transaction that checks the run item (runs table)
            # and writes a checkpoint counts once, on the table it writes (its check's units
            # are still billed to the table checked, above).
            use = self.tables.setdefault(self._table_of(op, params), TableUse())
            use.requests[op] += 1
            use.seconds += elapsed

    @staticmethod
    def _table_of(op: str, params: dict[str, Any]) -> str:
        """The table a request is counted on: its own, or the first a batch or transaction
        writes (a ``ConditionCheck`` only reads)."""
        if "TableName" in params:
            return str(params["TableName"])
        if "RequestItems" in params:
            return str(next(iter(params["RequestItems"])))
        if "TransactItems" in params:
            actions = [next(iter(entry.items())) for entry in params["TransactItems"]]
            written = [body for kind, body in actions if kind != "ConditionCheck"]
            return str((written or [actions[0][1]])[0]["TableName"])
        return "(other)"

    def _units(
        self, op: str, params: dict[str, Any], parsed: dict[str, Any]
    ) -> Iterator[tuple[str, float, float, int]]:
        if op == "PutItem":
            size = item_size(params["Item"])
            yield params["TableName"], write_units(size), 0.0, size
        elif op == "DeleteItem":
            yield params["TableName"], 1.0, 0.0, 0
        elif op == "UpdateItem":
            self._unsized.append((params["TableName"], params["Key"], "UpdateItem"))
        elif op == "BatchWriteItem":
            for table, requests in params["RequestItems"].items():
                for request in requests:
                    item = request.get("PutRequest", {}).get("Item")
                    size = item_size(item) if item else 0
                    yield table, write_units(size), 0.0, size
        elif op == "TransactWriteItems":
            for entry in params["TransactItems"]:
                kind, body = next(iter(entry.items()))
                if kind in ("Update", "ConditionCheck"):
                    # A check bills like a transactional write of the item it checks.
                    op_kind = "TransactWriteItems" if kind == "Update" else "ConditionCheck"
                    self._unsized.append((body["TableName"], body["Key"], op_kind))
                    continue
                size = item_size(body["Item"]) if kind == "Put" else 0
                yield body["TableName"], write_units(size, transactional=True), 0.0, size
        elif op == "GetItem":
            size = item_size(parsed.get("Item") or {})
            consistent = bool(params.get("ConsistentRead"))
            yield params["TableName"], 0.0, read_units(size, consistent=consistent), 0
        elif op in ("Query", "Scan"):
            size = sum(item_size(item) for item in parsed.get("Items", []))
            consistent = bool(params.get("ConsistentRead"))
            yield params["TableName"], 0.0, read_units(size, consistent=consistent), 0
        elif op == "BatchGetItem":
            for table, items in (parsed.get("Responses") or {}).items():
                consistent = bool(params["RequestItems"][table].get("ConsistentRead"))
                for item in items:
                    yield table, 0.0, read_units(item_size(item), consistent=consistent), 0
        elif op == "TransactGetItems":
            for entry in parsed.get("Responses", []):
                size = item_size(entry.get("Item") or {})
                yield (
                    "(transact-get)",
                    0.0,
                    read_units(size, consistent=True, transactional=True),
                    0,
                )

    def _size_updates(self) -> None:
        with self._lock:
            unsized, self._unsized = self._unsized, []
        for table, key, op in unsized:
            size = self._stored_size(table, key)
            units = write_units(size, transactional=op in ("TransactWriteItems", "ConditionCheck"))
            with self._lock:
                use = self.tables.setdefault(table, TableUse())
                use.write_units += units
                use.op_write_units[op] += units
                if op != "ConditionCheck":  # a check writes nothing
                    use.written_bytes += size

    def _stored_size(self, table: str, key: dict[str, Any]) -> int:
        try:
            item = self._peek.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
        except Exception:
            return 1024
        return item_size(item or key)


class RequestUnits:
    """The write units of each write request, in order: ``(table, WRU, of which checks)``.

    Unlike :class:`DynamoMeter`, which sizes checked and updated items once the measurement is
    over, this sizes the items a transaction's ``ConditionCheck`` reads right after the request
    (through an uncounted client), so each superstep is billed what it was billed then.
    Updates are sized the same way. The table is the first one the request writes.

    Args:
        client: The counted client (the one the adapters were given).
        peek: An uncounted client on the same account.
    """

    def __init__(self, client: Any, peek: Any) -> None:
        self._client = client
        self._peek = peek
        self.log: list[tuple[str, float, float]] = []
        client.meta.events.register("before-parameter-build.dynamodb", self._before)
        client.meta.events.register("after-call.dynamodb", self._after)

    def detach(self) -> None:
        self._client.meta.events.unregister("before-parameter-build.dynamodb", self._before)
        self._client.meta.events.unregister("after-call.dynamodb", self._after)

    @staticmethod
    def _before(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["units_params"] = params

    def _after(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        params = context.get("units_params") or {}
        op = model.name
        if op == "TransactWriteItems":
            units = checks = 0.0
            for entry in params.get("TransactItems", []):
                kind, body = next(iter(entry.items()))
                if kind == "Put":
                    size = item_size(body["Item"])
                else:
                    size = self._size(body["TableName"], body["Key"])
                unit = write_units(size, transactional=True)
                units += unit
                checks += unit if kind == "ConditionCheck" else 0
            self.log.append((DynamoMeter._table_of(op, params), units, checks))
        elif op == "PutItem":
            self.log.append((params["TableName"], write_units(item_size(params["Item"])), 0.0))
        elif op == "UpdateItem":
            size = self._size(params["TableName"], params["Key"])
            self.log.append((params["TableName"], write_units(size), 0.0))
        elif op == "BatchWriteItem":
            for table_name, requests in params["RequestItems"].items():
                items = [r["PutRequest"]["Item"] for r in requests if "PutRequest" in r]
                total = sum(write_units(item_size(item)) for item in items)
                self.log.append((table_name, float(total), 0.0))

    def _size(self, table_name: str, key: dict[str, Any]) -> int:
        item = self._peek.get_item(TableName=table_name, Key=key, ConsistentRead=True).get("Item")
        return item_size(item or key)


def dynamo_meter(container: Any, *, size_at_once: bool = False) -> DynamoMeter:
    """A meter on the container's DynamoDB client (with a private client for sizing)."""
    import boto3

    peek = boto3.client("dynamodb", region_name=REGION)
    return DynamoMeter(container.client("dynamodb"), peek, size_at_once=size_at_once)


# --------------------------------------------------------------------------------------------
# Timing and printing
# --------------------------------------------------------------------------------------------


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds, result) of one call."""
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table with right-aligned numbers."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(header)]
    # Text columns (the first, and any with words in them) are left-aligned.
    left = [i == 0 or any(" " in r[i] and "=" in r[i] for r in cells) for i in range(len(header))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.ljust(w) if left[i] else v.rjust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        )

    out = [title, line(header), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    return "\n".join(out)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        if value >= 100:
            return f"{value:,.0f}"
        if value >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    return str(value)


@contextmanager
def segment_timer() -> Iterator[list[tuple[str, float]]]:
    """Record (status, seconds) of every ``run_segment`` call, ``drive``'s included."""
    from langorch.app import runs

    original = runs.run_segment
    segments: list[tuple[str, float]] = []

    def timed_segment(cmd: Any, deps: Any) -> Any:
        started = time.perf_counter()
        result = original(cmd, deps)
        segments.append((result.status, time.perf_counter() - started))
        return result

    runs.run_segment = timed_segment  # type: ignore[assignment]
    try:
        yield segments
    finally:
        runs.run_segment = original  # type: ignore[assignment]


# --------------------------------------------------------------------------------------------
# Import times (P3)
# --------------------------------------------------------------------------------------------


def _import_seconds(code: str, env: dict[str, str] | None) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    return time.perf_counter() - started


def _loaded(code: str, env: dict[str, str] | None, watched: Sequence[str]) -> list[str]:
    probe = (
        f"{code}\nimport sys, json\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    output = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True, env=env
    )
    loaded = set(json.loads(output.stdout.strip().splitlines()[-1]))
    return [m for m in watched if m in loaded]


def import_ratios(
    sets: dict[str, str],
    *,
    rounds: int,
    targets: dict[str, float],
    watched: Sequence[str],
    title: str,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Whole-process import of each set as a multiple of ``import boto3``; prints a table.

    Each set runs in a fresh interpreter, alternated with ``python -c "import boto3"`` so both
    see the same machine load; the figure is the ratio of the medians over ``rounds``.

    Args:
        sets: name -> Python source that imports something.
        rounds: how many times each set (and boto3 before it) is timed.
        targets: name -> the ratio PERFORMANCE.md allows.
        watched: top-level packages to report when a set loads them.
        title: the table's title.
        env: the subprocesses' environment (default: this one).
    """
    boto3 = "import boto3"
    for code in [boto3, *sets.values()]:
        _import_seconds(code, env)  # warm-up: the OS page cache
    samples: dict[str, list[float]] = {name: [] for name in [boto3, *sets]}
    for _ in range(rounds):
        for name, code in sets.items():
            samples[boto3].append(_import_seconds(boto3, env))
            samples[name].append(_import_seconds(code, env))
    boto3_s = statistics.median(samples[boto3])
    results: dict[str, Any] = {"boto3_seconds": boto3_s}
    rows: list[list[Any]] = [[boto3, boto3_s * 1000, "1.00x", "", "-"]]
    for name, code in sets.items():
        seconds = statistics.median(samples[name])
        heavy = _loaded(code, env, watched)
        target = targets.get(name)
        results[name] = {
            "median_seconds": seconds,
            "ratio_to_boto3": seconds / boto3_s,
            "target_ratio": target,
            "heavy_modules_loaded": heavy,
        }
        rows.append(
            [
                name,
                seconds * 1000,
                f"{seconds / boto3_s:.2f}x",
                f"<= {target}x" if target else "",
                ", ".join(heavy) or "-",
            ]
        )
    print(table(title, ["import", "ms", "vs boto3", "target", "heavy packages loaded"], rows))
    return results
