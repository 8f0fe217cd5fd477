"""The one generic executor: every step of every workflow runs through :func:`make_step_node`.

A step's definition (its ``PlanStep`` and block, resolved at compile time into a
:class:`StepSpec`) tells the executor what to do; the kind handlers below know how. Each node
returns a ``Command`` that merges its outputs into ``shared_context`` and routes to the next
steps, so branches, loops, error routes and joins are all decided here, from the state, with no
hidden control flow elsewhere.

Retries use LangGraph's ``RetryPolicy``: the node raises on every attempt but the last, and on
the last attempt (or for an error that retrying cannot fix) it routes to ``on_error`` /
``on_failure`` with the normalised ``error`` object in state, or fails the run.
"""

from __future__ import annotations

import asyncio
import csv
import hashlib
import io
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from langgraph.errors import GraphBubbleUp
from langgraph.graph import END
from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt

from langorch.domain.definitions import (
    LLM_KINDS,
    BlockDefinition,
    BlockType,
    MemorySpec,
    PlanStep,
    ReadFileSpec,
)
from langorch.domain.errors import (
    DefinitionError,
    FileContentError,
    FileRefusedError,
    LangorchError,
    StepFailedError,
    StepTimeoutError,
)
from langorch.domain.templates import (
    TemplateError,
    evaluate,
    prompt_char_limit,
    render,
    render_value,
)
from langorch.engine.context import EngineContext, FileReader
from langorch.engine.state import OrchestrationState

logger = logging.getLogger(__name__)

SUMMARY_CHARS = 300
"""Bound on each value shown in a timeline outputs summary."""

APPROVAL_LABELS = ("approved", "rejected", "timed_out")


@dataclass(frozen=True)
class StepSpec:
    """A plan step resolved against its block and the plan's topology, ready to execute."""

    step: PlanStep
    block: BlockDefinition | None
    kind: BlockType
    successors: tuple[str, ...]
    """Where to go after success (for a loop: after the last iteration). Empty: the end."""
    branch_targets: dict[str, str] = field(default_factory=dict)
    loop_entries: tuple[str, ...] = ()
    loop_parent: str | None = None
    """For a loop body's exit step: the loop step to return to."""
    loop_collect: tuple[str, ...] = ()
    """For a loop step: the body's output keys, collected per iteration by default."""
    join_deps: tuple[str, ...] = ()
    """Dependencies that must all have finished before this step runs (``join: all``)."""
    on_error: str | None = None
    """Where a failure after the retries goes: the step's ``on_error``, else the plan's
    ``on_failure`` (unless this step is on the failure route), else nowhere: the run fails."""
    end_node: str = END
    provider: str | None = None
    model: str | None = None
    temperature: float | None = None
    """LLM steps: the block's temperature, else the workflow's (``None``: the default)."""
    max_tokens: int | None = None
    """LLM steps: the block's output token limit, else the workflow's (``None``: the default)."""
    approvers: tuple[str, ...] = ()

    @property
    def step_id(self) -> str:
        return self.step.step_id

    @property
    def max_attempts(self) -> int:
        retries = self.step.max_retries
        if retries is None:
            retries = self.block.max_retries if self.block else 0
        return retries + 1

    @property
    def timeout_seconds(self) -> float | None:
        if self.kind in (BlockType.approval, BlockType.wait, BlockType.loop, BlockType.subflow):
            return None  # they park or delegate; their children have their own timeouts
        if self.step.timeout_seconds is not None:
            return float(self.step.timeout_seconds)
        return float(self.block.timeout_seconds) if self.block else 60.0

    def destinations(self) -> tuple[str, ...]:
        """Every node this step can route to (drawn as the graph's edges)."""
        targets = [*self.successors, *self.branch_targets.values(), *self.loop_entries]
        for extra in (self.loop_parent, self.on_error):
            if extra:
                targets.append(extra)
        approval = self.step.approval
        if approval and approval.on_max_iterations:
            targets.append(approval.on_max_iterations)
        if not self.successors or self.kind == BlockType.terminate:
            targets.append(self.end_node)
        return tuple(dict.fromkeys(targets))


