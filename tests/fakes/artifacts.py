"""Artifacts in memory (``tests/contracts/test_artifact_store.py``), and files to download."""

from __future__ import annotations

from langorch.domain.artifacts import (
    MAX_LISTED,
    Artifact,
    ArtifactError,
    artifact_key,
    check_size,
    run_id_prefix,
    sha256_of,
    step_and_name,
)
from langorch.domain.errors import NotFoundError


class InMemoryArtifacts:
    """The ``ArtifactStore`` port in a dict of keys to (bytes, content type)."""

    def __init__(self) -> None:
        self.objects: dict[str, tuple[bytes, str]] = {}
        self.puts = 0
        """How many files were written (a replayed step writes none)."""

    def put(self, run_id: str, step_id: str, name: str, data: bytes, content_type: str) -> Artifact:
        key = artifact_key(run_id, step_id, name)
        self.objects[key] = (bytes(data), content_type)
        self.puts += 1
        return self._artifact(run_id, key)

    def list(self, run_id: str, limit: int = MAX_LISTED) -> list[Artifact]:
        prefix = run_id_prefix(run_id)
        found = [
            self._artifact(run_id, key)
            for key in sorted(self.objects)
            if key.startswith(prefix) and step_and_name(run_id, key) is not None
        ]
        return sorted(found, key=lambda a: (a.step_id, a.name))[:limit]

    def link(self, artifact: Artifact) -> str:
        return f"memory://{artifact.key}"

    def read(self, artifact: Artifact) -> bytes:
        if artifact.key not in self.objects:
            raise NotFoundError(f"{artifact.key} is gone")
        return self.objects[artifact.key][0]

    def _artifact(self, run_id: str, key: str) -> Artifact:
        parts = step_and_name(run_id, key)
        assert parts is not None
        data, content_type = self.objects[key]
        return Artifact(
            run_id=run_id,
            step_id=parts[0],
            name=parts[1],
            size=len(data),
            content_type=content_type,
            sha256=sha256_of(data),
            location=f"memory://{key}",
        )


class FakeDownloads:
    """What ``url`` sources download: files by URL, bounded like ``http_download``.

    Args:
        files: URL -> (bytes, Content-Type); a URL not in it answers 404.
    """

    def __init__(self, files: dict[str, tuple[bytes, str | None]] | None = None) -> None:
        self.files = dict(files or {})
        self.fetched: list[str] = []

    def __call__(self, url: str, *, max_bytes: int, timeout: float) -> tuple[bytes, str | None]:
        self.fetched.append(url)
        where = url.split("?")[0]  # as http_download: a query may carry a token
        if url not in self.files:
            raise ArtifactError(f"downloading {where}: HTTP 404")
        data, content_type = self.files[url]
        check_size(len(data), f"the download from {where}", limit=max_bytes)
        return data, content_type
