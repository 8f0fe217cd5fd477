"""A person fixes a failed step (issue 28 item 4, seed 000 verification 6), on fakes.

A step with ``on_error: ask`` that fails after its retries parks the run on an approval — the
same approval use-cases, signed links and emails as an approval step — showing the error and
the step's inputs. The person retries it with edited inputs, skips it giving its outputs, or
fails the run; the timeline says a fix was asked, what was chosen, by whom and from where.
Each test drives the run with ``run_segment`` and answers on the approval's emailed page
(``view_approval`` / ``decide_approval``), as ``langorch dev`` and the cloud do.
"""

from __future__ import annotations

from typing import Any

import pytest

from langorch.app.approvals.decisions import (
    RequestApproval,
    decide_approval,
    ensure_signing_key,
    request_approval,
    view_approval,
)
from langorch.app.runs import RunSegment, SegmentResult, StartRun, run_segment, start_run
from langorch.domain.approvals.outcomes import Decided, Shown
from langorch.domain.approvals.record import Approval
from langorch.domain.runs import RunStatus, TimelineEvent, TimelineEventType
from tests.fakes import Fakes
from tests.fakes.approvals import InMemoryApprovals
from tests.integration.conftest import register_text
from tests.support.definitions import workflow
from tests.unit.approvals_support import CountingExecutions, decide_command, view_command

OPS = "ops@example.com"
ORDER = workflow(
    "order", approvers=["ops@example.com"], inputs={"sku": "string"}, required=["sku"]
).steps("""
      - step_id: reserve
        kind: http
        http:
          method: POST
          url: "https://shop.example.com/reserve/{{ sku }}"
          response_key: reservation
        on_error: ask
      - step_id: confirm
        kind: transform
        depends_on: [reserve]
        transform: {confirmed: "reservation"}
""")


class Shop:
    """The service the step calls: it knows one sku, and keeps every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def __call__(
        self, method: str, url: str, *, headers: dict[str, str], body: Any, timeout: float
    ) -> tuple[int, Any]:
        self.calls.append((url, headers["Idempotency-Key"]))
        if url.endswith("/A-1"):
            return 200, "reserved R-1"
        return 404, {"error": "no such sku"}


@pytest.fixture
def shop() -> Shop:
    return Shop()


@pytest.fixture
def deps(shop: Shop) -> Fakes:
    fakes = Fakes(http=shop, public_base_url="https://approve.example.com")
    fakes.approvals = InMemoryApprovals()  # type: ignore[attr-defined]
    fakes.executions = CountingExecutions(fakes.settings.state_machine_arn)
    ensure_signing_key(fakes.secrets, fakes.settings.link_signing_secret)
    register_text(fakes, ORDER)  # type: ignore[arg-type]
    return fakes


def _asked(deps: Fakes, sku: str = "B-9") -> tuple[str, Approval]:
    """A run whose ``reserve`` failed and asked for a fix: its id and the approval."""
    run, _ = start_run(StartRun("order", input={"sku": sku}), deps)
    parked = run_segment(RunSegment(run.run_id), deps)
    return run.run_id, _requested(deps, parked)


def _requested(deps: Fakes, parked: SegmentResult) -> Approval:
    """What the state machine's AwaitApproval does with a park: the approval and its email."""
    assert parked.status == "waiting_approval", parked
    assert parked.approval is not None
    token = deps.executions.park(parked.run_id)
    requested = request_approval(
        RequestApproval(parked.run_id, parked.approval, task_token=token),
        deps,  # type: ignore[arg-type]
    )
    approval = deps.approvals.get(requested.approval_id)  # type: ignore[attr-defined]
    assert approval is not None
    return approval  # type: ignore[no-any-return]


def _answer(deps: Fakes, approval: Approval, choice: str, **edits: str) -> SegmentResult:
    """The person presses ``choice`` on the emailed page; the run resumes with the decision."""
    [mail] = [m for m in deps.email.sent if m.approval_id == approval.approval_id]
    shown = view_approval(view_command(mail.link), deps)  # type: ignore[arg-type]
    assert isinstance(shown, Shown)
    deps.clock.advance(deps.settings.approval_form_dwell_seconds)
    form = {"nonce": shown.nonce, "decision": choice, **{f"edit.{k}": v for k, v in edits.items()}}
    decided = decide_approval(decide_command(mail.link, form), deps)  # type: ignore[arg-type]
    assert isinstance(decided, Decided), decided
    executions: CountingExecutions = deps.executions  # type: ignore[assignment]
    return run_segment(RunSegment(approval.run_id, resume=executions.sent[-1]), deps)


def _events(deps: Fakes, run_id: str, kind: TimelineEventType) -> list[TimelineEvent]:
    return [e for e in deps.runs.get_timeline(run_id) if e.type is kind]


def test_a_failed_step_that_asks_parks_on_an_approval_showing_its_error_and_inputs(
    deps: Fakes, shop: Shop
) -> None:
    # Given a step with on_error: ask whose call fails
    # When the run runs
    run_id, approval = _asked(deps)

    # Then it waits on an approval for the workflow's approvers, showing the error, the
    # step's input to edit and the output a skip would give — instead of failing
    assert deps.runs.get_run(run_id).status is RunStatus.waiting_approval
    assert approval.approvers == [OPS] and approval.step_id == "reserve"
    assert approval.fix is not None
    assert (approval.fix.error_type, approval.fix.error_message) == (
        "HttpStepError",
        "HTTP 404 from shop.example.com",
    )
    assert approval.fix.choices == ["retry", "skip", "fail"]
    assert approval.editable == {"input.sku": "B-9", "output.reservation": None}
    [mail] = deps.email.sent
    assert "HTTP 404 from shop.example.com" in mail.text
    # And the timeline says the step failed and a fix was asked; the call was made once
    [failed] = _events(deps, run_id, TimelineEventType.step_failed)
    assert failed.detail["routed_to"] == "ask"
    [asked] = _events(deps, run_id, TimelineEventType.approval_requested)
    assert asked.detail["fix"] == {"error": "HttpStepError: HTTP 404 from shop.example.com"}
    assert len(shop.calls) == 1


