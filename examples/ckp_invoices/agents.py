"""Stand-in agents for the ``ckp_invoices`` example: an AP mailbox, a vendor portal, an ERP desktop
client and a ledger database, each an HTTP agent speaking langorch's agent protocol (README,
"CKP procedures"): ``POST {"steps": [{"step_id", "action", "params"}, …]}`` answered with one
result per step, ``{"results": [{"status": "ok", "output": …} | {"status": "error", …}]}``.

Deterministic: the mailbox holds three invoices (twelve when the mailbox's name contains
``busy``); each answer for an ``Idempotency-Key`` is kept, so a repeated call gets the same
answer and changes nothing twice. Every request needs ``Authorization: Bearer <token>``; the
ERP refuses a login whose password is not the one the example's secret holds.
"""

from __future__ import annotations

import hmac
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

VENDORS = {
    "V-100": {"name": "Paper & Co", "email": "billing@paper.example"},
    "V-200": {"name": "Cloud Hosting Ltd", "email": "ar@cloud.example"},
    "V-300": {"name": "Office Coffee", "email": "invoices@coffee.example"},
}


def _invoices(mailbox: str) -> str:
    count = 12 if "busy" in mailbox else 3
    rows = ["invoice_id,vendor_id,amount,currency"]
    for i in range(count):
        vendor = sorted(VENDORS)[i % len(VENDORS)]
        rows.append(f"INV-{1001 + i},{vendor},{120 + 35 * i}.50,EUR")
    return "\n".join(rows) + "\n"


class Agents:
    """The stand-ins' state: what each performed, by idempotency key."""

    def __init__(self, erp_password: str) -> None:
        self._password = erp_password
        self._answers: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._pages: dict[str, str] = {}
        self.sent: list[dict[str, Any]] = []
        self.ledger: list[dict[str, Any]] = []
        self.posted: list[dict[str, Any]] = []
        self.calls: list[tuple[str, list[str]]] = []
        """(agent, [action, …]) per call, in arrival order."""

    def handle(self, agent: str, request: dict[str, Any], key: str | None) -> dict[str, Any]:
        with self._lock:
            if key and key in self._answers:
                return self._answers[key]
            steps = request.get("steps") or []
            self.calls.append((agent, [s.get("action") for s in steps]))
            handler = getattr(self, f"_{agent}")
            answer = {"results": handler(steps, str(request.get("run_id") or ""))}
            if key:
                self._answers[key] = answer
            return answer

    def _email(self, steps: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
        results = []
        for step in steps:
            params, action = step.get("params") or {}, step.get("action")
            if action == "search_email":
                mailbox = str(params.get("folder") or "inbox")
                message = {
                    "id": f"msg-{mailbox}",
                    "subject": "Invoices",
                    "attachments": ["invoices.csv"],
                }
                results.append(_ok([message]))
            elif action == "download_attachment":
                mailbox = str(params.get("message_id") or "msg-inbox").removeprefix("msg-")
                results.append(_ok(_invoices(mailbox)))
            else:
                mail = {k: params.get(k) for k in ("to", "subject", "body")}
                self.sent.append(mail)
                results.append(_ok({"message_id": f"out-{len(self.sent)}"}))
        return results

    def _web(self, steps: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
        results = []
        for step in steps:
            params = step.get("params") or {}
            if step.get("action") == "navigate":
                # One browser context per run: the page stays open between calls.
                self._pages[run_id] = page = str(params.get("url") or "")
                results.append(_ok({"url": page, "status": 200}))
            else:
                page = self._pages.get(run_id, "")
                vendor_id = page.rstrip("/").rsplit("/", 1)[-1]
                vendor = VENDORS.get(vendor_id)
                results.append(
                    _ok({"vendor_id": vendor_id, **vendor})
                    if vendor
                    else _error(f"no vendor {vendor_id} on the portal")
                )
        return results

    def _desktop(self, steps: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
        results: list[dict[str, Any]] = []
        form: dict[str, Any] = {}
        for step in steps:
            params, action = step.get("params") or {}, step.get("action")
            if action == "launch_app":
                form = {}
                results.append(_ok({"window": f"{params.get('target')} - main"}))
            elif action == "type":
                form[str(params.get("target"))] = params.get("value")
                results.append(_ok({"typed": str(params.get("target"))}))
            elif form.get("password") is not None and not hmac.compare_digest(
                str(form["password"]), self._password
            ):
                results.append(_error("ERP login refused: wrong password"))
            else:
                document = {"document_no": f"ERP-{len(self.posted) + 5001}", **_public(form)}
                self.posted.append(document)
                results.append(_ok(document))
        return results

    def _database(self, steps: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
        results = []
        for step in steps:
            row = dict((step.get("params") or {}).get("parameters") or {})
            self.ledger.append(row)
            results.append(_ok({"rows_affected": 1, "ledger_id": len(self.ledger)}))
        return results


def _public(form: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in form.items() if k != "password"}


def _ok(output: Any) -> dict[str, Any]:
    return {"status": "ok", "output": output}


def _error(message: str) -> dict[str, Any]:
    return {"status": "error", "error": message}


def _handler(agents: Agents, token: str) -> type[BaseHTTPRequestHandler]:
    expected = f"Bearer {token}".encode()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            given = (self.headers.get("Authorization") or "").encode()
            if not hmac.compare_digest(given, expected):
                return self._answer(401, {"error": "unauthorized"})
            agent = self.path.strip("/").split("/")[0]
            if agent not in ("email", "web", "desktop", "database"):
                return self._answer(404, {"error": f"no agent at {self.path}"})
            length = int(self.headers.get("Content-Length") or 0)
            try:
                request = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError:
                return self._answer(400, {"error": "not JSON"})
            key = self.headers.get("Idempotency-Key")
            return self._answer(200, agents.handle(agent, request, key))

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return  # quiet: the run's timeline says what each agent did

    return Handler


class Running:
    """The stand-ins serving in a thread of this process."""

    def __init__(self, agents: Agents, token: str, port: int = 0) -> None:
        self.agents = agents
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler(agents, token))
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.stop: Callable[[], None] = self._stop

    def _stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def serve(token: str, secrets: dict[str, str] | None = None, port: int = 0) -> Running:
    """Start the stand-ins on 127.0.0.1 (``port`` 0: a free one) in a background thread.

    Args:
        token: The bearer token every request must carry.
        secrets: The example's secrets by id (the ERP password).
        port: Where to listen.
    """
    password = (secrets or {}).get("langorch/ckp_invoices/erp", "")
    return Running(Agents(password), token, port)
