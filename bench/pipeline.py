"""P6: 100 webhook runs through the local stack at once — none lost, none twice.

Starts ``langorch dev``'s stack in this process (free ports, a temporary home), registers a
webhook workflow with one approval, fires 100 signed deliveries concurrently at the local
gateway, waits for the 100 approvals, approves them all concurrently through the page's POST
(each link read from the outbox), waits for every run to end, then re-sends 10 deliveries.

Prints runs per minute, p50/p95 of trigger → first step started and of approval click → the
next segment started (both from the runs' timelines), and whether any run was lost (did not
finish) or doubled (more runs than deliveries, more than one execution per delivery, a re-sent
delivery that started something). Everything stays on 127.0.0.1.

Run: ``.venv/bin/python bench/pipeline.py [--runs 100] [--resend 10]``.
"""

from __future__ import annotations

import argparse
import html
import http.client
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

WORKFLOW = "bench_pipeline"
DEFINITIONS = f"""
workflows:
  - plan_id: {WORKFLOW}
    name: P6 benchmark - a webhook, one approval
    triggers: [{{type: webhook}}]
    approvers: [approver@example.com]
    memory: false
    inputs_schema:
      properties: {{n: {{type: integer}}}}
      required: [n]
    steps:
      - {{step_id: prepare, kind: transform, transform: {{doubled: "n * 2"}}}}
      - step_id: review
        kind: approval
        depends_on: [prepare]
        approval: {{title: "Approve item {{{{ n }}}}", timeout_seconds: 3600}}
        branches: {{approved: accept, rejected: decline}}
      - {{step_id: accept, kind: transform, transform: {{outcome: "'accepted'"}}}}
      - {{step_id: decline, kind: transform, transform: {{outcome: "'declined'"}}}}
"""

DEADLINE_SECONDS = 170.0
"""Every wait shares this budget, so the benchmark ends within about three minutes."""


