"""S3: files dropped into the watched bucket (``langorch files put``) and read by steps."""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from langorch.domain.errors import (
    FileMissingError,
    FileReadError,
    FileTooLargeError,
    NotFoundError,
    StorageError,
)

_MISSING = frozenset({"NoSuchKey", "NoSuchBucket", "NotFound", "404"})
_DENIED = frozenset({"AccessDenied", "403", "AllAccessDisabled"})
_TRANSIENT = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestTimeout",
        "RequestTimeTooSkewed",
        "InternalError",
        "ServiceUnavailable",
        "503",
        "500",
    }
)


@dataclass(frozen=True)
class PutObject:
    """Where a file went."""

    bucket: str
    key: str
    size: int
    etag: str
    version_id: str | None = None


def put_file(client: Any, bucket: str, key: str, path: Path) -> PutObject:
    """Upload ``path`` to ``s3://bucket/key`` (content type from the file name).

    Raises:
        NotFoundError: the bucket does not exist.
        StorageError: S3 refused the upload.
    """
    content_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    try:
        with path.open("rb") as body:
            response = client.put_object(
                Bucket=bucket, Key=key, Body=body, ContentType=content_type
            )
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code == "NoSuchBucket":
            raise NotFoundError(f"bucket {bucket} does not exist: is the stack deployed?") from exc
        raise StorageError(f"cannot put s3://{bucket}/{key}: {code or exc}") from exc
    version = response.get("VersionId")
    return PutObject(
        bucket=bucket,
        key=key,
        size=path.stat().st_size,
        etag=str(response.get("ETag", "")).strip('"'),
        version_id=None if version in (None, "null") else str(version),
    )


class S3Bucket:
    """The drop bucket in S3: where ``langorch files put`` uploads (its events start runs).

    Args:
        client: an S3 client.
        bucket: the bucket (``Settings.bucket``).
    """

    def __init__(self, client: Any, *, bucket: str) -> None:
        self._client = client
        self.bucket = bucket

    def put(self, key: str, source: Path) -> PutObject:
        """Upload ``source`` as ``key`` (see :func:`put_file`)."""
        return put_file(self._client, self.bucket, key, source)


class S3FileReader:
    """Reads objects of the files bucket for ``read_file`` steps, never past a byte bound.

    Only I/O: which bucket and keys a step may read is decided by the executor, from
    ``bucket`` and ``checkpoint_prefix``.

    Args:
        client: an S3 client.
        bucket: the files bucket (``Settings.bucket``).
        checkpoint_prefix: where checkpoints are offloaded in it (``Settings.checkpoint_prefix``).
    """

    def __init__(self, client: Any, *, bucket: str, checkpoint_prefix: str) -> None:
        self._client = client
        self.bucket = bucket
        self.checkpoint_prefix = checkpoint_prefix.strip("/")

    def read(self, bucket: str, key: str, *, max_bytes: int) -> tuple[bytes, dict[str, Any]]:
        """At most ``max_bytes`` of ``s3://bucket/key``, and the object's metadata.

        One ranged GetObject for ``max_bytes + 1`` bytes: the body is never read unbounded,
        and the total size comes from ``Content-Range``.

        Returns:
            The bytes and ``{"bucket", "key", "size", "etag"}``.

        Raises:
            FileMissingError: no such object or bucket.
            FileTooLargeError: the object is larger than ``max_bytes``.
            FileReadError: access denied (not retryable), or throttling, a 5xx or a dropped
                connection (retryable).
        """
        where = f"s3://{bucket}/{key}"
        try:
            response = self._client.get_object(Bucket=bucket, Key=key, Range=f"bytes=0-{max_bytes}")
            body = response["Body"]
            try:
                data: bytes = body.read(max_bytes + 1)
            finally:
                body.close()
        except ClientError as exc:
            if _code(exc) == "InvalidRange":  # S3 answers a range on an empty object with 416
                return b"", self._head(bucket, key)
            raise _read_error(exc, where) from exc
        except BotoCoreError as exc:  # connection dropped, read timed out
            raise FileReadError(
                f"cannot read {where}: {type(exc).__name__}", retryable=True
            ) from exc
        size = _total_size(response, len(data))
        if size > max_bytes or len(data) > max_bytes:
            raise FileTooLargeError(
                f"{where} is {max(size, len(data))} bytes, more than this step's max_bytes "
                f"({max_bytes}); raise read_file.max_bytes (at most 1048576) or split the file"
            )
        return data, _metadata(bucket, key, size, response)

    def _head(self, bucket: str, key: str) -> dict[str, Any]:
        try:
            response = self._client.head_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            raise _read_error(exc, f"s3://{bucket}/{key}") from exc
        except BotoCoreError as exc:
            raise FileReadError(
                f"cannot read s3://{bucket}/{key}: {type(exc).__name__}", retryable=True
            ) from exc
        return _metadata(bucket, key, int(response.get("ContentLength", 0)), response)


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _read_error(exc: ClientError, where: str) -> FileReadError:
    code = _code(exc)
    status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
    if code in _MISSING:
        what = "bucket" if code == "NoSuchBucket" else "object"
        return FileMissingError(
            f"{where} does not exist (no such {what}); check the step's read_file.bucket and "
            "read_file.key, or the key the run was started with"
        )
    if code in _DENIED:
        # Without s3:ListBucket on the key, S3 answers a missing key with 403 too.
        return FileReadError(
            f"{where} does not exist or the runner may not read it (access denied)"
        )
    if code in _TRANSIENT or status >= 500:
        return FileReadError(f"S3 failed reading {where}: {code or status}", retryable=True)
    return FileReadError(f"cannot read {where}: {code or status}")


def _total_size(response: dict[str, Any], read: int) -> int:
    content_range = str(response.get("ContentRange") or "")
    total = content_range.rsplit("/", 1)[-1]
    if total.isdigit():
        return int(total)
    length = response.get("ContentLength")
    return int(length) if length is not None else read


def _metadata(bucket: str, key: str, size: int, response: dict[str, Any]) -> dict[str, Any]:
    return {
        "bucket": bucket,
        "key": key,
        "size": size,
        "etag": str(response.get("ETag", "")).strip('"'),
    }
