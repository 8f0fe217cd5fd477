"""``read_file`` steps without AWS: formats, parsing errors, what may be read, validation."""

from __future__ import annotations

from typing import Any

import pytest

from langorch.domain.definitions import READ_FILE_MAX_BYTES, BlockDefinition, TaskPlan
from langorch.domain.errors import DefinitionError, FileContentError, FileRefusedError, Problem
from langorch.domain.fileformats import file_format, parse_content
from langorch.domain.loading import load_text
from langorch.domain.validation import InMemoryLookup, Validation, check_workflow, validate_block
from langorch.engine.kinds.read_file import check_readable
from tests.support.definitions import workflow

WHERE = "s3://langorch-files/inbox/x"


class _Files:
    """The part of a file reader the access rule looks at."""

    bucket = "langorch-files"
    checkpoint_prefix = "checkpoints"

    def read(self, bucket: str, key: str, *, max_bytes: int) -> tuple[bytes, dict[str, Any]]:
        raise AssertionError("the access rule never reads")


# --- Formats ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("inbox/orders.csv", "csv"),
        ("inbox/ORDERS.CSV", "csv"),
        ("a/b.json", "json"),
        ("a/b.yaml", "yaml"),
        ("a/b.yml", "yaml"),
        ("a/notes.txt", "text"),
        ("a/server.log", "text"),
        ("a.dir/README", "text"),
    ],
)
def test_auto_picks_the_format_by_the_key_suffix_else_text(key: str, expected: str):
    # Given format auto, When the key has this suffix, Then this format is used
    assert file_format("auto", key) == expected


def test_an_explicit_format_wins_over_the_suffix():
    # Given format lines on a .csv key, When resolved, Then lines
    assert file_format("lines", "inbox/orders.csv") == "lines"


def test_csv_gives_a_dict_per_row_keyed_by_the_header():
    # Given a CSV with a BOM, a quoted comma, a blank line and a short row
    data = '\ufeffid,name,amount\n1,"Smith, J",10\n\n2,Lee\n'.encode()

    # When parsed as csv
    rows = parse_content(data, "csv", WHERE)

    # Then one dict per row, the BOM gone from the first column, short rows padded with ""
    assert rows == [
        {"id": "1", "name": "Smith, J", "amount": "10"},
        {"id": "2", "name": "Lee", "amount": ""},
    ]


def test_an_empty_csv_and_a_header_only_csv_have_no_rows():
    # Given no bytes, and a header alone, When parsed as csv, Then no rows
    assert parse_content(b"", "csv", WHERE) == []
    assert parse_content(b"id,amount\n", "csv", WHERE) == []


def test_a_csv_row_longer_than_the_header_is_an_error_with_its_line():
    # Given a third row with one field too many
    data = b"id,amount\n1,10\n2,20,oops\n"

    # When parsed, Then the error names the line and both counts, and not the content
    with pytest.raises(FileContentError) as raised:
        parse_content(data, "csv", WHERE)
    assert str(raised.value) == (f"{WHERE} is not valid CSV: line 3 has 3 fields, the header has 2")


def test_malformed_csv_quoting_is_an_error_with_its_line():
    # Given a quoted field on line 2 with text after its closing quote
    data = b'id,name\n1,"ab"c\n'

    # When parsed, Then the csv module's complaint with the line
    with pytest.raises(FileContentError, match=r"is not valid CSV: ',' expected .* at line 2"):
        parse_content(data, "csv", WHERE)


def test_json_gives_the_document():
    assert parse_content(b'{"a": [1, 2]}', "json", WHERE) == {"a": [1, 2]}


def test_bad_json_is_an_error_with_line_and_column_and_no_content():
    # Given JSON with a trailing comma on line 2
    data = b'{"secret": "s3cr3t",\n}'

    # When parsed, Then the parser's position, without the file's content
    with pytest.raises(FileContentError) as raised:
        parse_content(data, "json", WHERE)
    message = str(raised.value)
    assert message.startswith(f"{WHERE} is not valid JSON: ")
    assert "line 2 column 1" in message
    assert "s3cr3t" not in message


