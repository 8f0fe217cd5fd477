"""``read_file`` steps on moto: the file is read and parsed, or the run says why not; and a CSV
dropped in the inbox starts the file_digest example, which counts its rows."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError

from langorch.app.runs import SegmentResult, drive
from langorch.app.triggers import handle_s3_object
from langorch.composition.container import Container
from langorch.domain.runs import TimelineEventType
from langorch.domain.triggers import S3ObjectCreated

from .conftest import MakeContainer, register_example, register_text, run_to_end
from .triggers_support import load_event, make_deps

BUCKET = "langorch-files"

READERS = """
workflows:
  - plan_id: reader
    memory: false
    inputs_schema: {properties: {bucket: {type: string}, key: {type: string}}}
    steps:
      - step_id: doc
        kind: read_file
        max_retries: 2
        retry_backoff_seconds: 0
        read_file: {max_bytes: 64}
      - step_id: after
        kind: transform
        depends_on: [doc]
        transform: {count: "doc_content | length", etag: "doc_file.etag"}
  - plan_id: routed_reader
    memory: false
    inputs_schema: {properties: {bucket: {type: string}, key: {type: string}}}
    steps:
      - {step_id: doc, kind: read_file, on_error: fallback}
      - {step_id: fallback, kind: transform,
         transform: {recovered: "error.type ~ ' at ' ~ error.step_id ~ ': ' ~ error.message"}}
