"""Built-in workflow templates (``langorch workflows new --template NAME``): each is a valid
definition file as written, runs offline, and is named by the id the user gives it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from langorch.cli.main import main
from langorch.domain.loading import load_text
from langorch.domain.validation import InMemoryLookup, check_workflow
from langorch.domain.workflow_templates import TEMPLATES, template_text
from tests.integration.conftest import register_text, run_to_end
from tests.unit.conftest import MakeFakes


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_every_template_is_valid_with_nothing_to_warn_about(name: str) -> None:
    # Given a template, named my_flow
    loaded = load_text(template_text(name, "my_flow"), source=f"{name}.yaml", fmt="yaml")
    [plan] = loaded.workflows
    # When validated against its own blocks and the built-in tools
    found = check_workflow(
        plan,
        InMemoryLookup(loaded.blocks),
        tools=frozenset({"calculator", "current_time", "http_get"}),
        providers=frozenset({"offline", "bedrock", "openai"}),
    )
    # Then it has no errors, no warnings, and its blocks carry the workflow's id
    assert (found.errors, found.warnings) == ([], [])
    assert plan.plan_id == "my_flow"
    assert all(block.block_id.startswith("my_flow_") for block in loaded.blocks)


def test_the_review_loop_template_runs_to_publish_when_approved(make_container: MakeFakes):
    # Given the review-loop template, registered
    container = make_container()
    register_text(container, template_text("review-loop", "review"))

    # When a brief goes through and the reviewer approves
    result = run_to_end(container, "review", {"brief": "loops"})

    # Then it published the draft
    assert result.status == "succeeded"
    assert set(result.outputs) == {"title", "body", "review"}


def test_the_approval_gate_template_ends_failed_when_refused(make_container: MakeFakes):
    # Given the approval-gate template, registered
    container = make_container()
    register_text(container, template_text("approval-gate", "gate"))

    def refuse(request: dict[str, Any]) -> dict[str, Any]:
        return {"decision": "rejected", "approver": "ops@example.com", "comment": "not now"}

    # When the approver refuses
    result = run_to_end(container, "gate", {"request": "Open port 443"}, on_approval=refuse)

    # Then the run ended failed with the comment
    assert result.status == "failed"
    assert result.error is not None and result.error["message"] == "refused: not now"


def test_the_file_digest_template_counts_a_dropped_csv(make_container: MakeFakes):
    # Given the file-digest template and a CSV in the files bucket
    container = make_container()
    register_text(container, template_text("file-digest", "digest"))
    container.files.put("inbox/orders.csv", b"id,total\n1,10\n2,20\n")

    # When a run starts for the dropped file
    result = run_to_end(
        container, "digest", {"bucket": container.files.bucket, "key": "inbox/orders.csv"}
    )

    # Then it counted the rows and columns
    assert result.status == "succeeded"
    assert (result.outputs["row_count"], result.outputs["columns"]) == (2, ["id", "total"])


def test_workflows_new_writes_the_template_and_refuses_to_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given no file yet
    target = tmp_path / "flow.yaml"

    # When the template is written twice, without --force the second time
    first = main(["workflows", "new", "--template", "approval-gate", "--id", "gate", str(target)])
    second = main(["workflows", "new", "--template", "approval-gate", str(target)])

    # Then the file holds the template under the id, and the second write was refused
    assert first == 0 and second == 2
    assert target.read_text() == template_text("approval-gate", "gate")
    assert "exists; choose another FILE, or --force" in capsys.readouterr().err


def test_workflows_new_refuses_an_id_that_is_not_one(tmp_path: Path) -> None:
    code = main(
        [
            "workflows",
            "new",
            "--template",
            "review-loop",
            "--id",
            "9 lives",
            str(tmp_path / "f.yaml"),
        ]
    )
    assert code == 2 and not (tmp_path / "f.yaml").exists()