def test_yaml_gives_a_json_document_with_dates_as_text():
    # Given YAML with a date
    data = b"due: 2026-03-01\nitems: [a, b]\n"

    # When parsed, Then the date is an ISO string (the content must fit in JSON state)
    assert parse_content(data, "yaml", WHERE) == {"due": "2026-03-01", "items": ["a", "b"]}


def test_bad_yaml_is_an_error_with_its_position():
    # Given YAML whose second line opens a flow sequence it never closes
    data = b"a: 1\nb: [1, 2\n"

    # When parsed, Then the problem and its line, not the content
    with pytest.raises(FileContentError, match=r"is not valid YAML: .* at line \d+ column \d+"):
        parse_content(data, "yaml", WHERE)


def test_text_and_lines():
    # Given two lines with CRLF endings
    data = b"first\r\nsecond\r\n"

    # When parsed as text and as lines, Then the string, and its lines without endings
    assert parse_content(data, "text", WHERE) == "first\r\nsecond\r\n"
    assert parse_content(data, "lines", WHERE) == ["first", "second"]


def test_invalid_utf8_is_an_error_naming_the_byte_and_offset():
    # Given Latin-1 bytes (é is 0xe9)
    data = "café".encode("latin-1")

    # When parsed as text, Then a clear message with the offending byte and where it is
    with pytest.raises(FileContentError) as raised:
        parse_content(data, "text", WHERE)
    assert str(raised.value) == (
        f"{WHERE} is not valid UTF-8 (byte 0xe9 at offset 3); save it as UTF-8"
    )


# --- What may be read ------------------------------------------------------------------------


def test_a_key_in_the_files_bucket_is_readable():
    # Given the files bucket and a drop key, When checked, Then nothing is raised
    check_readable("langorch-files", "inbox/orders.csv", _Files())


def test_another_bucket_is_refused_naming_the_allowed_one():
    with pytest.raises(FileRefusedError) as raised:
        check_readable("someone-elses-bucket", "inbox/orders.csv", _Files())
    assert "may read only the files bucket 'langorch-files'" in str(raised.value)


@pytest.mark.parametrize("key", ["checkpoints/run-1/ns=/c1/payload", "checkpoints"])
def test_the_checkpoint_prefix_is_refused(key: str):
    with pytest.raises(FileRefusedError, match="hold run checkpoints and cannot be read"):
        check_readable("langorch-files", key, _Files())


def test_a_key_that_only_starts_like_the_prefix_is_readable():
    # Given a key beside the prefix, not under it, When checked, Then it is allowed
    check_readable("langorch-files", "checkpoints-2026.csv", _Files())


def test_an_empty_key_is_refused_with_what_to_set():
    # Given a run without a key in its input (not started by a drop)
    with pytest.raises(FileRefusedError, match=r"read_file\.key rendered empty"):
        check_readable("langorch-files", "", _Files())


# --- Validation ------------------------------------------------------------------------------


def _checked(text: str, *blocks: BlockDefinition) -> Validation:
    loaded = load_text(text, source="test.yaml", fmt="yaml")
    lookup = InMemoryLookup([*blocks, *loaded.blocks], loaded.workflows)
    plan: TaskPlan = loaded.workflows[0]
    return check_workflow(plan, lookup, tools=None, providers=None)


def _problems(text: str, *blocks: BlockDefinition) -> list[Problem]:
    """Errors and warnings alike."""
    found = _checked(text, *blocks)
    return [*found.errors, *found.warnings]


def _load_problems(text: str) -> list[Problem]:
    with pytest.raises(DefinitionError) as raised:
        load_text(text, source="test.yaml", fmt="yaml")
    return raised.value.problems


def test_an_s3_triggered_read_file_with_defaults_has_no_problems():
    # Given the drop's bucket and key read by default, and the outputs read by the next step
    text = workflow(
        "digest", triggers=[{"type": "s3", "prefix": "inbox/", "suffix": ".csv"}], memory=True
    ).steps("""
      - {step_id: csv, kind: read_file}
      - step_id: count
        kind: transform
        depends_on: [csv]
        transform: {n: "csv_content | length", name: "csv_file.key"}
""")
    # When validated, Then nothing is wrong: an s3 trigger provides bucket and key
    assert _problems(text) == []


