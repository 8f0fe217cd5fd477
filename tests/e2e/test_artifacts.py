"""Artifacts from the command line: a run attaches files, and the CLI lists them with links.

``runs start --local`` runs the workflow in this process and prints the run with its files
(kept in ``--artifacts DIR``: the command's own stores go when it ends); through ``langorch
dev``, the file_digest example dropped a CSV attaches its digest and the CSV, and ``runs show``
lists both with the paths that open them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from langorch.cli.main import main
from langorch.composition.bootstrap import build_container
from langorch.local.stack import LocalStack, free_port, start_local_stack
from tests.e2e.readme import REPO
from tests.e2e.test_dev_pipeline import langorch
from tests.support.definitions import workflow
from tests.support.polling import wait_for

REPORT = workflow("report", inputs={"customer": "string", "order": "object"}).steps("""
      - {step_id: total, kind: transform, transform: {total: "order.amount * 2"}}
      - step_id: keep
        kind: attach
        depends_on: [total]
        settings:
          files:
            - {name: "report-{{ customer }}.md", content: "# {{ customer }}\\n\\ntotal {{ total }}"}
            - {name: order.json, from: order}
""")


@pytest.fixture
def definitions(tmp_path: Path) -> Path:
    path = tmp_path / "report.yaml"
    path.write_text(REPORT)
    return path


def test_a_local_run_lists_the_files_it_attached_kept_where_artifacts_says(
    definitions: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a workflow attaching a report it writes and a value of its input
    kept = tmp_path / "kept"
    data = '{"customer": "Ada", "order": {"amount": 21}}'

    # When it runs on this machine with --artifacts
    argv = ["runs", "start", "--local", str(definitions), "--input", data]
    code = main([*argv, "--artifacts", str(kept), "--json"])
    document = json.loads(capsys.readouterr().out)["runs"][0]

    # Then the run lists both files with their records, and each link opens the file, kept
    # after the command's own stores are gone
    assert code == 0
    run_id = document["run"]["run_id"]
    listed = {a["name"]: a for a in document["artifacts"]}
    assert set(listed) == {"report-Ada.md", "order.json"}
    report = listed["report-Ada.md"]
    assert (report["step_id"], report["content_type"]) == ("keep", "text/markdown")
    assert Path(report["link"]) == kept / run_id / "keep" / "report-Ada.md"
    assert Path(report["link"]).read_text() == "# Ada\n\ntotal 42"
    assert report["sha256"] == hashlib.sha256(b"# Ada\n\ntotal 42").hexdigest()
    assert json.loads(Path(listed["order.json"]["link"]).read_text()) == {"amount": 21}


def test_a_local_run_without_artifacts_says_its_files_go_with_it(
    definitions: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = '{"customer": "Ada", "order": {"amount": 1}}'
    assert main(["runs", "start", "--local", str(definitions), "--input", data]) == 0
    out = capsys.readouterr().out
    assert "\nartifacts:\n  keep  order.json  " in out
    assert "(in this command's temporary stores: --artifacts DIR keeps them)" in out


@pytest.fixture
def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalStack]:
    """`langorch dev` in this process, with the examples."""
    monkeypatch.chdir(tmp_path)
    running = start_local_stack(
        home=tmp_path / ".langorch", port=free_port(), examples=REPO / "examples"
    )
    yield running
    running.stop()


def test_runs_show_lists_what_the_file_digest_run_attached_with_paths_that_open_them(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given `langorch dev`, and the README's CSV dropped into the inbox
    orders = REPO / "examples" / "file_digest" / "orders.csv"
    code, _, err = langorch(capsys, "files", "put", str(orders), "--key", "inbox/orders.csv")
    assert code == 0, err
    run = _ended(stack, "file_digest")
    assert run.status.value == "succeeded", run.error

    # When the run is shown
    code, shown, err = langorch(capsys, "runs", "show", run.run_id)
    assert code == 0, err
    assert main(["runs", "show", run.run_id]) == 0
    text = capsys.readouterr().out

    # Then it lists the digest it wrote and the CSV it was started by, each path opening the
    # file in the home's bucket folder
    listed = {a["name"]: a for a in shown["artifacts"]}
    assert set(listed) == {"digest.md", "orders.csv"}
    assert Path(listed["orders.csv"]["link"]).read_bytes() == orders.read_bytes()
    assert listed["orders.csv"]["content_type"] == "text/csv"
    digest = Path(listed["digest.md"]["link"]).read_text()
    assert digest.startswith("# inbox/orders.csv\n\n4 rows: ")
    home_bucket = stack.settings.local_home
    assert home_bucket is not None
    assert listed["digest.md"]["link"].startswith(str(Path(home_bucket).resolve() / "bucket"))
    assert f"    {listed['digest.md']['link']}" in text


def _ended(stack: LocalStack, workflow_id: str) -> Any:
    """The workflow's one run once it ended (its S3 event starts it in the state machine)."""
    container = build_container(stack.settings)

    def ended() -> list[Any] | None:
        runs = container.runs.list_runs(workflow_id=workflow_id)
        return runs if runs and all(r.is_terminal for r in runs) else None

    # A bound for a stuck run, not a speed: it scales with LANGORCH_TEST_PATIENCE
    [run] = wait_for(ended, what=f"the {workflow_id} run to end", timeout=180, interval=0.2)
    return run
