"""Contract of the artifacts port (``ArtifactStore``): S3 on moto, a folder (the home's bucket
folder) and the in-memory fake keep, list, link and read a run's files alike, each with its
record (size, content type, SHA-256, where it is stored)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

import pytest

from langorch.adapters.artifacts import S3Artifacts, S3ArtifactWriter
from langorch.adapters.aws import make_client
from langorch.adapters.local_artifacts import FolderArtifacts
from langorch.app.artifacts import ArtifactStore, find_artifact, run_artifacts
from langorch.config import Settings
from langorch.domain.artifacts import LINK_SECONDS, ArtifactError
from langorch.domain.errors import NotFoundError
from tests.fakes.artifacts import InMemoryArtifacts

BUCKET = "langorch-files"


@pytest.fixture(params=["fake", "folder", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ArtifactStore:
    if request.param == "fake":
        return InMemoryArtifacts()
    if request.param == "folder":
        return FolderArtifacts(tmp_path / "bucket" / "artifacts")
    s3: Any = request.getfixturevalue("s3")
    s3.create_bucket(Bucket=BUCKET)
    return S3Artifacts(s3, bucket=BUCKET)


def test_a_kept_file_is_listed_with_its_record(store: ArtifactStore) -> None:
    # Given a file attached by a step
    kept = store.put("run-1", "summarize", "summary.md", b"# Summary\n", "text/markdown")
    # When the run's artifacts are listed
    [listed] = store.list("run-1")
    # Then it is there with its step, name, size, type and SHA-256, as put returned it
    assert listed == kept
    assert (listed.step_id, listed.name, listed.size) == ("summarize", "summary.md", 10)
    assert listed.content_type == "text/markdown"
    assert listed.sha256 == hashlib.sha256(b"# Summary\n").hexdigest()
    assert listed.location.endswith("artifacts/run-1/summarize/summary.md")


def test_files_are_listed_by_step_then_name_whatever_their_names(store: ArtifactStore) -> None:
    store.put("run-1", "summarize", "summary.md", b"#", "text/markdown")
    store.put("run-1", "fetch", "invoice (1) + copy é.json", b"{}", "application/json")
    store.put("run-1", "fetch", "a.txt", b"a", "text/plain")
    assert [(a.step_id, a.name) for a in store.list("run-1")] == [
        ("fetch", "a.txt"),
        ("fetch", "invoice (1) + copy é.json"),
        ("summarize", "summary.md"),
    ]


def test_the_same_name_again_replaces_the_file(store: ArtifactStore) -> None:
    # Given a step that ran again and attached its file again
    store.put("run-1", "summarize", "summary.md", b"first", "text/plain")
    store.put("run-1", "summarize", "summary.md", b"second!", "text/markdown")
    # Then the run has one file, the last one
    [listed] = store.list("run-1")
    assert (listed.size, listed.content_type) == (7, "text/markdown")
    assert store.read(listed) == b"second!"


def test_runs_keep_their_files_apart(store: ArtifactStore) -> None:
    store.put("run-1", "s", "a.txt", b"1", "text/plain")
    store.put("run-10", "s", "b.txt", b"2", "text/plain")
    assert [a.name for a in store.list("run-1")] == ["a.txt"]
    assert store.list("run-2") == []


def test_a_listing_stops_at_its_limit(store: ArtifactStore) -> None:
    for name in ("a.txt", "b.txt", "c.txt"):
        store.put("run-1", "s", name, b"x", "text/plain")
    assert len(store.list("run-1", limit=2)) == 2


@pytest.mark.parametrize("name", ["", "..", ".hidden", "a/b.txt", "a\\b.txt", "bell\x07"])
def test_a_name_that_is_not_one_file_is_refused(store: ArtifactStore, name: str) -> None:
    with pytest.raises(ArtifactError, match="artifact name"):
        store.put("run-1", "s", name, b"x", "text/plain")
    assert store.list("run-1") == []


@pytest.mark.parametrize(("run_id", "step_id"), [("..", "s"), ("run-1", ".."), ("a/b", "s")])
def test_ids_that_are_not_one_segment_are_refused(
    store: ArtifactStore, run_id: str, step_id: str
) -> None:
    with pytest.raises(ArtifactError, match="cannot be part of an artifact's key"):
        store.put(run_id, step_id, "a.txt", b"x", "text/plain")


def test_a_kept_file_reads_back_byte_for_byte(store: ArtifactStore) -> None:
    data = bytes(range(256)) * 10
    kept = store.put("run-1", "s", "blob.bin", data, "application/octet-stream")
    assert store.read(kept) == data


def test_each_file_has_a_link_made_on_demand(store: ArtifactStore) -> None:
    # Given a kept file
    store.put("run-1", "summarize", "summary.md", b"# Summary\n", "text/markdown")
    # When the run's artifacts are listed with their links
    [linked] = run_artifacts("run-1", store)
    # Then the link leads to that file's key (a path, a presigned URL, a fake's address)
    assert unquote(urlparse(linked.link).path).endswith("run-1/summarize/summary.md")


def test_an_artifact_is_found_only_by_what_the_listing_returns(store: ArtifactStore) -> None:
    # Given a run with one file
    store.put("run-1", "s", "a.txt", b"1", "text/plain")
    # Then it is found by its step and name, and nothing else is
    assert find_artifact("run-1", "s", "a.txt", store).size == 1
    for step_id, name in (("s", "b.txt"), ("t", "a.txt"), ("s", "../a.txt"), ("..", "s")):
        with pytest.raises(NotFoundError, match="has no artifact"):
            find_artifact("run-1", step_id, name, store)


def test_the_folder_link_is_the_file_and_its_record_is_hidden_beside_it(tmp_path: Path) -> None:
    store = FolderArtifacts(tmp_path / "artifacts")
    kept = store.put("run-1", "s", "report.csv", b"a,b\n", "text/csv")
    path = Path(store.link(kept))
    assert path.read_bytes() == b"a,b\n"
    assert path == tmp_path / "artifacts" / "run-1" / "s" / "report.csv"
    # (the record is a hidden file: the bucket folder's watcher never takes it for an object)
    assert sorted(p.name for p in path.parent.iterdir()) == [".report.csv.json", "report.csv"]


def test_a_file_copied_into_the_folder_is_listed_with_a_record_made_from_it(
    tmp_path: Path,
) -> None:
    # Given a file put in a run's folder by hand (no record beside it)
    folder = tmp_path / "artifacts" / "run-1" / "s"
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_bytes(b"hi")
    # Then it is listed, its type guessed from its name and its hash computed
    [listed] = FolderArtifacts(tmp_path / "artifacts").list("run-1")
    assert (listed.content_type, listed.sha256) == ("text/plain", hashlib.sha256(b"hi").hexdigest())


def test_the_s3_link_is_a_short_lived_sigv4_download_of_the_file(s3: Any) -> None:
    # Given a file kept by the runner's writer, and an operator's client as the CLI builds it
    s3.create_bucket(Bucket=BUCKET)
    kept = S3ArtifactWriter(s3, bucket=BUCKET).put(
        "run-1", "s", "ré port.csv", b"a,b\n", "text/csv"
    )
    operator = make_client("s3", Settings(region="us-east-1"))
    # When the operator's store links it
    link = urlparse(S3Artifacts(operator, bucket=BUCKET).link(kept))
    query = parse_qs(link.query)
    # Then it is a SigV4-signed GET of that key (botocore signs SigV2 in us-east-1 unless told:
    # newer buckets refuse it), valid 15 minutes, that downloads under the file's name
    assert unquote(link.path).endswith("/artifacts/run-1/s/ré port.csv")
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"]
    assert query["X-Amz-Expires"] == [str(LINK_SECONDS)] == ["900"]
    assert query["response-content-disposition"][0].startswith("attachment;")
    assert kept.location == f"s3://{BUCKET}/artifacts/run-1/s/ré port.csv"


def test_a_file_expiring_while_listed_is_left_out_not_an_error(s3: Any) -> None:
    # Given two files, one of which the lifecycle rule deletes between the listing and its
    # HeadObject
    s3.create_bucket(Bucket=BUCKET)
    store = S3Artifacts(s3, bucket=BUCKET)
    store.put("run-1", "s", "a.txt", b"1", "text/plain")
    store.put("run-1", "s", "b.txt", b"2", "text/plain")
    other = make_client("s3", Settings(region="us-east-1"))

    def expire_a(params: dict[str, Any], **_: Any) -> None:
        if params["Key"].endswith("/a.txt"):
            other.delete_object(Bucket=BUCKET, Key=params["Key"])

    s3.meta.events.register("before-parameter-build.s3.HeadObject", expire_a)
    # When the run's artifacts are listed, then the remaining one is
    assert [a.name for a in store.list("run-1")] == ["b.txt"]
