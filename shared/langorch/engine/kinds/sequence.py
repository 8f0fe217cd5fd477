"""``sequence``: perform a CKP node's steps — built-in actions, agent calls, MCP tools — in order,
each call recorded (seed 001 §5), each step's outcome on the timeline, then the node's checks.

Secrets: a parameter may read ``{{ secrets["id"] }}``; the value is read from the deployment's
secrets store when the step renders, handed to the agent, tool or HTTP call only, and scrubbed
from everything the step keeps or shows — its outputs (the run's state and checkpoints), the
timeline, the logs, errors — as are the values of the run's sensitive variables. What a call is
recorded under (its fingerprint) is computed from the parameters with every secret masked.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from langorch.domain.ckp.actions import BUILTIN_ACTIONS, ENGINE_ACTIONS, MAX_WAIT_MS, run_pure
from langorch.domain.ckp.binding import Binding, Catalog, plan_calls
from langorch.domain.ckp.errors import (
    ActionFailedError,
    AgentBindingChangedError,
    SecretUnavailableError,
    UnboundActionError,
    VerificationFailedError,
)
from langorch.domain.errors import LangorchError, SecretNotFoundError
from langorch.domain.kinds.sequence import (
    EXPRESSION_PARAMS,
    SECRETS,
    ActionStep,
    Check,
    ErrorHandler,
    SequenceSettings,
    reads_of,
    writes_of,
)
from langorch.domain.tasks import fingerprint
from langorch.domain.templates import evaluate, render_value
from langorch.engine.context import EngineContext, SecretReader, StepEffects
from langorch.engine.kinds.base import Executor, Outcome, StepSpec, scope_of, summarize, visits_of
from langorch.engine.state import OrchestrationState

logger = logging.getLogger(__name__)

REDACTED = "[redacted]"
"""What a secret's or a sensitive variable's value is replaced with wherever it would show."""

_MIN_SCRUB = 4
"""Values shorter than this are not scrubbed out of text (``"1"`` would garble everything);
a secret that short is no secret."""

ARGS_CHARS = 200


class SecretScope(Mapping[str, str]):
    """``secrets`` in a step's templates: each secret read when first used, remembered for
    scrubbing.

    Args:
        reader: The deployment's secrets store (``None``: every secret is unavailable).
        step_id: The step, for messages.
    """

    def __init__(self, reader: SecretReader | None, step_id: str) -> None:
        self._reader = reader
        self._step = step_id
        self._values: dict[str, str] = {}

    def __getitem__(self, name: str) -> str:
        if name not in self._values:
            self._values[name] = self._read(name)
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    @property
    def used(self) -> list[str]:
        """The values read so far (what must be scrubbed)."""
        return list(self._values.values())

    def _read(self, name: str) -> str:
        if self._reader is None:
            raise SecretUnavailableError(
                f"step {self._step} reads secret {name!r}, but no secrets store is wired here"
            )
        try:
            document = self._reader.get_json(name)
        except SecretNotFoundError as exc:
            raise SecretUnavailableError(
                f"step {self._step} reads secret {name!r}, which does not exist; store it with "
                f"`langorch secrets put {name}` (the value from standard input)"
            ) from exc
        value = document.get("value")
        if not isinstance(value, str):
            raise SecretUnavailableError(
                f'step {self._step}: secret {name!r} holds no string "value"; store it with '
                f"`langorch secrets put {name}`"
            )
        return value


class _MaskedSecrets(Mapping[str, str]):
    """``secrets`` for what is recorded and shown: every secret stands as its name."""

    def __getitem__(self, name: str) -> str:
        return f"«secret:{name}»"

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def scrub(value: Any, hidden: list[str]) -> Any:
    """``value`` with every occurrence of the ``hidden`` texts replaced by ``[redacted]``."""
    hidden = sorted((h for h in hidden if len(h) >= _MIN_SCRUB), key=len, reverse=True)
    if not hidden:
        return value
    return _scrub(value, hidden)


def _scrub(value: Any, hidden: list[str]) -> Any:
    if isinstance(value, str):
        for text in hidden:
            if text in value:
                value = value.replace(text, REDACTED)
        return value
    if isinstance(value, dict):
        return {k: _scrub(v, hidden) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, hidden) for v in value]
    return value


class _Node:
    """One attempt of one sequence node."""

    def __init__(
        self,
        spec: StepSpec,
        state: OrchestrationState,
        ctx: EngineContext,
        attempt: int,
        settings: SequenceSettings,
    ) -> None:
        from langgraph.config import get_stream_writer

        self.spec, self.ctx, self.attempt, self.settings = spec, ctx, attempt, settings
        self.secrets = SecretScope(ctx.secrets, spec.step_id)
        self.scope: dict[str, Any] = {**scope_of(spec, state), SECRETS: self.secrets}
        self.masked_scope: dict[str, Any] = {**self.scope, SECRETS: _MaskedSecrets()}
        self.context: dict[str, Any] = {}
        self.visit = visits_of(spec, state)
        self.emit = get_stream_writer()
        self.effects: StepEffects | None = None
        self.calls = 0
        self.spent_usd = 0.0
        """What the node's agent and tool calls declare they cost."""
        shared = state.get("shared_context") or {}
        self.sensitive = [v for k, v in shared.items() if k in ctx.redacted and isinstance(v, str)]

    @property
    def hidden(self) -> list[str]:
        return [*self.secrets.used, *self.sensitive]

    # -- the node -----------------------------------------------------------------------------

    async def run(self) -> Outcome:
        catalog = self._catalog()
        self._check_binding(catalog)
        if self.ctx.side_effects is not None:
            self.effects = self.ctx.side_effects.begin(
                step_id=self.spec.step_id,
                visit=self.visit,
                attempt=self.attempt,
                tools=[],
                emit=self.emit,
            )
        try:
            try:
                await self._steps(self.settings.steps, catalog)
            except Exception as exc:
                await self._recover(exc, catalog)
                raise self._scrubbed(exc) from exc
            self._checks(self.settings.checks)
        finally:
            if self.effects is not None:
                await self.effects.aclose()
        context = scrub(self.context, self.hidden)
        shown = {k: (REDACTED if k in self.ctx.redacted else v) for k, v in context.items()}
        usage = []
        if self.spent_usd:
            cost = round(self.spent_usd, 9)
            usage = [{"step_id": self.spec.step_id, "cost_usd": cost, "tool_cost_usd": cost}]
        state = {"usage": usage} if usage else {}
        return Outcome(context=context, summary=summarize(shown), state=state)

    def _catalog(self) -> Catalog:
        if self.ctx.actions is None:
            return Catalog(agents={})
        actions = [s.action for s in self.settings.steps]
        actions += [s.action for h in self.settings.handlers for s in h.recovery_steps]
        servers = frozenset(a.split(".", 1)[0] for a in actions if "." in a)
        return self.ctx.actions.catalog(self.settings.agent, servers)

    def _check_binding(self, catalog: Catalog) -> None:
        """The agent's resource key now must be the one bound when the procedure was stored."""
        agent = catalog.agents.get(self.settings.agent or "")
        if agent is None or agent.resource_key == self.spec.step.resource:
            return
        if not any(agent.supports(s.action) for s in self.settings.steps):
            return
        raise AgentBindingChangedError(
            f"node {self.spec.step_id}: agent {agent.name} now drives resource "
            f"{agent.resource_key!r}, but this procedure version was stored holding "
            f"{self.spec.step.resource!r}; store the procedure again (`langorch workflows put "
            "FILE`) so its nodes hold the agent's resource"
        )

    async def _steps(self, steps: list[ActionStep], catalog: Catalog) -> None:
        calls = plan_calls(
            [s.action for s in steps],
            self.settings.agent,
            catalog,
            reads=[reads_of(s) for s in steps],
            writes=[writes_of(s) for s in steps],
        )
        for call in calls:
            batch = [steps[i] for i in call.steps]
            for step in batch:
                if step.wait_ms:
                    await asyncio.sleep(step.wait_ms / 1000)
            results = await self._perform(call.binding, batch, catalog)
            for step, (ok, output, error) in zip(batch, results, strict=True):
                if ok:
                    self._keep(step, output)
                elif not self._tolerated(step, error):
                    raise ActionFailedError(
                        f"node {self.spec.step_id}, step {step.id} ({step.action}): {error}",
                        retryable=True,
                    )
                if step.wait_after_ms:
                    await asyncio.sleep(step.wait_after_ms / 1000)

    def _keep(self, step: ActionStep, output: Any) -> None:
        targets = set(writes_of(step))
        for name in targets:
            self.context[name] = output
            self.scope[name] = self.masked_scope[name] = output

    def _tolerated(self, step: ActionStep, error: str) -> bool:
        """A step that may fail: ``continue_on_error``, or a handler that ignores its error."""
        if step.continue_on_error:
            return True
        return any(h.ignore and _matches(h, "ActionFailedError", error) for h in self._handlers)

    @property
    def _handlers(self) -> list[ErrorHandler]:
        return self.settings.handlers

    async def _recover(self, exc: Exception, catalog: Catalog) -> None:
        """After the node's last attempt failed: the matching handlers' recovery steps."""
        final = not (getattr(exc, "retryable", True) and self.attempt < self.spec.max_attempts)
        if not final:
            return
        for handler in self._handlers:
            if handler.recovery_steps and _matches(handler, type(exc).__name__, str(exc)):
                try:
                    await self._steps(handler.recovery_steps, catalog)
                except Exception as failed:  # the node fails with its own error, not this one
                    logger.warning(
                        "recovery steps failed",
                        extra={
                            "run_id": self.ctx.run_id,
                            "step_id": self.spec.step_id,
                            "error": str(scrub(str(failed), self.hidden))[:300],
                        },
                    )
                return

    def _checks(self, checks: list[Check]) -> None:
        scope = {**self.scope, **self.context}
        for check in checks:
            if evaluate(check.condition, scope):
                continue
            message = scrub(
                render_value(check.message, scope) if check.message else check.condition,
                self.hidden,
            )
            if check.on_fail == "warn":
                self._event(f"check {check.id}", "", "warn", 0, failure=str(message))
                continue
            raise VerificationFailedError(
                f"node {self.spec.step_id}: check {check.id} failed: {message}"
            )

    def _scrubbed(self, exc: Exception) -> Exception:
        """The error with secret values taken out of its message (it goes to state and logs)."""
        text = str(exc)
        clean = scrub(text, self.hidden)
        if clean == text:
            return exc
        if isinstance(exc, LangorchError):
            copy = ActionFailedError(clean, retryable=bool(getattr(exc, "retryable", True)))
            return copy
        return ActionFailedError(clean)

    # -- calls --------------------------------------------------------------------------------

    async def _perform(
        self, binding: Binding, batch: list[ActionStep], catalog: Catalog
    ) -> list[tuple[bool, Any, str]]:
        """Perform one call; ``(ok, output, error)`` per step."""
        index = self.calls
        self.calls += 1
        params = [self._render(step, self.scope) for step in batch]
        # What is recorded and shown: secrets masked, sensitive variables' values scrubbed.
        shown = [scrub(self._render(step, self.masked_scope), self.sensitive) for step in batch]
        started = time.monotonic()
        if binding.kind == "unbound":
            self._event(
                binding.label(batch[0].action), _args(shown[0]), "unbound", 0, step=batch[0]
            )
            raise UnboundActionError(f"node {self.spec.step_id}, step {batch[0].id}: {binding.why}")
        self._gate(binding, batch, shown, catalog)
        digest = fingerprint(binding.kind, binding.label(batch[0].action), shown)

        async def make() -> dict[str, Any]:
            results = await self._dispatch(binding, batch, params, catalog, index)
            if any(not ok for ok, _, _ in results):
                raise _Partial(results)
            return {"results": [{"output": scrub(o, self.hidden)} for _, o, _ in results]}

        replayed = False
        try:
            # Pure built-ins compute the same again; every other call is recorded.
            effects = self.effects
            if effects is not None and (
                binding.kind != "builtin" or batch[0].action in ENGINE_ACTIONS
            ):
                record, replayed = await effects.once(binding.kind, digest, make)
                results = [(True, r.get("output"), "") for r in record["results"]]
            else:
                results = await self._dispatch(binding, batch, params, catalog, index)
        except _Partial as partial:
            results = partial.results
        duration = int((time.monotonic() - started) * 1000)
        self._charge(binding, batch, catalog, replayed=replayed)
        for step, args, (ok, _output, error) in zip(batch, shown, results, strict=True):
            self._event(
                binding.label(step.action),
                _args(args),
                "ok" if ok else "error",
                duration,
                step=step,
                replayed=replayed,
                failure=None if ok else str(scrub(error, self.hidden)),
                batch=len(batch) if len(batch) > 1 else None,
            )
        return results

    def _gate(
        self, binding: Binding, batch: list[ActionStep], shown: list[Any], catalog: Catalog
    ) -> None:
        """The tool policies on each agent or MCP tool call of the batch (``tool``: the action,
        or the MCP tool's name; ``args``: its parameters, secrets masked; an MCP tool's server
        adds its own rules). Refused, the node fails (its handlers and ``on_error`` route see
        ``ToolCallRefusedError``)."""
        if binding.kind not in ("agent", "tool"):
            return
        from langorch.domain.tool_policies import ToolCallRefusedError
        from langorch.engine.kinds._tool_gate import check_call

        server = binding.target if binding.kind == "tool" else None
        registration = catalog.servers.get(server or "")
        rules = registration.policies if registration is not None else ()
        for step, args in zip(batch, shown, strict=True):
            tool = binding.tool if binding.kind == "tool" and binding.tool else step.action
            asker = f"Node {self.spec.step_id} (via {binding.label(step.action)})"
            refused = check_call(
                self.spec,
                self.ctx,
                self.emit,
                tool,
                dict(args),
                asker=asker,
                server=server,
                server_rules=rules,
            )
            if refused is not None:
                raise ToolCallRefusedError(
                    f"node {self.spec.step_id}, step {step.id} ({step.action}): {refused}"
                )

    def _charge(
        self, binding: Binding, batch: list[ActionStep], catalog: Catalog, *, replayed: bool
    ) -> None:
        """Count what a call declares it costs (an agent's price per step, a tool server's per
        call): in the node's cost, and, made now (not replayed from its record), in the run's
        spend and the workflow's budgets."""
        from langorch.engine.kinds.llm import charge_declared

        cost = 0.0
        if binding.kind == "agent":
            cost = catalog.agents[binding.target].cost_per_step_usd * len(batch)
        elif binding.kind == "tool":
            server = catalog.servers.get(binding.target)
            cost = server.call_cost(binding.tool or "") if server is not None else 0.0
        if cost:
            self.spent_usd += cost
            if not replayed:
                charge_declared(self.ctx, cost)

    def _render(self, step: ActionStep, scope: dict[str, Any]) -> dict[str, Any]:
        rendered: dict[str, Any] = {}
        for key, value in step.params.items():
            rendered[key] = value if key in EXPRESSION_PARAMS else render_value(value, scope)
        return rendered

    async def _dispatch(
        self,
        binding: Binding,
        batch: list[ActionStep],
        params: list[dict[str, Any]],
        catalog: Catalog,
        index: int,
    ) -> list[tuple[bool, Any, str]]:
        if binding.kind == "builtin":
            return [await self._builtin(batch[0], params[0])]
        actions = self.ctx.actions
        if actions is None:
            raise UnboundActionError(f"node {self.spec.step_id}: no agents or tools wired here")
        timeout = _timeout(batch, self.spec)
        if binding.kind == "tool":
            assert binding.tool is not None
            output, failed = await actions.call_tool(
                binding.target, binding.tool, params[0], timeout=timeout
            )
            return [(not failed, output, str(output) if failed else "")]
        agent = catalog.agents[binding.target]
        key = self._idempotency_key(index)
        request = {
            "run_id": self.ctx.run_id,
            "procedure_id": self.ctx.workflow_id,
            "procedure_version": self.ctx.workflow_version,
            "node_id": self.spec.step_id,
            "agent": agent.name,
            "mode": agent.execution_mode.value,
            "steps": [
                {
                    "step_id": step.id,
                    "action": step.action,
                    "params": p,
                    "idempotency_key": f"{key}-{i}",
                    **({"timeout_ms": step.timeout_ms} if step.timeout_ms else {}),
                }
                for i, (step, p) in enumerate(zip(batch, params, strict=True))
            ],
        }
        answers = await actions.call_agent(
            agent, request, idempotency_key=key, timeout=min(timeout, agent.max_duration_seconds)
        )
        if len(answers) != len(batch):
            raise ActionFailedError(
                f"node {self.spec.step_id}: agent {agent.name} answered {len(answers)} results "
                f"for {len(batch)} steps; an agent answers one result per step, in order",
                retryable=False,
            )
        return [
            (
                a.get("status", "ok") == "ok",
                a.get("output"),
                str(a.get("error") or "the agent reported a failure"),
            )
            for a in answers
        ]

    def _idempotency_key(self, index: int) -> str:
        """Stable across retries and resumed segments: the run, node, visit and call index."""
        base = f"{self.ctx.run_id}:{self.spec.step_id}:{self.visit}:{index}"
        if self.settings.idempotency_key:
            base = f"{render_value(self.settings.idempotency_key, self.masked_scope)}:{index}"
        return hashlib.sha256(base.encode()).hexdigest()[:32]

    async def _builtin(self, step: ActionStep, params: dict[str, Any]) -> tuple[bool, Any, str]:
        try:
            if step.action == "wait":
                return True, await _wait(params), ""
            if step.action == "http_request":
                return True, await self._http(step, params), ""
            if step.action == "read_file":
                return True, await self._read_file(params), ""
            output = run_pure(step.action, params, {**self.scope, **self.context})
        except LangorchError as exc:
            return False, None, str(exc)
        if step.action == "log":
            logger.info(
                "procedure log",
                extra={
                    "run_id": self.ctx.run_id,
                    "step_id": self.spec.step_id,
                    "level": output["level"],
                    "log_message": str(scrub(output["message"], self.hidden))[:2000],
                },
            )
        return True, output, ""

    async def _http(self, step: ActionStep, params: dict[str, Any]) -> Any:
        http = self.ctx.http
        if http is None:
            raise ActionFailedError("http_request: no HTTP client is wired here", retryable=False)
        url = params.get("url")
        if not isinstance(url, str):
            raise ActionFailedError("http_request needs a url", retryable=False)
        method = str(params.get("method") or "GET").upper()
        headers = {str(k): str(v) for k, v in (params.get("headers") or {}).items()}
        headers.setdefault("Idempotency-Key", self._idempotency_key(self.calls))
        body = params.get("body", params.get("value"))
        timeout = (step.timeout_ms or 30_000) / 1000
        status, payload = await asyncio.to_thread(
            http, method, url, headers=headers, body=body, timeout=timeout
        )
        if status >= 400:
            host = url.split("/")[2] if "//" in url else "the server"
            raise ActionFailedError(
                f"http_request: HTTP {status} from {host}", retryable=status == 429 or status >= 500
            )
        return {"status": status, "body": payload}

    async def _read_file(self, params: dict[str, Any]) -> Any:
        from langorch.domain.fileformats import file_format, parse_content
        from langorch.domain.step_settings import READ_FILE_DEFAULT_BYTES

        files = self.ctx.files
        if files is None:
            raise ActionFailedError("read_file: no file reader is wired here", retryable=False)
        key = params.get("file_path") or params.get("key") or params.get("target")
        if not isinstance(key, str) or not key:
            raise ActionFailedError("read_file needs a file_path (a key of the files bucket)")
        bucket = str(params.get("bucket") or files.bucket)
        data, _ = await asyncio.to_thread(
            files.read,
            bucket,
            key,
            max_bytes=int(params.get("max_bytes") or READ_FILE_DEFAULT_BYTES),
        )
        fmt = file_format(str(params.get("format") or "auto"), key)
        return parse_content(data, fmt, f"s3://{bucket}/{key}")

    # -- timeline -----------------------------------------------------------------------------

    def _event(
        self,
        tool: str,
        args: str,
        outcome: str,
        duration: int,
        *,
        step: ActionStep | None = None,
        replayed: bool = False,
        failure: str | None = None,
        batch: int | None = None,
    ) -> None:
        event: dict[str, Any] = {
            "event": "tool_called",
            "step_id": self.spec.step_id,
            "at": datetime.now(UTC).isoformat(),
            "attempt": self.attempt,
            "tool": tool,
            "args": args,
            "duration_ms": duration,
            "outcome": outcome,
        }
        if step is not None:
            event["action_step"] = step.id
        if failure:
            event["tool_error"] = failure[:300]
        if replayed:
            event["replayed"] = True
        if batch:
            event["batch"] = batch
        self.emit(event)
        logger.info(
            "action performed",
            extra={
                "run_id": self.ctx.run_id,
                "step_id": self.spec.step_id,
                "action_step": step.id if step else None,
                "tool": tool,
                "outcome": outcome,
                "replayed": replayed,
            },
        )