def test_read_file_defaults_without_an_s3_trigger_or_input_are_reported():
    # Given a manual workflow whose read_file step has no settings
    text = workflow("digest", memory=True).steps("""
      - {step_id: csv, kind: read_file}
""")
    # When validated, Then the default templates' reads are warned about where they are
    found = _checked(text)
    assert found.errors == []
    assert [(p.path, p.message) for p in found.warnings] == [
        (
            "steps[0].read_file.bucket",
            "reads 'bucket', which no input or earlier step provides",
        ),
        ("steps[0].read_file.key", "reads 'key', which no input or earlier step provides"),
    ]


def test_a_read_file_key_template_over_an_input_is_fine_and_its_output_key_is_readable():
    text = workflow("report", inputs={"day": "string", "bucket": "string"}, memory=True).steps("""
      - step_id: load
        kind: read_file
        read_file: {key: "reports/{{ day }}.json", output_key: report}
      - {step_id: use, kind: transform, depends_on: [load], transform: {total: "report.total"}}
""")
    assert _problems(text) == []


def test_a_bad_format_is_reported_with_its_path_and_the_allowed_values():
    text = workflow("p", triggers=[{"type": "s3", "prefix": "inbox/"}], memory=True).steps("""
      - {step_id: csv, kind: read_file, read_file: {format: xlsx}}
""")
    [problem] = _load_problems(text)
    assert problem.path == "workflows[0].steps[0].read_file.format"
    assert "'auto', 'text', 'json', 'yaml', 'csv' or 'lines'" in problem.message
    assert problem.hint == "use one of those values"


@pytest.mark.parametrize("max_bytes", [0, READ_FILE_MAX_BYTES + 1])
def test_max_bytes_out_of_range_is_reported_with_its_path(max_bytes: int):
    text = workflow("p", triggers=[{"type": "s3", "prefix": "inbox/"}], memory=True).steps(f"""
      - {{step_id: csv, kind: read_file, read_file: {{max_bytes: {max_bytes}}}}}
""")
    [problem] = _load_problems(text)
    assert problem.path == "workflows[0].steps[0].read_file.max_bytes"
    assert str(max_bytes) in problem.message
    assert problem.hint


def test_read_file_settings_on_another_kind_are_reported_as_ignored():
    text = workflow("p", memory=True).steps("""
      - {step_id: t, kind: transform, transform: {a: "1"}, read_file: {key: x.csv}}
""")
    assert [p.path for p in _problems(text)] == ["steps[0].read_file"]


def test_a_read_file_block_reads_its_templates_from_its_input_keys():
    # Given a read_file block whose key template reads a name that is not an input key
    block = BlockDefinition(
        block_id="load_report",
        block_type="read_file",  # type: ignore[arg-type]
        input_keys=["bucket"],
        output_keys=["report"],
        read_file={"key": "reports/{{ day }}.json"},  # type: ignore[arg-type]
    )

    # When the block is validated, Then that read is reported on the block's setting
    problems = validate_block(block, tools=frozenset(), providers=frozenset())
    assert [(p.path, p.message) for p in problems] == [
        ("read_file.key", "reads 'day', which is not one of the block's input_keys")
    ]


def test_a_read_file_block_step_writes_the_blocks_first_output_key():
    # Given a read_file block with an output key, referenced by a step, and a later reader
    block = BlockDefinition(
        block_id="load_drop",
        block_type="read_file",  # type: ignore[arg-type]
        input_keys=["bucket", "key"],
        output_keys=["document"],
    )
    text = workflow("p", triggers=[{"type": "s3", "prefix": "inbox/"}], memory=True).steps("""
      - {step_id: load, block_id: load_drop}
      - step_id: use
        kind: transform
        depends_on: [load]
        transform: {n: "document | length", size: "load_file.size"}
""")
    # When validated, Then the block's output key and the metadata key are both available
    assert validate_block(block, tools=frozenset(), providers=frozenset()) == []
    assert _problems(text, block) == []
