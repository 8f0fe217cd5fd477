"""``langorch test``: every example's tests pass offline; a broken prompt fails with a diff; a
malformed tests file names the field; JUnit XML for CI."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.cli import Result, last_document, runner

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WITH_TESTS = sorted(p.parent.name for p in EXAMPLES.glob("*/tests.yaml"))


@pytest.fixture
def langorch(capsys: pytest.CaptureFixture[str]) -> object:
    return runner(capsys)


def test_every_example_ships_tests() -> None:
    # Given the examples folder / Then each example has a tests.yaml
    examples = sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir())
    assert examples == WITH_TESTS


@pytest.mark.parametrize("example", WITH_TESTS)
def test_example_tests_pass(langorch: object, example: str) -> None:
    # Given an example's tests.yaml / When `langorch test` runs it
    result: Result = langorch("--json", "test", str(EXAMPLES / example))  # type: ignore[operator]
    report = last_document(result.stdout)
    # Then every case passes
    failed = [c for c in report["cases"] if not c["passed"]]
    assert result.code == 0 and not failed, failed
    assert report["passed"] >= 1


def test_a_broken_prompt_fails_a_case_with_a_readable_diff(
    langorch: object, tmp_path: Path
) -> None:
    # Given a copy of blog_review whose draft prompt lost the reviewer's feedback
    copy = tmp_path / "blog_review"
    shutil.copytree(EXAMPLES / "blog_review", copy)
    definitions = copy / "definitions.yaml"
    text = definitions.read_text()
    broken = text.replace("Reviewer feedback to address (may be empty): {feedback}", "")
    assert broken != text
    definitions.write_text(broken)
    # When its tests run
    result: Result = langorch("test", str(copy))  # type: ignore[operator]
    # Then the feedback case fails, showing what the title should have been and what it was
    assert result.code == 1
    assert "FAIL  " in result.stdout and "the reviewer's feedback reaches the next draft" in (
        result.stdout
    )
    assert 'outputs $.title: expected "Draft 2", got "Draft 1"' in result.stdout
    assert "1 passed" not in result.stdout and "2 passed, 1 failed" in result.stdout


def test_a_malformed_tests_file_names_the_field(langorch: object, tmp_path: Path) -> None:
    # Given a tests file with a typo in a case's expectations and a bad decision
    shutil.copy(EXAMPLES / "blog_review" / "definitions.yaml", tmp_path / "definitions.yaml")
    (tmp_path / "tests.yaml").write_text(
        "cases:\n"
        "  - name: typo\n"
        "    approvals: {review: [maybe]}\n"
        "    expect: {stauts: succeeded}\n"
    )
    # When it is run
    result: Result = langorch("test", str(tmp_path))  # type: ignore[operator]
    # Then each problem names its field path and the case
    assert result.code != 0
    assert "cases[0].expect.stauts: unexpected field (a typo?) (case 'typo')" in result.stderr
    assert "cases[0].approvals.review[0].decision" in result.stderr


def test_junit_xml_lists_each_case(langorch: object, tmp_path: Path) -> None:
    # Given the broken copy of blog_review
    copy = tmp_path / "blog_review"
    shutil.copytree(EXAMPLES / "blog_review", copy)
    definitions = copy / "definitions.yaml"
    definitions.write_text(
        definitions.read_text().replace(
            "Reviewer feedback to address (may be empty): {feedback}", ""
        )
    )
    junit = tmp_path / "junit.xml"
    # When it is run with --junit
    langorch("test", str(copy), "--junit", str(junit))  # type: ignore[operator]
    # Then the XML has one testcase per case, the broken one with its failure
    suite = ET.fromstring(junit.read_text()).find("testsuite")  # noqa: S314 - our own file
    assert suite is not None and suite.get("tests") == "3" and suite.get("failures") == "1"
    failures = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
    assert failures == ["the reviewer's feedback reaches the next draft"]