@dataclass
class Outcome:
    """What a kind handler produced."""

    context: dict[str, Any] = field(default_factory=dict)
    label: str | None = None
    goto: list[str] | None = None
    """Explicit routing (loops, terminate); ``None``: route by label or successors."""
    state: dict[str, Any] = field(default_factory=dict)
    """Other state channels to update (``loops``, ``status``, ``outputs``, ``usage``)."""
    tokens: dict[str, int] | None = None
    summary: dict[str, str] | None = None
    """What the timeline shows of the outputs; ``None``: :func:`summarize` of ``context``.
    A file read shows the content's shape, never the content."""


class HttpStepError(LangorchError):
    """An ``http`` step got an error status."""

    def __init__(self, status: int, url_host: str) -> None:
        self.status = status
        self.retryable = status == 429 or status >= 500
        super().__init__(f"HTTP {status} from {url_host}")


def is_retryable(exc: BaseException) -> bool:
    """Whether another attempt could succeed: definition and template errors never do."""
    if isinstance(exc, DefinitionError | TemplateError):
        return False
    retryable = getattr(exc, "retryable", None)
    if retryable is not None:
        return bool(retryable)
    return True


# --------------------------------------------------------------------------------------------
# The node
# --------------------------------------------------------------------------------------------


def make_step_node(spec: StepSpec) -> Any:
    """Build the LangGraph node function for one step."""

    async def node(state: OrchestrationState, runtime: Runtime[EngineContext]) -> Any:
        ctx = runtime.context
        visits = state.get("visits") or {}
        done = visits.get(spec.step_id, 0)
        if spec.join_deps and not all(visits.get(d, 0) > done for d in spec.join_deps):
            return Command(goto=[])  # a join waits: another dependency will trigger it again
        info = runtime.execution_info
        attempt = info.node_attempt if info is not None else 1
        emit = runtime.stream_writer
        started = time.monotonic()
        if attempt == 1:
            emit(_event("step_started", spec, segment=ctx.segment))
        try:
            timeout = spec.timeout_seconds
            work = _run_kind(spec, state, ctx, attempt)
            outcome = await (asyncio.wait_for(work, timeout) if timeout else work)
        except GraphBubbleUp:
            raise  # interrupts park the run; they are not failures
        except Exception as exc:
            error = _normalise(exc, spec, attempt)
            duration = _ms(started)
            from langorch.llm.calls import error_tokens, retry_delay  # light: no SDK

            tokens = error_tokens(exc)  # a refused or cut answer is billed all the same
            if is_retryable(exc) and attempt < spec.max_attempts:
                emit(
                    _event(
                        "step_retried",
                        spec,
                        attempt=attempt,
                        duration_ms=duration,
                        error=error,
                        tokens=tokens,
                    )
                )
                logger.warning(
                    "step attempt failed; retrying",
                    extra={"run_id": ctx.run_id, "step_id": spec.step_id, "attempt": attempt},
                )
                # The server's Retry-After, within the step's own time; LangGraph's backoff
                # follows.
                await asyncio.sleep(retry_delay(exc, limit_seconds=spec.timeout_seconds))
                raise
            route = spec.on_error  # on_error, else the plan's on_failure (resolved at compile)
            emit(
                _event(
                    "step_failed",
                    spec,
                    attempt=attempt,
                    duration_ms=duration,
                    error=error,
                    routed_to=route,
                    tokens=tokens,
                )
            )
            logger.error(
                "step failed",
                extra={
                    "run_id": ctx.run_id,
                    "step_id": spec.step_id,
                    "error_type": error["type"],
                    "routed_to": route,
                },
            )
            if route is None:
                if isinstance(exc, StepTimeoutError | StepFailedError):
                    raise
                raise StepFailedError(f"step {spec.step_id} failed: {error['message']}") from exc
            return Command(
                update={
                    "error": dict(error),
                    "last_error": error["message"],
                    "visits": {spec.step_id: done + 1},
                    "block_results": [_result(spec, success=False, error=error)],
                },
                goto=route,
            )
        duration = _ms(started)
        shown = outcome.summary if outcome.summary is not None else summarize(outcome.context)
        emit(
            _event(
                "step_finished",
                spec,
                attempt=attempt,
                duration_ms=duration,
                tokens=outcome.tokens,
                branch=outcome.label,
                outputs_summary=shown,
            )
        )
        update: dict[str, Any] = {
            **outcome.state,
            "visits": {spec.step_id: done + 1},
            "current_block": {
                "block_id": spec.block.block_id if spec.block else None,
                "step_id": spec.step_id,
                "kind": spec.kind.value,
            },
            "block_results": [
                _result(
                    spec,
                    success=True,
                    # A bounded summary: the full outputs are in shared_context already, and a
                    # log that copied them would grow every checkpoint by every step's outputs.
                    output=shown,
                    label=outcome.label,
                    duration_ms=duration,
                )
            ],
        }
        if outcome.context:
            update["shared_context"] = outcome.context
        return Command(update=update, goto=_route(spec, state, outcome, done + 1))

    node.__name__ = f"step_{spec.step_id}"
    return node


