"""``read_file``: read one object of the files bucket (bounded, never checkpoints), parse it by
format (:mod:`langorch.domain.fileformats`), put content and metadata in ``shared_context``."""

from __future__ import annotations

import asyncio

from langorch.domain.errors import FileRefusedError, StepFailedError
from langorch.domain.fileformats import file_format, parse_content, shape
from langorch.domain.kinds.read_file import read_file_settings
from langorch.domain.step_settings import ReadFileSpec
from langorch.domain.templates import render
from langorch.engine.context import EngineContext, FileReader
from langorch.engine.kinds.base import (
    Executor,
    Outcome,
    StepSpec,
    input_scope,
    output_key,
    summarize,
)
from langorch.engine.state import OrchestrationState


def read_file_spec(spec: StepSpec) -> ReadFileSpec:
    """The step's ``read_file`` settings, else its block's, else the defaults."""
    return read_file_settings(spec.step, spec.block)


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


async def run_read_file(
    spec: StepSpec, state: OrchestrationState, ctx: EngineContext, attempt: int
) -> Outcome:
    """Read, parse, and keep the content out of the timeline (its shape only)."""
    files = ctx.files
    if files is None:
        raise StepFailedError(f"step {spec.step_id}: no file reader is configured")
    settings = read_file_spec(spec)
    scope = input_scope(spec, state)
    bucket = render(settings.bucket, scope).strip()
    key = render(settings.key, scope)
    check_readable(bucket, key, files)
    data, meta = await asyncio.to_thread(files.read, bucket, key, max_bytes=settings.max_bytes)
    fmt = file_format(settings.format, key)
    content = parse_content(data, fmt, f"s3://{bucket}/{key}")
    content_key = output_key(spec, settings.output_key, f"{spec.step_id}_content")
    meta_key = f"{spec.step_id}_file"
    return Outcome(
        context={content_key: content, meta_key: meta},
        # The file's content stays out of the timeline: its shape and metadata only.
        summary={content_key: f"{fmt}: {shape(content)}", **summarize({meta_key: meta})},
    )


EXECUTORS: dict[str, Executor] = {"read_file": run_read_file}
