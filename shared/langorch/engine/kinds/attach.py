"""``attach``: get each file's bytes from its source, keep it as one of the run's artifacts.

Each kept file is a recorded side effect (seed 001 §5), like an ``http`` step's response: its
record (name, size, content type, SHA-256, where it is stored) is written as soon as the file
is kept, so a step run again after a crash, or a replay, gets the record back and neither
downloads nor writes that file again. A failed file records nothing, so a retry tries again.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from langorch.domain.artifacts import (
    MAX_ARTIFACT_BYTES,
    ArtifactError,
    check_name,
    check_size,
    content_type_for,
    human_size,
    sha256_of,
    too_large,
)
from langorch.domain.errors import (
    FileMissingError,
    FileReadError,
    FileTooLargeError,
    StepFailedError,
)
from langorch.domain.kinds.attach import AttachFile, AttachSettings
from langorch.domain.kinds.registry import require
from langorch.domain.tasks import fingerprint
from langorch.domain.templates import render
from langorch.engine.context import EngineContext, StepEffects
from langorch.engine.kinds.base import (
    Executor,
    Outcome,
    StepSpec,
    input_scope,
    visits_of,
)
from langorch.engine.kinds.read_file import check_readable
from langorch.engine.state import OrchestrationState

Fetch = Callable[[], Awaitable[tuple[bytes, str | None]]]
"""Gets a file's bytes and its media type (``None``: guess from the name)."""

DOWNLOAD_TIMEOUT_SECONDS = 60.0
"""A download's timeout when the step sets no ``timeout_seconds``."""


async def run_attach(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    """Keep every file, in order; the step's result is their records."""
    if ctx.artifacts is None:
        raise StepFailedError(f"step {spec.step_id}: no artifact store is configured here")
    settings: AttachSettings = require("attach").settings(spec.step, spec.block)
    scope = input_scope(spec, state)
    effects = None
    if ctx.side_effects is not None:
        effects = ctx.side_effects.begin(
            step_id=spec.step_id,
            visit=visits_of(spec, state),
            attempt=attempt,
            tools=[],
            emit=_no_events,
        )
    kept: list[dict[str, Any]] = []
    try:
        for i, file in enumerate(settings.files):
            kept.append(await _attach(spec, ctx, effects, f"settings.files[{i}]", file, scope))
    finally:
        if effects is not None:
            await effects.aclose()
    key = f"{spec.step_id}_artifacts"
    listed = ", ".join(f"{r['name']} ({human_size(r['size'])})" for r in kept)
    return Outcome(
        context={key: kept},
        summary={key: f"{len(kept)} file{'s' if len(kept) != 1 else ''}: {listed}"},
    )


async def _attach(
    spec: StepSpec,
    ctx: EngineContext,
    effects: StepEffects | None,
    at: str,
    file: AttachFile,
    scope: dict[str, Any],
) -> dict[str, Any]:
    """Keep one file (once: recorded) and return its record."""
    name = render(file.name, scope).strip()
    try:
        check_name(name)
    except ArtifactError as exc:
        raise ArtifactError(f"{at}.name: {exc}") from None
    source, value = file.source()
    fetch: Fetch
    if source in ("content", "from"):
        data = _content(at, source, value, scope)
        check_size(len(data), f"{at} ({name})")
        digest = fingerprint("attach", name, source, sha256_of(data))
        fetch = _given(data)
    elif source == "key":
        key = render(value, scope).strip()
        digest = fingerprint("attach", name, source, key)
        fetch = _from_bucket(ctx, f"{at}.key", key)
    else:
        url = render(value, scope).strip()
        digest = fingerprint("attach", name, source, url)
        fetch = _download(ctx, f"{at}.url", url, spec.timeout_seconds)
    writer = ctx.artifacts
    assert writer is not None  # checked by run_attach

    async def keep() -> dict[str, Any]:
        data, given_type = await fetch()
        content_type = content_type_for(name, file.content_type or given_type)
        artifact = await asyncio.to_thread(
            writer.put, ctx.run_id, spec.step_id, name, data, content_type
        )
        record = artifact.record()
        del record["run_id"]  # the run's own state: its id says nothing
        return record

    if effects is None:
        return await keep()
    record, _replayed = await effects.once("attach", digest, keep)
    return record


def _given(data: bytes) -> Fetch:
    """The bytes a template or the run's state gave (the type comes from the name)."""

    async def fetch() -> tuple[bytes, str | None]:
        return data, None

    return fetch


def _content(at: str, source: str, value: str, scope: dict[str, Any]) -> bytes:
    """A ``content`` template rendered, or a ``from`` key's value (text as is, else JSON)."""
    if source == "content":
        text = render(value, scope)
        if value.endswith("\n") and not text.endswith("\n"):
            text += "\n"  # Jinja drops a template's last newline; a text file keeps it
        return text.encode("utf-8")
    found: Any = scope
    for part in value.split("."):
        found = found.get(part) if isinstance(found, dict) else None
    if found is None:
        raise ArtifactError(
            f"{at}.from: the run has no value at {value!r}; name a key an earlier step writes "
            "(an http step's response_key, an LLM step's output key)"
        )
    if isinstance(found, str):
        return found.encode("utf-8")
    return json.dumps(found, indent=2, ensure_ascii=False, default=str).encode("utf-8")


def _from_bucket(ctx: EngineContext, at: str, key: str) -> Fetch:
    """Reads ``key`` of the files bucket (as ``read_file`` may: never checkpoints)."""
    files = ctx.files
    if files is None:
        raise StepFailedError(f"{at}: no file reader is configured here")
    if not key:
        raise ArtifactError(
            f"{at} rendered empty; a run started by a file drop has its key as {{{{ key }}}}"
        )
    where = f"s3://{files.bucket}/{key}"

    async def fetch() -> tuple[bytes, str | None]:
        try:
            check_readable(files.bucket, key, files)
            data, _meta = await asyncio.to_thread(
                files.read, files.bucket, key, max_bytes=MAX_ARTIFACT_BYTES
            )
        except FileMissingError:
            raise ArtifactError(
                f"{at}: {where} does not exist; check the key (a run started by a file drop "
                "has it as {{ key }})"
            ) from None
        except FileTooLargeError:
            raise too_large(f"{at}: {where}") from None
        except FileReadError as exc:
            raise ArtifactError(f"{at}: {exc}", retryable=exc.retryable) from None
        return data, None

    return fetch


def _download(ctx: EngineContext, at: str, url: str, timeout: float | None) -> Fetch:
    """Downloads ``url``, at most :data:`MAX_ARTIFACT_BYTES`."""
    download = ctx.download
    if download is None:
        raise StepFailedError(f"{at}: no downloader is configured here")

    async def fetch() -> tuple[bytes, str | None]:
        try:
            return await asyncio.to_thread(
                download,
                url,
                max_bytes=MAX_ARTIFACT_BYTES,
                timeout=timeout or DOWNLOAD_TIMEOUT_SECONDS,
            )
        except ArtifactError as exc:
            raise type(exc)(f"{at}: {exc}", retryable=exc.retryable) from None

    return fetch


def _no_events(event: Any) -> None:
    """An attach step emits no tool events of its own (its step events say what it kept)."""


EXECUTORS: dict[str, Executor] = {"attach": run_attach}
