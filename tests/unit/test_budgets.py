"""Budgets that ask instead of fail (issue 29, item 2), on fakes.

A workflow's LLM steps use the fake priced model (the offline provider under a model the
workflow prices); its budget is set so the second step's estimate crosses it. The question goes
through the approval machinery (``request_approval``: the stored approval, the emails), and the
decision resumes the run as an approval step's would.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from langorch.app.approvals.decisions import RequestApproval, ensure_signing_key, request_approval
from langorch.app.runs import RunSegment, SegmentResult, StartRun, run_segment, start_run
from langorch.domain.budgets import RAISE_KEY
from langorch.domain.loading import load_text
from langorch.domain.runs import RunStatus, TimelineEventType
from langorch.domain.validation import check_workflow
from tests.fakes import Fakes
from tests.fakes.approvals import InMemoryApprovals
from tests.integration.conftest import register_text
from tests.support.definitions import workflow

FINANCE = "finance@example.com"

BLOCKS = """
blocks:
  - block_id: b_summary
    input_keys: [topic]
    output_keys: [summary]
    prompt_template: "Summarise {{topic}} in one line"
    max_tokens: 100
  - block_id: b_title
    input_keys: [summary]
    output_keys: [title]
    prompt_template: "A title for {{summary}}"
    max_tokens: 1000
"""

# $1,000 per million tokens: the first step's estimate is about $0.11 (100 output tokens), the
# second's about $1.01 (1,000): within $1.00 the first runs, the second would cross it.
FLOW = (
    BLOCKS
    + """
workflows:
  - plan_id: capped
    memory: false
    llm_model: priced
    prices: {"offline/priced": {input: 1000, output: 1000}}
    budget: {per_run: 1.0, on_budget: %s, approvers: [finance@example.com]}
    steps:
      - {step_id: summary, block_id: b_summary}
      - {step_id: title, block_id: b_title, depends_on: [summary], on_error: recover}
      - {step_id: recover, kind: transform, transform: {why: "error.type"}}
"""
)


def _deps(on_budget: str = "ask") -> Fakes:
    deps = Fakes()
    deps.approvals = InMemoryApprovals()  # type: ignore[attr-defined]
    ensure_signing_key(deps.secrets, deps.settings.link_signing_secret)
    register_text(deps, FLOW % on_budget)  # type: ignore[arg-type]
    return deps


def _parked(deps: Fakes) -> tuple[str, SegmentResult]:
    run, _ = start_run(StartRun("capped", input={"topic": "tea"}), deps)
    return run.run_id, run_segment(RunSegment(run.run_id), deps)


def _ask(deps: Fakes, run_id: str, parked: SegmentResult) -> Any:
    """The question through the approval machinery, as the AwaitApproval task asks it."""
    asked = request_approval(
        RequestApproval(run_id, parked.approval or {}, task_token="token-1"),
        deps,  # type: ignore[arg-type]
    )
    return deps.approvals.get(asked.approval_id)  # type: ignore[attr-defined]


def _decide(deps: Fakes, run_id: str, decision: str, **more: Any) -> SegmentResult:
    answer = {"decision": decision, "approver": FINANCE, **more}
    return run_segment(RunSegment(run_id, resume=answer), deps)


def test_a_run_whose_next_call_would_cross_its_budget_parks_on_an_approval_saying_so() -> None:
    # Given a run that spent part of its $1.00 on its first step
    deps = _deps()

    # When its second step's estimate would cross the budget
    run_id, parked = _parked(deps)

    # Then the run waits on an approval asked of finance, before the second call was made
    assert parked.status == "waiting_approval"
    run = deps.runs.get_run(run_id)
    assert run.status is RunStatus.waiting_approval
    approval = _ask(deps, run_id, parked)
    assert approval.approvers == [FINANCE]
    spent = f"${run.cost_usd:.4f}"
    assert approval.message.startswith(f"this run has spent {spent} of $1.00; the next step")
    assert "is estimated at $1." in approval.message
    # And the email finance got carries the same words
    (sent,) = deps.email.sent  # type: ignore[attr-defined]
    assert approval.message in sent.text
    finished = [
        e.step_id for e in deps.runs.get_timeline(run_id) if e.type.value == "step_finished"
    ]
    assert finished == ["summary"]


def test_an_approved_raise_lets_the_run_finish_having_asked_once() -> None:
    # Given a run parked on its budget
    deps = _deps()
    run_id, parked = _parked(deps)
    _ask(deps, run_id, parked)

    # When finance approves the default raise (the original budget again)
    ended = _decide(deps, run_id, "approved", edits={RAISE_KEY: 1.0})

    # Then the run finishes, and it asked once
    assert ended.status == "succeeded"
    timeline = deps.runs.get_timeline(run_id)
    asked = [e for e in timeline if e.type is TimelineEventType.approval_requested]
    assert len(asked) == 1
    finished = [e.step_id for e in timeline if e.type is TimelineEventType.step_finished]
    assert finished == ["summary", "title"]
    assert deps.runs.get_run(run_id).outputs["title"]


def test_a_rejected_raise_ends_the_run_budget_exceeded_past_any_on_error_route() -> None:
    # Given a run parked on its budget (its step routes errors to `recover`)
    deps = _deps()
    run_id, parked = _parked(deps)
    _ask(deps, run_id, parked)

    # When finance rejects the raise
    ended = _decide(deps, run_id, "rejected")

    # Then the run ends failed with budget_exceeded, the second call never made
    assert ended.status == "failed"
    run = deps.runs.get_run(run_id)
    assert run.status is RunStatus.failed
    assert run.error is not None and run.error.type == "budget_exceeded"
    assert "has spent" in run.error.message and FINANCE in run.error.message
    timeline = deps.runs.get_timeline(run_id)
    assert [e.step_id for e in timeline if e.type is TimelineEventType.step_finished] == ["summary"]


def test_on_budget_fail_ends_the_run_at_once_without_asking() -> None:
    # Given a workflow whose budget fails rather than asks
    deps = _deps("fail")

    # When its second step would cross the budget
    run_id, ended = _parked(deps)

    # Then the run ends budget_exceeded, and no approval was asked
    assert ended.status == "failed"
    run = deps.runs.get_run(run_id)
    assert run.error is not None and run.error.type == "budget_exceeded"
    types = {e.type for e in deps.runs.get_timeline(run_id)}
    assert TimelineEventType.approval_requested not in types


def test_a_budget_that_asks_no_one_is_refused_with_its_path() -> None:
    # Given a budget that asks, with no approvers on it or on the workflow
    text = (FLOW % "ask").replace(", approvers: [finance@example.com]", "")
    plan = load_text(text, source="t.yaml", fmt="yaml").workflows[0]
    deps = Fakes()
    register_text(deps, BLOCKS)  # type: ignore[arg-type]

    # When it is validated, then the missing approvers are named at budget.approvers
    found = check_workflow(plan, deps.definitions, tools=None, providers=None)  # type: ignore[arg-type]
    assert [p.path for p in found.errors] == ["budget.approvers"]


def test_a_negative_budget_is_refused_with_its_path() -> None:
    from langorch.domain.errors import DefinitionError

    with pytest.raises(DefinitionError) as refused:
        load_text(
            (FLOW % "ask").replace("per_run: 1.0", "per_run: -1"), source="t.yaml", fmt="yaml"
        )
    assert any("budget.per_run" in p.path for p in refused.value.problems)


DAILY = BLOCKS + workflow(
    "daily",
    llm_model="priced",
    prices={"offline/priced": {"input": 1000, "output": 1000}},
    budget={"per_day": 0.25, "on_budget": "fail"},
).steps("""
      - {step_id: summary, block_id: b_summary}
