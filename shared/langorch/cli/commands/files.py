"""``langorch files put``: drop a file into the watched bucket (it starts matching workflows)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from langorch.cli.context import Context
from langorch.cli.errors import UsageError
from langorch.cli.registry import Subparsers, add_command, add_group


def register(subparsers: Subparsers) -> None:
    """Add the ``files`` group."""
    files = add_group(subparsers, "files", "drop files into the watched bucket")
    put = add_command(
        files, "put", _put, "upload a file; workflows with a matching s3 trigger start"
    )
    put.add_argument("path", metavar="PATH", help="the file to upload")
    put.add_argument("--key", help="the object key (default: the file's name)")


def _key(args: argparse.Namespace, path: Path) -> str:
    key = args.key if args.key is not None else path.name
    if not key or key.startswith("/") or len(key.encode("utf-8")) > 1024:
        raise UsageError(
            f"--key {key!r}: use a relative key of at most 1024 bytes, e.g. inbox/{path.name}"
        )
    return str(key)


def _matching(ctx: Context, bucket: str, key: str) -> list[str]:
    # Which workflows the drop will start: the same rule the trigger function applies.
    from langorch.domain.triggers import S3ObjectCreated, s3_trigger_matches

    obj = S3ObjectCreated(bucket=bucket, key=key)
    return sorted(
        plan.plan_id
        for plan in ctx.definitions().list_workflows()
        if any(
            s3_trigger_matches(t, obj, default_bucket=ctx.settings.bucket)
            for t in plan.all_triggers()
        )
    )


def _put(ctx: Context, args: argparse.Namespace) -> None:
    path = Path(args.path)
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "does not exist"
        raise UsageError(f"{path} {what}: give the path of the file to upload")
    key = _key(args, path)
    bucket = ctx.settings.bucket
    from langorch.adapters.local_files import FolderBucket, InvalidKeyError

    target = ctx.container.bucket
    try:
        put = target.put(key, path)
    except InvalidKeyError as exc:
        raise UsageError(f"--key: {exc}") from None
    workflows = _matching(ctx, bucket, key)
    local = isinstance(target, FolderBucket)
    document: dict[str, Any] = {
        "bucket": put.bucket,
        "key": put.key,
        "size": put.size,
        "etag": put.etag,
        "version_id": put.version_id,
        "matching_workflows": workflows,
        "local": local,
    }

    def text() -> str:
        where = f"s3://{put.bucket}/{put.key}"
        if isinstance(target, FolderBucket):
            where += f" ({target.path_of(put.key)})"
        lines = [f"put {where} ({put.size} bytes)"]
        if workflows:
            starts = "starts" if local else "will start"
            lines.append(f"the drop {starts} a run of: {', '.join(workflows)}")
            if local:
                lines.append(
                    "  (the local stack delivers the event within a second; `langorch runs list`)"
                )
        else:
            lines.append("no workflow has an s3 trigger matching this key: nothing starts")
        return "\n".join(lines)

    ctx.out.result(document, text)
