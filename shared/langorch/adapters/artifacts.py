"""Artifacts in S3: the files bucket under ``artifacts/<run_id>/<step_id>/<name>``
(:mod:`langorch.domain.artifacts`).

Only I/O. An object carries its own record: ``Content-Type``, and the SHA-256 as user metadata
(``x-amz-meta-sha256``), so the record expires with the bytes (the bucket's lifecycle rule on
``artifacts/``). Two classes, because two principals use them: the runner only writes
(:class:`S3ArtifactWriter`, ``s3:PutObject`` on the prefix); operators list, link and read
(:class:`S3Artifacts`, with their own credentials). Links are presigned GET URLs made here
without a request, never stored or logged.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from langorch.domain.artifacts import (
    LINK_SECONDS,
    MAX_ARTIFACT_BYTES,
    MAX_LISTED,
    OCTET_STREAM,
    Artifact,
    artifact_key,
    content_disposition,
    run_id_prefix,
    sha256_of,
    step_and_name,
)
from langorch.domain.errors import NotFoundError, StorageError

_MISSING = frozenset({"NoSuchKey", "NotFound", "404"})


def _location(bucket: str, key: str) -> str:
    return f"s3://{bucket}/{key}"


class S3ArtifactWriter:
    """Keeps artifacts in the files bucket: the runner's half of the ``ArtifactStore`` port.

    Args:
        client: an S3 client.
        bucket: the files bucket (``Settings.bucket``).
    """

    def __init__(self, client: Any, *, bucket: str) -> None:
        self._client = client
        self.bucket = bucket

    def put(self, run_id: str, step_id: str, name: str, data: bytes, content_type: str) -> Artifact:
        """Upload the file with its record (one PutObject; the same key again replaces it)."""
        key = artifact_key(run_id, step_id, name)
        where = _location(self.bucket, key)
        digest = sha256_of(data)
        try:
            self._client.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=data,
                ContentType=content_type,
                Metadata={"sha256": digest},
            )
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"cannot keep artifact {where}: {exc}") from exc
        return Artifact(
            run_id=run_id,
            step_id=step_id,
            name=name,
            size=len(data),
            content_type=content_type,
            sha256=digest,
            location=where,
        )


class S3Artifacts(S3ArtifactWriter):
    """The whole ``ArtifactStore`` port on the files bucket (operators: CLI and console).

    Args:
        client: an S3 client with the operator's credentials.
        bucket: the files bucket (``Settings.bucket``).
    """

    def list(self, run_id: str, limit: int = MAX_LISTED) -> list[Artifact]:
        """The run's artifacts: ListObjectsV2 under its prefix, then one HeadObject each for
        its record (the listing carries neither content type nor metadata)."""
        found: list[Artifact] = []
        try:
            pages = self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=run_id_prefix(run_id)
            )
            for page in pages:
                for item in page.get("Contents", []):
                    parts = step_and_name(run_id, item["Key"])
                    if parts is not None and len(found) < limit:
                        artifact = self._head(run_id, *parts)
                        if artifact is not None:
                            found.append(artifact)
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"cannot list the artifacts of run {run_id}: {exc}") from exc
        return sorted(found, key=lambda a: (a.step_id, a.name))

    def _head(self, run_id: str, step_id: str, name: str) -> Artifact | None:
        """The object's record; ``None`` when it expired since the listing."""
        key = artifact_key(run_id, step_id, name)
        try:
            head = self._client.head_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code", "")) in _MISSING:
                return None
            raise
        return Artifact(
            run_id=run_id,
            step_id=step_id,
            name=name,
            size=int(head.get("ContentLength", 0)),
            content_type=str(head.get("ContentType") or OCTET_STREAM),
            sha256=str(head.get("Metadata", {}).get("sha256", "")),
            location=_location(self.bucket, key),
        )

    def link(self, artifact: Artifact) -> str:
        """A presigned GET URL, valid :data:`LINK_SECONDS`, that downloads as the file's name
        (signed here, no request)."""
        url: str = self._client.generate_presigned_url(
            "get_object",
            Params={
                "Bucket": self.bucket,
                "Key": artifact.key,
                "ResponseContentDisposition": content_disposition(artifact.name),
            },
            ExpiresIn=LINK_SECONDS,
        )
        return url

    def read(self, artifact: Artifact) -> bytes:
        """The file's bytes (one GetObject, never more than :data:`MAX_ARTIFACT_BYTES`)."""
        where = _location(self.bucket, artifact.key)
        try:
            response = self._client.get_object(Bucket=self.bucket, Key=artifact.key)
            body = response["Body"]
            try:
                data: bytes = body.read(MAX_ARTIFACT_BYTES + 1)
            finally:
                body.close()
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code", "")) in _MISSING:
                raise NotFoundError(f"{where} is gone (expired with the run's data)") from exc
            raise StorageError(f"cannot read {where}: {exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"cannot read {where}: {exc}") from exc
        if len(data) > MAX_ARTIFACT_BYTES:
            raise StorageError(f"{where} is larger than an artifact can be: not served")
        return data
