"""A fake of Slack's Web API on loopback, for ``langorch dev`` and the tests.

``slack_sdk``'s ``WebClient`` is pointed at it (``Settings.slack_base_url``); it answers the
calls langorch makes (``chat.postMessage``, ``chat.update``, ``chat.postEphemeral``,
``users.info``, ``users.lookupByEmail``, ``views.open``, ``views.update``), keeps every message
and modal as Slack would show it, and records each call. :func:`signed_interaction` builds the
request Slack sends when someone presses a button, signed with the app's signing secret, so a
test (or a person at ``langorch dev``) can press it by posting it to the local gateway's
``POST /slack/interactions``; :func:`signed_form_opening` and :func:`signed_form_submission`
do the same for the modal.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlencode

MAX_BODY_BYTES = 1024 * 1024


@dataclass
class FakeSlack:
    """The workspace's state: its people, its messages, and every call received.

    Args:
        users: Slack user id -> email (what ``users.info`` shows).
        open_workspace: everyone is a member: an address ``users.lookupByEmail`` does not know
            becomes a user (``langorch dev``, where approvers are whoever a workflow names).
    """

    users: dict[str, str] = field(default_factory=dict)
    open_workspace: bool = False
    messages: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    """(conversation, ts) -> the message as it reads now (``text``, ``blocks``)."""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    ephemeral: list[dict[str, Any]] = field(default_factory=list)
    views: dict[str, dict[str, Any]] = field(default_factory=dict)
    """view id -> the modal as it reads now (``views.open``, ``views.update``)."""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ts: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """What Slack answers ``method`` with (``{"ok": false, "error": …}`` as Slack does)."""
        with self._lock:
            self.calls.append((method, params))
            if method == "chat.postMessage":
                where = str(params.get("channel", ""))
                # A DM to a user id lands in the bot's DM channel with them.
                conversation = "D" + where[1:] if where.startswith("U") else where
                ts = f"1700000000.{next(self._ts):06d}"
                self.messages[conversation, ts] = _shown(params)
                return {"ok": True, "channel": conversation, "ts": ts}
            if method == "chat.update":
                key = (str(params.get("channel")), str(params.get("ts")))
                if key not in self.messages:
                    return {"ok": False, "error": "message_not_found"}
                self.messages[key] = _shown(params)
                return {"ok": True, "channel": key[0], "ts": key[1]}
            if method == "chat.postEphemeral":
                self.ephemeral.append(dict(params))
                return {"ok": True, "message_ts": "1700000000.999999"}
            if method == "users.info":
                email = self.users.get(str(params.get("user")))
                if email is None:
                    return {"ok": False, "error": "user_not_found"}
                return {"ok": True, "user": {"id": params["user"], "profile": {"email": email}}}
            if method == "users.lookupByEmail":
                wanted = str(params.get("email", "")).lower()
                found = next((u for u, e in self.users.items() if e.lower() == wanted), None)
                if found is None and self.open_workspace and wanted:
                    found = f"U{len(self.users) + 1:08d}"
                    self.users[found] = wanted
                if found is None:
                    return {"ok": False, "error": "users_not_found"}
                return {"ok": True, "user": {"id": found}}
            if method == "views.open":
                view_id = f"V{next(self._ts):08d}"
                self.views[view_id] = _view(params)
                return {"ok": True, "view": {"id": view_id, **self.views[view_id]}}
            if method == "views.update":
                view_id = str(params.get("view_id"))
                if view_id not in self.views:
                    return {"ok": False, "error": "not_found"}
                self.views[view_id] = _view(params)
                return {"ok": True, "view": {"id": view_id, **self.views[view_id]}}
            return {"ok": False, "error": "unknown_method"}

    def called(self, method: str) -> list[dict[str, Any]]:
        """The parameters of every call of ``method``, oldest first."""
        with self._lock:
            return [p for m, p in self.calls if m == method]


def _view(params: dict[str, Any]) -> dict[str, Any]:
    view = params.get("view")
    return dict(json.loads(view) if isinstance(view, str) else view or {})


def _shown(params: dict[str, Any]) -> dict[str, Any]:
    blocks = params.get("blocks")
    if isinstance(blocks, str):
        blocks = json.loads(blocks)
    return {"text": params.get("text", ""), "blocks": blocks or []}


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        self._answer(path, dict(parse_qsl(query)))

    def do_POST(self) -> None:
        length = min(int(self.headers.get("Content-Length") or 0), MAX_BODY_BYTES)
        raw = self.rfile.read(length)
        kind = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        path, _, query = self.path.partition("?")
        params: dict[str, Any] = dict(parse_qsl(query))
        if kind == "application/json":
            params.update(json.loads(raw or b"{}"))
        else:
            params.update(parse_qsl(raw.decode()))
        self._answer(path, params)

    def _answer(self, path: str, params: dict[str, Any]) -> None:
        method = path.strip("/").rsplit("/", 1)[-1]
        body = json.dumps(self.server.slack.answer(method, params)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the calls are recorded, not printed."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, slack: FakeSlack, port: int) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.slack = slack


@dataclass
class RunningFakeSlack:
    """A fake Slack serving on loopback (``base_url`` is what ``WebClient`` takes)."""

    slack: FakeSlack
    server: _Server
    thread: threading.Thread

    @property
    def base_url(self) -> str:
        """The Web API's URL (``…/api/``)."""
        return f"http://127.0.0.1:{self.server.server_address[1]}/api/"

    def stop(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def serve(slack: FakeSlack | None = None, *, port: int = 0) -> RunningFakeSlack:
    """Serve a fake Slack on 127.0.0.1 (``port`` 0: any free port) in a daemon thread."""
    fake = slack or FakeSlack()
    server = _Server(fake, port)
    thread = threading.Thread(target=server.serve_forever, name="fake-slack", daemon=True)
    thread.start()
    return RunningFakeSlack(fake, server, thread)


def signed_interaction(
    signing_secret: str,
    *,
    user_id: str,
    approval_id: str,
    decision: str,
    conversation: str,
    message_ts: str,
    timestamp: int,
    action_ts: str = "1700000001.000001",
) -> tuple[bytes, dict[str, str]]:
    """The request Slack sends when ``user_id`` presses Approve or Reject: body and headers,
    signed as Slack signs (``v0=`` HMAC-SHA256 of ``v0:<timestamp>:<body>``)."""
    action_id = {"approved": "langorch.approve", "rejected": "langorch.reject"}[decision]
    payload = {
        "type": "block_actions",
        "user": {"id": user_id},
        "container": {"type": "message", "channel_id": conversation, "message_ts": message_ts},
        "channel": {"id": conversation},
        "actions": [
            {
                "action_id": action_id,
                "block_id": "langorch-approval",
                "value": approval_id,
                "type": "button",
                "action_ts": action_ts,
            }
        ],
    }
    body = urlencode({"payload": json.dumps(payload)}).encode()
    return body, signed_headers(signing_secret, body, timestamp)


def signed_headers(signing_secret: str, body: bytes, timestamp: int) -> dict[str, str]:
    """The headers Slack sends with ``body``: its timestamp and ``v0=`` signature (HMAC-SHA256
    of ``v0:<timestamp>:<body>`` with the signing secret)."""
    base = f"v0:{timestamp}:".encode() + body
    signature = "v0=" + hmac.new(signing_secret.encode(), base, hashlib.sha256).hexdigest()
    return {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": str(timestamp),
        "X-Slack-Signature": signature,
    }


def signed_form_opening(
    signing_secret: str,
    *,
    user_id: str,
    approval_id: str,
    conversation: str,
    message_ts: str,
    timestamp: int,
    trigger_id: str = "1700000001.trigger",
) -> tuple[bytes, dict[str, str]]:
    """The request Slack sends when ``user_id`` presses "Comment or edit…"."""
    payload = {
        "type": "block_actions",
        "user": {"id": user_id},
        "trigger_id": trigger_id,
        "container": {"type": "message", "channel_id": conversation, "message_ts": message_ts},
        "actions": [
            {"action_id": "langorch.review", "value": approval_id, "type": "button"},
        ],
    }
    body = urlencode({"payload": json.dumps(payload)}).encode()
    return body, signed_headers(signing_secret, body, timestamp)


def signed_form_submission(
    signing_secret: str,
    view: dict[str, Any],
    *,
    user_id: str,
    values: dict[str, str],
    timestamp: int,
) -> tuple[bytes, dict[str, str]]:
    """The request Slack sends when ``user_id`` submits the modal ``view`` (as it reads in
    :attr:`FakeSlack.views`) with ``values`` typed or picked, by block id (``decision``,
    ``comment``, ``edit.<key>``); inputs not in ``values`` keep their initial value."""
    state: dict[str, dict[str, Any]] = {}
    for block in view.get("blocks", []):
        if block.get("type") != "input":
            continue
        element = block["element"]
        block_id, action_id = block["block_id"], element["action_id"]
        if element["type"] == "users_select":
            picked = values.get(block_id)
            state[block_id] = {action_id: {"type": "users_select", "selected_user": picked}}
        elif element["type"] == "radio_buttons":
            picked = values.get(block_id, (element.get("initial_option") or {}).get("value"))
            option = {"value": picked} if picked is not None else None
            state[block_id] = {action_id: {"type": "radio_buttons", "selected_option": option}}
        else:
            typed = values.get(block_id, element.get("initial_value"))
            state[block_id] = {action_id: {"type": "plain_text_input", "value": typed}}
    payload = {
        "type": "view_submission",
        "user": {"id": user_id},
        "view": {
            "callback_id": view.get("callback_id"),
            "private_metadata": view.get("private_metadata", ""),
            "state": {"values": state},
        },
    }
    body = urlencode({"payload": json.dumps(payload)}).encode()
    return body, signed_headers(signing_secret, body, timestamp)
