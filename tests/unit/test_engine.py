"""The workflow engine through its use-cases: seed 000's verification points and the control kinds.

Each test registers definitions in the fake definitions store, starts a run and drives it
segment by segment with the fakes of the runs table, checkpointer and memory store (each of
which passes its adapter's contract suite). The same paths on moto are driven by the state
machine in ``tests/integration/test_state_machine.py`` and ``tests/e2e``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from langorch.app.runs import LEASE_GRACE_SECONDS, RunSegment, StartRun, run_segment, start_run
from langorch.domain.definitions import TaskPlan
from langorch.domain.errors import LeaseHeldError, LeaseLostError, UnknownInterruptError
from langorch.domain.runs import RunRecord, RunStatus, TimelineEventType
from langorch.engine.compiler import build_graph, resolve_blocks
from tests.gated_kinds import (
    WAIT_SECONDS,
    GatedKinds,
    paused_at_the_gate,
    registered,
)
from tests.integration.conftest import register_example, register_text, run_to_end
from tests.support.approvers import recording_approver
from tests.support.definitions import workflow
from tests.support.recording import record_llm
from tests.unit.conftest import MakeFakes as MakeContainer
from tests.workflows import BOSS_APPROVES_40, GATED_APPROVAL

LINEAR = """
blocks:
  - {block_id: b_fetch, name: Fetch, input_keys: [topic], output_keys: [facts],
     prompt_template: "Find facts about {topic}"}
  - {block_id: b_write, name: Write, input_keys: [facts], output_keys: [draft],
     prompt_template: "Write about {facts}"}
  - {block_id: b_title, name: Title, input_keys: [draft], output_keys: [title],
     prompt_template: "Title for {draft}"}
""" + workflow("linear", inputs={"topic": "string"}, required=["topic"]).steps("""
      - {step_id: fetch, block_id: b_fetch}
      - {step_id: write, block_id: b_write, depends_on: [fetch]}
      - {step_id: title, block_id: b_title, depends_on: [write]}
""")


@pytest.fixture
def gated() -> Iterator[GatedKinds]:
    """The ``gate`` and ``tally`` kinds, registered for one test."""
    with registered() as kinds:
        yield kinds


# --- seed 000 verification 1: the executor -------------------------------------------------


def test_executor_reads_inputs_renders_prompt_and_writes_outputs(make_container: MakeContainer):
    # Given a one-block plan and an LLM that records what it is asked
    container = make_container()
    llm = record_llm(container, {"fetch": {"facts": "LangGraph checkpoints state"}})
    register_text(container, LINEAR)

    # When the run goes through
    result = run_to_end(container, "linear", {"topic": "durable agents"})

    # Then the first block's prompt was rendered from its input key, and outputs were merged
    assert result.status == "succeeded"
    assert llm.requests[0].prompt == "Find facts about durable agents"
    assert llm.requests[0].output_keys == ["facts"]
    assert result.outputs["facts"] == "LangGraph checkpoints state"


# --- 2: topology ---------------------------------------------------------------------------


def _stored_workflow(container: Any, plan_id: str) -> TaskPlan:
    plan = container.definitions.get_workflow(plan_id)
    assert plan is not None, f"{plan_id} is not stored"
    return plan


def test_three_step_plan_compiles_to_the_expected_topology(make_container: MakeContainer):
    # Given a three-step linear plan
    container = make_container()
    register_text(container, LINEAR)
    plan = _stored_workflow(container, "linear")

    # When it is compiled
    graph = build_graph(plan, resolve_blocks(plan, container.definitions)).compile()
    edges = {(e.source, e.target) for e in graph.get_graph().edges}

    # Then there is one node per step wired in order between START and END
    assert {"fetch", "write", "title"} <= set(graph.get_graph().nodes)
    assert {
        ("__start__", "fetch"),
        ("fetch", "write"),
        ("write", "title"),
        ("title", "__end__"),
    } <= edges


# --- 3: linear flow ------------------------------------------------------------------------


def test_linear_flow_accumulates_shared_context(make_container: MakeContainer):
    # Given the linear plan with scripted answers
    container = make_container(
        {"fetch": {"facts": "F"}, "write": {"draft": "D"}, "title": {"title": "T"}}
    )
    register_text(container, LINEAR)

    # When it runs
    result = run_to_end(container, "linear", {"topic": "x"})

    # Then every step's output is in the final context, alongside the input
    assert result.outputs == {"topic": "x", "facts": "F", "draft": "D", "title": "T"}


def test_a_superstep_budget_cuts_a_run_into_the_same_segments_on_any_machine(
    make_container: MakeContainer,
):
    # Given the linear plan, a time budget no segment reaches and a budget of one superstep
    container = make_container(
        {"fetch": {"facts": "F"}, "write": {"draft": "D"}, "title": {"title": "T"}},
        segment_budget_supersteps=1,
    )
    register_text(container, LINEAR)

    # When it runs to the end
    result = run_to_end(container, "linear", {"topic": "x"})

    # Then each segment ran one superstep (the graph's start, then one step each), however
    # long they took, and the run's outputs are those of one uncut run
    assert result.segment == 4
    assert result.outputs == {"topic": "x", "facts": "F", "draft": "D", "title": "T"}


# --- 4: decision routing -------------------------------------------------------------------

DECISION = """
blocks:
  - {block_id: b_triage, name: Triage, block_type: decision, input_keys: [ticket],
     prompt_template: "Is {ticket} urgent?", branches: {urgent: page, normal: queue}}
