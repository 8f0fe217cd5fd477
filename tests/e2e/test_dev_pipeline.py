"""`langorch dev` runs the real pipeline: the emulator in server mode executes the run state
machine, whose Lambda tasks run the handlers in this process; the CLI starts, follows, cancels
runs and reads their logs back from the emulator's CloudWatch Logs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from langorch.cli.main import main
from langorch.composition.bootstrap import build_container
from langorch.domain.runs import RunRecord
from langorch.local._invoke import TRIGGER
from langorch.local.stack import LocalStack
from tests.e2e.readme import REPO, langorch_commands
from tests.support.cli import langorch_json as langorch
from tests.support.polling import wait_for
from tests.support.stacks import EXAMPLES, START_BLOG_REVIEW, running_stack
from tests.workflows import LINEAR


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalStack, float]]:
    """`langorch dev` in this process on a free port, one for the module (a stack start is the
    costly part of these tests; each test's workflows, runs and files have ids of their own);
    how long it took to be ready."""
    began = time.monotonic()
    home = tmp_path_factory.mktemp("dev-pipeline") / ".langorch"
    with running_stack(home, examples=EXAMPLES) as running:
        yield running, time.monotonic() - began


@pytest.fixture
def stack(started: tuple[LocalStack, float], monkeypatch: pytest.MonkeyPatch) -> LocalStack:
    """The module's stack, found by the CLI as a developer's is: ./.langorch."""
    monkeypatch.chdir(started[0].home.parent)
    return started[0]


def file_digest_runs(stack: LocalStack) -> set[str]:
    """The ids of the file_digest runs so far."""
    runs = build_container(stack.settings).runs.list_runs(workflow_id="file_digest", limit=1000)
    return {r.run_id for r in runs}


def ended_file_digest_run(stack: LocalStack, before: set[str]) -> RunRecord:
    """The one file_digest run started since ``before``, once it has ended (the S3 event starts
    it on the emulator's threads)."""
    container = build_container(stack.settings)

    def ended() -> list[RunRecord] | None:
        runs = container.runs.list_runs(workflow_id="file_digest", limit=1000)
        new = [r for r in runs if r.run_id not in before]
        return new if new and all(r.is_terminal for r in new) else None

    [run] = wait_for(ended, what="the file_digest run to end", timeout=60, interval=0.2)
    return run


def test_the_dev_stack_is_ready_with_its_state_machine(started: tuple[LocalStack, float]):
    # Given `langorch dev` started (examples registered, pipeline provisioned); how long that
    # takes is measured by `make bench-pipeline`, never asserted here (it depends on the machine)
    stack, _ = started

    # Then the stack file names the running state machine
    document = json.loads(stack.stack_file.read_text())
    arn = document["settings"]["state_machine_arn"]
    machine = (
        build_container(stack.settings)
        .client("stepfunctions")
        .describe_state_machine(stateMachineArn=arn)
    )
    assert machine["status"] == "ACTIVE"
    assert "${" not in machine["definition"]
    assert set(document["functions"]) == {
        "trigger",
        "run_segment",
        "request_approval",
        "approval_callback",
    }
    assert document["outbox_dir"] == str((stack.home / "outbox").resolve())
    assert document["settings"]["outbox_dir"] == document["outbox_dir"]


def test_a_run_started_with_wait_runs_in_the_state_machine_and_its_logs_come_back(
    stack: LocalStack, capsys: pytest.CaptureFixture[str], tmp_path: Path
):
    # Given a workflow registered in the local stack
    (tmp_path / "linear.yaml").write_text(LINEAR)
    assert langorch(capsys, "workflows", "put", str(tmp_path / "linear.yaml"))[0] == 0

    # When it is started and followed from the command line
    code, data, err = langorch(capsys, "runs", "start", "linear", "--input", '{"x": 4}', "--wait")

    # Then it succeeded in its execution (the state machine ran it, not this process)
    assert code == 0, err
    run = data["runs"][0]["run"]
    assert run["status"] == "succeeded"
    assert run["outputs"]["z"] == 9
    execution = build_container(stack.settings).stepfunctions.describe(run["run_id"])
    assert execution["status"] == "SUCCEEDED"
    # (and `runs show`, which asks the emulator without boto3, says so too)
    code, shown, err = langorch(capsys, "runs", "show", run["run_id"])
    assert code == 0, err
    assert (shown["execution"]["arn"], shown["execution"]["status"]) == (
        execution["executionArn"],
        "SUCCEEDED",
    )

    # And `runs logs` pulls the segment's lines back from CloudWatch Logs (shipped in the
    # background, and the run ends inside the segment's invocation, before they are: a reader
    # in another process, as this command is, may look a moment early)
    deadline = time.monotonic() + 30
    while True:
        code, logs, err = langorch(capsys, "runs", "logs", run["run_id"])
        assert code == 0, err
        answered = [
            line for line in logs["lines"] if line["fields"].get("message") == "segment answered"
        ]
        if answered or time.monotonic() > deadline:
            break
    assert answered
    assert answered[0]["group"] == "/aws/lambda/langorch-run-segment"
    assert all(line["fields"]["run_id"] == run["run_id"] for line in logs["lines"])


def test_a_run_followed_with_wait_tells_each_event_once_then_its_outcome(
    stack: LocalStack, capsys: pytest.CaptureFixture[str], tmp_path: Path
):
    # Given a workflow registered in the local stack
    (tmp_path / "linear.yaml").write_text(LINEAR)
    assert langorch(capsys, "workflows", "put", str(tmp_path / "linear.yaml"))[0] == 0

    # When it is started and followed in text mode
    code = main(["runs", "start", "linear", "--input", '{"x": 4}', "--wait"])
    captured = capsys.readouterr()

    # Then each step is told once (on stderr, as it happens) and stdout has the outcome
    assert code == 0, captured.err
    told = (captured.out + captured.err).splitlines()
    assert len([line for line in told if " ok " in line and " double " in line]) == 1
    assert len([line for line in told if " end " in line]) == 1
    assert "linear@1  succeeded" in captured.out
    assert "z: 9" in captured.out


def test_a_run_waiting_on_an_approval_says_where_its_email_is_and_can_be_cancelled(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
):
    # Given a blog review run followed until it parks on its approval
    code, data, err = langorch(capsys, *START_BLOG_REVIEW, "--wait")
    assert code == 0, err
    document = data["runs"][0]
    run_id = document["run"]["run_id"]

    # Then it waits on the approval, and the approval's email is in the outbox
    assert document["run"]["status"] == "waiting_approval"
    assert document["approval"]["email_files"], document["approval"]
    assert Path(document["approval"]["email_files"][0]).parent == Path(stack.settings.outbox_dir)

    # When it is cancelled
    code, cancelled, err = langorch(capsys, "runs", "cancel", run_id)

    # Then the run is cancelled and its pending approval closed, so no click can resume it.
    # (Its execution was told to stop; moto keeps a stopped execution RUNNING while a task
    # token wait is pending — EMULATOR-NOTES — where AWS reports ABORTED.)
    assert code == 0, err
    assert cancelled["run"]["status"] == "cancelled"
    container = build_container(stack.settings)
    approval = container.approvals.get(document["approval"]["approval_id"])
    assert approval is not None and approval.status.value == "cancelled"
    assert container.runs.get_run(run_id).pending is None


def test_an_operator_pauses_and_resumes_a_run_from_the_command_line(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
):
    # Given a blog review run parked on its approval (issue 28 item 3)
    code, data, err = langorch(capsys, *START_BLOG_REVIEW, "--wait")
    assert code == 0, err
    run_id = data["runs"][0]["run"]["run_id"]

    # When an operator pauses it with a reason
    code, paused, err = langorch(capsys, "runs", "pause", run_id, "--reason", "freeze")

    # Then it is paused at once, everywhere: its record, the paused listing, its show
    assert code == 0, err
    assert (paused["state"], paused["asked"]) == ("paused", True)
    assert paused["run"]["status"] == "paused" and paused["run"]["pause"]["reason"] == "freeze"
    _, listed, _ = langorch(capsys, "runs", "list", "--status", "paused")
    assert [r["run_id"] for r in listed["runs"]] == [run_id]
    main(["runs", "show", run_id])
    shown = capsys.readouterr().out
    assert "paused by cli:" in shown and "resume with `langorch runs resume" in shown

    # And when it is resumed, it waits on its approval again; a second resume changes nothing
    code, resumed, err = langorch(capsys, "runs", "resume", run_id, "--reason", "thawed")
    assert code == 0, err
    assert resumed["resumed"] and resumed["run"]["status"] == "waiting_approval"
    code, again, _ = langorch(capsys, "runs", "resume", run_id)
    assert code == 0 and not again["resumed"]


@pytest.mark.parametrize(
    "key",
    [
        "inbox/orders.csv",
        # S3 URL-encodes keys in its events; each of these once came back as another key
        "inbox/c++ report (1) 100% ünïcode+été.csv",
    ],
)
def test_a_csv_dropped_with_files_put_is_read_and_counted_by_the_file_digest_example(
    stack: LocalStack, capsys: pytest.CaptureFixture[str], tmp_path: Path, key: str
):
    # Given `langorch dev` with the examples, and a CSV of three orders
    data = tmp_path / "orders.csv"
    data.write_text("order,amount\nA-1,10\nA-2,25\nA-3,7\n")
    before = file_digest_runs(stack)

    # When it is dropped into the inbox with the CLI
    code, put, err = langorch(capsys, "files", "put", str(data), "--key", key)

    # Then the drop matches file_digest, whose run (started by the S3 event, run by the state
    # machine) reads the file and ends with its row count
    assert code == 0, err
    assert put["matching_workflows"] == ["file_digest"]
    run = ended_file_digest_run(stack, before)
    assert run.status.value == "succeeded", run.error
    assert run.outputs["row_count"] == 3
    assert run.outputs["file"]["key"] == key


def test_the_readmes_csv_drop_is_read_and_counted_by_the_file_digest_example(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
):
    # Given `langorch dev` with the examples, and the README's command dropping the CSV the
    # repository ships (its path made absolute: this stack runs in another directory)
    [argv] = langorch_commands(("files", "put"))
    argv = [str(REPO / a) if a.startswith("examples/") else a for a in argv]
    rows = len((REPO / "examples" / "file_digest" / "orders.csv").read_text().splitlines()) - 1
    before = file_digest_runs(stack)

    # When it is run
    code, put, err = langorch(capsys, *argv)

    # Then the drop matches file_digest, whose run reads the shipped file and counts its rows
    assert code == 0, err
    assert put["matching_workflows"] == ["file_digest"]
    run = ended_file_digest_run(stack, before)
    assert run.status.value == "succeeded", run.error
    assert run.outputs["row_count"] == rows == 4
    assert run.outputs["file"]["key"] == "inbox/orders.csv"


def test_a_250_kb_webhook_is_refused_at_the_door_and_reconcile_finds_nothing_stranded(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
):
    # Given a signed 250 KB delivery to the local stack (before: 202, then the run stayed
    # `queued` forever while its execution failed)
    note = "x" * 250_000
    before = build_container(stack.settings).runs.list_runs(workflow_id="blog_review", limit=1000)

    # When it is sent
    code, answer, err = langorch(
        capsys, "hooks", "send", "blog_review", "--input", json.dumps({"commit_message": note})
    )

    # Then it is refused with 413 naming the limit and the field, and no run exists for it
    assert code == 1, err
    assert answer["status"] == 413, answer
    assert "100000" in answer["error"]
    assert answer["problems"][0]["path"] == "body"
    after = build_container(stack.settings).runs.list_runs(workflow_id="blog_review", limit=1000)
    assert len(after) == len(before)

    # And reconcile, against the stack's real executions, has nothing stranded to repair
    code, reconciled, err = langorch(capsys, "runs", "reconcile", "--dry-run")
    assert code == 0, err
    assert reconciled == {"dry_run": True, "runs": []}


def test_the_trigger_function_runs_the_reconcile_pass_the_stacks_schedule_sends(
    stack: LocalStack,
):
    # Given the Input of the deployed stack's reconcile schedule (infra: Triggers.Reconcile)
    from langorch.domain.triggers import RECONCILE_SOURCE

    # When the Scheduler would deliver it to the trigger function
    answer = stack.invoker(TRIGGER)({"source": RECONCILE_SOURCE})

    # Then the function ran the pass (before: `{"ignored": "unsupported event"}`), against
    # the stack's real executions, and found nothing stranded
    assert answer == {"reconciled": []}


SAME = """
blocks:
  - block_id: same_tagger
    name: Tag an item
    block_type: extraction
    input_keys: [item]
    output_keys: [tag]
    prompt_template: "Tag {{ item }}"
workflows:
  - plan_id: same_both_ways
    memory: false
    inputs_schema:
      properties: {items: {type: array}, limit: {type: integer}}
      required: [items, limit]
    steps:
      - step_id: each
        kind: loop
        loop: {over: items, item_key: item, body: [tag], collect: [tag], collect_key: tags}
      - {step_id: tag, block_id: same_tagger}
      - step_id: count
        kind: transform
        depends_on: [each]
        transform: {n: "tags | length", big: "(tags | length) > limit"}
      - step_id: route
        kind: decision
        depends_on: [count]
        cases: [{when: big, branch: many}]
        default_branch: few
        branches: {many: many, few: few}
      - {step_id: many, kind: transform, transform: {verdict: "'many'"}}
      - {step_id: few, kind: transform, transform: {verdict: "'few'"}}
"""


def _shape(document: dict[str, Any]) -> tuple[Any, ...]:
    """What a run did, without when: its status, outputs and each step's events in order."""
    events = [
        (event["type"], event.get("step_id"))
        for event in document["timeline"]
        if event["type"] in ("step_started", "step_finished", "step_failed", "run_finished")
    ]
    return document["run"]["status"], document["run"]["outputs"], events


def test_one_workflow_behaves_the_same_run_here_and_through_the_dev_stack(
    stack: LocalStack, capsys: pytest.CaptureFixture[str], tmp_path: Path
):
    # Given one workflow file (a for-each over an LLM block, a transform, a decision)
    definitions = tmp_path / "same.yaml"
    definitions.write_text(SAME)
    data = '{"items": ["a", "b", "c"], "limit": 2}'

    # When it runs in this process with `runs start --local` and through `langorch dev`
    code, local, err = langorch(
        capsys, "runs", "start", "--local", str(definitions), "--input", data
    )
    assert code == 0, err
    assert langorch(capsys, "workflows", "put", str(definitions))[0] == 0
    code, staged, err = langorch(
        capsys, "runs", "start", "same_both_ways", "--input", data, "--wait"
    )
    assert code == 0, err
    code, shown, err = langorch(capsys, "runs", "show", staged["runs"][0]["run"]["run_id"])
    assert code == 0, err

    # Then both took the same steps in the same order and produced the same outputs
    assert _shape(local["runs"][0]) == _shape(shown)
    assert shown["run"]["outputs"]["verdict"] == "many"
