"""Calls to registered agents and MCP tools for CKP steps (the engine's ``ActionDispatch``).

**HTTP agents.** One ``POST`` to the agent's URL per call, JSON both ways::

    → {"run_id", "procedure_id", "procedure_version", "node_id", "agent", "mode",
       "steps": [{"step_id", "action", "params", "idempotency_key", "timeout_ms"?}, …]}
    ← {"results": [{"status": "ok", "output": …} | {"status": "error", "error": "…"}, …]}

one result per step, in order (an agent given one step may answer the bare result). Headers: the
registration's (values read from the secrets store here, never logged), ``Content-Type``, and
``Idempotency-Key`` — the same for every attempt of the call (run, node, visit, call index), so
an agent can recognise a call repeated after a crash. 429 and 5xx answers are worth another
attempt; other 4xx are not.

**MCP agents.** Each step calls the agent's MCP tool named like its action, with the step's
parameters as arguments, in one session per call.

Registrations are read once per segment and name (a segment that runs a node ten times reads its
agent once); a registration changed meanwhile is seen by the next segment.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, Protocol

from langorch.domain.agents import AgentCallError, AgentRegistration
from langorch.domain.ckp.binding import Catalog
from langorch.domain.errors import SecretNotFoundError
from langorch.domain.tool_servers import SECRET_VALUE_KEY, ToolServer, ToolServerError

if TYPE_CHECKING:
    from langorch.app.ports import AgentStore, SecretsStore, ToolConnector, ToolServerStore
    from langorch.engine.context import HttpCaller


class AgentCallDeps(Protocol):
    """What agent and tool calls need."""

    @property
    def agents(self) -> AgentStore: ...
    @property
    def tool_servers(self) -> ToolServerStore: ...
    @property
    def secrets(self) -> SecretsStore: ...
    @property
    def tool_connector(self) -> ToolConnector: ...
    @property
    def http(self) -> HttpCaller | None: ...


class AgentCalls:
    """The registered agents and tools of one segment, and calls to them.

    Args:
        agents: The agent registry.
        tool_servers: The tool registry.
        secrets: Where header values are read.
        connect: Opens MCP sessions.
        http: Makes HTTP requests.
    """

    def __init__(
        self,
        *,
        agents: AgentStore,
        tool_servers: ToolServerStore,
        secrets: SecretsStore,
        connect: ToolConnector,
        http: HttpCaller | None,
    ) -> None:
        self._agents = agents
        self._servers = tool_servers
        self._secrets = secrets
        self._connect = connect
        self._http = http
        self._known: dict[str, AgentRegistration | None] = {}
        self._tools: dict[str, ToolServer | None] = {}

    @classmethod
    def of(cls, deps: AgentCallDeps) -> AgentCalls:
        """Wired from the deployment's ports."""
        return cls(
            agents=deps.agents,
            tool_servers=deps.tool_servers,
            secrets=deps.secrets,
            connect=deps.tool_connector,
            http=deps.http,
        )

    def catalog(self, agent: str | None = None, servers: frozenset[str] = frozenset()) -> Catalog:
        """The registrations the binding rules need for one node: its agent and the tool
        servers its ``server.tool`` actions name (each read once per segment)."""
        agents: dict[str, AgentRegistration] = {}
        if agent:
            if agent not in self._known:
                self._known[agent] = self._agents.get(agent)
            found = self._known[agent]
            if found is not None:
                agents[agent] = found
        found_servers: dict[str, ToolServer] = {}
        for server in servers:
            if server not in self._tools:
                self._tools[server] = self._servers.get(server)
            registration = self._tools[server]
            if registration is not None:
                found_servers[server] = registration
        return Catalog(
            agents=agents,
            tools=frozenset(found_servers),
            servers=found_servers,
        )

    async def call_agent(
        self,
        agent: AgentRegistration,
        request: dict[str, Any],
        *,
        idempotency_key: str,
        timeout: float,
    ) -> list[dict[str, Any]]:
        """One call; one result per step of ``request["steps"]``.

        Raises:
            AgentCallError: no answer, an error status, or an answer of the wrong shape.
        """
        headers = await asyncio.to_thread(self._headers, agent)
        if agent.transport == "mcp":
            return await self._mcp(agent, request["steps"], headers, timeout)
        if self._http is None:
            raise AgentCallError(f"agent {agent.name}: no HTTP client here", retryable=False)
        headers["Idempotency-Key"] = idempotency_key
        status, body = await asyncio.to_thread(
            self._http, "POST", agent.url, headers=headers, body=request, timeout=timeout
        )
        if status >= 400:
            raise AgentCallError(
                f"agent {agent.name} answered HTTP {status}: {_short(body)}",
                retryable=status == 429 or status >= 500,
            )
        return _results(agent, body, len(request["steps"]))

    async def call_tool(
        self, server: str, tool: str, args: dict[str, Any], *, timeout: float
    ) -> tuple[Any, bool]:
        """Call ``tool`` of the registered tool server ``server``: ``(output, failed)``."""
        from langorch.app.step_tools import read_headers

        registration = await asyncio.to_thread(self._servers.get, server)
        if registration is None or not registration.allows(tool):
            raise ToolServerError(
                f"tool server {server!r} is not registered or does not allow {tool!r}"
            )
        headers = await asyncio.to_thread(read_headers, registration, self._secrets)
        connection = self._connect(server, registration.url, headers, call_timeout=timeout)
        try:
            text, failed = await connection.call(tool, args, timeout=timeout)
        finally:
            await connection.aclose()
        return _parsed(text), failed

    def _headers(self, agent: AgentRegistration) -> dict[str, str]:
        headers: dict[str, str] = {}
        for header, secret_id in agent.headers.items():
            try:
                value = self._secrets.get_json(secret_id).get(SECRET_VALUE_KEY)
            except SecretNotFoundError as exc:
                raise AgentCallError(
                    f"agent {agent.name}: header {header} needs secret {secret_id}, which does "
                    f"not exist; store it with `langorch secrets put {secret_id}`",
                    retryable=False,
                ) from exc
            if not isinstance(value, str):
                raise AgentCallError(
                    f'agent {agent.name}: secret {secret_id} has no string "value"',
                    retryable=False,
                )
            headers[header] = value
        return headers

    async def _mcp(
        self,
        agent: AgentRegistration,
        steps: list[dict[str, Any]],
        headers: dict[str, str],
        timeout: float,
    ) -> list[dict[str, Any]]:
        connection = self._connect(agent.name, agent.url, headers, call_timeout=timeout)
        results: list[dict[str, Any]] = []
        try:
            for step in steps:
                text, failed = await connection.call(
                    step["action"], step["params"], timeout=timeout
                )
                results.append(
                    {"status": "error", "error": text}
                    if failed
                    else {"status": "ok", "output": _parsed(text)}
                )
        finally:
            await connection.aclose()
        return results