workflows:
  - plan_id: triage
    memory: false
    inputs_schema: {properties: {ticket: {type: string}}}
    steps:
      - {step_id: triage, block_id: b_triage,
         branches: {urgent: page, normal: queue}}
      - {step_id: page, kind: transform, transform: {routed: "'paged'"}}
      - {step_id: queue, kind: transform, transform: {routed: "'queued'"}}
"""


@pytest.mark.parametrize(("label", "expected"), [("urgent", "paged"), ("normal", "queued")])
def test_llm_decision_routes_to_the_chosen_branch(
    make_container: MakeContainer, label: str, expected: str
):
    # Given a decision block whose LLM answers `label`
    container = make_container({"triage": {"branch": label}})
    register_text(container, DECISION)

    # When the run goes through
    result = run_to_end(container, "triage", {"ticket": "db down"})

    # Then only that branch ran
    assert result.outputs["routed"] == expected
    steps = [
        e.step_id
        for e in container.runs.get_timeline(result.run_id)
        if e.type == TimelineEventType.step_finished
    ]
    assert steps == ["triage", "page" if label == "urgent" else "queue"]


def test_llm_decision_is_constrained_to_the_branch_labels(make_container: MakeContainer):
    # Given a decision and an LLM that records its requests
    container = make_container()
    llm = record_llm(container, {"triage": {"branch": "normal"}})
    register_text(container, DECISION)

    # When the run goes through
    run_to_end(container, "triage", {"ticket": "typo"})

    # Then the LLM was asked to choose among exactly the labels
    assert sorted(llm.requests[0].choices or []) == ["normal", "urgent"]


# --- 5: memory round trip across two runs (the lunch order example) -------------------------


def test_lunch_order_asks_for_a_preference_once_then_runs_automatically(
    make_container: MakeContainer,
):
    # Given the lunch-order example and a user with no saved preference
    container = _lunch_order(make_container)
    chipotle = {"restaurant": "Chipotle", "items_to_order": ["Burrito Bowl"]}
    asked, fill_in = recording_approver(
        {"decision": "approved", "approver": "me@example.com", "edits": chipotle}
    )

    # When it runs twice
    first = run_to_end(
        container, "lunch_order", {"delivery_address": "1 Main St"}, on_approval=fill_in
    )
    second = run_to_end(
        container, "lunch_order", {"delivery_address": "1 Main St"}, on_approval=fill_in
    )

    # Then the first run asked and saved the preference; the second loaded it and did not ask
    assert first.status == second.status == "succeeded"
    assert len(asked) == 1
    assert container.memory.get_preferences("u1")["restaurant"] == "Chipotle"
    assert second.outputs["restaurant"] == "Chipotle"
    assert second.outputs["check_previous_order_branch"] == "has_preference"
    assert second.outputs["order_confirmation_id"] == "UE-12345"
    assert len(container.memory.get_history("u1", "lunch_order")) == 2


def test_a_field_the_approver_fills_in_starts_as_its_declared_type(
    make_container: MakeContainer,
):
    # Given the lunch-order example: nothing provides restaurant and items_to_order before its
    # approval, which declares them text and a list
    from langorch.domain.approvals.edits import parse_edits

    container = _lunch_order(make_container)
    asked, fill_in = recording_approver({"decision": "rejected", "approver": "me@example.com"})

    # When the approver is asked
    run_to_end(container, "lunch_order", {"delivery_address": "1 Main St"}, on_approval=fill_in)

    # Then the fields start empty of their types, and the list's lines read back as a list
    editable = asked[0]["editable"]
    assert editable == {"restaurant": "", "items_to_order": []}
    typed = {"edit.items_to_order": "Burrito Bowl\r\nChips", "edit.restaurant": "Chipotle"}
    assert parse_edits(editable, typed) == {
        "restaurant": "Chipotle",
        "items_to_order": ["Burrito Bowl", "Chips"],
    }


def _lunch_order(make_container: MakeContainer) -> Any:
    """A container holding the lunch-order example, its offline script answering for the model."""
    container = make_container(script=str(_example_script("lunch_order")))
    register_example(container, "lunch_order")
    return container


def _example_script(name: str) -> Any:
    from tests.integration.conftest import EXAMPLES

    return EXAMPLES / name / "offline.yaml"


# --- 6: interrupt and resume, in a fresh process -------------------------------------------

APPROVAL = GATED_APPROVAL


def test_approval_parks_the_run_and_a_fresh_process_resumes_it(make_container: MakeContainer):
    # Given a run parked at an approval
    first_process = make_container()
    register_text(first_process, APPROVAL)
    run, _ = start_run(StartRun("gated", input={"amount": 21}), first_process)
    parked = run_segment(RunSegment(run.run_id), first_process)
    assert parked.status == "waiting_approval"
    assert parked.approval is not None and parked.approval["title"] == "Pay 42?"
    assert first_process.runs.get_run(run.run_id).status == "waiting_approval"

    # When a new process (new saver, newly compiled graph; only DynamoDB shared) resumes it
    second_process = make_container()
    done = run_segment(
        RunSegment(run.run_id, resume=BOSS_APPROVES_40),
        second_process,
    )

    # Then the run finishes on the approved branch with the approver's edit applied
    assert done.status == "succeeded"
    assert done.outputs["paid"] == 40
    decided = [
        e
        for e in second_process.runs.get_timeline(run.run_id)
        if e.type == TimelineEventType.approval_decided
    ]
    assert decided[0].actor == "boss@example.com"


def _parked_at_approval(make_container: MakeContainer) -> tuple[Any, RunRecord]:
    """A container and a run of ``gated`` whose first segment parked it at its approval."""
    container = make_container()
    register_text(container, APPROVAL)
    run, _ = start_run(StartRun("gated", input={"amount": 1}), container)
    run_segment(RunSegment(run.run_id), container)
    return container, run


def test_a_resume_for_an_unknown_interrupt_is_rejected(make_container: MakeContainer):
    # Given a run parked at an approval
    container, run = _parked_at_approval(make_container)

    # When a resume names an interrupt the run is not waiting on
    with pytest.raises(UnknownInterruptError):
        run_segment(
            RunSegment(
                run.run_id, resume={"decision": "approved"}, interrupt_id="not-the-pending-one"
            ),
            container,
        )

    # Then the run is still parked and nothing moved
    assert container.runs.get_run(run.run_id).status == "waiting_approval"


def test_a_segment_without_resume_never_answers_a_pending_interrupt(
    make_container: MakeContainer,
):
    # Given a run parked at an approval
    container, run = _parked_at_approval(make_container)

    parked = container.runs.get_run(run.run_id)

    # When a segment runs with no resume (a new execution of the run, or a retried invocation)
    again = run_segment(RunSegment(run.run_id), container)

    # Then it announces the same park instead of answering it: the approval is still pending
    # on the same interrupt, and the graph did not move
    assert again.status == "waiting_approval"
    assert again.approval is not None and parked.pending is not None
    assert again.approval["interrupt_id"] == parked.pending.interrupt_id
    after = container.runs.get_run(run.run_id)
    assert after.pending == parked.pending and after.segment == parked.segment


def test_a_segment_without_resume_announces_a_park_its_record_missed(
    make_container: MakeContainer,
):
    # Given a run whose graph parked at an approval, but whose record never said so (the
    # process died between the checkpoint and the record)
    container, run = _parked_at_approval(make_container)
    parked = container.runs.get_run(run.run_id)
    assert parked.pending is not None
    container.runs.save_run(
        parked.model_copy(update={"status": RunStatus.running, "pending": None})
    )

    # When a segment runs with no resume
    again = run_segment(RunSegment(run.run_id), container)

    # Then it parks the run on that same approval, and the record says so now
    assert again.status == "waiting_approval"
    assert again.approval is not None
    assert again.approval["interrupt_id"] == parked.pending.interrupt_id
    assert container.runs.get_run(run.run_id).pending == parked.pending


def test_rejection_routes_to_the_reject_branch(make_container: MakeContainer):
    container = make_container()
    register_text(container, APPROVAL)

    result = run_to_end(
        container,
        "gated",
        {"amount": 5},
        on_approval=lambda r: {"decision": "rejected", "approver": "b@x.io"},
    )

    assert result.status == "failed"
    assert result.error is not None and result.error["message"] == "refused"


# --- review loop ---------------------------------------------------------------------------


def _always_reject(rounds: list[int]) -> Any:
    def reject(request: dict[str, Any]) -> dict[str, Any]:
        rounds.append(request["iteration"])
        return {
            "decision": "rejected",
            "approver": "ed@example.com",
            "comment": f"round {request['iteration']}: tighten it",
        }

    return reject


def test_an_exhausted_review_loop_takes_on_max_iterations_and_does_not_publish(
    make_container: MakeContainer,
):
    # Given the blog review example (max 3 rounds, on_max_iterations: abandon) and a reviewer
    # who always rejects (before the fix the third draft was published and the run succeeded)
    container = make_container(script=str(_example_script("blog_review")))
    register_example(container, "blog_review")
    rounds: list[int] = []

    # When the run goes through
    result = run_to_end(
        container,
        "blog_review",
        {"commit_message": "add saver"},
        on_approval=_always_reject(rounds),
    )

    # Then the reviewer was asked exactly 3 times, and the run ended failed at abandon
    assert rounds == [1, 2, 3]
    assert result.status == "failed"
    assert result.error is not None
    assert result.error["message"] == "rejected 3 times; last feedback: round 3: tighten it"
    events = container.runs.get_timeline(result.run_id)
    assert not [e for e in events if e.step_id == "publish"]
    review = [
        e for e in events if e.type == TimelineEventType.step_finished and e.step_id == "review"
    ]
    # And the timeline says the loop was exhausted
    assert review[-1].detail["branch"] == "exhausted"
    assert review[-1].outputs_summary is not None
    assert review[-1].outputs_summary["exhausted"] == "after 3 rounds -> abandon"


UNROUTED_LOOP = workflow("unrouted", approvers=["ed@example.com"]).steps("""
      - {step_id: draft, kind: transform, transform: {text: "'draft'"}}
      - step_id: review
        kind: approval
        depends_on: [draft]
        approval: {show_keys: [text], max_iterations: 2}
        branches: {approved: publish, rejected: draft}
      - {step_id: publish, kind: terminate, terminate: {outputs: {text: text}}}
