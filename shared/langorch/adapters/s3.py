"""S3: the drop bucket (also where oversized checkpoints are offloaded)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from langorch.domain.errors import StorageError


def ensure_bucket(client: Any, bucket: str, region: str) -> None:
    """Create ``bucket`` when it does not exist (local stack and tests)."""
    try:
        client.head_bucket(Bucket=bucket)
        return
    except ClientError as exc:
        if exc.response["Error"]["Code"] not in ("404", "NoSuchBucket", "NotFound"):
            raise StorageError(f"cannot reach bucket {bucket}: {exc}") from exc
    params: dict[str, Any] = {"Bucket": bucket}
    if region != "us-east-1":
        params["CreateBucketConfiguration"] = {"LocationConstraint": region}
    try:
        client.create_bucket(**params)
    except ClientError as exc:
        raise StorageError(f"cannot create bucket {bucket}: {exc}") from exc
