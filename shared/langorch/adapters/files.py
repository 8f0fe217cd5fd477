"""S3: files dropped into the watched bucket (``langorch files put``)."""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from langorch.domain.errors import NotFoundError, StorageError


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
