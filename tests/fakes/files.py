"""In-memory objects of the files bucket, read as the S3 reader reads them."""

from __future__ import annotations

import hashlib
from typing import Any

from langorch.domain.errors import FileMissingError, FileTooLargeError


class InMemoryFiles:
    """Objects by ``(bucket, key)``; reads bounded by ``max_bytes`` like ``S3FileReader``.

    Args:
        bucket: the files bucket.
        checkpoint_prefix: where checkpoints are offloaded in it.
    """

    def __init__(self, bucket: str = "langorch-files", checkpoint_prefix: str = "checkpoints"):
        self.bucket = bucket
        self.checkpoint_prefix = checkpoint_prefix.strip("/")
        self._objects: dict[tuple[str, str], bytes] = {}

    def put(self, key: str, data: bytes, *, bucket: str | None = None) -> None:
        """Store an object (in the files bucket unless another is named)."""
        self._objects[(bucket or self.bucket, key)] = bytes(data)

    def read(self, bucket: str, key: str, *, max_bytes: int) -> tuple[bytes, dict[str, Any]]:
        """At most ``max_bytes`` of the object and ``{"bucket", "key", "size", "etag"}``."""
        where = f"s3://{bucket}/{key}"
        data = self._objects.get((bucket, key))
        if data is None:
            raise FileMissingError(
                f"{where} does not exist (no such object); check the step's read_file.bucket "
                "and read_file.key, or the key the run was started with"
            )
        if len(data) > max_bytes:
            raise FileTooLargeError(
                f"{where} is {len(data)} bytes, more than this step's max_bytes ({max_bytes}); "
                "raise read_file.max_bytes (at most 1048576) or split the file"
            )
        etag = hashlib.md5(data, usedforsecurity=False).hexdigest()  # S3's single-part ETag
        return data, {"bucket": bucket, "key": key, "size": len(data), "etag": etag}
