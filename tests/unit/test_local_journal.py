"""Which emulator requests the local journal keeps, and that what it keeps reads back."""

from __future__ import annotations

import base64
from pathlib import Path

from langorch.local.journal import Journal, is_write, read_entries, service_of


def signed(service: str, **environ: str) -> dict[str, str]:
    auth = (
        "AWS4-HMAC-SHA256 Credential=local/20261123/us-east-1/"
        f"{service}/aws4_request, SignedHeaders=host, Signature=abc"
    )
    return {"HTTP_AUTHORIZATION": auth, **environ}


def test_the_service_is_read_from_the_signature_scope() -> None:
    assert service_of(signed("dynamodb")) == "dynamodb"
    assert service_of(signed("secretsmanager")) == "secretsmanager"
    assert service_of({}) is None
    assert service_of({"HTTP_AUTHORIZATION": "Bearer x"}) is None


def test_json_protocol_reads_are_not_journaled_and_writes_are() -> None:
    for read in ("GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems", "DescribeTable"):
        assert not is_write(signed("dynamodb", HTTP_X_AMZ_TARGET=f"DynamoDB_20120810.{read}"))
    for write in ("PutItem", "UpdateItem", "TransactWriteItems", "BatchWriteItem", "CreateTable"):
        assert is_write(signed("dynamodb", HTTP_X_AMZ_TARGET=f"DynamoDB_20120810.{write}"))
    assert not is_write(signed("secretsmanager", HTTP_X_AMZ_TARGET="secretsmanager.GetSecretValue"))
    assert is_write(signed("secretsmanager", HTTP_X_AMZ_TARGET="secretsmanager.PutSecretValue"))


def test_rest_writes_are_the_writing_methods() -> None:
    assert is_write(signed("s3", REQUEST_METHOD="PUT"))
    assert is_write(signed("s3", REQUEST_METHOD="DELETE"))
    assert is_write(signed("scheduler", REQUEST_METHOD="POST"))
    assert not is_write(signed("s3", REQUEST_METHOD="GET"))
    assert not is_write(signed("s3", REQUEST_METHOD="HEAD"))


def test_a_torn_last_line_is_skipped_and_the_rest_reads_back(tmp_path: Path) -> None:
    # Given a journal with two entries and a line torn by a power cut
    path = tmp_path / "state" / "emulator.journal"
    journal = Journal(path, {"format": "test"})
    body = base64.b64encode(b"{}").decode()
    journal.append({"environ": {"PATH_INFO": "/one"}, "body": body})
    journal.append({"environ": {"PATH_INFO": "/two"}, "body": body})
    journal.close()
    with path.open("ab") as handle:
        handle.write(b'{"environ": {"PATH_IN')
    # When it is read, then the two whole entries come back in order (the header is not one)
    assert [e["environ"]["PATH_INFO"] for e in read_entries(path)] == ["/one", "/two"]
    assert path.stat().st_mode & 0o777 == 0o600


def test_lines_queued_by_concurrent_writers_are_in_the_file_in_queue_order_once_answered(
    tmp_path: Path,
) -> None:
    # Given 16 threads that each take a "service lock", queue a numbered line, release the lock
    # and wait for their line to be written (as JournaledApp does)
    import threading
    from concurrent.futures import ThreadPoolExecutor

    path = tmp_path / "emulator.journal"
    journal = Journal(path, {"format": "test"})
    service_lock = threading.Lock()
    order: list[int] = []
    missing: list[int] = []

    def write(n: int) -> None:
        with service_lock:
            order.append(n)
            ticket = journal.queue(Journal.encode({"environ": {"PATH_INFO": f"/{n}"}}))
        journal.written(ticket)
        # Then once answered, the line is in the file (a crash now would keep it)
        if f'"/{n}"' not in path.read_text():
            missing.append(n)

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(write, range(200)))
    journal.close()
    assert missing == []
    # And the file holds each line once, in the order the lock let them in
    assert [e["environ"]["PATH_INFO"] for e in read_entries(path)] == [f"/{n}" for n in order]