class _Partial(Exception):
    """A call some of whose steps failed: not recorded, so another attempt calls again."""

    def __init__(self, results: list[tuple[bool, Any, str]]) -> None:
        super().__init__("some steps failed")
        self.results = results


def _matches(handler: ErrorHandler, error_type: str, message: str) -> bool:
    if handler.error_type not in ("*", "any", "all", error_type):
        return False
    return handler.text_contains is None or handler.text_contains in message


def _timeout(batch: list[ActionStep], spec: StepSpec) -> float:
    """A call's time: its steps' ``timeout_ms`` added up, else the node's."""
    own = [s.timeout_ms for s in batch if s.timeout_ms]
    if own:
        return sum(own) / 1000
    return spec.timeout_seconds or 60.0


async def _wait(params: dict[str, Any]) -> Any:
    value = params.get("duration_ms", params.get("value", params.get("ms")))
    if not isinstance(value, int | float) or not 0 <= value <= MAX_WAIT_MS:
        raise ActionFailedError(
            f"wait needs duration_ms from 0 to {MAX_WAIT_MS}, got {value!r}", retryable=False
        )
    await asyncio.sleep(value / 1000)
    return {"waited_ms": value}


def _args(params: dict[str, Any]) -> str:
    text = json.dumps(params, sort_keys=True, default=str, ensure_ascii=False)
    return text if len(text) <= ARGS_CHARS else text[: ARGS_CHARS - 1] + "…"


async def run_sequence(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    """Perform the node's steps, then its checks."""
    settings = SequenceSettings.model_validate(spec.step.settings or {})
    if not settings.steps and not settings.checks:
        return Outcome()  # a fork: the branches start after it
    return await _Node(spec, state, ctx, attempt, settings).run()


EXECUTORS: dict[str, Executor] = {"sequence": run_sequence}

__all__ = ["BUILTIN_ACTIONS", "REDACTED", "SecretScope", "run_sequence", "scrub"]
