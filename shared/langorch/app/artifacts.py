"""The artifacts port, and what ``runs show`` and the console's run page do with it: list a
run's files with links, and find one to download.

Where artifacts live, what is recorded of each and how they expire:
:mod:`langorch.domain.artifacts`. The store is the files bucket (S3) in the cloud, a folder of
the home locally, a dict in tests; one contract suite holds them to the same behaviour
(``tests/contracts/test_artifact_store.py``). The runner only writes
(:class:`~langorch.engine.context.ArtifactWriter`); listing, links and reads are the
operator's, with the operator's credentials.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from langorch.domain.artifacts import MAX_LISTED, Artifact, name_problem
from langorch.domain.errors import NotFoundError


class ArtifactStore(Protocol):
    """Where a run's artifacts are kept."""

    def put(self, run_id: str, step_id: str, name: str, data: bytes, content_type: str) -> Artifact:
        """Keep ``data`` as the step's artifact ``name`` (the same name again replaces it).

        Raises:
            ArtifactError: the name cannot name a file.
            StorageError: the store refused.
        """
        ...

    def list(self, run_id: str, limit: int = MAX_LISTED) -> list[Artifact]:
        """The run's artifacts, by step and name, at most ``limit``.

        Raises:
            StorageError: the store refused.
        """
        ...

    def link(self, artifact: Artifact) -> str:
        """Where a person opens it: a path locally, a presigned GET URL in the cloud (made now,
        valid :data:`~langorch.domain.artifacts.LINK_SECONDS`; never stored or logged)."""
        ...

    def read(self, artifact: Artifact) -> bytes:
        """Its bytes (at most :data:`~langorch.domain.artifacts.MAX_ARTIFACT_BYTES`).

        Raises:
            NotFoundError: it is gone (expired).
            StorageError: the store refused.
        """
        ...


@dataclass(frozen=True)
class LinkedArtifact:
    """An artifact and the link made for it."""

    artifact: Artifact
    link: str


def run_artifacts(run_id: str, store: ArtifactStore) -> list[LinkedArtifact]:
    """The run's artifacts, each with a link made on demand.

    Raises:
        StorageError: the store refused (the caller still shows the run).
    """
    return [LinkedArtifact(a, store.link(a)) for a in store.list(run_id)]


def find_artifact(run_id: str, step_id: str, name: str, store: ArtifactStore) -> Artifact:
    """The run's artifact ``name`` of ``step_id``, as the store lists it.

    Only what the listing returns is ever found: a name that is not one file (``..``, a path,
    a hidden file) or any other key of the bucket is not an artifact of the run.

    Raises:
        NotFoundError: the run has no such artifact.
    """
    if not name_problem(name):
        for artifact in store.list(run_id):
            if artifact.step_id == step_id and artifact.name == name:
                return artifact
    raise NotFoundError(
        f"run {run_id} has no artifact {name[:80]!r} of step {step_id[:80]!r}: "
        "its run page lists those it has (they expire with the run's data)"
    )