""")


def test_an_exhausted_review_loop_without_a_route_fails_the_run_with_a_named_error(
    make_container: MakeContainer,
):
    # Given a review loop of at most 2 rounds that declares no on_max_iterations
    container = make_container()
    register_text(container, UNROUTED_LOOP)
    rounds: list[int] = []

    # When the reviewer rejects every round
    result = run_to_end(container, "unrouted", {}, on_approval=_always_reject(rounds))

    # Then the run fails, naming the exhausted loop and the fix; nothing was published
    # (before the fix it went on along the approved branch and succeeded)
    assert rounds == [1, 2]
    assert result.status == "failed"
    assert result.error is not None
    assert result.error["type"] == "ReviewLoopExhaustedError"
    assert result.error["message"].startswith("review loop exhausted after 2 rounds")
    assert "declare approval.on_max_iterations" in result.error["message"]
    events = container.runs.get_timeline(result.run_id)
    assert not [e for e in events if e.step_id == "publish"]


def test_review_loop_regenerates_with_feedback_then_publishes_on_approval(
    make_container: MakeContainer,
):
    container = make_container(script=str(_example_script("blog_review")))
    llm = record_llm(container, _example_script("blog_review"))
    register_example(container, "blog_review")
    answers = iter(
        [{"decision": "rejected", "comment": "more code samples"}, {"decision": "approved"}]
    )

    result = run_to_end(
        container,
        "blog_review",
        {"commit_message": "add saver"},
        on_approval=lambda r: next(answers),
    )

    drafts = [r for r in llm.requests if r.step_id == "draft"]
    assert len(drafts) == 2
    assert "more code samples" in drafts[1].prompt
    assert result.outputs["title"] == "Draft 2: durable checkpoints"


def test_round_two_of_a_review_loop_carries_the_last_feedback_and_what_changed(
    make_container: MakeContainer,
):
    # Given the blog review example and a reviewer who rejects round 1, then approves
    container = make_container(script=str(_example_script("blog_review")))
    register_example(container, "blog_review")
    asked: list[dict[str, Any]] = []
    answers = iter(
        [
            {"decision": "rejected", "approver": "ed@example.com", "comment": "<b>shorter</b>"},
            {"decision": "approved", "approver": "ed@example.com"},
        ]
    )

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request)
        return next(answers)

    # When the run goes through
    result = run_to_end(
        container, "blog_review", {"commit_message": "add saver"}, on_approval=answer
    )

    # Then round 1 asks with no previous round, and round 2 says what the reviewer asked for
    # and which shown keys changed (both: the draft was rewritten); before, it did not
    assert result.status == "succeeded"
    assert "previous" not in asked[0]
    assert asked[1]["previous"] == {
        "iteration": 1,
        "approver": "ed@example.com",
        "comment": "<b>shorter</b>",
        "changed": ["title", "body"],
    }


# --- loops and parallel joins --------------------------------------------------------------


def test_for_each_runs_the_body_per_item_and_collects_results(make_container: MakeContainer):
    # Given the invoice batch example with three invoices, one above the threshold
    container = make_container(script=str(_example_script("invoice_batch")))
    register_example(container, "invoice_batch")
    invoices = [
        {"id": "A", "vendor": "v", "amount": 10},
        {"id": "B", "vendor": "v", "amount": 5000},
        {"id": "C", "vendor": "v", "amount": 20},
    ]
    asked: list[str] = []

    def decide(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request["context"]["invoice"]["id"])
        return {"decision": "rejected", "approver": "cfo@example.com"}

    # When the batch runs
    result = run_to_end(
        container, "invoice_batch", {"invoices": invoices, "threshold": 1000}, on_approval=decide
    )

    # Then only the large invoice needed approval, and every outcome was collected in order
    assert asked == ["B"]
    assert [
        (r["invoice_outcome"]["id"], r["invoice_outcome"]["status"])
        for r in result.outputs["invoice_results"]
    ] == [("A", "posted"), ("B", "rejected"), ("C", "posted")]
    assert "report" in result.outputs


PARALLEL = workflow("fan_out", inputs={"n": "integer"}).steps("""
      - {step_id: start, kind: transform, transform: {base: "n"}}
      - {step_id: left, kind: transform, depends_on: [start], transform: {l: "base + 1"}}
      - {step_id: right, kind: transform, depends_on: [start], transform: {r: "base + 2"}}
      - {step_id: slow, kind: transform, depends_on: [right], transform: {s: "r * 10"}}
      - {step_id: join, kind: transform, depends_on: [left, slow], transform: {total: "l + s"}}
