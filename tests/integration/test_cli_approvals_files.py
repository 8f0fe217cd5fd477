"""``langorch approvals`` and ``langorch files`` through ``main(argv)`` against a moto server."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from langorch.cli.errors import EXIT_CONFLICT
from langorch.cli.main import main
from langorch.composition.container import Container
from tests.support.cli import fresh_emulator

TOKEN = "task-token-that-must-never-be-printed"
NOW = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)


@pytest.fixture
def container(endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Container:
    return fresh_emulator(endpoint, tmp_path / "home", monkeypatch)


def langorch(capsys: pytest.CaptureFixture[str], endpoint: str, *args: str) -> tuple[int, Any, str]:
    code = main([*args, "--endpoint-url", endpoint, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out.strip() else None, captured.err


def _decided_approval(container: Container) -> str:
    from langorch.domain.approvals.record import ApprovalStatus, AuditEntry, new_approval

    approval = new_approval(
        run_id="run-1",
        workflow_id="blog_review",
        request={
            "interrupt_id": "i-1",
            "step_id": "review",
            "title": "Review: Draft 1",
            "approvers": ["editor@example.com"],
            "timeout_seconds": 3600,
            "context": {"title": "Draft 1"},
        },
        now=NOW,
    )
    container.approvals.put_pending(approval, TOKEN)
    container.approvals.append_audit(
        AuditEntry(
            approval_id=approval.approval_id,
            at=NOW + timedelta(minutes=1),
            action="view",
            outcome="shown",
            actor="editor@example.com",
            source_ip="127.0.0.1",
            method="GET",
        )
    )
    container.approvals.decide(
        approval.approval_id,
        ApprovalStatus.approved,
        "editor@example.com",
        "ship it",
        {},
        NOW + timedelta(minutes=2),
    )
    return approval.approval_id


def test_show_has_what_who_and_the_audit_trail_but_never_the_token(
    container: Container, endpoint: str, capsys: pytest.CaptureFixture[str]
):
    approval_id = _decided_approval(container)

    code, shown, err = langorch(capsys, endpoint, "approvals", "show", approval_id)

    assert code == 0, err
    assert shown["title"] == "Review: Draft 1"
    assert shown["approvers"] == ["editor@example.com"]
    assert (shown["status"], shown["decided_by"]) == ("approved", "editor@example.com")
    assert [(e["action"], e["actor"]) for e in shown["audit"]][:1] == [
        ("view", "editor@example.com")
    ]
    text_code = main(["approvals", "show", approval_id, "--endpoint-url", endpoint])
    text = capsys.readouterr().out
    assert text_code == 0
    assert "editor@example.com" in text
    for output in (json.dumps(shown), text):
        assert TOKEN not in output
        assert "sig=" not in output and "/approvals/" not in output


def test_list_pending_leaves_out_decided_approvals(
    container: Container, endpoint: str, capsys: pytest.CaptureFixture[str]
):
    approval_id = _decided_approval(container)

    _, everything, _ = langorch(capsys, endpoint, "approvals", "list")
    _, pending, _ = langorch(capsys, endpoint, "approvals", "list", "--pending")

    assert [a["approval_id"] for a in everything["approvals"]] == [approval_id]
    assert pending["approvals"] == []


def test_show_of_an_unknown_approval_is_exit_3(
    container: Container, endpoint: str, capsys: pytest.CaptureFixture[str]
):
    code, data, _ = langorch(capsys, endpoint, "approvals", "show", "apr-nope")

    assert code == 3
    assert "does not exist" in data["error"]


def test_files_put_uploads_to_the_bucket_and_names_the_matching_workflows(
    container: Container, endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    from langorch.app.definitions import register_files, seed_builtins

    seed_builtins(container.definitions)
    definitions = tmp_path / "wf.yaml"
    definitions.write_text(
        """
