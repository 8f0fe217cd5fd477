"""A step's tools and recorded calls: what :class:`~langorch.engine.context.SideEffects` is.

For each attempt of an LLM step, :meth:`RecordedSideEffects.begin` opens a :class:`TaskRecorder`
(seed 001 §5) and, when the block lists ``tools_required``, a :class:`StepToolbox` binding the
built-in tools (:mod:`langorch.llm.builtin_tools`) and the registered MCP tools it names. The
MCP SDK is imported only when a step names a registered tool (the container's ``tool_connector``).

Every tool call is bounded (``tool_max_calls_per_step``, ``tool_call_timeout_seconds``), told to
the model as text when it fails or times out (the step goes on), recorded, put on the timeline
(tool, argument summary, duration, outcome, and what went wrong) and logged with the run and step
ids. Only the call's own timeout becomes text: a cancellation from outside (the step's timeout,
a segment being shut down) stops the step. Header secrets are read here and handed to the MCP
connection only; a server that cannot be reached or refuses them is connected to once more with
the registration and its secrets read afresh (past the secrets cache).

A call to a registered server carries an idempotency key and is recorded as started before it
is sent (:meth:`TaskRecorder.once_keyed`). One found started but never done after a crash is of
unknown outcome: it goes on the timeline as ``unknown``, then, as its registration says
(``on_unknown``), is sent again with the same key or fails the step with
:class:`ToolCallOutcomeUnknownError`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from langorch.app.tasks import SideEffectDeps, TaskRecorder, TaskStore
from langorch.domain.errors import SecretNotFoundError
from langorch.domain.tasks import fingerprint
from langorch.domain.tool_servers import (
    SECRET_VALUE_KEY,
    ToolCallOutcomeUnknownError,
    ToolServer,
    ToolServerError,
    ToolServerUnreachableError,
)
from langorch.llm.toolbox import ToolSpec, UnboundToolError

if TYPE_CHECKING:
    from langorch.app.ports import SecretsStore, ToolConnection, ToolConnector, ToolServerStore
    from langorch.engine.context import ToolGate

logger = logging.getLogger(__name__)

MAX_TOOL_OUTPUT_CHARS = 4_000
"""Tool output the model is told (and the record keeps); http_get alone may return 100 KB."""

ARGS_SUMMARY_CHARS = 200
"""What the timeline and logs show of a call's arguments."""

ERROR_SUMMARY_CHARS = 300
"""What the timeline and logs show of a failed call's error."""

Emit = Callable[[Any], None]
Runner = Callable[[dict[str, Any], str | None], Awaitable[tuple[str, str]]]
"""Runs one tool call (its arguments, its idempotency key): its text and outcome."""
T = TypeVar("T")