"""


@pytest.fixture
def container(make_container: MakeContainer) -> Container:
    container = make_container()
    register_text(container, READERS)
    return container


def _put(container: Container, key: str, body: bytes, bucket: str = BUCKET) -> str:
    response = container.client("s3").put_object(Bucket=bucket, Key=key, Body=body)
    return str(response["ETag"]).strip('"')


def _read(container: Container, key: str, bucket: str = BUCKET) -> SegmentResult:
    return run_to_end(container, "reader", {"bucket": bucket, "key": key})


def _retries(container: Container, result: SegmentResult) -> int:
    timeline = container.runs.get_timeline(result.run_id)
    return [e.type for e in timeline if e.step_id == "doc"].count(TimelineEventType.step_retried)


def test_a_csv_in_the_files_bucket_is_read_into_rows_with_its_metadata(container: Container):
    # Given a CSV in the files bucket
    body = b"id,amount\n1,10\n2,20\n3,30\n"
    etag = _put(container, "inbox/orders.csv", body)

    # When a run reads it
    result = _read(container, "inbox/orders.csv")

    # Then the rows and the file's metadata are in the state, and the next step used them
    assert result.status == "succeeded"
    assert result.outputs["doc_content"] == [
        {"id": "1", "amount": "10"},
        {"id": "2", "amount": "20"},
        {"id": "3", "amount": "30"},
    ]
    assert result.outputs["doc_file"] == {
        "bucket": BUCKET,
        "key": "inbox/orders.csv",
        "size": len(body),
        "etag": etag,
    }
    assert result.outputs["count"] == 3
    assert result.outputs["etag"] == etag


def test_the_timeline_and_the_logs_show_the_files_shape_never_its_content(
    container: Container, caplog: pytest.LogCaptureFixture
):
    # Given a JSON file holding something nobody should see outside the run's state
    _put(container, "inbox/payroll.json", b'{"salary": "s3cr3t-9876"}')

    # When a run reads it, with langorch's log lines captured at every level
    with caplog.at_level(logging.DEBUG, logger="langorch"):
        result = _read(container, "inbox/payroll.json")

    # Then the step's timeline summary describes the content, and no log line (message or
    # structured field) of ours quotes it
    assert result.status == "succeeded"
    [finished] = [
        e
        for e in container.runs.get_timeline(result.run_id)
        if e.type == TimelineEventType.step_finished and e.step_id == "doc"
    ]
    assert finished.outputs_summary is not None
    assert finished.outputs_summary["doc_content"] == "json: object with 1 keys"
    assert "s3cr3t-9876" not in str(finished.outputs_summary)
    ours = [r for r in caplog.records if r.name.startswith("langorch")]
    assert ours, "the run logged nothing: the check below would prove nothing"
    assert not [r for r in ours if "s3cr3t-9876" in f"{r.getMessage()} {vars(r)}"]


def test_an_empty_file_reads_as_empty_text(container: Container):
    # Given an empty object (S3 refuses a byte range on it)
    _put(container, "inbox/empty.txt", b"")

    # When a run reads it, Then the content is "" and the size 0
    result = _read(container, "inbox/empty.txt")
    assert result.status == "succeeded"
    assert result.outputs["doc_content"] == ""
    assert result.outputs["doc_file"]["size"] == 0


def test_a_missing_file_fails_the_run_naming_bucket_and_key_without_retrying(
    container: Container,
):
    # Given no such object
    # When a run reads it
    result = _read(container, "inbox/nope.csv")

    # Then the run failed with the bucket and key in the reason, after one attempt
    assert result.status == "failed"
    assert result.error is not None
    assert result.error["step_id"] == "doc"
    assert "s3://langorch-files/inbox/nope.csv does not exist" in result.error["message"]
    assert _retries(container, result) == 0


def test_a_file_over_max_bytes_fails_with_its_size_and_what_to_do(container: Container):
    # Given a 100-byte file and a step bounded at 64 bytes
    _put(container, "inbox/big.txt", b"x" * 100)

    # When a run reads it
    result = _read(container, "inbox/big.txt")

    # Then it failed saying how big the file is, the bound, and how to fix it; not retried
    assert result.status == "failed"
    assert result.error is not None
    message = result.error["message"]
    assert "s3://langorch-files/inbox/big.txt is 100 bytes" in message
    assert "max_bytes (64)" in message
    assert "raise read_file.max_bytes" in message and "split the file" in message
    assert _retries(container, result) == 0


def test_a_key_under_the_checkpoint_prefix_is_refused(container: Container):
    # Given an object where checkpoints are offloaded (another run's state)
    _put(container, "checkpoints/run-other/ns=/c1/payload", b"{}")

    # When a run asks for it
    result = _read(container, "checkpoints/run-other/ns=/c1/payload")

    # Then the step refuses, saying why
    assert result.status == "failed"
    assert result.error is not None
    assert "hold run checkpoints and cannot be read by steps" in result.error["message"]


def test_a_file_in_another_bucket_is_refused(container: Container):
    # Given another bucket in the same account, with a file in it
    container.client("s3").create_bucket(Bucket="someone-elses")
    _put(container, "inbox/orders.csv", b"id\n1\n", bucket="someone-elses")

    # When a run asks for it
    result = _read(container, "inbox/orders.csv", bucket="someone-elses")

    # Then the step refuses and names the one bucket it may read
    assert result.status == "failed"
    assert result.error is not None
    assert "may read only the files bucket 'langorch-files'" in result.error["message"]


def test_unparseable_json_fails_with_the_parsers_position(container: Container):
    # Given a .json file with a syntax error on line 2
    _put(container, "inbox/bad.json", b'{"a": 1,\n "b": }')

    # When a run reads it
    result = _read(container, "inbox/bad.json")

    # Then the reason has the line and column
    assert result.status == "failed"
    assert result.error is not None
    assert "s3://langorch-files/inbox/bad.json is not valid JSON" in result.error["message"]
    assert "line 2 column 7" in result.error["message"]


def test_a_read_error_follows_on_error_with_the_normalised_error(container: Container):
    # Given a step with an on_error route, and no such file
    # When the run reads it
    result = run_to_end(container, "routed_reader", {"bucket": BUCKET, "key": "inbox/gone.csv"})

    # Then the route ran and saw the error's type, step and message
    assert result.status == "succeeded"
    assert result.outputs["recovered"].startswith(
        "FileMissingError at doc: s3://langorch-files/inbox/gone.csv does not exist"
    )


def test_a_transient_s3_failure_is_retried_by_the_steps_retry_policy(container: Container):
    # Given a file, and an S3 connection that drops on the first GetObject
    _put(container, "inbox/orders.csv", b"id\n1\n")
    calls: list[str] = []

    def drop_first(**kwargs: Any) -> None:
        calls.append("GetObject")
        if len(calls) == 1:
            raise EndpointConnectionError(endpoint_url="https://s3.amazonaws.com")

    container.client("s3").meta.events.register("before-call.s3.GetObject", drop_first)

    # When a run reads it
    result = _read(container, "inbox/orders.csv")

    # Then the step was retried once and the run succeeded with the rows
    assert result.status == "succeeded"
    assert result.outputs["doc_content"] == [{"id": "1"}]
    assert _retries(container, result) == 1
    assert len(calls) == 2


# --- Through the S3 trigger ------------------------------------------------------------------


def test_a_csv_dropped_in_the_inbox_starts_file_digest_which_counts_its_rows(aws: None):
    # Given the file_digest example registered, and a CSV put under inbox/
    deps = make_deps()
    register_example(deps, "file_digest")
    body = b"order,amount\nA-1,10\nA-2,25\nA-3,7\nA-4,12\n"
    etag = _put(deps, "inbox/orders 2026.csv", body)

    # When S3's Object Created event for it (URL-encoded key, as S3 sends it) is handled
    raw = load_event("eventbridge_s3_object_created.json")
    raw["detail"]["object"].update(
        {"key": "inbox/orders+2026.csv", "size": len(body), "etag": etag}
    )
    del raw["detail"]["object"]["version-id"]
    outcome = handle_s3_object(S3ObjectCreated.from_event(raw), deps)

    # Then one file_digest run started, and driven to its end it read the file's 4 rows
    assert [r.workflow_id for r in outcome.started] == ["file_digest"]
    result = drive(outcome.started[0].run_id, deps, on_approval=lambda r: {}, sleep=lambda s: None)
    assert result.status == "succeeded"
    assert result.outputs["row_count"] == 4
    assert result.outputs["columns"] == ["order", "amount"]
    assert result.outputs["file"]["key"] == "inbox/orders 2026.csv"
    assert result.outputs["summary"]


def test_with_a_file_reader_role_files_are_read_with_that_roles_credentials(
    make_container: MakeContainer,
):
    # Given the deployed stack's setting: read_file steps read with the file reader role (IAM
    # denies that role every checkpoint; the runner's own role may not read files at all)
    role = "arn:aws:iam::123456789012:role/langorch-file-reader"
    container = make_container(file_reader_role_arn=role)
    register_text(container, READERS)
    _put(container, "inbox/orders.csv", b"id\n1\n2\n")

    # When a run reads a file
    result = _read(container, "inbox/orders.csv")

    # Then it was read, with credentials STS issued for that role (not the process's own)
    assert result.status == "succeeded", result.error
    assert result.outputs["count"] == 2
    # (botocore keeps a client's credentials on its request signer)
    reader_key = container.files._client._request_signer._credentials.access_key
    own_key = container.client("s3")._request_signer._credentials.access_key
    assert reader_key != own_key
    identity = container.client("sts", role=role).get_caller_identity()["Arn"]
    assert identity == (
        "arn:aws:sts::123456789012:assumed-role/langorch-file-reader/langorch-file-reader"
    )