def _route(spec: StepSpec, state: OrchestrationState, outcome: Outcome, visits: int) -> list[str]:
    if outcome.goto is not None:
        return outcome.goto
    if spec.kind == BlockType.approval and outcome.label == "rejected":
        approval = spec.step.approval
        if approval and approval.max_iterations and visits >= approval.max_iterations:
            # The review loop is bounded: stop asking and go on with the last draft.
            target = approval.on_max_iterations or spec.branch_targets.get("approved")
            return [target] if target else [spec.end_node]
    if outcome.label is not None:
        target = spec.branch_targets.get(outcome.label)
        if target is None:
            raise StepFailedError(
                f"step {spec.step_id} chose {outcome.label!r}, which has no branch; "
                f"known: {sorted(spec.branch_targets)}"
            )
        return [target]
    if spec.loop_parent is not None:
        return [spec.loop_parent]
    return list(spec.successors) or [spec.end_node]


# --------------------------------------------------------------------------------------------
# Kinds
# --------------------------------------------------------------------------------------------


async def _run_kind(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    kind = spec.kind
    if kind in LLM_KINDS:
        return await _llm_step(spec, state, ctx, attempt)
    if kind == BlockType.decision:
        return await _decision(spec, state, ctx, attempt)
    handler = _HANDLERS.get(kind)
    if handler is None:  # pragma: no cover - validation rejects unknown kinds
        raise StepFailedError(f"step {spec.step_id}: no executor for kind {kind}")
    return await handler(spec, state, ctx, attempt)


def scope_of(spec: StepSpec | None, state: OrchestrationState) -> dict[str, Any]:
    """The names templates and expressions see: ``shared_context`` plus the run's own."""
    shared = dict(state.get("shared_context") or {})
    scope: dict[str, Any] = {
        **shared,
        "user_preferences": state.get("user_preferences") or {},
        "user_history": state.get("user_history") or [],
        "error": state.get("error") or {},
        "run_id": state.get("run_id", ""),
        "user_id": state.get("user_id", ""),
    }
    mappings = spec.step.input_mappings if spec else None
    if mappings:
        for key, source in mappings.items():
            scope[key] = shared.get(source, "")
    return scope


def _inputs(spec: StepSpec, scope: dict[str, Any]) -> dict[str, Any]:
    keys = spec.block.input_keys if spec.block else []
    return {key: scope.get(key, "") for key in keys}


async def _call_llm(
    spec: StepSpec,
    state: OrchestrationState,
    ctx: EngineContext,
    attempt: int,
    *,
    choices: list[str] | None = None,
) -> tuple[dict[str, Any], dict[str, int], dict[str, Any]]:
    started = time.monotonic()  # before the first import of langorch.llm: it takes a while
    from langorch.llm import LLMRequest  # the package is light; SDKs load per provider
    from langorch.llm.calls import call_model

    block = spec.block
    if block is None:
        raise StepFailedError(f"step {spec.step_id}: an LLM step needs a block with a prompt")
    scope = scope_of(spec, state)
    scope.update(_inputs(spec, scope))
    provider = spec.provider or ctx.default_provider or "offline"
    prompt = render(
        block.prompt_template,
        scope,
        max_chars=prompt_char_limit(provider, block.max_prompt_chars),
        too_long_hint=f"the prompt limit of block {block.block_id} ({provider}); shorten its "
        "inputs, or raise the block's max_prompt_chars (at most 4,000,000)",
    )
    system = block.system_prompt or f"You are executing: {block.name or block.block_id}. " + (
        block.description or ""
    )
    request = LLMRequest(
        run_id=ctx.run_id,
        step_id=spec.step_id,
        block_id=block.block_id,
        provider=provider,
        model=spec.model,  # None: the registry applies the default provider's model
        system_prompt=render(system, scope),
        prompt=prompt,
        output_keys=[k for k in block.output_keys if not (choices and k == "branch")],
        output_types=dict(block.output_types),
        choices=choices,
        temperature=spec.temperature,
        tools=list(block.tools_required),
        call_index=(state.get("visits") or {}).get(spec.step_id, 0),
        attempt=attempt,
        max_tokens=spec.max_tokens,
        max_attempts=spec.max_attempts,
    )
    # Within the step's time, cancelled with it, every attempt's tokens counted (llm/calls.py).
    result = await call_model(
        ctx.llm, request, budget_seconds=spec.timeout_seconds, started=started
    )
    tokens = {"input": result.input_tokens, "output": result.output_tokens}
    usage = {
        "step_id": spec.step_id,
        "provider": result.provider,
        "model": result.model,
        "input": result.input_tokens,
        "output": result.output_tokens,
    }
    return dict(result.outputs), tokens, usage


async def _llm_step(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    outputs, tokens, usage = await _call_llm(spec, state, ctx, attempt)
    keys = spec.block.output_keys if spec.block else []
    context = {key: outputs[key] for key in keys if key in outputs}
    return Outcome(context=context, tokens=tokens, state={"usage": [usage]})


async def _decision(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    labels = list(spec.branch_targets)
    step = spec.step
    scope = scope_of(spec, state)
    if step.cases:
        label = step.default_branch
        for case in step.cases:
            if evaluate(case.when, scope):
                label = case.branch
                break
        if label is None:
            raise StepFailedError(f"step {spec.step_id}: no case matched and no default_branch")
        return Outcome(label=label, context={f"{spec.step_id}_branch": label})
    if step.condition:
        value = evaluate(step.condition, scope)
        label = _label_of(value, labels)
        return Outcome(label=label, context={f"{spec.step_id}_branch": label})
    outputs, tokens, usage = await _call_llm(spec, state, ctx, attempt, choices=labels)
    label = str(outputs.get("branch"))
    keys = spec.block.output_keys if spec.block else []
    context = {k: outputs[k] for k in keys if k in outputs and k != "branch"}
    context[f"{spec.step_id}_branch"] = label
    return Outcome(label=label, context=context, tokens=tokens, state={"usage": [usage]})


def _label_of(value: Any, labels: list[str]) -> str:
    if isinstance(value, bool):
        for candidate in ("true", "yes") if value else ("false", "no"):
            if candidate in labels:
                return candidate
    return str(value)


async def _transform(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    mapping = spec.step.transform or (spec.block.transform if spec.block else None) or {}
    scope = scope_of(spec, state)
    context: dict[str, Any] = {}
    for key, expression in mapping.items():
        context[key] = evaluate(expression, {**scope, **context})
    return Outcome(context=context)


def _memory_spec(spec: StepSpec) -> MemorySpec:
    return spec.step.memory or (spec.block.memory if spec.block else None) or MemorySpec()


async def _query_memory(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    memory = ctx.memory
    if memory is None:
        raise StepFailedError(f"step {spec.step_id}: long-term memory is not configured")
    mem = _memory_spec(spec)
    value: Any
    extra: dict[str, Any] = {}
    if mem.scope == "history":
        value = await asyncio.to_thread(memory.get_history, ctx.user_id, ctx.workflow_id, 10)
        extra["user_history"] = value
    else:
        prefs = await asyncio.to_thread(memory.get_preferences, ctx.user_id)
        extra["user_preferences"] = prefs
        value = {k: prefs[k] for k in mem.keys if k in prefs} if mem.keys else prefs
    context = {_output_key(spec, None, "memory_results"): value}
    if mem.keys and isinstance(value, dict):
        context.update(value)  # the named keys are also readable directly
    return Outcome(context=context, state=extra)


async def _save_memory(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    memory = ctx.memory
    if memory is None:
        raise StepFailedError(f"step {spec.step_id}: long-term memory is not configured")
    mem = _memory_spec(spec)
    scope = scope_of(spec, state)
    keys = mem.keys or (spec.block.input_keys if spec.block else [])
    values = {k: scope[k] for k in keys if k in scope and scope[k] not in ("", None)}
    if mem.scope == "history":
        await asyncio.to_thread(
            memory.save_history, ctx.user_id, ctx.workflow_id, ctx.run_id, values
        )
        return Outcome(context={f"{spec.step_id}_saved": sorted(values)})
    await asyncio.to_thread(memory.update_preferences, ctx.user_id, values)
    prefs = {**(state.get("user_preferences") or {}), **values}
    return Outcome(
        context={f"{spec.step_id}_saved": sorted(values)}, state={"user_preferences": prefs}
    )


def idempotency_key(run_id: str, step_id: str, visit: int) -> str:
    """Stable across retries and resumed segments: the same run, step and round."""
    return hashlib.sha256(f"{run_id}:{step_id}:{visit}".encode()).hexdigest()[:32]


async def _http(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    http = spec.step.http or (spec.block.http if spec.block else None)
    if http is None or ctx.http is None:
        raise StepFailedError(f"step {spec.step_id}: no http settings or no http client")
    scope = scope_of(spec, state)
    scope.update(_inputs(spec, scope))
    url = render(http.url, scope)
    headers = {k: render(v, scope) for k, v in http.headers.items()}
    visit = (state.get("visits") or {}).get(spec.step_id, 0)
    headers.setdefault("Idempotency-Key", idempotency_key(ctx.run_id, spec.step_id, visit))
    body = render_value(http.body, scope) if http.body is not None else None
    timeout = spec.timeout_seconds or 30.0
    status, payload = await asyncio.to_thread(
        ctx.http, http.method, url, headers=headers, body=body, timeout=timeout
    )
    if status >= 400:
        raise HttpStepError(status, url.split("/")[2] if "//" in url else url)
    key = _output_key(spec, http.response_key, f"{spec.step_id}_response")
    return Outcome(context={key: {"status": status, "body": payload}})


def _output_key(spec: StepSpec, explicit: str | None, default: str) -> str:
    """Where a step's single result goes: the key it names, else its block's first output key,
    else ``default``."""
    if explicit:
        return explicit
    keys = spec.block.output_keys if spec.block else []
    return keys[0] if keys else default


def read_file_spec(spec: StepSpec) -> ReadFileSpec:
    """The step's ``read_file`` settings, else its block's, else the defaults."""
    return spec.step.read_file or (spec.block.read_file if spec.block else None) or ReadFileSpec()


def check_readable(bucket: str, key: str, files: FileReader) -> None:
    """Refuse what a workflow may not read: another bucket, or another run's checkpoints.

    Raises:
        FileRefusedError: with what was asked and what is allowed.
    """
    where = f"s3://{bucket}/{key}"
    if not key:
        raise FileRefusedError(
            "read_file.key rendered empty; a run started by a file drop has 'key' in its "
            "input, other runs need read_file.key set"
        )
    if bucket != files.bucket:
        raise FileRefusedError(
            f"{where}: steps may read only the files bucket {files.bucket!r}; "
            "drop the file there (langorch files put) or copy it there first"
        )
    prefix = files.checkpoint_prefix.strip("/")
    if prefix and (key == prefix or key.startswith(prefix + "/")):
        raise FileRefusedError(
            f"{where}: keys under {prefix + '/'!r} hold run checkpoints and cannot be read "
            "by steps; put files under another prefix"
        )


def file_format(fmt: str, key: str) -> str:
    """The format ``auto`` stands for: by the key's suffix, else text."""
    if fmt != "auto":
        return fmt
    suffix = key.rsplit("/", 1)[-1].rsplit(".", 1)[-1].lower() if "." in key else ""
    return {"json": "json", "yaml": "yaml", "yml": "yaml", "csv": "csv"}.get(suffix, "text")


def parse_content(data: bytes, fmt: str, where: str) -> Any:
    """Decode ``data`` (UTF-8, a leading BOM dropped) and parse it as ``fmt``.

    ``text``: the string; ``lines``: its lines; ``json`` / ``yaml``: the document (YAML dates
    become ISO strings, so the result is JSON); ``csv``: a dict per row keyed by the header
    row, short rows padded with ``""``.

    Raises:
        FileContentError: bad UTF-8, or the parser's complaint with its position (never the
            content itself).
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FileContentError(
            f"{where} is not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "save it as UTF-8"
        ) from exc
    if fmt == "text":
        return text
    if fmt == "lines":
        return text.splitlines()
    if fmt == "json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise FileContentError(
                f"{where} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            ) from exc
    if fmt == "yaml":
        import yaml  # only read_file steps on YAML files need it (cold start, PERFORMANCE P3)

        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or type(exc).__name__
            raise FileContentError(f"{where} is not valid YAML: {problem}{at}") from exc
        return json.loads(json.dumps(document, default=str))
    if fmt == "csv":
        return _csv_rows(text, where)
    raise FileContentError(f"{where}: unknown format {fmt!r}")  # pragma: no cover - validated


def _csv_rows(text: str, where: str) -> list[dict[str, str]]:
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    rows: list[dict[str, str]] = []
    try:
        header = next(reader, None)
        if header is None:
            return rows
        for record in reader:
            if not record:
                continue  # a blank line
            if len(record) > len(header):
                raise FileContentError(
                    f"{where} is not valid CSV: line {reader.line_num} has {len(record)} "
                    f"fields, the header has {len(header)}"
                )
            padded = [*record, *[""] * (len(header) - len(record))]
            rows.append(dict(zip(header, padded, strict=True)))
    except csv.Error as exc:
        raise FileContentError(
            f"{where} is not valid CSV: {exc} at line {reader.line_num}"
        ) from exc
    return rows


def _shape(value: Any) -> str:
    if isinstance(value, str):
        return f"text, {len(value)} characters"
    if isinstance(value, list):
        return f"list of {len(value)} items"
    if isinstance(value, dict):
        return f"object with {len(value)} keys"
    return type(value).__name__


async def _read_file(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    files = ctx.files
    if files is None:
        raise StepFailedError(f"step {spec.step_id}: no file reader is configured")
    settings = read_file_spec(spec)
    scope = scope_of(spec, state)
    scope.update(_inputs(spec, scope))
    bucket = render(settings.bucket, scope).strip()
    key = render(settings.key, scope)
    check_readable(bucket, key, files)
    data, meta = await asyncio.to_thread(files.read, bucket, key, max_bytes=settings.max_bytes)
    fmt = file_format(settings.format, key)
    content = parse_content(data, fmt, f"s3://{bucket}/{key}")
    output_key = _output_key(spec, settings.output_key, f"{spec.step_id}_content")
    meta_key = f"{spec.step_id}_file"
    return Outcome(
        context={output_key: content, meta_key: meta},
        # The file's content stays out of the timeline: its shape and metadata only.
        summary={output_key: f"{fmt}: {_shape(content)}", **summarize({meta_key: meta})},
    )


async def _approval(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    approval = spec.step.approval
    if approval is None:
        raise StepFailedError(f"step {spec.step_id}: approval settings missing")
    scope = scope_of(spec, state)
    shared = state.get("shared_context") or {}
    iteration = (state.get("visits") or {}).get(spec.step_id, 0) + 1
    request = {
        "kind": "approval",
        "step_id": spec.step_id,
        "title": render(approval.title, scope)
        if approval.title
        else spec.step.name or spec.step_id,
        "message": render(approval.message, scope) if approval.message else "",
        "context": {k: shared.get(k) for k in approval.show_keys},
        "editable": {k: shared.get(k) for k in approval.editable_keys},
        "approvers": list(approval.approvers or spec.approvers or ctx.default_approvers),
        "timeout_seconds": approval.timeout_seconds,
        "on_timeout": approval.on_timeout,
        "require_code": approval.require_code,
        "iteration": iteration,
        "max_iterations": approval.max_iterations,
    }
    answer = interrupt(request)
    decision = _decision_of(answer)
    label = decision["decision"]
    if label == "timed_out":
        label = _timeout_label(spec, approval.on_timeout)
    edits = decision.get("edits") or {}
    unknown = sorted(set(edits) - set(approval.editable_keys))
    if unknown:
        raise StepFailedError(
            f"step {spec.step_id}: edits to keys that are not editable: {unknown}"
        )
    context: dict[str, Any] = dict(edits)
    if decision.get("comment"):
        context[approval.feedback_key] = decision["comment"]
    context[f"{spec.step_id}_decision"] = {
        "decision": decision["decision"],
        "approver": decision.get("approver"),
        "comment": decision.get("comment", ""),
        "iteration": iteration,
    }
    return Outcome(context=context, label=label)


def _decision_of(answer: Any) -> dict[str, Any]:
    if isinstance(answer, str):
        answer = {"decision": answer}
    if not isinstance(answer, dict) or answer.get("decision") not in APPROVAL_LABELS:
        raise StepFailedError(
            f"an approval resume must be {{'decision': one of {list(APPROVAL_LABELS)}}}, "
            f"got {answer!r:.200}"
        )
    return answer


def _timeout_label(spec: StepSpec, on_timeout: str) -> str:
    if on_timeout == "approve":
        return "approved"
    if on_timeout == "reject":
        return "rejected"
    if on_timeout == "fail":
        raise StepFailedError(f"approval {spec.step_id} timed out")
    return "timed_out" if "timed_out" in spec.branch_targets else "rejected"


async def _wait(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    wait = spec.step.wait
    scope = scope_of(spec, state)
    seconds: float
    if wait is not None and wait.until:
        until = datetime.fromisoformat(render(wait.until, scope).replace("Z", "+00:00"))
        if until.tzinfo is None:
            until = until.replace(tzinfo=UTC)
        seconds = max(0.0, (until - datetime.now(UTC)).total_seconds())
    elif wait is not None and wait.seconds is not None:
        raw = wait.seconds if isinstance(wait.seconds, int) else render(str(wait.seconds), scope)
        seconds = float(raw)
    else:
        raise StepFailedError(f"step {spec.step_id}: wait needs seconds or until")
    interrupt({"kind": "wait", "step_id": spec.step_id, "seconds": round(seconds)})
    return Outcome(context={f"{spec.step_id}_waited": round(seconds)})


async def _loop(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    loop = spec.step.loop
    if loop is None:
        raise StepFailedError(f"step {spec.step_id}: loop settings missing")
    cursor = dict((state.get("loops") or {}).get(spec.step_id) or {})
    shared = state.get("shared_context") or {}
    collect_key = loop.collect_key or f"{spec.step_id}_results"
    if not cursor.get("active"):
        over = loop.over
        items = shared.get(over) if over in shared else evaluate(over, scope_of(spec, state))
        if items is None:
            items = []
        if not isinstance(items, list):
            raise StepFailedError(
                f"loop {spec.step_id}: 'over' must give a list, got {type(items).__name__}"
            )
        cursor = {
            "active": True,
            "index": 0,
            "items": items[: loop.max_iterations],
            "results": [],
            "total": len(items),
        }
    else:
        collect = loop.collect or list(spec.loop_collect)
        cursor["results"] = [
            *cursor["results"],
            {k: shared.get(k) for k in collect},
        ]
        cursor["index"] += 1
    index = cursor["index"]
    if index < len(cursor["items"]):
        item = cursor["items"][index]
        context = {loop.item_key: item, loop.index_key: index}
        return Outcome(
            context=context, goto=list(spec.loop_entries), state={"loops": {spec.step_id: cursor}}
        )
    results = cursor["results"]
    done = {"active": False, "index": index, "items": [], "results": [], "total": cursor["total"]}
    return Outcome(
        context={collect_key: results},
        goto=list(spec.successors) or [spec.end_node],
        state={"loops": {spec.step_id: done}},
    )


async def _subflow(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    sub = spec.step.subflow
    if sub is None or ctx.subflows is None:
        raise StepFailedError(f"step {spec.step_id}: subflow settings or resolver missing")
    plan, graph = ctx.subflows(sub.workflow_id, sub.version)
    scope = scope_of(spec, state)
    child_input = {
        k: render_value(v, scope) if "{" in v else scope.get(v) for k, v in sub.inputs.items()
    }
    child_ctx = replace(ctx, workflow_id=plan.plan_id, workflow_version=plan.version)
    result = await graph.ainvoke(
        {
            "run_id": ctx.run_id,
            "agent_id": plan.plan_id,
            "user_id": ctx.user_id,
            "shared_context": child_input,
        },
        context=child_ctx,
    )
    if result.get("status") == "failed":
        raise StepFailedError(f"subflow {plan.plan_id} failed: {result.get('last_error')}")
    child_shared = result.get("shared_context") or {}
    keys = sub.outputs or list(child_shared)
    context = {k: child_shared.get(k) for k in keys}
    return Outcome(context=context, state={"usage": result.get("usage") or []})


async def _terminate(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    term = spec.step.terminate
    scope = scope_of(spec, state)
    status = term.status if term else "succeeded"
    outputs: dict[str, Any] = {}
    if term:
        for name, source in term.outputs.items():
            outputs[name] = render_value(source, scope) if "{" in source else scope.get(source)
    message = render(term.message, scope) if term and term.message else ""
    extra: dict[str, Any] = {"status": status, "outputs": outputs}
    if status == "failed":
        extra["last_error"] = message or f"terminated at {spec.step_id}"
    return Outcome(goto=[spec.end_node], state=extra)


Handler = Callable[[StepSpec, OrchestrationState, EngineContext, int], Awaitable[Outcome]]

_HANDLERS: dict[BlockType, Handler] = {
    BlockType.transform: _transform,
    BlockType.query_memory: _query_memory,
    BlockType.save_memory: _save_memory,
    BlockType.http: _http,
    BlockType.read_file: _read_file,
    BlockType.approval: _approval,
    BlockType.wait: _wait,
    BlockType.loop: _loop,
    BlockType.subflow: _subflow,
    BlockType.terminate: _terminate,
}


# --------------------------------------------------------------------------------------------
# Results, errors, events
# --------------------------------------------------------------------------------------------


def _normalise(exc: BaseException, spec: StepSpec, attempt: int) -> dict[str, Any]:
    if isinstance(exc, TimeoutError):
        exc = StepTimeoutError(f"step {spec.step_id} ran past {spec.timeout_seconds:.0f}s")
    message = str(exc) or type(exc).__name__
    return {
        "step_id": spec.step_id,
        "type": type(exc).__name__,
        "message": message[:1000],
        "attempts": attempt,
    }


def _result(
    spec: StepSpec,
    *,
    success: bool,
    output: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
    label: str | None = None,
    duration_ms: int | None = None,
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "step_id": spec.step_id,
        "block_id": spec.block.block_id if spec.block else None,
        "kind": spec.kind.value,
        "success": success,
        "output": output or {},
    }
    if label is not None:
        result["branch"] = label
    if error is not None:
        result["error"] = error
    if duration_ms is not None:
        result["duration_ms"] = duration_ms
    return result


def summarize(values: dict[str, Any]) -> dict[str, str]:
    """A bounded, printable view of a step's outputs for the timeline."""
    summary: dict[str, str] = {}
    for key, value in list(values.items())[:20]:
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        summary[key] = text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"
    return summary


def _event(event: str, spec: StepSpec, **fields: Any) -> dict[str, Any]:
    return {
        "event": event,
        "step_id": spec.step_id,
        "kind": spec.kind.value,
        "at": datetime.now(UTC).isoformat(),
        **{k: v for k, v in fields.items() if v is not None},
    }


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