class SecretValues:
    """What a run's steps may do with the secrets store: read a secret, nothing else (the
    engine's ``SecretReader``; the runner is granted no write)."""

    def __init__(self, store: SecretsStore) -> None:
        self._store = store

    def get_json(self, name: str, *, fresh: bool = False) -> dict[str, Any]:
        """The secret's JSON value (``SecretNotFoundError`` when it does not exist)."""
        return self._store.get_json(name, fresh=fresh)


def _results(agent: AgentRegistration, body: Any, count: int) -> list[dict[str, Any]]:
    results: list[Any]
    if isinstance(body, dict) and isinstance(body.get("results"), list):
        results = body["results"]
    elif count == 1 and isinstance(body, dict) and ("output" in body or "status" in body):
        results = [body]
    else:
        raise AgentCallError(
            f'agent {agent.name} answered {_short(body)}; an agent answers {{"results": '
            '[{"status": "ok", "output": …}, …]}, one per step',
            retryable=False,
        )
    if not all(isinstance(r, dict) for r in results):
        raise AgentCallError(f"agent {agent.name}: each result is an object", retryable=False)
    return [dict(r) for r in results]


def _parsed(text: Any) -> Any:
    if isinstance(text, str) and text.strip()[:1] in ("{", "["):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text
    return text


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 200 else text[:199] + "…"