def _request(
    url: str, method: str = "GET", body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=120)
    try:
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        connection.request(method, target, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _wait(what: str, probe: Callable[[], bool], deadline: float) -> bool:
    while time.monotonic() < deadline:
        if probe():
            return True
        time.sleep(0.5)
    print(f"  gave up waiting for {what}", file=sys.stderr)
    return False


def _percentiles(values: list[float]) -> str:
    if not values:
        return "n/a"
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms"


def _approve(link: str) -> tuple[int, float]:
    status, page = _request(link)
    nonce = re.search(rb'name="nonce" value="([^"]*)"', page)
    if status != 200 or nonce is None:
        return status, time.time()
    form = urlencode(
        {"nonce": html.unescape(nonce.group(1).decode()), "decision": "approved"}
    ).encode()
    clicked = time.time()
    status, _ = _request(link, "POST", form, {"Content-Type": "application/x-www-form-urlencoded"})
    return status, clicked


def _explain(container: Any, run: Any, approval_id: str | None) -> None:
    """Why a run did not end: its record, its approval's audit and its last timeline events."""
    print(
        f"  not ended: {run.run_id} status={run.status.value} segment={run.segment} "
        f"error={run.error}",
        file=sys.stderr,
    )
    if approval_id:
        approval = container.approvals.get(approval_id)
        trail = [(e.action, e.outcome) for e in container.approvals.audit(approval_id)]
        status = approval.status.value if approval else None
        print(f"    approval {approval_id}: {status}, audit {trail}", file=sys.stderr)
    for event in container.runs.get_timeline(run.run_id)[-4:]:
        step = event.step_id or ""
        print(f"    {event.at:%H:%M:%S.%f} {event.type.value} {step}", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--resend", type=int, default=10)
    args = parser.parse_args()

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _support import fake_aws_environment

    fake_aws_environment()
    from standardwebhooks import Webhook

    from langorch.app.container import Container
    from langorch.app.trigger_sync import register_and_sync
    from langorch.domain.runs import TimelineEventType
    from langorch.local.stack import free_port, start_local_stack

    started = time.monotonic()
    deadline = started + DEADLINE_SECONDS
    home = Path(tempfile.mkdtemp(prefix="langorch-bench-")) / ".langorch"
    stack = start_local_stack(home=home, port=free_port(), examples=None)
    try:
        settings = stack.settings
        container = Container(settings)
        definitions = home / "bench.yaml"
        definitions.write_text(DEFINITIONS)
        register_and_sync([definitions], container)
        secret = container.secrets.get_json(settings.webhook_secret_prefix + WORKFLOW)["current"]
        hook = f"{settings.public_base_url}/hooks/{WORKFLOW}"
        print(f"stack ready in {time.monotonic() - started:.1f} s; gateway {hook}")

        signer = Webhook(secret)

        def deliver(n: int) -> tuple[int, str | None, float]:
            # Signed as any Standard Webhooks sender signs, with the official library.
            payload = json.dumps({"n": n})
            body = payload.encode()
            now = datetime.now(UTC)
            headers = {
                "webhook-id": f"bench-{n}",
                "webhook-timestamp": str(int(now.timestamp())),
                "webhook-signature": signer.sign(f"bench-{n}", now, payload),
            }
            sent = time.time()
            status, answer = _request(
                hook, "POST", body, {**headers, "Content-Type": "application/json"}
            )
            run_id = json.loads(answer).get("run_id") if status == 202 else None
            return status, run_id, sent

        # 1. Fire every delivery at once.
        fired = time.monotonic()
        with ThreadPoolExecutor(max_workers=args.runs) as pool:
            answers = list(pool.map(deliver, range(args.runs)))
        accepted_in = time.monotonic() - fired
        statuses = [s for s, _, _ in answers]
        run_ids = {r for _, r, _ in answers if r}
        sent_at = {r: t for _, r, t in answers if r}
        print(
            f"{args.runs} deliveries answered in {accepted_in:.1f} s: "
            f"{statuses.count(202)} x 202, others {sorted(set(statuses) - {202}) or 'none'}"
        )

        # 2. Every run parks on its approval; each email's link is in the outbox.
        outbox = Path(settings.outbox_dir or "")

        def links() -> dict[str, str]:
            found = {}
            for path in outbox.glob("*.json"):
                message = json.loads(path.read_text())
                found[message["approval_id"]] = message["link"]
            return found

        _wait(f"{len(run_ids)} approval emails", lambda: len(links()) >= len(run_ids), deadline)
        emails = links()
        print(f"{len(emails)} approval emails in the outbox")

        # 3. Approve them all at once, through the page's form.
        with ThreadPoolExecutor(max_workers=max(1, len(emails))) as pool:
            clicks = list(pool.map(_approve, emails.values()))
        click_at = {aid: t for aid, (_, t) in zip(emails, clicks, strict=True)}
        print(
            f"{len(clicks)} approvals posted: {sum(1 for s, _ in clicks if s == 200)} answered 200"
        )
        for approval_id, (status, _) in zip(emails, clicks, strict=True):
            if status != 200:
                print(f"  approval {approval_id} answered {status}", file=sys.stderr)

        # 4. Every run ends.
        def ended() -> bool:
            return all(container.runs.get_run(r).is_terminal for r in run_ids)

        _wait("every run to end", ended, deadline)
        finished_at = time.monotonic()

        # 5. Re-send some deliveries (same delivery ids): nothing new may start.
        with ThreadPoolExecutor(max_workers=max(1, args.resend)) as pool:
            resent = list(pool.map(deliver, range(args.resend)))
        resent_new = [r for _, r, _ in resent if r and r not in run_ids]

        # Figures.
        runs = {r: container.runs.get_run(r) for r in run_ids}
        stored = container.runs.list_runs(workflow_id=WORKFLOW, limit=1000)
        first_step: list[float] = []
        resume: list[float] = []
        approval_of: dict[str, str] = {}
        for approval in container.approvals.list(limit=1000):
            approval_of[approval.run_id] = approval.approval_id
        for run_id in run_ids:
            events = container.runs.get_timeline(run_id)
            steps = [e.at for e in events if e.type == TimelineEventType.step_started]
            if steps:
                first_step.append(steps[0].timestamp() - sent_at[run_id])
            clicked = click_at.get(approval_of.get(run_id, ""))
            if clicked is not None:
                later: list[datetime] = [
                    e.at
                    for e in events
                    if e.type == TimelineEventType.segment_started and e.at.timestamp() >= clicked
                ]
                if later:
                    resume.append(min(later).timestamp() - clicked)
        executions = container.client("stepfunctions").list_executions(
            stateMachineArn=settings.state_machine_arn, maxResults=1000
        )["executions"]
        per_run: dict[str, int] = {}
        for execution in executions:
            per_run[execution["name"]] = per_run.get(execution["name"], 0) + 1
        succeeded = sum(1 for r in runs.values() if r.status.value == "succeeded")
        # A delivery not answered 202 is lost to its sender, whatever was stored.
        lost = [r for r, run in runs.items() if not run.is_terminal]
        lost += [f"delivery {n}" for n, (s, _, _) in enumerate(answers) if s != 202]
        lost += [r.run_id for r in stored if r.run_id not in runs and not r.is_terminal]
        doubled = (
            len(stored) > args.runs
            or len(run_ids) < statuses.count(202)
            or any(count > 1 for count in per_run.values())
            or bool(resent_new)
        )
        elapsed = finished_at - fired
        for run_id in sorted(r for r, run in runs.items() if not run.is_terminal):
            _explain(container, runs[run_id], approval_of.get(run_id))
        print()
        print(f"P6 local pipeline, {args.runs} webhook runs with one approval each")
        print(f"  runs started          {len(run_ids)} (stored for the workflow: {len(stored)})")
        print(f"  runs succeeded        {succeeded}")
        print(
            f"  runs per minute       {len(run_ids) / elapsed * 60:.1f}"
            f" (first delivery to last end, {elapsed:.1f} s)"
        )
        print(f"  trigger -> 1st step   {_percentiles(first_step)} ({len(first_step)} runs)")
        print(f"  click -> resume       {_percentiles(resume)} ({len(resume)} runs)")
        print(
            f"  executions            {len(executions)}"
            f" ({max(per_run.values(), default=0)} max per run)"
        )
        print(
            f"  re-sent deliveries    {len(resent)}:"
            f" {sum(1 for s, _, _ in resent if s == 202)} x 202, {len(resent_new)} new runs"
        )
        print(
            "  lost                  "
            + ("NONE" if not lost else f"{len(lost)} (not accepted or not finished)")
        )
        print(f"  doubled               {'NONE' if not doubled else 'YES'}")
        print(f"  total                 {time.monotonic() - started:.1f} s")
        return 0 if not lost and not doubled and succeeded == args.runs else 1
    finally:
        stack.stop()
        os.environ.pop("MOTO_PORT", None)


if __name__ == "__main__":
    sys.exit(main())
