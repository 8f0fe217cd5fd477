"""The local stack's drop bucket: a folder under the home, one file per object key.

``langorch files put`` copies a file in, and so may a person (``cp report.csv
.langorch/bucket/inbox/``); the stack's watcher (:mod:`langorch.local.bucket_events`) turns each
new or changed file into the ``Object Created`` event S3 would send. ``read_file`` steps read
through :meth:`FolderBucket.read`, bounded as the S3 reader is. A file lives as long as the home:
nothing here is in memory, so a restart or a crash loses no dropped file.

Keys map to paths segment by segment (``inbox/a b+c.csv`` is ``bucket/inbox/a b+c.csv``); a key
that could leave the folder or name a hidden file (an empty, ``.`` or ``..`` segment, a leading
``.``, a NUL) is refused. Files whose names start with ``.`` are the folder's own (a copy in
progress) and never objects.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langorch.adapters.files import PutObject
from langorch.domain.errors import FileMissingError, FileTooLargeError, LangorchError

INCOMING = ".incoming"
"""Where a copy is written before it is renamed into place (atomic: never seen half done)."""

MAX_KEY_BYTES = 1024
"""S3's limit on a key's UTF-8 length."""


class InvalidKeyError(LangorchError, ValueError):
    """An object key that cannot name a file in the bucket folder."""


@dataclass(frozen=True)
class StoredObject:
    """A file of the bucket folder as the watcher sees it."""

    key: str
    size: int
    mtime_ns: int


def etag_of(path: Path) -> str:
    """S3's single-part ETag: the MD5 of the content, hex."""
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class FolderBucket:
    """The drop bucket as a folder; satisfies the ``FileReader`` port.

    Args:
        root: the folder (``<home>/bucket``).
        bucket: the bucket's name in settings and events (``Settings.bucket``).
    """

    checkpoint_prefix = "checkpoints"
    """Nothing is offloaded here (checkpoints live in SQLite); kept out of steps' reach anyway,
    as in the cloud."""

    def __init__(self, root: Path, *, bucket: str) -> None:
        self.root = root
        self.bucket = bucket

    def ensure(self) -> None:
        """Create the folder when missing."""
        (self.root / INCOMING).mkdir(parents=True, exist_ok=True)

    def path_of(self, key: str) -> Path:
        """The file that holds ``key``.

        Raises:
            InvalidKeyError: the key is empty, too long, or would leave the folder or name a
                hidden file.
        """
        if not key or len(key.encode("utf-8")) > MAX_KEY_BYTES:
            raise InvalidKeyError(
                f"object key {key[:80]!r} must be 1-{MAX_KEY_BYTES} bytes of UTF-8"
            )
        segments = key.split("/")
        for segment in segments:
            if segment in ("", ".", "..") or segment.startswith(".") or "\0" in segment:
                raise InvalidKeyError(
                    f"object key {key[:80]!r} has the segment {segment!r}: a local bucket key "
                    "is segments separated by single '/', none empty, '.', '..' or starting "
                    "with '.'"
                )
        return self.root.joinpath(*segments)

    def put(self, key: str, source: Path) -> PutObject:
        """Copy ``source`` in as ``key`` (an existing object is replaced), atomically."""
        target = self.path_of(key)
        self.ensure()
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self.root / INCOMING)
        os.close(handle)
        try:
            shutil.copyfile(source, temporary)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return PutObject(
            bucket=self.bucket, key=key, size=target.stat().st_size, etag=etag_of(target)
        )

    def objects(self) -> Iterator[StoredObject]:
        """Every object in the folder (hidden files and folders are not objects)."""
        if not self.root.is_dir():
            return
        for folder, directories, names in os.walk(self.root):
            directories[:] = sorted(d for d in directories if not d.startswith("."))
            for name in sorted(names):
                if name.startswith("."):
                    continue
                path = Path(folder, name)
                try:
                    stat = path.stat()
                except FileNotFoundError:  # removed while listing
                    continue
                key = path.relative_to(self.root).as_posix()
                yield StoredObject(key=key, size=stat.st_size, mtime_ns=stat.st_mtime_ns)

    def read(self, bucket: str, key: str, *, max_bytes: int) -> tuple[bytes, dict[str, Any]]:
        """At most ``max_bytes`` of the object, and ``{"bucket", "key", "size", "etag"}``.

        Raises:
            FileMissingError: no such object (or another bucket, which this stack has not).
            FileTooLargeError: the object is larger than ``max_bytes``.
        """
        where = f"s3://{bucket}/{key}"
        try:
            path = self.path_of(key) if bucket == self.bucket else None
        except InvalidKeyError:
            path = None
        if path is None or not path.is_file():
            raise FileMissingError(
                f"{where} does not exist (no such object); check the step's read_file.bucket "
                "and read_file.key, or the key the run was started with"
            )
        with path.open("rb") as handle:
            data = handle.read(max_bytes + 1)
            size = os.fstat(handle.fileno()).st_size
        if len(data) > max_bytes or size > max_bytes:
            raise FileTooLargeError(
                f"{where} is {max(size, len(data))} bytes, more than this step's max_bytes "
                f"({max_bytes}); raise read_file.max_bytes (at most 1048576) or split the file"
            )
        etag = hashlib.md5(data, usedforsecurity=False).hexdigest()
        return data, {"bucket": bucket, "key": key, "size": len(data), "etag": etag}
