"""Artifacts: an ``attach`` step keeps files the run produced (a template, a value of its
state, an object of the files bucket) or downloaded (an http URL) with the run, each recorded
with its name, size, content type, SHA-256, where it is stored and the step (seed 001:
"artifacts references (screenshots, downloaded files)"); ``runs show`` lists them with links."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from langorch.app.runs import RunSegment, StartRun, run_segment, start_run
from langorch.cli.main import main
from langorch.domain.artifacts import MAX_ARTIFACT_BYTES
from langorch.domain.loading import load_text
from langorch.domain.lookup import InMemoryLookup
from langorch.domain.validation import check_workflow
from tests.fakes import Fakes
from tests.fakes.artifacts import FakeDownloads
from tests.fakes.tools import InMemoryTasks
from tests.integration.conftest import drive, register_text, run_to_end
from tests.support.crashes import Crash, DyingTasks
from tests.support.definitions import workflow

REPORT = workflow("report", inputs={"customer": "string", "invoice": "object"}).steps("""
      - step_id: keep
        kind: attach
        settings:
          files:
            - {name: "note-{{ customer }}.md", content: "# For {{ customer }}"}
            - {name: invoice.json, from: invoice}
""")

FETCH = workflow("fetch", inputs={"url": "string", "key": "string"}).steps("""
      - step_id: keep
        kind: attach
        settings:
          files:
            - {name: invoice.pdf, url: "{{ url }}"}
            - {name: received.csv, key: "{{ key }}"}
""")

INVOICE_URL = "https://billing.example/invoices/42.pdf?token=t0k3n"


def _files(files: str) -> str:
    """A workflow whose one attach step has these files (a YAML flow list)."""
    return workflow("probe", inputs={"base": "string", "text": "string"}).steps(f"""
      - step_id: keep
        kind: attach
        settings: {{files: {files}}}
