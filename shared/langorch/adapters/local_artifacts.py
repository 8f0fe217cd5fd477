"""Artifacts in a folder: ``<folder>/<run_id>/<step_id>/<name>``, the folder being the home's
``bucket/artifacts/`` (the same keys as in S3) or, for ``runs start --local --artifacts DIR``,
a folder that outlives the command.

Each file's record (content type, SHA-256) sits beside it in a hidden sidecar,
``.<name>.json``: hidden files are the bucket folder's own, never objects, so the watcher never
sees a sidecar and a file name (which never starts with ``.``) never collides with one. The
link is the file's path. The bucket folder's watcher sees attached files as objects, and the
trigger use-case never starts a run for one (as for checkpoint offloads in the cloud).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from langorch.domain.artifacts import (
    MAX_ARTIFACT_BYTES,
    MAX_LISTED,
    Artifact,
    artifact_key,
    content_type_for,
    name_problem,
    run_id_prefix,
    sha256_of,
)
from langorch.domain.errors import NotFoundError, StorageError


class FolderArtifacts:
    """The ``ArtifactStore`` port on a folder.

    Args:
        folder: where artifacts live (``<home>/bucket/artifacts``).
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, run_id: str, step_id: str, name: str) -> Path:
        # The key's checks (one segment each, no '..', no hidden name) keep it in the folder.
        key = artifact_key(run_id, step_id, name)
        return self.folder.joinpath(*key.split("/")[1:])

    def put(self, run_id: str, step_id: str, name: str, data: bytes, content_type: str) -> Artifact:
        """Write the record, then the file, each atomically (a reader never sees half)."""
        target = self._path(run_id, step_id, name)
        digest = sha256_of(data)
        record = {"content_type": content_type, "sha256": digest}
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            _write(_sidecar(target), json.dumps(record).encode("utf-8"))
            _write(target, data)
        except OSError as exc:
            raise StorageError(f"cannot keep artifact {target}: {exc}") from exc
        return self._artifact(run_id, step_id, target, len(data), record)

    def list(self, run_id: str, limit: int = MAX_LISTED) -> list[Artifact]:
        """The run's files under its folder (hidden files are records and copies in progress)."""
        run_id_prefix(run_id)  # checks the id is one segment
        folder = self.folder / run_id
        if not folder.is_dir():
            return []
        found: list[Artifact] = []
        try:
            for path in sorted(folder.glob("*/*")):
                if len(found) >= limit:
                    break
                if path.is_file() and not name_problem(path.name):
                    record = _record(path)
                    found.append(
                        self._artifact(run_id, path.parent.name, path, path.stat().st_size, record)
                    )
        except OSError as exc:
            raise StorageError(f"cannot list the artifacts of run {run_id}: {exc}") from exc
        return sorted(found, key=lambda a: (a.step_id, a.name))

    def link(self, artifact: Artifact) -> str:
        """The file's absolute path."""
        return str(self._path(artifact.run_id, artifact.step_id, artifact.name).resolve())

    def read(self, artifact: Artifact) -> bytes:
        """The file's bytes."""
        path = self._path(artifact.run_id, artifact.step_id, artifact.name)
        try:
            with path.open("rb") as handle:
                data = handle.read(MAX_ARTIFACT_BYTES + 1)
        except FileNotFoundError as exc:
            raise NotFoundError(f"{path} is gone") from exc
        except OSError as exc:
            raise StorageError(f"cannot read {path}: {exc}") from exc
        if len(data) > MAX_ARTIFACT_BYTES:
            raise StorageError(f"{path} is larger than an artifact can be: not served")
        return data

    def _artifact(
        self, run_id: str, step_id: str, path: Path, size: int, record: dict[str, str]
    ) -> Artifact:
        return Artifact(
            run_id=run_id,
            step_id=step_id,
            name=path.name,
            size=size,
            content_type=record["content_type"],
            sha256=record["sha256"],
            location=str(path.resolve()),
        )


def _sidecar(path: Path) -> Path:
    return path.with_name(f".{path.name}.json")


def _record(path: Path) -> dict[str, str]:
    """The file's record; made from the file when its sidecar is missing (a file copied in)."""
    try:
        record = json.loads(_sidecar(path).read_text(encoding="utf-8"))
        return {"content_type": str(record["content_type"]), "sha256": str(record["sha256"])}
    except (OSError, ValueError, KeyError, TypeError):
        return {"content_type": content_type_for(path.name), "sha256": sha256_of(path.read_bytes())}


def _write(target: Path, data: bytes) -> None:
    """``data`` into ``target`` through a hidden temporary file renamed into place."""
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
