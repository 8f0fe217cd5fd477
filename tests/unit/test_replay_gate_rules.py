"""The replay gate's rules: what --fail-on means, and the decisions a recorded timeline keeps."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from langorch.domain.replay import FailOn, FailOnError, RunReplay, recorded_decisions
from langorch.domain.runs import TimelineEvent, TimelineEventType

AT = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def _replayed(**changes: object) -> RunReplay:
    fields: dict[str, object] = {
        "run_id": "run-1",
        "replay_run_id": "run-2",
        "recorded_version": 1,
        "recorded_status": "succeeded",
        "status": "succeeded",
        "path_changed": False,
        "path_diff": [],
        "outputs_changed": [],
        "routing_changed": False,
        "approvals_recorded": [],
        "approvals_replayed": [],
        "routing_diff": [],
        "cost_usd": (0.10, 0.10),
        "duration_ms": (5, 5),
        "new_failure": None,
    }
    return RunReplay(**{**fields, **changes})  # type: ignore[arg-type]


def test_fail_on_reads_kinds_and_a_cost_rise() -> None:
    # Given the documented list / When it is parsed / Then each item is understood
    rule = FailOn.parse("path, failure,cost+20%")
    assert rule.kinds == {"path", "failure"} and rule.cost_rise == pytest.approx(0.2)


def test_fail_on_names_an_item_it_does_not_judge_and_what_it_does() -> None:
    # Given a typo / When it is parsed / Then the error names it and lists the choices
    with pytest.raises(FailOnError) as caught:
        FailOn.parse("path,costs+20")
    [problem] = caught.value.problems
    assert problem.path == "--fail-on costs+20"
    assert "cost+N%" in problem.hint and "unrecorded" in problem.hint


def test_a_cost_rise_past_the_limit_fails_the_gate_and_one_within_it_does_not() -> None:
    # Given a 20 % limit
    rule = FailOn.parse("cost+20%")
    # When a replay costs 30 % more, or 10 % more / Then only the first fails, saying by how much
    assert rule.reasons(_replayed(cost_usd=(0.10, 0.13))) == ["cost +30% (limit +20%)"]
    assert rule.reasons(_replayed(cost_usd=(0.10, 0.11))) == []


def test_only_the_named_kinds_fail_the_gate() -> None:
    # Given a gate on failures only
    rule = FailOn.parse("failure")
    # When a replay changed its path but did not fail / Then it passes; a new failure does not
    assert rule.reasons(_replayed(path_changed=True)) == []
    assert rule.reasons(_replayed(new_failure="boom")) == ["new failure: boom"]


def _event(seq: int, kind: TimelineEventType, **fields: object) -> TimelineEvent:
    return TimelineEvent(seq=seq, at=AT, type=kind, **fields)  # type: ignore[arg-type]


def _gate_decided(seq: int, summary: str, decision: str, comment: str) -> list[TimelineEvent]:
    """a@x's decision on step ``gate`` at ``seq``, then the step's finish with ``summary`` as its
    ``gate_decision`` output."""
    return [
        _event(
            seq,
            TimelineEventType.approval_decided,
            step_id="gate",
            actor="a@x",
            detail={"decision": decision, "comment": comment},
        ),
        _event(
            seq + 1,
            TimelineEventType.step_finished,
            step_id="gate",
            outputs_summary={"gate_decision": summary},
        ),
    ]


def test_recorded_decisions_keep_what_each_approval_showed_even_when_cut() -> None:
    # Given a timeline with two decided approvals, the second's summary cut short
    cut = '{"decision": "rejected", "approver": "a@x", "shown": {"invoice": "bbbb"}, "votes": [{…'
    events = [
        *_gate_decided(1, '{"decision": "approved", "shown": {"invoice": "aaaa"}}', "approved", ""),
        *_gate_decided(3, cut, "rejected", "no"),
    ]
    # When the decisions are read
    found = recorded_decisions(events)
    # Then each keeps its decision, comment, approver and the digests of what it showed
    assert [(d.decision, d.comment, d.approver, d.shown) for d in found] == [
        ("approved", "", "a@x", {"invoice": "aaaa"}),
        ("rejected", "no", "a@x", {"invoice": "bbbb"}),
    ]


def _run(run_id: str, status: str, error: str | None = None, **outputs: object) -> object:
    from langorch.domain.runs import RunError, RunRecord, RunStatus, RunTrigger

    return RunRecord(
        run_id=run_id,
        workflow_id="w",
        workflow_version=1,
        status=RunStatus(status),
        trigger=RunTrigger(type="manual"),
        created_at=AT,
        updated_at=AT,
        outputs=dict(outputs),
        error=RunError(step_id="s", type="LLMCallError", message=error) if error else None,
    )


def test_a_call_without_a_record_is_reported_not_counted_as_the_candidates_failure() -> None:
    from langorch.domain.replay import compare

    # Given a recorded run, and a replay that stopped because a changed prompt had no record
    recorded = _run("run-1", "succeeded", report="done")
    stopped = _run("run-2", "failed", "replay: step report's prompt is not the recorded one")
    # When they are compared
    found = compare(
        recorded,
        [],
        stopped,
        [],
        asked=[],
        unrecorded=["model call at step report"],  # type: ignore[arg-type]
    )
    # Then the call is reported, no new failure is claimed, no outputs compared
    assert found.unrecorded == ["model call at step report"]
    assert found.new_failure is None and found.outputs_changed == []
    # ... while the same failure without a refusal is the candidate's own
    failed = _run("run-3", "failed", "division by zero")
    assert compare(recorded, [], failed, [], asked=[], unrecorded=[]).new_failure == (  # type: ignore[arg-type]
        "division by zero"
    )


# --- approval edits: kept with the decision, served again ------------------------------------


def test_a_decisions_event_keeps_the_edits_but_not_secret_looking_or_huge_ones() -> None:
    from langorch.app.segment_record import MAX_EDITS_BYTES, edits_kept

    # Given edits of a plain key and of a secret-looking one, and edits too large to keep
    edits = {"restaurant": "Sushi Go", "api_token": "t0p"}
    huge = {"notes": "x" * (MAX_EDITS_BYTES + 1)}
    # When the timeline event's share of them is taken
    # Then plain values are kept, the others only named
    assert edits_kept(edits) == {"edits": {"restaurant": "Sushi Go"}, "edits_unkept": ["api_token"]}
    assert edits_kept(huge) == {"edits_unkept": ["notes"]}
    assert edits_kept({}) == {} and edits_kept(None) == {}


def _decided(detail: dict[str, object], **summary: str) -> list[TimelineEvent]:
    return [
        _event(1, TimelineEventType.approval_decided, step_id="ask", actor="a@x", detail=detail),
        _event(2, TimelineEventType.step_finished, step_id="ask", outputs_summary=summary),
    ]


def test_a_replayed_decision_carries_its_recorded_edits_the_candidate_accepts() -> None:
    from langorch.app.replay import ReplayApprovals, Unrecorded

    # Given a recorded approval whose approver edited two keys, one no longer editable
    detail = {"decision": "approved", "edits": {"restaurant": "Sushi Go", "tip": 3}}
    unrecorded = Unrecorded()
    approvals = ReplayApprovals(recorded_decisions(_decided(detail)), "approved", unrecorded)
    # When the candidate asks that approval, with only the restaurant editable
    answer = approvals({"step_id": "ask", "approvers": ["a@x"], "editable": {"restaurant": ""}})
    # Then the answer carries the accepted edit, and the dropped one is reported
    assert answer["edits"] == {"restaurant": "Sushi Go"}
    assert unrecorded.calls == [
        "approval ask: edits of tip not applied (not editable in the candidate)"
    ]


def test_a_decision_recorded_before_edits_were_kept_reports_the_keys_it_edited() -> None:
    from langorch.app.replay import ReplayApprovals, Unrecorded

    # Given a decision recorded without its edits, whose step set an editable key
    events = _decided({"decision": "approved"}, ask_decision="{}", restaurant="Sushi Go")
    unrecorded = Unrecorded()
    approvals = ReplayApprovals(recorded_decisions(events), "approved", unrecorded)
    # When the candidate asks that approval
    answer = approvals({"step_id": "ask", "approvers": ["a@x"], "editable": {"restaurant": ""}})
    # Then it is replayed without edits, and the report says which values were unknown
    assert answer["edits"] == {}
    assert unrecorded.calls == [
        "approval ask: edits of restaurant were not recorded; replayed without them"
    ]