""")


def _problems(text: str) -> list[tuple[str, str, str]]:
    plan = load_text(text, source="w.yaml", fmt="yaml").workflows[0]
    found = check_workflow(plan, InMemoryLookup(), tools=None, providers=None)
    return [(p.path, p.message, p.hint) for p in found.errors]


# --- validation: a bad file is refused before anything runs, with its path and the fix -------


def test_a_file_without_a_source_is_refused_naming_the_four_sources() -> None:
    [(path, message, hint)] = _problems(_files("[{name: a.txt}]"))
    assert path == "steps[0].settings.files[0]"
    assert message == "a file needs one source, this one has none"
    assert all(f"{source} (" in hint for source in ("content", "from", "key", "url"))


def test_a_file_with_two_sources_is_refused_naming_both() -> None:
    [(path, message, _)] = _problems(
        _files('[{name: a.txt, content: "hi", url: "https://x.example/a"}]')
    )
    assert (path, message) == (
        "steps[0].settings.files[0]",
        "a file needs one source, this one has content, url",
    )


def test_a_url_that_is_not_http_is_refused_with_where_files_come_from_instead() -> None:
    [(path, message, hint)] = _problems(_files('[{name: a.txt, url: "ftp://x.example/a"}]'))
    assert path == "steps[0].settings.files[0].url"
    assert "is not an http(s) URL" in message
    assert "key:" in hint and "from:" in hint


def test_a_url_made_by_a_template_is_checked_when_it_runs() -> None:
    assert _problems(_files('[{name: a.txt, url: "{{ base }}/a.txt"}]')) == []


@pytest.mark.parametrize("name", ["../a.txt", "a/b.txt", ".hidden"])
def test_a_name_that_is_not_one_file_is_refused(name: str) -> None:
    [(path, message, hint)] = _problems(_files(f'[{{name: "{name}", content: "x"}}]'))
    assert path == "steps[0].settings.files[0].name"
    assert message.startswith(repr(name))
    assert "one path segment" in hint


def test_two_files_of_one_step_with_one_name_are_refused() -> None:
    [(path, message, _)] = _problems(
        _files('[{name: a.txt, content: "1"}, {name: a.txt, content: "2"}]')
    )
    assert (path, message) == ("steps[0].settings.files[1].name", "files[0] is named 'a.txt' too")


def test_an_unknown_field_is_refused_at_its_path() -> None:
    [(path, _, _)] = _problems(_files('[{name: a.txt, content: "x", bucket: other}]'))
    assert path == "steps[0].settings.files[0].bucket"


# --- the engine: each source kept with its record --------------------------------------------


def test_an_attach_step_keeps_its_files_with_their_records(make_container: Any) -> None:
    # Given a workflow attaching a rendered note and a value of its state
    container = make_container()
    register_text(container, REPORT)
    # When it runs
    result = run_to_end(container, "report", {"customer": "Ada", "invoice": {"total": 12.5}})
    # Then both files are the run's artifacts, with the content they were given
    assert result.status == "succeeded"
    store = container.artifacts
    invoice, note = store.list(result.run_id)
    assert (note.step_id, note.name, note.content_type) == ("keep", "note-Ada.md", "text/markdown")
    assert store.read(note) == b"# For Ada"
    assert json.loads(store.read(invoice)) == {"total": 12.5}
    # And the step's result records each: name, size, type, SHA-256, where, which step
    [first, _] = result.outputs["keep_artifacts"]
    assert first == {
        "step_id": "keep",
        "name": "note-Ada.md",
        "size": 9,
        "content_type": "text/markdown",
        "sha256": hashlib.sha256(b"# For Ada").hexdigest(),
        "location": f"memory://artifacts/{result.run_id}/keep/note-Ada.md",
    }


def test_a_text_file_keeps_the_last_newline_of_its_template(make_container: Any) -> None:
    # (Jinja drops a template's last newline; a text file ends with one)
    container = make_container()
    register_text(container, _files('[{name: a.md, content: "# {{ text }}\\n"}]'))
    result = run_to_end(container, "probe", {"text": "hi"})
    [kept] = container.artifacts.list(result.run_id)
    assert container.artifacts.read(kept) == b"# hi\n"


def test_a_downloaded_file_and_a_file_of_the_bucket_are_kept(make_container: Any) -> None:
    # Given an invoice to download and a CSV dropped into the files bucket
    container = make_container()
    container.download = FakeDownloads({INVOICE_URL: (b"%PDF-1.7", "application/pdf")})
    container.files.put("inbox/orders.csv", b"order,amount\nA-1,10\n")
    register_text(container, FETCH)
    # When the run attaches both
    result = run_to_end(container, "fetch", {"url": INVOICE_URL, "key": "inbox/orders.csv"})
    # Then each is kept, typed by the download's Content-Type or by its name
    assert result.status == "succeeded", result.error
    store = container.artifacts
    pdf, csv = store.list(result.run_id)
    assert (pdf.name, pdf.content_type, store.read(pdf)) == (
        "invoice.pdf",
        "application/pdf",
        b"%PDF-1.7",
    )
    assert (csv.name, csv.content_type, store.read(csv)) == (
        "received.csv",
        "text/csv",
        b"order,amount\nA-1,10\n",
    )


def test_a_download_over_the_limit_fails_the_step_saying_the_limit_and_keeps_nothing(
    make_container: Any,
) -> None:
    # Given a URL that answers with one byte more than a step may attach
    container = make_container()
    big = b"x" * (MAX_ARTIFACT_BYTES + 1)
    container.download = FakeDownloads({INVOICE_URL: (big, "application/pdf")})
    container.files.put("inbox/orders.csv", b"a\n")
    register_text(container, FETCH)
    # When the run attaches it
    result = run_to_end(container, "fetch", {"url": INVOICE_URL, "key": "inbox/orders.csv"})
    # Then the step failed, naming the file, the limit and what to do; nothing was kept
    assert result.status == "failed"
    assert result.error is not None
    message = result.error["message"]
    assert message.startswith("settings.files[0].url: the download from https://billing")
    assert f"is over {MAX_ARTIFACT_BYTES} bytes, the most a step may attach" in message
    assert "t0k3n" not in message  # (the URL's query may carry a token: never repeated)
    assert container.artifacts.list(result.run_id) == []


def test_a_missing_object_fails_the_step_naming_the_key(make_container: Any) -> None:
    container = make_container()
    container.download = FakeDownloads({INVOICE_URL: (b"%PDF", None)})
    register_text(container, FETCH)
    result = run_to_end(container, "fetch", {"url": INVOICE_URL, "key": "inbox/gone.csv"})
    assert result.status == "failed" and result.error is not None
    assert result.error["message"] == (
        "settings.files[1].key: s3://langorch-files/inbox/gone.csv does not exist; check the "
        "key (a run started by a file drop has it as {{ key }})"
    )


def test_a_checkpoint_is_never_attached(make_container: Any) -> None:
    # Given a key under the checkpoint prefix (another run's state)
    container = make_container()
    container.download = FakeDownloads({INVOICE_URL: (b"%PDF", None)})
    container.files.put("checkpoints/run-x/payload", b"secret state")
    register_text(container, FETCH)
    # When a run tries to attach it, the step fails and nothing is kept
    result = run_to_end(
        container, "fetch", {"url": INVOICE_URL, "key": "checkpoints/run-x/payload"}
    )
    assert result.status == "failed" and result.error is not None
    assert "hold run checkpoints and cannot be read by steps" in result.error["message"]
    assert [a.name for a in container.artifacts.list(result.run_id)] == ["invoice.pdf"]


def test_a_name_rendering_to_a_path_fails_the_step_saying_why(make_container: Any) -> None:
    container = make_container()
    register_text(container, REPORT)
    result = run_to_end(container, "report", {"customer": "../etc", "invoice": {}})
    assert result.status == "failed"
    assert result.error is not None
    assert result.error["message"].startswith("settings.files[0].name: artifact name")
    assert container.artifacts.list(result.run_id) == []


# --- kept once: a step run again after a crash neither downloads nor writes again ------------


def test_a_step_run_again_after_a_crash_keeps_each_file_once() -> None:
    # Given an attach step whose process dies right after its download was kept
    downloads = FakeDownloads({INVOICE_URL: (b"%PDF-1.7", "application/pdf")})
    fakes = Fakes(download=downloads)
    fakes.files.put("inbox/orders.csv", b"a,b\n")
    register_text(fakes, FETCH)
    fakes.tasks = crashing = DyingTasks("attach", kept=True)
    run, _ = start_run(
        StartRun("fetch", input={"url": INVOICE_URL, "key": "inbox/orders.csv"}), fakes
    )
    with pytest.raises(Crash):
        run_segment(RunSegment(run.run_id), fakes)
    assert (downloads.fetched, fakes.artifacts.puts) == ([INVOICE_URL], 1)
    # When a new process runs the segment again
    again = fakes.another_process()
    again.tasks = InMemoryTasks()
    again.tasks._records = crashing._records
    result = drive(run.run_id, again, on_approval=lambda r: {}, sleep=lambda s: None)
    # Then the run finished with both files, the invoice downloaded and written once
    assert result.status == "succeeded", result.error
    assert downloads.fetched == [INVOICE_URL]
    assert fakes.artifacts.puts == 2
    assert [a["name"] for a in result.outputs["keep_artifacts"]] == ["invoice.pdf", "received.csv"]


# --- runs show ---------------------------------------------------------------------------------


def test_runs_show_lists_the_runs_files_with_their_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a local home whose run attached a file
    from langorch.composition.embedded import EmbeddedContainer
    from langorch.config import Settings

    home = tmp_path / "home"
    container = EmbeddedContainer(Settings(local_home=str(home), region="us-east-1"))
    container.ensure_resources(engine=False)
    register_text(container, REPORT)
    run, _ = start_run(StartRun("report", input={"customer": "x", "invoice": {}}), container)
    container.artifacts.put(run.run_id, "keep", "note.md", b"# hi", "text/markdown")
    # (the stack file `langorch dev` writes; nothing here calls its endpoint)
    stack = {"endpoint_url": "http://127.0.0.1:9", "settings": {"local_home": str(home)}}
    (home / "stack.json").write_text(json.dumps(stack))
    monkeypatch.setenv("LANGORCH_HOME", str(home))
    # When the run is shown, as JSON and as text
    assert main(["runs", "show", run.run_id, "--json"]) == 0
    shown: Any = json.loads(capsys.readouterr().out)
    assert main(["runs", "show", run.run_id]) == 0
    text = capsys.readouterr().out
    # Then its artifacts are listed with their record and a path that opens the file
    [listed] = shown["artifacts"]
    assert (listed["step_id"], listed["name"], listed["size"]) == ("keep", "note.md", 4)
    assert listed["content_type"] == "text/markdown"
    assert listed["sha256"] == hashlib.sha256(b"# hi").hexdigest()
    assert Path(listed["link"]).read_bytes() == b"# hi"
    assert f"artifacts:\n  keep  note.md  4 B  text/markdown\n    {listed['link']}" in text


def test_artifacts_without_local_is_refused_saying_why(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "start", "report", "--artifacts", "out"]) == 2
    assert "--artifacts keeps the files of a --local run" in capsys.readouterr().err