class RecordedSideEffects:
    """Opens each LLM step attempt's recorder and tools (the engine's ``SideEffects``).

    Args:
        run_id: The run.
        tasks: Where calls are recorded (``None``: in memory for the attempt only).
        tool_servers: Registered tools (``None``: only built-in tools bind).
        secrets: Where header secrets are read.
        max_calls: Tool calls a step may make.
        call_timeout: Seconds one tool call may take.
        allowed_urls: The server URLs this deployment may call (``None``: any).
        allowed_domains: The hosts ``http_get`` may fetch (``None``: any public host).
        connect: Opens a session with a registered server (``None``: only built-in tools).
    """

    def __init__(
        self,
        run_id: str,
        *,
        tasks: TaskStore | None,
        tool_servers: ToolServerStore | None,
        secrets: SecretsStore | None,
        max_calls: int,
        call_timeout: float,
        allowed_urls: Sequence[str] | None = None,
        connect: ToolConnector | None = None,
        allowed_domains: Sequence[str] | None = None,
    ) -> None:
        self._run_id = run_id
        self._allowed_domains = None if allowed_domains is None else tuple(allowed_domains)
        self._connect = connect
        self._allowed_urls = None if allowed_urls is None else frozenset(allowed_urls)
        self._tasks = tasks
        self._servers = tool_servers
        self._secrets = secrets
        self._max_calls = max_calls
        self._timeout = call_timeout

    @classmethod
    def of_run(cls, run_id: str, deps: SideEffectDeps) -> RecordedSideEffects:
        """The side effects of one run's segment, wired from the deployment's ports."""
        settings = deps.settings
        return cls(
            run_id,
            tasks=deps.tasks,
            tool_servers=deps.tool_servers,
            secrets=deps.secrets,
            max_calls=settings.tool_max_calls_per_step,
            call_timeout=settings.tool_call_timeout_seconds,
            allowed_urls=settings.tool_server_urls,
            connect=deps.tool_connector,
            allowed_domains=settings.http_allowed_domains,
        )

    def begin(
        self,
        *,
        step_id: str,
        visit: int,
        attempt: int,
        tools: list[str],
        emit: Emit,
        gate: ToolGate | None = None,
    ) -> StepAttempt:
        """The recorder (and toolbox, when ``tools``) of one attempt of one step; ``gate`` is
        asked before each tool call."""
        recorder = TaskRecorder(self._tasks, self._run_id, step_id, visit, attempt)
        toolbox = None
        if tools:
            toolbox = StepToolbox(
                list(dict.fromkeys(tools)),
                recorder=recorder,
                resolve=self._resolve,
                emit=emit,
                where={"run_id": self._run_id, "step_id": step_id, "attempt": attempt},
                max_calls=self._max_calls,
                call_timeout=self._timeout,
                gate=gate,
                allowed_domains=self._allowed_domains,
            )
        return StepAttempt(recorder, toolbox)

    def _resolve(self, name: str) -> tuple[ToolConnection, ToolServer] | None:
        """The MCP server registered as ``name`` and a connection to it (``None``: not
        registered)."""
        server = self._registration(name)
        if server is None:
            return None

        def reopen() -> ToolConnection:
            # Read again too: the server may have been registered anew (restarted elsewhere).
            return self._open(self._registration(name) or server, fresh=True)

        return _Reconnecting(self._open(server, fresh=False), reopen), server

    def _registration(self, name: str) -> ToolServer | None:
        server = self._servers.get(name) if self._servers is not None else None
        allowed = self._allowed_urls
        if server is not None and allowed is not None and server.url not in allowed:
            raise ToolServerError(
                f"tool {name}: its server {server.url} is not one this deployment may "
                "call; add it to mcp_servers (cdk.json) and deploy"
            )
        return server

    def _open(self, server: ToolServer, *, fresh: bool) -> ToolConnection:
        if self._connect is None:
            raise ToolServerError(f"tool {server.name}: no tool connector is configured here")
        headers = read_headers(server, self._secrets, fresh=fresh)
        return self._connect(server.name, server.url, headers, call_timeout=self._timeout)


class _Reconnecting:
    """A connection to a registered server that connects once more, with its credentials read
    afresh, when the server cannot be reached or refuses them.

    Secrets are cached per process (300 s): a server restarted with a new token would otherwise
    be refused, and the failure told to the model, until the cache ages out. A
    :class:`ToolServerUnreachableError` says the request did not run there, so sending it again
    repeats nothing. Once per step attempt: a server that stays down costs no fresh read per
    call.
    """

    def __init__(self, first: ToolConnection, reopen: Callable[[], ToolConnection]) -> None:
        self.name = first.name
        self._connection = first
        self._reopen: Callable[[], ToolConnection] | None = reopen

    async def list_tools(self) -> list[ToolSpec]:
        """See :meth:`ToolConnection.list_tools`."""
        return await self._again(lambda connection: connection.list_tools())

    async def call(
        self, tool: str, args: dict[str, Any], *, timeout: float, key: str | None = None
    ) -> tuple[str, bool]:
        """See :meth:`ToolConnection.call`."""
        return await self._again(
            lambda connection: connection.call(tool, args, timeout=timeout, key=key)
        )

    async def aclose(self) -> None:
        """See :meth:`ToolConnection.aclose`."""
        await self._connection.aclose()

    async def _again(self, work: Callable[[ToolConnection], Awaitable[T]]) -> T:
        try:
            return await work(self._connection)
        except ToolServerUnreachableError:
            reopen, self._reopen = self._reopen, None
            if reopen is None:
                raise
            logger.info(
                "tool server unreachable; connecting once more with its credentials read afresh",
                extra={"tool_server": self.name},
            )
        await self._connection.aclose()
        self._connection = await asyncio.to_thread(reopen)
        return await work(self._connection)


