"""The local drop bucket is a folder: keys map to files one segment at a time, awkward names
included, and no key can leave the folder or pass for the folder's own files."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from langorch.adapters.local_files import FolderBucket, InvalidKeyError


@pytest.fixture
def bucket(tmp_path: Path) -> FolderBucket:
    return FolderBucket(tmp_path / "bucket", bucket="langorch-files")


@pytest.mark.parametrize(
    "key", ["inbox/c++ report (1).csv", "inbox/100% done.txt", "inbox/naïve résumé.csv", "a+b"]
)
def test_an_awkward_name_is_stored_and_listed_under_its_key(
    bucket: FolderBucket, tmp_path: Path, key: str
) -> None:
    # Given a file put under a key with spaces, +, %, parentheses or non-ASCII letters
    source = tmp_path / "source"
    source.write_bytes(b"x,y\n")
    put = bucket.put(key, source)
    # Then it reads back and is listed under the same key, with S3's etag
    assert bucket.read("langorch-files", key, max_bytes=10)[0] == b"x,y\n"
    assert [o.key for o in bucket.objects()] == [key]
    assert put.etag == hashlib.md5(b"x,y\n", usedforsecurity=False).hexdigest()


@pytest.mark.parametrize(
    "key", ["../outside", "inbox/../../x", "/absolute", "inbox//x", "inbox/.hidden", "", "a/./b"]
)
def test_a_key_that_could_leave_the_folder_is_refused(bucket: FolderBucket, key: str) -> None:
    with pytest.raises(InvalidKeyError, match="key"):
        bucket.path_of(key)


def test_a_copy_in_progress_is_not_an_object(bucket: FolderBucket, tmp_path: Path) -> None:
    # Given the folder's own incoming copy and a person's hidden editor file
    bucket.ensure()
    (bucket.root / ".incoming" / "tmp123").write_bytes(b"half")
    (bucket.root / "inbox").mkdir()
    (bucket.root / "inbox" / ".orders.csv.swp").write_bytes(b"")
    (bucket.root / "inbox" / "orders.csv").write_bytes(b"a")
    # Then only the real file is an object
    assert [o.key for o in bucket.objects()] == ["inbox/orders.csv"]


def test_another_bucket_reads_as_missing(bucket: FolderBucket, tmp_path: Path) -> None:
    from langorch.domain.errors import FileMissingError

    source = tmp_path / "source"
    source.write_bytes(b"a")
    bucket.put("k", source)
    with pytest.raises(FileMissingError, match="s3://elsewhere/k"):
        bucket.read("elsewhere", "k", max_bytes=10)
