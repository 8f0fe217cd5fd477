"""Issue 31's delivery check: 500 webhook deliveries for 5 keys under ``concurrency: {limit: 2,
key}`` on ``langorch dev`` — none lost, none doubled, never more than 2 running per key.

Starts ``langorch dev`` in its own process as ``bench/pipeline.py`` does (a temporary home, free
ports), registers a webhook workflow with ``concurrency: {limit: 2, key: "{{ customer }}"}``,
fires ``--runs`` signed deliveries (customers ``c0``..``c4`` in turn) from ``--senders`` threads
at the local gateway, waits for every run to end, then re-sends ``--resend`` of the deliveries.

Counts, from the runs table and the timelines:

- lost: a delivery answered other than 202, or whose run did not succeed;
- doubled: more runs than deliveries, a run started more than once (two ``run_started``
  events, or an attempt past 0), or a re-sent delivery answered with a new run;
- per key, the most runs whose ``[started_at, ended_at]`` overlap (must be at most 2).

Run: ``.venv/bin/python bench/flow.py [--runs 500] [--senders 20] [--resend 50]``; exits 1 when
anything was lost, doubled or ran past the limit.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pipeline import DevProcess, _request, _wait

WORKFLOW = "bench_flow"
KEYS = 5
LIMIT = 2
DEFINITIONS = f"""
workflows:
  - plan_id: {WORKFLOW}
    name: Issue 31 - 500 deliveries, concurrency 2 per customer
    triggers: [{{type: webhook}}]
    memory: false
    concurrency: {{limit: {LIMIT}, key: "{{{{ customer }}}}"}}
    inputs_schema:
      properties: {{customer: {{type: string}}, n: {{type: integer}}}}
      required: [customer, n]
    steps:
      - {{step_id: work, kind: transform, transform: {{doubled: "n * 2"}}}}
"""
DEADLINE_SECONDS = 1800.0


def _deliver(hook: str, secret: str, n: int) -> tuple[int, str | None]:
    from standardwebhooks import Webhook

    delivery = f"flow-{n}"
    payload = json.dumps({"customer": f"c{n % KEYS}", "n": n})
    now = datetime.now(UTC)
    headers = {
        "webhook-id": delivery,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(secret).sign(delivery, now, payload),
        "Content-Type": "application/json",
    }
    status, answer = _request(hook, "POST", payload.encode(), headers)
    return status, (json.loads(answer).get("run_id") if status == 202 else None)


def _most_at_once(intervals: list[tuple[float, float]]) -> int:
    """The most intervals that overlap at one moment (an end before a start at a tie)."""
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def measure(dev: DevProcess, runs: int, senders: int, resend: int) -> int:
    from langorch.app.trigger_sync import register_and_sync
    from langorch.cli.target import resolve_target
    from langorch.composition.bootstrap import build_container

    settings = resolve_target(home=str(dev.home)).settings
    container = build_container(settings)
    definitions = dev.home.parent / "flow.yaml"
    definitions.write_text(DEFINITIONS)
    register_and_sync([definitions], container)
    secret = container.secrets.get_json(settings.webhook_secret_prefix + WORKFLOW)["current"]
    hook = f"{settings.public_base_url}/hooks/{WORKFLOW}"
    deadline = time.monotonic() + DEADLINE_SECONDS

    fired = time.monotonic()
    with ThreadPoolExecutor(max_workers=senders) as pool:
        answers = list(pool.map(lambda n: _deliver(hook, secret, n), range(runs)))
    statuses = Counter(s for s, _ in answers)
    run_ids = [r for _, r in answers if r]
    print(f"{runs} deliveries answered in {time.monotonic() - fired:.1f} s: {dict(statuses)}")

    def ended() -> bool:
        return all(container.runs.get_run(r).is_terminal for r in set(run_ids))

    finished = _wait(f"{len(set(run_ids))} runs to end", ended, deadline)
    took = time.monotonic() - fired
    with ThreadPoolExecutor(max_workers=senders) as pool:
        again = list(pool.map(lambda n: _deliver(hook, secret, n), range(resend)))
    resent_new = sum(1 for (_, r), (_, first) in zip(again, answers, strict=False) if r != first)

    records = [container.runs.get_run(r) for r in set(run_ids)]
    stored = container.runs.list_runs(WORKFLOW, limit=1000)
    starts = {
        r.run_id: sum(e.type.value == "run_started" for e in container.runs.get_timeline(r.run_id))
        for r in records
    }
    lost = (runs - statuses.get(202, 0)) + sum(r.status.value != "succeeded" for r in records)
    doubled = (
        (len(stored) - runs if len(stored) > runs else 0)
        + sum(n != 1 for n in starts.values())
        + sum(r.attempt != 0 for r in records)
        + resent_new
    )
    per_key: dict[str, list[tuple[float, float]]] = {}
    for r in records:
        if r.started_at and r.ended_at:
            span = (r.started_at.timestamp(), r.ended_at.timestamp())
            per_key.setdefault(r.input["customer"], []).append(span)
    most = {k: _most_at_once(v) for k, v in sorted(per_key.items())}
    print(
        f"all ended: {finished} in {took:.1f} s ({len(records) / took * 60:.0f} runs/min); "
        f"runs stored {len(stored)} for {runs} deliveries"
    )
    print(f"lost {lost}, doubled {doubled} (re-sent {resend}: {resent_new} answered a new run)")
    print(f"most running at once per key (limit {LIMIT}): {most}")
    ok = finished and lost == 0 and doubled == 0 and max(most.values(), default=0) <= LIMIT
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--senders", type=int, default=20)
    parser.add_argument("--resend", type=int, default=50)
    args = parser.parse_args()

    from _support import fake_aws_environment

    fake_aws_environment()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    dev = DevProcess(Path(tempfile.mkdtemp(prefix="langorch-flow-")))
    print(f"starting: {' '.join(dev.command())}  (output: {dev.log})")
    try:
        dev.start()
        return measure(dev, args.runs, args.senders, args.resend)
    finally:
        print(dev.stop())


if __name__ == "__main__":
    sys.exit(main())
