"""Artifacts: files a run produced or downloaded, kept with the run (seed 001 §6.1, §8.3).

An ``attach`` step keeps each file in the files bucket under
``artifacts/<run_id>/<step_id>/<name>`` (locally: the home's ``bucket/artifacts/`` folder), with
what it is: name, size, content type, SHA-256, where it is stored and which step attached it.
The bytes and that record live together (S3 object metadata; a hidden sidecar file locally),
so a file and its record expire at once: the bucket's lifecycle rule expires the prefix with
the run's checkpoints (``infra/constructs/storage.py``). ``runs show`` and the console's run
page list them with a link made on demand: a presigned GET URL in the cloud (never stored or
logged), the file's path locally, and the console serves each as a download. Objects under the
prefix never start runs, as checkpoint offloads never do.
"""

from __future__ import annotations

import hashlib
import mimetypes
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import quote

from langorch.domain.errors import LangorchError

ARTIFACTS_PREFIX = "artifacts"
"""Where artifacts live in the files bucket."""

MAX_ARTIFACT_BYTES = 10 * 1024 * 1024
"""The largest file a step may attach, 10 MiB: a run's own files, not a file store (a larger
file is read whole into the runner's memory and served whole by the console)."""

MAX_NAME_CHARS = 200
"""The longest file name (a file system allows 255 bytes; the sidecar adds a few)."""

MAX_LISTED = 200
"""The most artifacts ``runs show`` and the console list for one run."""

LINK_SECONDS = 900
"""How long a presigned link made by ``runs show`` works: 15 minutes, long enough to click."""

OCTET_STREAM = "application/octet-stream"


class ArtifactError(LangorchError):
    """A file cannot be attached: its name cannot name a file, its source is wrong or gone.

    ``retryable`` is true only for what another attempt can fix (a 5xx, a dropped connection).
    """

    retryable = False

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        self.retryable = retryable
        super().__init__(message)


class ArtifactTooLargeError(ArtifactError):
    """The file is larger than :data:`MAX_ARTIFACT_BYTES`; another attempt gets the same."""


@dataclass(frozen=True)
class Artifact:
    """A file attached to a run.

    Attributes:
        run_id: The run.
        step_id: The step that attached it.
        name: Its file name (one path segment).
        size: Its size in bytes.
        content_type: Its media type (given, from the download, else from the name).
        sha256: The SHA-256 of its bytes, hex.
        location: Where it is stored: ``s3://bucket/key`` in the cloud, a path locally.
    """

    run_id: str
    step_id: str
    name: str
    size: int
    content_type: str
    sha256: str
    location: str

    @property
    def key(self) -> str:
        """Its key in the files bucket (``artifacts/<run_id>/<step_id>/<name>``)."""
        return artifact_key(self.run_id, self.step_id, self.name)

    def record(self) -> dict[str, Any]:
        """The JSON record ``runs show --json`` carries, and (without ``run_id``, the run's
        own) the attaching step's result."""
        return asdict(self)


def check_name(name: str) -> str:
    """``name`` when it can name one file, else :class:`ArtifactError` saying why.

    A name is one path segment: no ``/`` or ``\\``, not empty, ``.`` or ``..``, no leading
    ``.`` (hidden files are the folder's own), no control character, at most
    :data:`MAX_NAME_CHARS` characters.
    """
    problem = name_problem(name)
    if problem:
        raise ArtifactError(
            f"artifact name {name[:80]!r} {problem}: name the file with one path segment "
            "(report.md, invoice-{{ run_id }}.pdf)"
        )
    return name


def name_problem(name: str) -> str:
    """Why ``name`` cannot name one file (``""``: it can)."""
    if not name or name in (".", "..") or name.startswith("."):
        return "is empty or starts with '.'"
    if "/" in name or "\\" in name:
        return "has a '/' or '\\' (a name is one file, not a path)"
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "has a control character"
    if len(name) > MAX_NAME_CHARS:
        return f"is longer than {MAX_NAME_CHARS} characters"
    return ""


def _check_segment(what: str, value: str) -> str:
    """A run or step id as a key segment: never a path of its own (ids are plain already)."""
    if not value or value in (".", "..") or value.startswith(".") or "/" in value or "\\" in value:
        raise ArtifactError(f"{what} {value[:80]!r} cannot be part of an artifact's key")
    return value


def run_id_prefix(run_id: str) -> str:
    """``artifacts/<run_id>/``: where a run's artifacts are listed from."""
    return f"{ARTIFACTS_PREFIX}/{_check_segment('run id', run_id)}/"


def artifact_key(run_id: str, step_id: str, name: str) -> str:
    """``artifacts/<run_id>/<step_id>/<name>`` (each part checked)."""
    return f"{run_id_prefix(run_id)}{_check_segment('step id', step_id)}/{check_name(name)}"


def step_and_name(run_id: str, key: str) -> tuple[str, str] | None:
    """The step and name a bucket key under the run's prefix holds (``None``: not one)."""
    rest = key.removeprefix(run_id_prefix(run_id))
    step_id, _, name = rest.partition("/")
    if rest == key or not step_id or name_problem(name):
        return None
    return step_id, name


def content_type_for(name: str, given: str | None = None) -> str:
    """``given`` (a download's ``Content-Type``, a step's setting), else guessed from the name."""
    if given and given.strip():
        return given.strip()
    return mimetypes.guess_type(name)[0] or OCTET_STREAM


def sha256_of(data: bytes) -> str:
    """The SHA-256 of ``data``, hex."""
    return hashlib.sha256(data).hexdigest()


def check_size(size: int, what: str, limit: int = MAX_ARTIFACT_BYTES) -> None:
    """Refuse a file past ``limit`` (:data:`MAX_ARTIFACT_BYTES`), saying which and what to do.

    Raises:
        ArtifactTooLargeError: ``size`` is over the limit.
    """
    if size > limit:
        raise too_large(what, limit)


def too_large(what: str, limit: int = MAX_ARTIFACT_BYTES) -> ArtifactTooLargeError:
    """The error for a file past ``limit``: which, the limit, and what to do instead."""
    return ArtifactTooLargeError(
        f"{what} is over {limit} bytes, the most a step may attach: attach a smaller file or "
        "a summary of it, or keep it elsewhere and attach its link"
    )


def human_size(size: int) -> str:
    """``512 B``, ``1.2 kB``, ``3.4 MB`` (decimal units, as file managers show)."""
    if size < 1000:
        return f"{size} B"
    if size < 1_000_000:
        return f"{size / 1000:.1f} kB"
    return f"{size / 1_000_000:.1f} MB"


def content_disposition(name: str) -> str:
    """A ``Content-Disposition`` that downloads as ``name``, never shows it inline (RFC 6266:
    an ASCII fallback and the UTF-8 name, percent-encoded)."""
    fallback = "".join(c if 32 <= ord(c) < 127 and c not in '"\\;' else "_" for c in name)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"
