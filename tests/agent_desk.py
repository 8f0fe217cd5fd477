"""A real HTTP agent for tests, speaking langorch's agent protocol (README, "CKP procedures").

Each action answers ``{"status": "ok", "output": {"did": action, **params}}``, except ``fail``
(an error result) and ``echo_header`` (the Authorization header it got). Every request is kept —
path, headers, body — so a test can say how many calls were made and what each carried.
``status`` makes the next answers an HTTP error (503, 400, …).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.support.loopback import JsonHandler, serving


@dataclass
class AgentDesk:
    """The agent's state: what it was asked, and how it answers."""

    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200

    def actions(self) -> list[list[str]]:
        """The actions of each call, in arrival order."""
        return [[s["action"] for s in r["body"]["steps"]] for r in self.requests]

    def answer(self, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        results = []
        for step in body.get("steps") or []:
            action, params = step.get("action"), step.get("params") or {}
            if action == "fail":
                results.append({"status": "error", "error": f"could not {params.get('what')}"})
            elif action == "echo_header":
                results.append({"status": "ok", "output": headers.get("authorization")})
            else:
                results.append({"status": "ok", "output": {"did": action, **params}})
        return {"results": results}


@contextmanager
def agent_desk() -> Iterator[AgentDesk]:
    """An agent on a free loopback port for the duration of the block."""
    desk = AgentDesk()

    class Handler(JsonHandler):
        def do_POST(self) -> None:
            body = json.loads(self.body())
            headers = {k.lower(): v for k, v in self.headers.items()}
            desk.requests.append({"path": self.path, "headers": headers, "body": body})
            status = desk.status
            answer = desk.answer(body, headers) if status == 200 else {"error": "unavailable"}
            self.send_json(status, answer)

    with serving(Handler) as url:
        desk.url = f"{url}/agent"
        yield desk
