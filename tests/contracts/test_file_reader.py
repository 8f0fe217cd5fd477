"""Contract of the files port (``FileReader``): S3 on moto, the local stack's bucket folder and
the in-memory fake."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import pytest

from langorch.adapters.files import S3FileReader
from langorch.adapters.local_files import FolderBucket
from langorch.domain.errors import FileMissingError, FileTooLargeError
from tests.fakes import InMemoryFiles

BUCKET = "langorch-files"
Reader = S3FileReader | InMemoryFiles | FolderBucket
Put = Callable[[str, bytes], None]


@pytest.fixture(params=["fake", "folder", "s3"])
def files(request: pytest.FixtureRequest, tmp_path: Any) -> tuple[Reader, Put]:
    """A reader and a way to store an object in its bucket."""
    if request.param == "fake":
        fake = InMemoryFiles(BUCKET)
        return fake, fake.put
    if request.param == "folder":
        folder = FolderBucket(tmp_path / "bucket", bucket=BUCKET)

        def put_file(key: str, data: bytes) -> None:
            source = tmp_path / "upload"
            source.write_bytes(data)
            folder.put(key, source)

        return folder, put_file
    s3: Any = request.getfixturevalue("s3")
    s3.create_bucket(Bucket=BUCKET)

    def put(key: str, data: bytes) -> None:
        s3.put_object(Bucket=BUCKET, Key=key, Body=data)

    return S3FileReader(s3, bucket=BUCKET, checkpoint_prefix="/checkpoints/"), put


def test_an_object_reads_back_with_its_size_and_etag(files: tuple[Reader, Put]) -> None:
    reader, put = files
    put("in/a.csv", b"a,b\n1,2\n")
    data, meta = reader.read(BUCKET, "in/a.csv", max_bytes=100)
    assert data == b"a,b\n1,2\n"
    assert (meta["bucket"], meta["key"], meta["size"]) == (BUCKET, "in/a.csv", 8)
    assert meta["etag"] == hashlib.md5(b"a,b\n1,2\n", usedforsecurity=False).hexdigest()


def test_an_object_of_exactly_max_bytes_is_read(files: tuple[Reader, Put]) -> None:
    reader, put = files
    put("in/ten", b"0123456789")
    assert reader.read(BUCKET, "in/ten", max_bytes=10)[0] == b"0123456789"


def test_an_object_larger_than_max_bytes_is_refused(files: tuple[Reader, Put]) -> None:
    reader, put = files
    put("in/eleven", b"0123456789A")
    with pytest.raises(FileTooLargeError, match="11 bytes"):
        reader.read(BUCKET, "in/eleven", max_bytes=10)


def test_an_empty_object_reads_as_no_bytes(files: tuple[Reader, Put]) -> None:
    reader, put = files
    put("in/empty", b"")
    data, meta = reader.read(BUCKET, "in/empty", max_bytes=10)
    assert (data, meta["size"]) == (b"", 0)


def test_a_missing_object_is_a_missing_file(files: tuple[Reader, Put]) -> None:
    reader, _ = files
    with pytest.raises(FileMissingError, match="does not exist"):
        reader.read(BUCKET, "in/nope", max_bytes=10)


def test_the_reader_names_its_bucket_and_checkpoint_prefix(files: tuple[Reader, Put]) -> None:
    reader, _ = files
    assert (reader.bucket, reader.checkpoint_prefix) == (BUCKET, "checkpoints")