def read_headers(
    server: ToolServer, secrets: SecretsStore | None, *, fresh: bool = False
) -> dict[str, str]:
    """The request headers of ``server``, read from their secrets (never logged).

    Args:
        server: The registration.
        secrets: Where its header secrets are.
        fresh: Read past the secrets cache.

    Raises:
        ToolServerError: a secret is missing or holds no string ``value``.
    """
    headers: dict[str, str] = {}
    for header, secret_id in server.headers.items():
        if secrets is None:
            raise ToolServerError(f"tool {server.name}: no secrets store to read {secret_id}")
        try:
            value = secrets.get_json(secret_id, fresh=fresh).get(SECRET_VALUE_KEY)
        except SecretNotFoundError as exc:
            raise ToolServerError(
                f"tool {server.name}: header {header} needs secret {secret_id}, which does "
                f'not exist; store {{"{SECRET_VALUE_KEY}": "..."}} in it'
            ) from exc
        if not isinstance(value, str):
            raise ToolServerError(
                f"tool {server.name}: secret {secret_id} has no string "
                f'"{SECRET_VALUE_KEY}" for header {header}'
            )
        headers[header] = value
    return headers


class StepAttempt:
    """One attempt's recorder and toolbox (the engine's ``StepEffects``)."""

    def __init__(self, recorder: TaskRecorder, toolbox: StepToolbox | None) -> None:
        self._recorder = recorder
        self._toolbox = toolbox

    @property
    def toolbox(self) -> StepToolbox | None:
        """The step's tools, or ``None`` when it lists none."""
        return self._toolbox

    @property
    def tool_cost_usd(self) -> float:
        """What the tool calls made so far declare they cost (US dollars)."""
        return self._toolbox.spent_usd if self._toolbox is not None else 0.0

    async def once(
        self, kind: str, digest: str, call: Callable[[], Awaitable[dict[str, Any]]]
    ) -> tuple[dict[str, Any], bool]:
        """See :meth:`TaskRecorder.once`."""
        return await self._recorder.once(kind, digest, call)

    async def aclose(self) -> None:
        """Close the MCP sessions the attempt opened."""
        if self._toolbox is not None:
            await self._toolbox.aclose()