""")


def test_parallel_branches_join_once_after_all_finish(make_container: MakeContainer):
    # Given two branches of different lengths that join
    container = make_container()
    register_text(container, PARALLEL)

    # When it runs
    result = run_to_end(container, "fan_out", {"n": 1})

    # Then the join ran once, after both branches, with both results
    assert result.outputs["total"] == 2 + 30
    joins = [
        e
        for e in container.runs.get_timeline(result.run_id)
        if e.type == TimelineEventType.step_finished and e.step_id == "join"
    ]
    assert len(joins) == 1


# --- errors --------------------------------------------------------------------------------

ERRORS = """
blocks:
  - {block_id: b_flaky, name: Flaky, input_keys: [], output_keys: [answer],
     prompt_template: "answer", max_retries: 2}
workflows:
  - plan_id: with_on_error
    memory: false
    steps:
      - {step_id: flaky, block_id: b_flaky, on_error: fallback, retry_backoff_seconds: 0}
      - {step_id: fallback, kind: transform,
         transform: {recovered: "'after ' ~ error.attempts ~ ' attempts: ' ~ error.message"}}
  - plan_id: with_on_failure
    memory: false
    on_failure: cleanup
    steps:
      - {step_id: flaky, block_id: b_flaky, retry_backoff_seconds: 0, max_retries: 0}
      - {step_id: next, kind: transform, depends_on: [flaky], transform: {x: "1"}}
      - {step_id: cleanup, kind: terminate,
         terminate: {status: failed, message: "cleaned up after {{ error.step_id }}"}}