workflows:
  - plan_id: csv_import
    triggers: [{type: s3, prefix: "inbox/", suffix: ".csv"}]
    steps:
      - {step_id: done, kind: terminate, terminate: {status: succeeded}}
  - plan_id: pdf_import
    triggers: [{type: s3, prefix: "inbox/", suffix: ".pdf"}]
    steps:
      - {step_id: done, kind: terminate, terminate: {status: succeeded}}
"""
    )
    register_files(container.definitions, [str(definitions)])
    data = tmp_path / "orders.csv"
    data.write_text("id,amount\n1,10\n")

    code, put, err = langorch(
        capsys, endpoint, "files", "put", str(data), "--key", "inbox/orders.csv"
    )

    assert code == 0, err
    assert (put["bucket"], put["key"], put["size"]) == ("langorch-files", "inbox/orders.csv", 15)
    assert put["matching_workflows"] == ["csv_import"]
    stored = container.client("s3").get_object(Bucket="langorch-files", Key="inbox/orders.csv")
    assert stored["Body"].read() == b"id,amount\n1,10\n"


def test_files_put_of_a_missing_file_is_a_usage_error(
    container: Container, endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    code, data, _ = langorch(capsys, endpoint, "files", "put", str(tmp_path / "nope.csv"))

    assert code == 2
    assert (
        data["error"]
        == f"{tmp_path / 'nope.csv'} does not exist: give the path of the file to upload"
    )


def test_reissue_refuses_a_decided_or_unknown_approval(
    container: Container, endpoint: str, capsys: pytest.CaptureFixture[str]
):
    approval_id = _decided_approval(container)

    code, data, _ = langorch(capsys, endpoint, "approvals", "reissue", approval_id)
    assert code == EXIT_CONFLICT
    assert "not pending" in data["error"] and approval_id in data["error"]
    code, data, _ = langorch(capsys, endpoint, "approvals", "reissue", "apr-nope")
    assert code == 3 and "does not exist" in data["error"]


def test_show_prints_the_policy_its_votes_and_what_happens_next(
    container: Container, endpoint: str, capsys: pytest.CaptureFixture[str]
):
    # Given a pending approval needing 2 of 3, with one vote and a reminder ahead
    from langorch.domain.approvals.policy import Vote
    from langorch.domain.approvals.record import approver_ref, new_approval

    now = datetime.now(UTC).replace(microsecond=0)
    approval = new_approval(
        run_id="run-2",
        workflow_id="invoice_batch",
        request={
            "interrupt_id": "i-2",
            "step_id": "finance_review",
            "title": "Pay 12000",
            "approvers": ["fay@example.com", "fin@example.com", "fox@example.com"],
            "timeout_seconds": 3 * 86400,
            "on_timeout": "reject",
            "policy": {
                "quorum": {"at_least": 2},
                "reminders": {"after": ["4h"]},
                "escalation": [{"after": "1d", "approvers": ["boss@example.com"]}],
            },
        },
        now=now,
    )
    container.approvals.put_pending(approval, TOKEN)
    vote = Vote(approver="fay@example.com", decision="approved", at=now)
    slot = approver_ref(approval.approval_id, "fay@example.com")
    assert container.approvals.record_vote(approval.approval_id, slot, vote)

    # When an operator shows it
    code, shown, err = langorch(capsys, endpoint, "approvals", "show", approval.approval_id)

    # Then the votes, the progress and the next timer are there
    assert code == 0, err
    policy = shown["policy"]
    assert policy["progress"] == "1 of 2 approvals; waiting for fin@example.com, fox@example.com"
    assert [v["approver"] for v in policy["votes"]] == ["fay@example.com"]
    assert policy["next"]["kind"] == "reminder"
    assert policy["next"]["at"] == (now + timedelta(hours=4)).isoformat()
    assert "Needs 2 approvals." in policy["rules"]
    main(["approvals", "show", approval.approval_id, "--endpoint-url", endpoint])
    text = capsys.readouterr().out
    assert "next       reminder at" in text and "no decision 4h after the request" in text
    assert "then       at" in text and "reject" in text
