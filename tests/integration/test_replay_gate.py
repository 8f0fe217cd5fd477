"""The replay gate (issue 32's done-means): 20 recorded invoice_batch runs replayed on a
candidate with a higher approval threshold list exactly the runs whose approval routing changed,
while no request reaches the ERP (counted at the server) and no email is sent.

The invoice_batch here posts each invoice to an ERP with an ``http`` step (the example's
``post_invoice`` transform, made a real side effect), so the count at the ERP says whether the
replay made any request.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from langorch.adapters.http import http_call
from langorch.app.runs import StartRun, drive, start_run
from langorch.app.workflow_tests import answer_for
from langorch.composition.embedded import EmbeddedContainer
from langorch.config import Settings
from langorch.domain.replay import FailOn
from langorch.domain.workflow_tests import Decision
from langorch.local.replay import replay, select_runs
from tests.integration.conftest import register_text

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "invoice_batch" / "definitions.yaml"
ERP_POST = """      - step_id: post_invoice
        kind: http
        http: {method: POST, url: "{{ erp_url }}/invoices", body: "{{ invoice }}",
               response_key: erp}
      - step_id: posted
        kind: transform
        depends_on: [post_invoice]
        transform:
          invoice_outcome: "{'id': invoice.id, 'amount': invoice.amount, 'status': 'posted'}"
"""
AMOUNTS = [50, 900, 1200, 3000, 2400, 15000, 700, 1800, 5000, 2600]


class _Erp(BaseHTTPRequestHandler):
    requests = 0
    lock = threading.Lock()

    def do_POST(self) -> None:
        with _Erp.lock:
            _Erp.requests += 1
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"posted": True}).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def erp() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Erp)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _workflow(erp_url: str, *, threshold_rule: str) -> str:
    text = EXAMPLE.read_text()
    start = text.index("      - step_id: post_invoice")
    end = text.index("      - step_id: reject_invoice")
    text = text[:start] + ERP_POST + text[end:]
    text = text.replace(
        "body: [check_amount, approve_invoice, finance_approval, post_invoice, reject_invoice]",
        "body: [check_amount, approve_invoice, finance_approval, post_invoice, posted, "
        "reject_invoice]",
    )
    text = text.replace('{when: "invoice.amount > threshold", ', f"{{when: {threshold_rule!r}, ")
    return text.replace(
        "        threshold: {type: number, default: 1000}",
        f"        threshold: {{type: number, default: 1000}}\n"
        f"        erp_url: {{type: string, default: {erp_url!r}}}",
    )


def _everyone_approves(request: dict[str, Any]) -> dict[str, Any]:
    return answer_for(request, Decision(decision="approved"))


def _batch(i: int) -> list[dict[str, Any]]:
    """Run i's invoices: two of the amounts above, so some runs hold one in (1000, 2500]."""
    return [
        {"id": f"R{i}-{n}", "vendor": "Acme", "amount": AMOUNTS[(i * 3 + n * 7) % len(AMOUNTS)]}
        for n in range(2)
    ]


def test_replay_lists_exactly_the_runs_whose_approval_routing_changed(
    tmp_path: Path, erp: str
) -> None:
    # Given 20 recorded runs of invoice_batch (each invoice posted to the ERP, approvals
    # approved), on a stack's stores
    source = EmbeddedContainer(
        Settings(region="us-east-1", local_home=str(tmp_path)), http=http_call
    )
    source.ensure_resources()
    from langorch.app.definitions import seed_builtins

    seed_builtins(source.definitions)
    register_text(source, _workflow(erp, threshold_rule="invoice.amount > threshold"))  # type: ignore[arg-type]
    recorded: dict[str, list[dict[str, Any]]] = {}
    for i in range(20):
        run, _ = start_run(StartRun("invoice_batch", input={"invoices": _batch(i)}), source)
        assert drive(run.run_id, source, on_approval=_everyone_approves).status == "succeeded"
        recorded[run.run_id] = _batch(i)
    assert _Erp.requests == 40
    # ... and a candidate, version 2, that asks a person only above 2,500
    register_text(source, _workflow(erp, threshold_rule="invoice.amount > 2500"))  # type: ignore[arg-type]
    assert source.definitions.get_workflow("invoice_batch").version == 2  # type: ignore[union-attr]
    _Erp.requests = 0
    emails_before = list(Path(tmp_path).rglob("*.eml"))

    # When the 20 runs are replayed on version 2
    runs = select_runs(source, "invoice_batch", 2, limit=50)
    report = replay(source, "invoice_batch", 2, runs, fail_on=FailOn.parse("approvals"))

    # Then the report lists exactly the runs with an invoice in (1000, 2500]: asked before, not now
    expected = {
        run_id
        for run_id, invoices in recorded.items()
        if any(1000 < inv["amount"] <= 2500 for inv in invoices)
    }
    assert 0 < len(expected) < 20
    changed = {r.run_id for r in report.runs if r.routing_changed}
    assert len(report.runs) == 20 and changed == expected
    assert set(report.failures()) == expected and not report.passed
    # ... each with the approval no longer asked
    for run in report.runs:
        if run.routing_changed:
            assert all(line.startswith("- approve_invoice") for line in run.routing_diff)
    # ... every run still ends as recorded, its ERP calls served from the records
    assert all(r.status == "succeeded" and not r.new_failure for r in report.runs)
    assert all(not r.unrecorded for r in report.runs)
    # ... with no request reaching the ERP, and no email sent
    assert _Erp.requests == 0
    assert report.emails == 0 and list(Path(tmp_path).rglob("*.eml")) == emails_before