class StepToolbox:
    """The tools of one attempt of one step (a :class:`langorch.llm.toolbox.Toolbox`).

    Args:
        names: The block's ``tools_required``: built-in names and registered names.
        recorder: Records each call.
        resolve: Registered name -> its MCP server and a connection (``None``: not
            registered).
        emit: Takes the ``tool_called`` timeline events.
        where: ``run_id``, ``step_id``, ``attempt`` for events, logs and messages.
        max_calls: Calls the step may make; later calls are refused (told to the model).
        call_timeout: Seconds per call.
        gate: Asked before each call (the tool policies): a text refuses the call, told to
            the model; it may park the run for a person first.
        allowed_domains: The hosts ``http_get`` may fetch (``None``: any public host); a
            refused fetch is told to the model and named on the timeline.
    """

    def __init__(
        self,
        names: list[str],
        *,
        recorder: TaskRecorder,
        resolve: Callable[[str], tuple[ToolConnection, ToolServer] | None],
        emit: Emit,
        where: dict[str, Any],
        max_calls: int,
        call_timeout: float,
        gate: ToolGate | None = None,
        allowed_domains: tuple[str, ...] | None = None,
    ) -> None:
        self._gate = gate
        self._allowed_domains = allowed_domains
        self._names = names
        self._recorder = recorder
        self._resolve = resolve
        self._emit = emit
        self._where = where
        self._max_calls = max_calls
        self._timeout = call_timeout
        self._calls = 0
        self._builtins: dict[str, Any] | None = None
        self._registered: list[tuple[ToolConnection, ToolServer]] | None = None
        self._mcp: dict[str, tuple[ToolConnection, ToolServer, ToolSpec]] | None = None
        self._unregistered: list[str] = []
        self.spent_usd = 0.0
        """What the calls made (or replayed) declare they cost: their servers' prices."""

    @property
    def max_calls(self) -> int:
        """Tool calls the step may make in all."""
        return self._max_calls

    @property
    def exhausted(self) -> bool:
        """Whether every allowed call was used."""
        return self._calls >= self._max_calls

    async def specs(self) -> list[ToolSpec]:
        """The bound tools: built-in ones, then each registered server's allowed tools."""
        specs = [_builtin_spec(tool) for tool in self._builtin_tools().values()]
        return specs + [spec for _, _, spec in (await self._mcp_tools()).values()]

    async def turn(
        self, digest: str, ask: Callable[[], Awaitable[dict[str, Any]]]
    ) -> dict[str, Any]:
        """One recorded model round."""
        result, _ = await self._recorder.once("turn", digest, ask)
        return result

    async def call(self, name: str, args: dict[str, Any]) -> str:
        """Run (or replay) one call; see :meth:`langorch.llm.toolbox.Toolbox.call`."""
        output, _ = await self.call_with_outcome(name, args)
        return output

    async def call_with_outcome(self, name: str, args: dict[str, Any]) -> tuple[str, str]:
        """Run (or replay) one call: ``(text, outcome)``; see
        :meth:`langorch.llm.toolbox.Toolbox.call_with_outcome`."""
        started = time.monotonic()
        summary = _summary(args)
        if self.exhausted:
            self._event(name, summary, "refused", started)
            return (
                f"error: this step may call tools {self._max_calls} times and has; answer with "
                "what you have",
                "refused",
            )
        self._calls += 1
        if name == "http_get" and (refused := self._egress_refusal(args)) is not None:
            self._event(name, summary, "refused", started, failure=refused)
            return f"error: {refused}", "refused"
        run, server = await self._runner(name, summary, started)
        if self._gate is not None:
            where = (server.name, server.policies) if server is not None else (None, ())
            refused = await self._gate(name, args, *where)  # may park the run for a person
            if refused is not None:
                return refused, "refused"

        async def make(key: str | None = None) -> dict[str, Any]:
            output, outcome = await run(args, key)
            if len(output) > MAX_TOOL_OUTPUT_CHARS:
                output = output[:MAX_TOOL_OUTPUT_CHARS] + " [truncated]"
            return {"output": output, "error": outcome != "ok", "outcome": outcome}

        digest = fingerprint(name, args)
        if server is not None:
            self.spent_usd += server.call_cost(name)
        if server is None:  # a built-in tool: no server to remember a key
            result, replayed = await self._recorder.once("tool", digest, make)
        else:

            def unknown(key: str) -> None:
                self._unknown(name, summary, started, key, server)

            result, replayed = await self._recorder.once_keyed(
                "tool", digest, make, unknown=unknown
            )
        output = str(result.get("output", ""))
        # Records made before outcomes were kept say only whether the call failed.
        outcome = result.get("outcome") or ("error" if result.get("error") else "ok")
        failure = output if outcome != "ok" else None
        self._event(name, summary, outcome, started, replayed=replayed, failure=failure)
        return output, outcome

    async def aclose(self) -> None:
        """Close the MCP sessions."""
        for connection, _ in self._registered or []:
            await connection.aclose()

    def _unknown(
        self, tool: str, summary: str, started: float, key: str, server: ToolServer
    ) -> None:
        """A call found sent but never recorded back: on the timeline as ``unknown``; then sent
        again with the same key, or the step fails, as its registration says."""
        resend = server.on_unknown == "retry"
        then = (
            "sent again with the same idempotency key"
            if resend
            else "not sent again (--on-unknown fail)"
        )
        self._event(
            tool,
            summary,
            "unknown",
            started,
            failure=f"sent before the process stopped, its outcome never recorded; {then}",
            key=key,
        )
        if not resend:
            raise ToolCallOutcomeUnknownError(registration=server.name, tool=tool, key=key)

    async def _runner(
        self, name: str, summary: str, started: float
    ) -> tuple[Runner, ToolServer | None]:
        """How to run the call, and the registration of its server (``None``: built-in)."""
        builtin = self._builtin_tools().get(name)
        if builtin is not None:

            async def run_builtin(args: dict[str, Any], key: str | None) -> tuple[str, str]:
                return await self._bounded(asyncio.to_thread(builtin.invoke, args))

            return run_builtin, None
        owner = await self._owner(name)
        if owner is None:
            self._event(name, summary, "unbound", started)
            raise UnboundToolError(self._unbound_message(name))
        connection, server = owner

        async def run_mcp(args: dict[str, Any], key: str | None) -> tuple[str, str]:
            return await self._bounded(connection.call(name, args, timeout=self._timeout, key=key))

        return run_mcp, server

    async def _bounded(self, work: Awaitable[Any]) -> tuple[str, str]:
        """The call's text and outcome (``ok``, ``error``, ``timeout``): a failure is told to
        the model, not raised.

        A ``CancelledError`` is never caught here: the one this call's own timeout raises comes
        out of ``asyncio.timeout`` as ``TimeoutError``; any other is the step's (its timeout, a
        segment being shut down), and the step must stop.
        """
        try:
            async with asyncio.timeout(self._timeout):
                value = await work
        except TimeoutError:
            return (
                f"error: the tool did not answer within {self._timeout:g} s "
                "(tool_call_timeout_seconds); answer without it, or try again differently",
                "timeout",
            )
        except Exception as exc:
            return f"error: {type(exc).__name__}: {exc}", "error"
        if isinstance(value, tuple):
            text, failed = value
            return (f"error: {text}", "error") if failed else (str(text), "ok")
        return str(value), "ok"

    def _egress_refusal(self, args: dict[str, Any]) -> str | None:
        """Why this ``http_get`` may not fetch its URL (the deployment's domain allow-list)."""
        from langorch.domain.egress import egress_refusal

        return egress_refusal(str(args.get("url") or ""), self._allowed_domains)

    def _builtin_tools(self) -> dict[str, Any]:
        if self._builtins is None:
            from langorch.llm.builtin_tools import TOOL_FACTORIES

            self._builtins = {
                name: TOOL_FACTORIES[name]() for name in self._names if name in TOOL_FACTORIES
            }
        return self._builtins

    async def _registrations(self) -> list[tuple[ToolConnection, ToolServer]]:
        """The step's registered tools with an unopened connection each (no network yet)."""
        if self._registered is None:
            from langorch.llm.builtin_tools import TOOL_FACTORIES

            self._registered = []
            for name in self._names:
                if name in TOOL_FACTORIES:
                    continue
                found = await asyncio.to_thread(self._resolve, name)
                if found is None:
                    self._unregistered.append(name)
                else:
                    self._registered.append(found)
        return self._registered

    async def _owner(self, tool: str) -> tuple[ToolConnection, ToolServer] | None:
        """The connection serving ``tool`` and its registration. A registration with an
        ``allow`` list answers without connecting (a replayed call then never opens a session);
        one without is asked for its tools."""
        registered = await self._registrations()
        for connection, server in registered:
            if tool in server.allow:
                return connection, server
        if all(server.allow for _, server in registered):
            return None
        found = (await self._mcp_tools()).get(tool)
        return (found[0], found[1]) if found is not None else None

    async def _mcp_tools(self) -> dict[str, tuple[ToolConnection, ToolServer, ToolSpec]]:
        """Every registered server's allowed tools, listed from the servers."""
        if self._mcp is None:
            tools: dict[str, tuple[ToolConnection, ToolServer, ToolSpec]] = {}
            for connection, server in await self._registrations():
                for spec in await connection.list_tools():
                    if server.allows(spec.name) and spec.name not in tools:
                        tools[spec.name] = (connection, server, spec)
            self._mcp = tools
        return self._mcp

    def _unbound_message(self, name: str) -> str:
        allowed = [tool for _, server in self._registered or [] for tool in server.allow]
        bound = sorted({*self._builtin_tools(), *(self._mcp or {}), *allowed})
        return (
            f"step {self._where['step_id']}: the model called tool {name!r}, which this step "
            f"does not bind (bound: {', '.join(bound) or 'none'}; named in tools_required but "
            f"not registered: {', '.join(self._unregistered) or 'none'}); register a server "
            "that has it (`langorch tools add NAME --mcp URL`) and list NAME in the block's "
            "tools_required, or allow it in an existing registration (--allow)"
        )

    def _event(
        self,
        tool: str,
        summary: str,
        outcome: str,
        started: float,
        *,
        replayed: bool = False,
        failure: str | None = None,
        key: str | None = None,
    ) -> None:
        """Put the call on the timeline and in the logs (a failed one with what went wrong, an
        unknown one with its idempotency key)."""
        duration = int((time.monotonic() - started) * 1000)
        event: dict[str, Any] = {
            "event": "tool_called",
            "step_id": self._where["step_id"],
            "at": datetime.now(UTC).isoformat(),
            "attempt": self._where["attempt"],
            "tool": tool,
            "args": summary,
            "duration_ms": duration,
            "outcome": outcome,
        }
        if failure is not None:
            event["tool_error"] = _bounded_text(
                failure.removeprefix("error: "), ERROR_SUMMARY_CHARS
            )
        if replayed:
            event["replayed"] = True
        if key is not None:
            event["idempotency_key"] = key
        self._emit(event)
        logger.log(
            logging.INFO if failure is None else logging.WARNING,
            "tool called",
            extra={
                **self._where,
                "tool": tool,
                "tool_args": summary,
                "tool_error": event.get("tool_error"),
                "duration_ms": duration,
                "outcome": outcome,
                "replayed": replayed,
                "idempotency_key": key,
            },
        )


def _builtin_spec(tool: Any) -> ToolSpec:
    schema = tool.tool_call_schema.model_json_schema()
    schema.pop("title", None)
    return ToolSpec(name=tool.name, description=tool.description, parameters=schema)


def _summary(args: dict[str, Any]) -> str:
    return _bounded_text(json.dumps(args, sort_keys=True, default=str), ARGS_SUMMARY_CHARS)


def _bounded_text(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
