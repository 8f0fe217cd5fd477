"""The ``ApprovalsStore`` contract: the in-memory fake, the local SQLite store and the DynamoDB
adapter (on moto).

Every test runs against all three, so the fake the use-case tests rely on cannot drift from the
real stores: decide once (also under concurrency), mark delivered, reopen only the exact
undelivered decision, close (time out, cancel) only what the run did not get, and the
bookkeeping around them (emails, codes, listings, the append-only audit). The last tests hold
the SQLite store to what only it has: several processes on one file.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from langorch.adapters.sqlite._db import Database
from langorch.adapters.sqlite.approvals import SqliteApprovals
from langorch.app.approvals.ports import ApprovalsStore
from langorch.domain.approvals.audit import line_body
from langorch.domain.approvals.policy import VotesChangedError
from langorch.domain.approvals.record import (
    AlreadyDecidedError,
    Approval,
    ApprovalStatus,
    AuditEntry,
    LinkExpiredError,
    RunEndedError,
    SupersededError,
    approval_id_for,
    new_approval,
)
from langorch.domain.errors import NotFoundError, StorageError
from langorch.domain.evidence import GENESIS, digest
from tests.fakes.approvals import InMemoryApprovals
from tests.support.stores import STORES, under_contract
from tests.support.threads import at_once

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
ALICE = "alice@example.com"
BOB = "bob@example.com"
TOKEN = "token-1"


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest) -> ApprovalsStore:
    """The store under contract: the fake, the SQLite store on a fresh file, or the DynamoDB
    adapter on moto (writes made atomic)."""
    return under_contract(request, InMemoryApprovals, SqliteApprovals, _on_dynamodb)


def _on_dynamodb(client: Any) -> ApprovalsStore:
    from langorch.adapters.dynamodb.approvals.repository import ApprovalsRepository
    from langorch.adapters.dynamodb.runs import RunsRepository

    RunsRepository(client, "runs").create_table()
    return ApprovalsRepository(client, "runs")


def _approval(n: int = 1, *, run_id: str = "run-1", created: datetime = NOW) -> Approval:
    return new_approval(
        run_id=run_id,
        workflow_id="wf",
        request={
            "interrupt_id": f"int-{n}",
            "step_id": "review",
            "title": "Pay",
            "approvers": [ALICE, BOB],
            "timeout_seconds": 3600,
            "editable": {"amount": 1},
        },
        now=created,
    )


def _pending(store: ApprovalsStore, n: int = 1, **kwargs: Any) -> Approval:
    approval, created = store.put_pending(_approval(n, **kwargs), TOKEN)
    assert created
    return approval


def _decide(store: ApprovalsStore, approval: Approval, who: str = ALICE, **kw: Any) -> Approval:
    return store.decide(
        approval.approval_id,
        kw.get("decision", ApprovalStatus.approved),
        who,
        kw.get("comment", "fine"),
        kw.get("edits", {"amount": 2}),
        kw.get("now", NOW + timedelta(minutes=1)),
    )


# --------------------------------------------------------------------------------------------
# Storing the request
# --------------------------------------------------------------------------------------------


def test_a_pending_approval_is_stored_once_with_its_token(store: ApprovalsStore) -> None:
    # Given a stored pending approval
    approval = _pending(store)
    # When the same request is stored again with a newer token
    again, created = store.put_pending(_approval(), "token-2")
    # Then nothing new was created, the record is the first one, and the newest token is kept
    assert not created and again.approval_id == approval.approval_id
    assert again.status is ApprovalStatus.pending
    assert store.task_token(approval.approval_id) == "token-2"
    got = store.get(approval.approval_id)
    assert got is not None and got.approvers == [ALICE, BOB] and got.editable == {"amount": 1}


def test_a_closed_approval_keeps_its_token_when_requested_again(store: ApprovalsStore) -> None:
    approval = _pending(store)
    assert store.mark(approval.approval_id, ApprovalStatus.timed_out)
    again, created = store.put_pending(_approval(), "token-2")
    assert not created and again.status is ApprovalStatus.timed_out
    assert store.task_token(approval.approval_id) == TOKEN


def test_missing_approvals_read_as_none_or_not_found(store: ApprovalsStore) -> None:
    assert store.get("apr-missing") is None
    assert store.code_hash("apr-missing", "ref") is None
    with pytest.raises(NotFoundError):
        store.task_token("apr-missing")
    for write in (
        lambda: store.mark_emailed("apr-missing", "ref"),
        lambda: store.claim_code_attempt("apr-missing", "ref", 5),
        lambda: store.set_code_hash("apr-missing", "ref", "h"),
        lambda: store.decide("apr-missing", ApprovalStatus.approved, ALICE, None, {}, NOW),
    ):
        with pytest.raises(NotFoundError):
            write()


def test_the_token_is_not_part_of_any_approval_read(store: ApprovalsStore) -> None:
    approval = _pending(store)
    shown = [store.get(approval.approval_id), *store.list(), *store.list(pending_only=True)]
    assert all(TOKEN not in a.model_dump_json() for a in shown if a)


# --------------------------------------------------------------------------------------------
# Decide once
# --------------------------------------------------------------------------------------------


def test_a_decision_is_recorded_once_and_the_loser_reads_who_won(store: ApprovalsStore) -> None:
    # Given alice approved
    approval = _pending(store)
    decided = _decide(store, approval)
    assert (decided.status, decided.decided_by, decided.comment) == (
        ApprovalStatus.approved,
        ALICE,
        "fine",
    )
    assert decided.edits == {"amount": 2} and decided.delivered_at is None
    # When bob rejects / Then he is refused with who decided and when
    with pytest.raises(AlreadyDecidedError) as lost:
        _decide(store, approval, BOB, decision=ApprovalStatus.rejected)
    assert (lost.value.outcome, lost.value.decided_by) == (ApprovalStatus.approved, ALICE)
    assert lost.value.decided_at == decided.decided_at
    assert store.list(pending_only=True) == []


def test_concurrent_decisions_have_exactly_one_winner(store: ApprovalsStore) -> None:
    # Given four approvers pressing at the same moment
    approval = _pending(store)
    start = threading.Barrier(4)
    won: list[str] = []
    lost: list[str] = []

    def press(who: str) -> None:
        start.wait()
        try:
            _decide(store, approval, who)
            won.append(who)
        except AlreadyDecidedError as exc:
            lost.append(str(exc.decided_by))

    threads = [threading.Thread(target=press, args=(f"{i}@example.com",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then one decision won and every other press read that winner
    assert len(won) == 1 and lost == won * 3
    stored = store.get(approval.approval_id)
    assert stored is not None and stored.decided_by == won[0]


@pytest.mark.parametrize(
    ("close", "refusal"),
    [
        (ApprovalStatus.timed_out, LinkExpiredError),
        (ApprovalStatus.cancelled, RunEndedError),
        (ApprovalStatus.superseded, SupersededError),
    ],
)
def test_a_closed_approval_takes_no_decision(
    store: ApprovalsStore, close: ApprovalStatus, refusal: type[Exception]
) -> None:
    approval = _pending(store)
    assert store.mark(approval.approval_id, close)
    with pytest.raises(refusal):
        _decide(store, approval)


def test_an_expired_approval_takes_no_decision(store: ApprovalsStore) -> None:
    approval = _pending(store)
    with pytest.raises(LinkExpiredError):
        _decide(store, approval, now=approval.expires_at)
    stored = store.get(approval.approval_id)
    assert stored is not None and stored.is_pending


def test_only_approved_or_rejected_is_a_decision(store: ApprovalsStore) -> None:
    approval = _pending(store)
    with pytest.raises(ValueError, match="approved or rejected"):
        _decide(store, approval, decision=ApprovalStatus.timed_out)


# --------------------------------------------------------------------------------------------
# Delivered, reopened, closed
# --------------------------------------------------------------------------------------------


def test_mark_delivered_keeps_the_first_time_and_needs_a_decision(store: ApprovalsStore) -> None:
    approval = _pending(store)
    assert store.mark_delivered(approval.approval_id, NOW) is None
    assert store.mark_delivered("apr-missing", NOW) is None
    _decide(store, approval)
    first = store.mark_delivered(approval.approval_id, NOW + timedelta(minutes=2))
    again = store.mark_delivered(approval.approval_id, NOW + timedelta(minutes=5))
    assert first is not None and again is not None
    assert first.delivered_at == again.delivered_at == NOW + timedelta(minutes=2)
    assert again.decided_by == ALICE


def test_reopen_undoes_only_the_exact_undelivered_decision(store: ApprovalsStore) -> None:
    # Given alice's decision, recorded and not delivered
    approval = _pending(store)
    decided = _decide(store, approval)
    # When someone else's decision (or one never made) is reopened / Then nothing changes
    assert not store.reopen(decided.model_copy(update={"decided_by": BOB}))
    assert not store.reopen(approval)
    # When hers is reopened / Then it is pending again, listed, and can be decided anew
    assert store.reopen(decided)
    reopened = store.get(approval.approval_id)
    assert reopened is not None and reopened.is_pending and reopened.decided_by is None
    assert [a.approval_id for a in store.list(pending_only=True)] == [approval.approval_id]
    assert _decide(store, approval, BOB).decided_by == BOB


def test_a_delivered_decision_is_never_reopened_timed_out_or_cancelled(
    store: ApprovalsStore,
) -> None:
    approval = _pending(store)
    decided = _decide(store, approval)
    assert store.mark_delivered(approval.approval_id, NOW) is not None
    assert (
        store.reopen(decided),
        store.mark(approval.approval_id, ApprovalStatus.timed_out),
        store.mark(approval.approval_id, ApprovalStatus.cancelled),
    ) == (False, False, False)
    stored = store.get(approval.approval_id)
    assert stored is not None and stored.status is ApprovalStatus.approved


def test_mark_closes_once_including_an_undelivered_decision(store: ApprovalsStore) -> None:
    # Given a pending approval and one with an undelivered decision
    pending, decided = _pending(store, 1), _pending(store, 2)
    _decide(store, decided)
    # When both close, twice / Then each closes once
    assert store.mark(pending.approval_id, ApprovalStatus.timed_out)
    assert not store.mark(pending.approval_id, ApprovalStatus.cancelled)
    assert store.mark(decided.approval_id, ApprovalStatus.cancelled)
    assert not store.mark("apr-missing", ApprovalStatus.cancelled)

    statuses = {a.approval_id: a.status for a in store.list()}
    assert statuses == {
        pending.approval_id: ApprovalStatus.timed_out,
        decided.approval_id: ApprovalStatus.cancelled,
    }
    assert store.list(pending_only=True) == []
    with pytest.raises(ValueError, match="closes an approval as one of"):
        store.mark(pending.approval_id, ApprovalStatus.approved)


def test_a_superseded_approval_is_closed_and_stays_superseded(store: ApprovalsStore) -> None:
    # Given a pending approval
    approval = _pending(store)
    # When a newer request supersedes it
    assert store.mark(approval.approval_id, ApprovalStatus.superseded)
    # Then it is closed as superseded, and nothing closes it again
    assert not store.mark(approval.approval_id, ApprovalStatus.cancelled)
    stored = store.get(approval.approval_id)
    assert stored is not None and stored.status is ApprovalStatus.superseded


def test_the_next_generation_at_a_pause_point_is_found_after_the_superseded_one(
    store: ApprovalsStore,
) -> None:
    from langorch.app.approvals.driver import newest_at

    # Given a pending approval superseded by the next generation at the same pause point
    first = _pending(store)
    assert store.mark(first.approval_id, ApprovalStatus.superseded)
    second_id = approval_id_for(first.run_id, first.interrupt_id, 2)
    _, created = store.put_pending(first.model_copy(update={"approval_id": second_id}), "token-2")
    # Then both are kept, each under its own id, and the pause point's newest is the second
    assert created and second_id != first.approval_id
    assert newest_at(store, first.run_id, first.interrupt_id) == (2, store.get(second_id))
    assert store.task_token(second_id) == "token-2"
    old = store.get(first.approval_id)
    assert old is not None and old.status is ApprovalStatus.superseded


# --------------------------------------------------------------------------------------------
# Bookkeeping: emails, codes, listings, audit
# --------------------------------------------------------------------------------------------


def test_emailed_refs_codes_and_failures_are_kept(store: ApprovalsStore) -> None:
    approval = _pending(store)
    store.mark_emailed(approval.approval_id, "ref-b")
    store.mark_emailed(approval.approval_id, "ref-a")
    store.mark_emailed(approval.approval_id, "ref-a")
    store.set_code_hash(approval.approval_id, "ref-a", "hash-a")
    stored = store.get(approval.approval_id)
    assert stored is not None
    assert stored.emailed == ["ref-a", "ref-b"]
    assert store.code_hash(approval.approval_id, "ref-a") == "hash-a"
    assert store.code_hash(approval.approval_id, "ref-b") is None


def test_code_attempts_count_per_approver_up_to_the_limit(store: ApprovalsStore) -> None:
    approval = _pending(store)
    claims = [store.claim_code_attempt(approval.approval_id, "ref-a", 3) for _ in range(4)]
    assert claims == [1, 2, 3, None]
    assert store.claim_code_attempt(approval.approval_id, "ref-b", 3) == 1


def test_concurrent_code_attempts_never_exceed_the_limit(store: ApprovalsStore) -> None:
    # Failed before: 30 concurrent wrong codes were checked 14 times against a limit of 5
    # (the count was read, then incremented).
    approval = _pending(store)
    granted = at_once([lambda: store.claim_code_attempt(approval.approval_id, "ref-a", 5)] * 30)
    assert sorted(g for g in granted if g is not None) == [1, 2, 3, 4, 5]
    assert granted.count(None) == 25


def test_reissue_raises_the_generation_and_forgets_codes_and_attempts(
    store: ApprovalsStore,
) -> None:
    approval = _pending(store)
    store.mark_emailed(approval.approval_id, "ref-a")
    store.set_code_hash(approval.approval_id, "ref-a", "hash-a")
    for _ in range(2):
        store.claim_code_attempt(approval.approval_id, "ref-a", 2)
    assert store.claim_code_attempt(approval.approval_id, "ref-a", 2) is None
    fresh = store.reissue_links(approval.approval_id, ["ref-a", "ref-b"])
    assert fresh is not None and (fresh.link_generation, fresh.emailed) == (1, [])
    assert store.code_hash(approval.approval_id, "ref-a") is None
    assert store.claim_code_attempt(approval.approval_id, "ref-a", 2) == 1
    again = store.reissue_links(approval.approval_id, ["ref-a"])
    assert again is not None and again.link_generation == 2
    store.decide(approval.approval_id, ApprovalStatus.approved, ALICE, None, {}, NOW)
    assert store.reissue_links(approval.approval_id, ["ref-a"]) is None
    with pytest.raises(NotFoundError):
        store.reissue_links("apr-missing", ["ref-a"])


def test_a_view_token_is_used_once(store: ApprovalsStore) -> None:
    approval = _pending(store)
    assert store.use_view_token(approval.approval_id, "view-1")
    assert not store.use_view_token(approval.approval_id, "view-1")
    assert store.use_view_token(approval.approval_id, "view-2")
    assert [e.action for e in store.audit(approval.approval_id)] == []
    with pytest.raises(NotFoundError):
        store.use_view_token("apr-missing", "view-1")


def test_listings_are_newest_first_and_filter_by_run(store: ApprovalsStore) -> None:
    first = _pending(store, 1, created=NOW)
    second = _pending(store, 2, run_id="run-2", created=NOW + timedelta(seconds=1))
    third = _pending(store, 3, created=NOW + timedelta(seconds=2))
    _decide(store, third)
    ids = [a.approval_id for a in store.list()]
    assert ids == [third.approval_id, second.approval_id, first.approval_id]
    assert [a.approval_id for a in store.list(pending_only=True)] == [
        second.approval_id,
        first.approval_id,
    ]
    assert [a.approval_id for a in store.list(run_id="run-1")] == [
        third.approval_id,
        first.approval_id,
    ]
    assert len(store.list(limit=1)) == 1


def test_the_audit_trail_is_append_only_and_oldest_first(store: ApprovalsStore) -> None:
    approval = _pending(store)
    lines = [
        AuditEntry(approval_id=approval.approval_id, at=NOW, action="requested", outcome="a"),
        AuditEntry(approval_id=approval.approval_id, at=NOW, action="view", outcome="b"),
        AuditEntry(
            approval_id=approval.approval_id,
            at=NOW + timedelta(seconds=1),
            action="decide",
            outcome="approved",
            actor=ALICE,
            source_ip="203.0.113.7",
            method="POST",
        ),
    ]
    for line in lines:
        store.append_audit(line)
    unchained = {"run_id": None, "prev": None, "digest": None}
    assert [e.model_copy(update=unchained) for e in store.audit(approval.approval_id)] == lines
    assert store.audit("apr-other") == []


def _line(approval: Approval, outcome: str) -> AuditEntry:
    return AuditEntry(approval_id=approval.approval_id, at=NOW, action="view", outcome=outcome)


def test_a_runs_audit_lines_are_chained_as_they_are_written(store: ApprovalsStore) -> None:
    # Given two approvals of one run
    first, second = _pending(store, 1), _pending(store, 2)

    # When lines of both are written, interleaved
    for approval, outcome in [(first, "a"), (second, "b"), (first, "c")]:
        store.append_audit(_line(approval, outcome))

    # Then they form one chain in written order: each carries the previous line's digest, and
    # its own digest is that of what it holds
    lines = {e.outcome: e for a in (first, second) for e in store.audit(a.approval_id)}
    assert [lines[o].prev for o in "abc"] == [GENESIS, lines["a"].digest, lines["b"].digest]
    assert all(e.run_id == "run-1" for e in lines.values())
    assert all(e.digest == digest(line_body(e)) for e in lines.values())


def test_concurrent_audit_writers_never_fork_a_runs_chain(store: ApprovalsStore) -> None:
    # Given two approvals of one run, and eight writers adding lines at once
    approvals = [_pending(store, 1), _pending(store, 2)]

    def write(n: int) -> None:
        for k in range(3):
            store.append_audit(_line(approvals[n % 2], f"{n}-{k}"))

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Then the 24 lines form one unbroken chain: one first line, each other line after exactly
    # one line, none after the last
    lines = [e for a in approvals for e in store.audit(a.approval_id)]
    assert len(lines) == 24
    prevs = [e.prev for e in lines]
    digests = {e.digest for e in lines}
    assert len(set(prevs)) == 24
    assert prevs.count(GENESIS) == 1
    assert set(prevs) - {GENESIS} <= digests


# --------------------------------------------------------------------------------------------
# Votes, delegations and timers (issue 13)
# --------------------------------------------------------------------------------------------


def _vote(who: str, decision: str = "approved", at: datetime = NOW) -> Any:
    from langorch.domain.approvals.policy import Vote

    return Vote(approver=who, decision=decision, at=at)  # type: ignore[arg-type]


def test_one_vote_per_slot_and_the_votes_read_back_oldest_first(store: ApprovalsStore) -> None:
    approval = _pending(store)
    assert store.record_vote(
        approval.approval_id, "slot-b", _vote(BOB, at=NOW + timedelta(seconds=1))
    )
    assert store.record_vote(approval.approval_id, "slot-a", _vote(ALICE))
    assert not store.record_vote(approval.approval_id, "slot-a", _vote(ALICE, "rejected"))
    assert [(v.approver, v.decision) for v in store.votes(approval.approval_id)] == [
        (ALICE, "approved"),
        (BOB, "approved"),
    ]


def test_no_vote_is_taken_after_the_decision(store: ApprovalsStore) -> None:
    approval = _pending(store)
    _decide(store, approval)
    with pytest.raises(AlreadyDecidedError):
        store.record_vote(approval.approval_id, "slot-a", _vote(ALICE))
    assert store.votes(approval.approval_id) == []


def test_a_counted_decision_needs_the_vote_count_it_read(store: ApprovalsStore) -> None:
    from langorch.domain.approvals.policy import VotesChangedError

    approval = _pending(store)
    first = _vote(ALICE)
    store.record_vote(approval.approval_id, "slot-a", first)
    store.record_vote(approval.approval_id, "slot-b", _vote(BOB))
    # Decided with one vote while two were recorded: refused, nothing written
    with pytest.raises(VotesChangedError):
        store.decide(approval.approval_id, ApprovalStatus.approved, ALICE, None, {}, NOW, [first])
    assert store.get(approval.approval_id).is_pending  # type: ignore[union-attr]
    votes = store.votes(approval.approval_id)
    decided = store.decide(approval.approval_id, ApprovalStatus.approved, BOB, None, {}, NOW, votes)
    assert [v.approver for v in decided.votes] == [ALICE, BOB]
    assert [v.approver for v in store.get(approval.approval_id).votes] == [ALICE, BOB]  # type: ignore[union-attr]


def test_a_delegation_takes_the_delegators_slot_once(store: ApprovalsStore) -> None:
    approval = _pending(store)
    carol = "carol@example.com"
    assert store.delegate(approval.approval_id, "slot-b", BOB, carol, NOW)
    assert store.get(approval.approval_id).delegations == {carol: BOB}  # type: ignore[union-attr]
    # Bob's slot is used: he can neither vote nor delegate again
    assert not store.record_vote(approval.approval_id, "slot-b", _vote(BOB))
    assert not store.delegate(approval.approval_id, "slot-b", BOB, "dan@example.com", NOW)
    # Alice voted first: she cannot delegate afterwards
    store.record_vote(approval.approval_id, "slot-a", _vote(ALICE))
    assert not store.delegate(approval.approval_id, "slot-a", ALICE, "eve@example.com", NOW)
    assert store.votes(approval.approval_id) == [_vote(ALICE)]


def test_a_timer_counter_moves_once_from_the_value_seen(store: ApprovalsStore) -> None:
    approval = _pending(store)
    assert store.advance_timer(approval.approval_id, "reminders_sent", 0)
    assert not store.advance_timer(approval.approval_id, "reminders_sent", 0)
    assert store.advance_timer(approval.approval_id, "escalation_level", 0)
    fresh = store.get(approval.approval_id)
    assert fresh is not None and (fresh.reminders_sent, fresh.escalation_level) == (1, 1)
    _decide(store, fresh)
    assert not store.advance_timer(approval.approval_id, "reminders_sent", 1)


@pytest.mark.parametrize("voters", [12])
def test_concurrent_votes_take_one_slot_each(store: ApprovalsStore, voters: int) -> None:
    approval = _pending(store)
    start = threading.Barrier(voters * 2)
    taken: list[bool] = []

    def vote(n: int) -> None:
        start.wait()
        taken.append(
            store.record_vote(approval.approval_id, f"slot-{n % voters}", _vote(f"p{n}@x.io"))
        )

    threads = [threading.Thread(target=vote, args=(n,)) for n in range(voters * 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert taken.count(True) == voters
    assert len(store.votes(approval.approval_id)) == voters


def test_thirty_concurrent_voters_reach_one_counted_decision_with_every_vote(
    store: ApprovalsStore,
) -> None:
    # Given 30 approvers of a step that needs 3 approvals
    approval = _pending(store)
    voters = [f"voter{n:02d}@example.com" for n in range(30)]
    start = threading.Barrier(len(voters))
    outcomes: dict[str, str] = {}

    def press(n: int) -> None:
        # As the vote use-case does: vote, count every vote, decide with them at the quorum
        # (again when a vote arrived meanwhile)
        who = voters[n]
        start.wait()
        try:
            if not store.record_vote(approval.approval_id, f"slot-{n}", _vote(who)):
                outcomes[who] = "slot taken"
                return
            while len(votes := store.votes(approval.approval_id)) >= 3:
                try:
                    store.decide(
                        approval.approval_id, ApprovalStatus.approved, who, None, {}, NOW, votes
                    )
                except VotesChangedError:
                    continue
                outcomes[who] = "decided"
                return
            outcomes[who] = "voted"
        except AlreadyDecidedError:
            outcomes[who] = "late"

    # When all 30 press Approve at the same moment
    threads = [threading.Thread(target=press, args=(n,)) for n in range(len(voters))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then exactly one decided, carrying every vote recorded: none was taken after it
    assert len(outcomes) == len(voters)
    assert list(outcomes.values()).count("decided") == 1
    decided = store.get(approval.approval_id)
    assert decided is not None and outcomes[str(decided.decided_by)] == "decided"
    recorded = sorted(v.approver for v in store.votes(approval.approval_id))
    assert len(recorded) >= 3 and sorted(v.approver for v in decided.votes) == recorded
    # and everyone whose vote is not among them was told it was decided already
    assert all(outcomes[who] == "late" for who in set(voters) - set(recorded))


# --------------------------------------------------------------------------------------------
# SQLite only: processes sharing one file (the local stack's sandboxes are processes)
# --------------------------------------------------------------------------------------------


def _decide_in_a_process(path: str, approval_id: str, who: str, start: Any, results: Any) -> None:
    """One sandbox: its own ``Database`` on the shared file, pressing Approve at ``start``."""
    store = SqliteApprovals(Database(path))
    start.wait()
    try:
        store.decide(approval_id, ApprovalStatus.approved, who, None, {}, NOW)
        results.put((who, "won"))
    except AlreadyDecidedError as exc:
        results.put((who, f"lost to {exc.decided_by}"))
    except Exception as exc:  # reported, so the test shows it instead of hanging
        results.put((who, repr(exc)))


def test_two_processes_deciding_at_once_have_exactly_one_winner(sqlite_db: Database) -> None:
    # Given a pending approval in the home's file
    approval = _pending(SqliteApprovals(sqlite_db))
    # Forked (a spawned Python would spend seconds importing), with no connection of ours open
    # to inherit: each process opens its own, as a sandbox does.
    sqlite_db.close()
    context = multiprocessing.get_context("fork")
    start, results = context.Barrier(2), context.Queue()
    processes = [
        context.Process(
            target=_decide_in_a_process,
            args=(str(sqlite_db.path), approval.approval_id, who, start, results),
        )
        for who in (ALICE, BOB)
    ]
    # When two processes, each with its own connection, decide it at the same moment
    for process in processes:
        process.start()
    outcomes = dict(results.get(timeout=120) for _ in processes)
    for process in processes:
        process.join()
    # Then one won, and the other read that winner
    winners = [who for who, outcome in outcomes.items() if outcome == "won"]
    assert len(winners) == 1, outcomes
    (loser,) = set(outcomes) - set(winners)
    assert outcomes[loser] == f"lost to {winners[0]}"
    stored = SqliteApprovals(sqlite_db).get(approval.approval_id)
    assert stored is not None and stored.decided_by == winners[0]


def test_the_sqlite_audit_trail_refuses_updates_and_deletes(sqlite_db: Database) -> None:
    # Given an approval with one audit line in the SQLite store
    store = SqliteApprovals(sqlite_db)
    approval = _pending(store)
    line = AuditEntry(approval_id=approval.approval_id, at=NOW, action="requested", outcome="a")
    store.append_audit(line)
    # When anything with the file rewrites or deletes it / Then the file refuses
    for statement in ("UPDATE approval_audit SET body = '{}'", "DELETE FROM approval_audit"):
        with pytest.raises(StorageError, match="append-only") as refused, sqlite_db.write() as c:
            c.execute(statement)
        assert isinstance(refused.value.__cause__, sqlite3.IntegrityError)
    assert [e.outcome for e in store.audit(approval.approval_id)] == [line.outcome]


def test_dynamodb_audit_lines_have_a_partition_of_their_own_and_old_ones_still_read(
    dynamodb: Any,
) -> None:
    from langorch.adapters.dynamodb.approvals.repository import ApprovalsRepository
    from langorch.adapters.dynamodb.runs import RunsRepository

    # Given the DynamoDB store, and a line written before audit had its own partition
    RunsRepository(dynamodb, "runs").create_table()
    store = ApprovalsRepository(dynamodb, "runs")
    approval = _pending(store)
    old = AuditEntry(approval_id=approval.approval_id, at=NOW, action="requested", outcome="a")
    dynamodb.put_item(
        TableName="runs",
        Item={
            "pk": {"S": f"approval#{approval.approval_id}"},
            "sk": {"S": "audit#2026-01-05T12:00:00+00:00#legacy"},
            "body": {"S": old.model_dump_json(exclude_none=True)},
        },
    )
    # When a new line is appended
    new = AuditEntry(
        approval_id=approval.approval_id, at=NOW + timedelta(seconds=1), action="view", outcome="b"
    )
    store.append_audit(new)
    # Then it is stored under audit#approval#<id> (what the IAM LeadingKeys conditions match)
    items = dynamodb.scan(TableName="runs")["Items"]
    partitions = {i["pk"]["S"] for i in items if i["sk"]["S"].startswith("audit#")}
    assert f"audit#approval#{approval.approval_id}" in partitions
    # ...and the trail reads both, oldest first
    assert [e.outcome for e in store.audit(approval.approval_id)] == ["a", "b"]