"""


def test_retries_then_the_on_error_route(make_container: MakeContainer):
    # Given a block that fails more often than its retries allow
    container = make_container({"flaky": {"raise": "provider unavailable", "times": 5}})
    register_text(container, ERRORS)

    # When it runs
    result = run_to_end(container, "with_on_error")

    # Then it was tried 3 times and the on_error step saw the normalised error
    assert result.status == "succeeded"
    assert result.outputs["recovered"].startswith("after 3 attempts: ")
    timeline = container.runs.get_timeline(result.run_id)
    assert [e.type for e in timeline if e.step_id == "flaky"].count(
        TimelineEventType.step_retried
    ) == 2


def test_a_failure_without_on_error_goes_to_on_failure(make_container: MakeContainer):
    container = make_container({"flaky": {"raise": "boom", "times": 5}})
    register_text(container, ERRORS)

    result = run_to_end(container, "with_on_failure")

    assert result.status == "failed"
    assert result.error is not None and result.error["message"] == "cleaned up after flaky"


def test_a_failure_with_no_route_fails_the_run_with_the_reason(make_container: MakeContainer):
    container = make_container({"flaky": {"raise": "boom", "times": 5}})
    register_text(container, ERRORS.replace("on_failure: cleanup", ""))

    result = run_to_end(container, "with_on_failure")

    assert result.status == "failed"
    assert result.error is not None and result.error["step_id"] == "flaky"
    assert container.runs.get_run(result.run_id).status == "failed"


# --- one writer per run --------------------------------------------------------------------


def test_two_concurrent_segments_for_one_run_exactly_one_proceeds(
    make_container: MakeContainer, gated: GatedKinds
):
    # Given a run whose first segment is paused mid-run (at the gate), holding the lease;
    # the gate, not the threads' timing, decides that both segments overlap
    first = paused_at_the_gate(gated, make_container)  # each segment is its own "Lambda"

    # When a second segment starts while the first runs, then it is refused
    with pytest.raises(LeaseHeldError):
        run_segment(RunSegment(first.run_id), make_container())
    gated.gate.open()
    first.thread.join(WAIT_SECONDS)
    outcomes = [r.status for r in first.outcome] + ["refused"]

    # Then the first ran the run to the end, each step once, and the other was refused
    assert sorted(outcomes) == ["refused", "succeeded"]
    assert gated.effects == {"before": 1, "after": 1}


def test_a_segment_that_lost_its_lease_writes_no_checkpoint(
    make_container: MakeContainer, gated: GatedKinds
):
    # Given a run whose first segment is paused at the gate, after its first step
    stale = paused_at_the_gate(gated, make_container)
    container, run_id = stale.setup, stale.run_id
    # When its lease expires, another segment runs the run to the end, and then it goes on
    container.clock.advance(container.settings.segment_budget_seconds + LEASE_GRACE_SECONDS + 1)
    assert run_segment(RunSegment(run_id), make_container()).status == "succeeded"
    gated.gate.open()
    stale.thread.join(WAIT_SECONDS)

    # Then its write was refused (the fake fences as the DynamoDB saver does), no step ran
    # twice, and the history is one line
    [refused] = stale.outcome
    assert isinstance(refused, LeaseLostError), refused
    assert gated.effects == {"before": 1, "after": 1}
    config: Any = {"configurable": {"thread_id": run_id, "checkpoint_ns": ""}}
    history = list(container.checkpointer.list(config))
    parents = [t.parent_config["configurable"]["checkpoint_id"] for t in history[:-1]]  # type: ignore[index]
    assert parents == [t.config["configurable"]["checkpoint_id"] for t in history[1:]]


def test_starting_with_the_same_dedupe_key_makes_one_run(make_container: MakeContainer):
    container = make_container()
    register_text(container, LINEAR)

    first, created = start_run(StartRun("linear", {"topic": "a"}, dedupe_key="d-1"), container)
    again, created_again = start_run(
        StartRun("linear", {"topic": "a"}, dedupe_key="d-1"), container
    )

    assert (created, created_again) == (True, False)
    assert first.run_id == again.run_id
