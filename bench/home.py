"""P6: `langorch dev` starts as fast with a long history as with none.

Generates a home holding 10,000 runs and 100,000 timeline events (through the SQLite runs store,
as the functions write them; a few runs left parked or sleeping, as a real home has), then starts
``langorch dev --ready-only`` on it and on a new home, alternating, and prints what each start
said ("ready in N s; state machine warm in M s") and the home's size. Nothing is replayed at
start: the history is in the SQLite file, and start-up reads only the runs still in flight.

*Ready* is every port accepting requests (the gateway, the console, the emulator); *warm* is
moto's Step Functions interpreter imported (seconds of CPU: moto's EC2 and Batch models), the
run state machine created and the runs in flight recovered, after ready, in the background. A
run started between the two waits for the state machine; nothing fails.

Figures on this 2-core host, shared with seven other sessions (wall clock; "host speed" is
``_support.host_speed``, 0.5 s on a quiet host — the readings scale with it):

- before (issue 25, 2026-11-27; host speed 1.06 s before, 12.2 s after): full home ready 18.5 /
  38.5 s, new home 37.8 / 39.7 s — the ready line waited for the interpreter.
- after (same day; host speed 16.5 s before, 13.5 s after — 27-33x a quiet host): full home
  ready 4.9 / 4.0 s (warm 38.7 / 44.7 s), new home ready 4.6 / 4.2 s (warm 33.7 / 44.2 s). The
  ready time no longer includes moto: CPU of the ``langorch dev`` process at its ready line fell
  from ~7.9 s to ~3.3 s (the repository's examples, measured at load ~30), the rest of which is
  mostly the examples' MCP server (``mcp``'s pydantic models); this bench starts with no
  examples.

Run: ``.venv/bin/python bench/home.py [--runs 10000] [--events 100000] [--starts 3]``.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

READY = re.compile(r"langorch dev is ready in ([0-9.]+) s; state machine warm in ([0-9.]+) s")


def generate(home: Path, runs: int, events: int) -> float:
    """Write ``runs`` runs with ``events`` timeline events in all into ``home``; seconds taken."""
    from langorch.adapters.sqlite._db import DATABASE_FILE, Database
    from langorch.adapters.sqlite.runs import SqliteRuns
    from langorch.domain.runs import (
        RunRecord,
        RunStatus,
        RunTrigger,
        TimelineEvent,
        TimelineEventType,
    )

    started = time.monotonic()
    store = SqliteRuns(Database(home / DATABASE_FILE))
    per_run = max(1, events // runs)
    base = datetime(2026, 1, 1, tzinfo=UTC)
    for n in range(runs):
        at = base + timedelta(seconds=n)
        status = RunStatus.succeeded if n % 1000 else RunStatus.failed
        run = RunRecord(
            run_id=f"run-{n:08d}",
            workflow_id=f"workflow_{n % 20}",
            workflow_version=1,
            trigger=RunTrigger(type="webhook", detail={"delivery": f"d-{n}"}),
            status=status,
            created_at=at,
            updated_at=at,
            input={"n": n, "text": "x" * 200},
        )
        store.create_run(run)
        store.append_events(
            run.run_id,
            [
                TimelineEvent(
                    seq=seq,
                    at=at + timedelta(milliseconds=seq),
                    type=TimelineEventType.step_finished,
                    step_id=f"step_{seq}",
                    detail={"duration_ms": seq},
                )
                for seq in range(1, per_run + 1)
            ],
        )
    return time.monotonic() - started


def ready_seconds(home: Path, examples: Path) -> tuple[float, float]:
    """Start ``langorch dev --ready-only`` on ``home``; the start-up it reports: ready (every
    port accepts requests) and warm (the state machine runs executions)."""
    from langorch.local.stack import free_port

    command = [
        str(Path(sys.executable).with_name("langorch")),
        "dev",
        "--home",
        str(home),
        "--port",
        str(free_port()),
        "--emulator-port",
        str(free_port()),
        "--console-port",
        "0",
        "--examples",
        str(examples),
        "--ready-only",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    found = READY.search(result.stdout)
    if result.returncode != 0 or found is None:
        raise RuntimeError(f"langorch dev did not start:\n{result.stdout}\n{result.stderr}")
    return float(found.group(1)), float(found.group(2))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--starts", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _support import fake_aws_environment, host_speed

    fake_aws_environment()
    print(f"host speed: a fixed Python loop in {host_speed():.2f} s (0.5 s on a quiet host)")
    root = Path(tempfile.mkdtemp(prefix="langorch-bench-home-"))
    examples = root / "examples"
    examples.mkdir()
    full, empty = root / "full", root / "empty"
    took = generate(full, args.runs, args.events)
    size = sum(p.stat().st_size for p in full.rglob("*") if p.is_file())
    print(f"generated {args.runs} runs, {args.events} timeline events in {took:.1f} s")
    print(f"  the home: {size / 1e6:.1f} MB")
    readings: dict[str, list[tuple[float, float]]] = {"full": [], "empty": []}
    for n in range(args.starts):
        for name, home in (("full", full), ("empty", empty)):
            readings[name].append(ready_seconds(home, examples))
        (full_ready, full_warm), (new_ready, new_warm) = readings["full"][-1], readings["empty"][-1]
        print(
            f"  start {n + 1}: full home ready {full_ready:.2f} s, warm {full_warm:.2f} s; "
            f"new home ready {new_ready:.2f} s, warm {new_warm:.2f} s"
        )
    full_median = statistics.median(r for r, _ in readings["full"])
    print(
        f"langorch dev ready (median of {args.starts}): {full_median:.2f} s with "
        f"{args.runs} runs and {args.events} events, "
        f"{statistics.median(r for r, _ in readings['empty']):.2f} s new   target <= 3 s: "
        f"{'met' if full_median <= 3 else 'MISSED'}; state machine warm "
        f"{statistics.median(w for _, w in readings['full']):.2f} s full, "
        f"{statistics.median(w for _, w in readings['empty']):.2f} s new"
    )
    print(f"host speed: the same loop in {host_speed():.2f} s, after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