""")


def test_a_daily_budget_stops_the_run_whose_estimate_no_longer_fits_the_day() -> None:
    # Given a workflow whose runs may spend $0.25 a day in all (each call is estimated at
    # about $0.11 and costs about $0.02)
    deps = Fakes()
    register_text(deps, DAILY)  # type: ignore[arg-type]

    # When runs start one after another until one is refused
    ended = []
    for _ in range(20):
        run, _ = start_run(StartRun("daily", input={"topic": "tea"}), deps)
        ended.append(run_segment(RunSegment(run.run_id), deps))
        if ended[-1].status == "failed":
            break

    # Then a run was refused budget_exceeded once the day's spend left no room for its estimate
    assert [r.status for r in ended[:-1]] == ["succeeded"] * (len(ended) - 1)
    refused = deps.runs.get_run(ended[-1].run_id)
    assert refused.error is not None and refused.error.type == "budget_exceeded"
    assert "workflow daily today has spent" in refused.error.message
    # And the day's counter holds what the runs cost, within the limit
    key = f"daily/day/{deps.clock():%Y-%m-%d}"
    spent = deps.budgets.spent(key) / 1e6
    assert spent == pytest.approx(sum(r.cost_usd for r in ended), abs=1e-5)
    assert spent <= 0.25


def test_a_budgeted_step_on_a_model_without_a_price_fails_naming_the_price_to_add() -> None:
    # Given a deployment that prices nothing, and a budgeted workflow that prices nothing either
    from langorch.domain.prices import PriceTable

    deps = Fakes()
    deps.prices = PriceTable({})
    text = (FLOW % "ask").replace('prices: {"offline/priced": {input: 1000, output: 1000}}', "")
    register_text(deps, text)  # type: ignore[arg-type]

    # When a run reaches its first LLM step
    run, _ = start_run(StartRun("capped", input={"topic": "tea"}), deps)
    ended = run_segment(RunSegment(run.run_id), deps)

    # Then the run fails rather than spend unmetered, naming the price to add
    assert ended.status == "failed"
    error = deps.runs.get_run(run.run_id).error
    assert error is not None and error.type == "UnpricedModelError"
    assert "'offline/priced'" in error.message and "prices:" in error.message


def test_twenty_concurrent_runs_never_overspend_the_day_by_more_than_one_estimate() -> None:
    # Given a workflow whose runs may spend $0.25 a day in all (each call is estimated at
    # about $0.11 and costs about $0.02), its runs started together
    deps = Fakes()
    register_text(deps, DAILY)  # type: ignore[arg-type]
    runs = [start_run(StartRun("daily", input={"topic": "tea"}), deps)[0] for _ in range(20)]

    # When all twenty run their segment at once, in threads, through the engine
    ended: list[SegmentResult] = []
    gate = threading.Barrier(len(runs))

    def run(run_id: str) -> None:
        gate.wait()
        ended.append(run_segment(RunSegment(run_id), deps))

    threads = [threading.Thread(target=run, args=(r.run_id,)) for r in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Then the day's counter holds exactly what the finished runs cost, within the limit plus
    # at most one call's estimate; the others were refused budget_exceeded, none half-run
    key = f"daily/day/{deps.clock():%Y-%m-%d}"
    spent = deps.budgets.spent(key) / 1e6
    records = [deps.runs.get_run(r.run_id) for r in runs]
    assert spent == pytest.approx(sum(r.cost_usd for r in records), abs=1e-5)
    assert spent <= 0.25 + 0.11
    statuses = sorted(r.status.value for r in records)
    assert set(statuses) == {"succeeded", "failed"}
    refused = [r for r in records if r.status is RunStatus.failed]
    assert all(r.error is not None and r.error.type == "budget_exceeded" for r in refused)