def test_a_retry_with_edited_inputs_runs_the_step_again_and_the_run_succeeds(
    deps: Fakes, shop: Shop
) -> None:
    # Given a run asking for a fix of its failed call
    run_id, approval = _asked(deps)

    # When the person retries it with another sku, from the emailed page
    result = _answer(deps, approval, "retry", **{"input.sku": "A-1"})

    # Then the step ran again with the edited input (a new request: a new idempotency key),
    # and the run went on and succeeded
    assert result.status == "succeeded"
    assert result.outputs["confirmed"] == {"status": 200, "body": "reserved R-1"}
    assert result.outputs["sku"] == "A-1"
    assert [url for url, _ in shop.calls] == [
        "https://shop.example.com/reserve/B-9",
        "https://shop.example.com/reserve/A-1",
    ]
    assert shop.calls[0][1] != shop.calls[1][1]
    # And the timeline says who chose what, from where
    [decided] = _events(deps, run_id, TimelineEventType.approval_decided)
    assert decided.actor == OPS
    assert decided.detail["fix"] == {"choice": "retry", "via": "link"}
    started = _events(deps, run_id, TimelineEventType.step_started)
    [_, retried] = [e for e in started if e.step_id == "reserve"]
    assert retried.detail["fix"] == {"choice": "retry", "by": OPS, "via": "link"}


def test_a_skip_gives_the_outputs_and_the_run_goes_on_without_calling_again(
    deps: Fakes, shop: Shop
) -> None:
    # Given a run asking for a fix of its failed call
    run_id, approval = _asked(deps)

    # When the person skips it, giving the output the step would have given
    result = _answer(deps, approval, "skip", **{"output.reservation": "booked by phone"})

    # Then the next step ran on the given output, the call was not made again, and the run
    # succeeded
    assert result.status == "succeeded"
    assert result.outputs["confirmed"] == "booked by phone"
    assert len(shop.calls) == 1
    [decided] = _events(deps, run_id, TimelineEventType.approval_decided)
    assert (decided.actor, decided.detail["fix"]) == (OPS, {"choice": "skip", "via": "link"})


def test_a_fail_ends_the_run_failed_with_the_steps_original_error(deps: Fakes, shop: Shop) -> None:
    # Given a run asking for a fix of its failed call
    run_id, approval = _asked(deps)

    # When the person fails the run
    result = _answer(deps, approval, "fail")

    # Then it failed with the step's own error, and nothing else ran
    assert result.status == "failed"
    run = deps.runs.get_run(run_id)
    assert run.status is RunStatus.failed
    assert run.error is not None
    assert (run.error.step_id, run.error.type, run.error.message) == (
        "reserve",
        "HttpStepError",
        "HTTP 404 from shop.example.com",
    )
    assert len(shop.calls) == 1
    [decided] = _events(deps, run_id, TimelineEventType.approval_decided)
    assert decided.detail["fix"] == {"choice": "fail", "via": "link"}


def test_a_retry_that_fails_again_asks_again_as_the_next_round(deps: Fakes) -> None:
    # Given a run asking for a fix of its failed call
    _, approval = _asked(deps)

    # When the person retries it with another sku that fails too
    again = _answer(deps, approval, "retry", **{"input.sku": "C-3"})

    # Then the run asks again, round 2, showing the sku as edited
    second = _requested(deps, again)
    assert second.approval_id != approval.approval_id
    assert second.iteration == 2
    assert second.editable["input.sku"] == "C-3"
    # And that round's retry can still succeed
    assert _answer(deps, second, "retry", **{"input.sku": "A-1"}).status == "succeeded"


def test_a_fix_nobody_answers_in_time_fails_the_run_with_the_steps_error(deps: Fakes) -> None:
    # Given a run asking for a fix
    run_id, _ = _asked(deps)

    # When its approval times out (the state machine resumes it with timed_out)
    result = run_segment(RunSegment(run_id, resume={"decision": "timed_out"}), deps)

    # Then the run failed with the step's error
    assert result.status == "failed"
    error = deps.runs.get_run(run_id).error
    assert error is not None and (error.type, error.step_id) == ("HttpStepError", "reserve")


def test_a_workflows_on_failure_ask_asks_for_any_of_its_steps(deps: Fakes) -> None:
    # Given a workflow-wide on_failure: ask, with its own ask settings, and a failing step
    register_text(  # type: ignore[arg-type]
        deps,
        workflow(
            "split",
            on_failure="ask",
            ask={"approvers": ["lead@example.com"], "title": "Split {{ total }} failed"},
            inputs={"total": "number", "people": "integer"},
        ).steps("""
      - {step_id: divide, kind: transform, transform: {each: "total / people"}}
"""),
    )

    # When it runs, the failure asks the workflow's ask: approvers, with its title
    run, _ = start_run(StartRun("split", input={"total": 90, "people": 0}), deps)
    approval = _requested(deps, run_segment(RunSegment(run.run_id), deps))
    assert (approval.approvers, approval.title) == (["lead@example.com"], "Split 90 failed")

    # And a retry with the input corrected succeeds
    result = _answer(deps, approval, "retry", **{"input.people": "3"})
    assert (result.status, result.outputs["each"]) == ("succeeded", 30.0)
