"""The execution history count: events per round read from the shipped state machine, and when
a run must continue in a fresh execution."""

from __future__ import annotations

from langorch.domain.history import STARTED_EVENTS, HistoryBudget


def test_rounds_cost_the_events_their_states_record_in_the_shipped_state_machine():
    # Given the shipped state machine
    budget = HistoryBudget.shipped(25_000)

    # When each kind of round is counted
    # Then: RunSegment (a task: 5) + Route (2), then the branch's states
    assert budget.round("continue") == 5 + 2 + 2  # Continue
    assert budget.round("sleeping") == 5 + 2 + 2 + 2  # Sleep, WakeUp
    assert budget.round("waiting_approval") == 5 + 2 + 6  # AwaitApproval (token), then back
    assert budget.round("waiting_resource") == 5 + 2 + 6 + 2  # AwaitResource (token), WakeUp
    assert budget.round("succeeded") == 5 + 2 + 3  # Succeeded and ExecutionSucceeded
    assert budget.round("continued") == 5 + 2 + 3  # ContinuedAsNew
    assert budget.widest_round == 15


def test_a_run_continues_when_the_widest_round_and_the_hand_over_might_not_fit():
    # Given a limit of 60 events: the widest round is 15, a hand-over 10
    budget = HistoryBudget.shipped(60)

    # Then 35 events leave room for both, 36 do not
    assert not budget.due(35)
    assert budget.due(36)


def test_an_execution_that_ran_nothing_never_hands_over():
    # Given a limit too small for any round
    budget = HistoryBudget.shipped(20)

    # Then a fresh execution still runs its first segment (no hand-over loop)
    assert not budget.due(STARTED_EVENTS)
    assert budget.due(STARTED_EVENTS + 9)


def test_the_default_limit_fits_more_than_1800_approval_rounds_per_execution():
    # Given the deployed default (1,000 below AWS's 25,000 for retries' events)
    from langorch.config import Settings

    budget = HistoryBudget.shipped(Settings().execution_history_limit)

    # When approval rounds are counted until a hand-over is due
    events, rounds = STARTED_EVENTS, 0
    while not budget.due(events):
        events += budget.round("waiting_approval")
        rounds += 1

    # Then one execution carries about 1,850 of them (the invoice_batch pattern)
    assert rounds == 1_845


def test_runs_show_says_which_execution_a_run_continued_in():
    # Given a hand-over on a run's timeline
    from datetime import UTC, datetime

    from langorch.cli.timeline import event_line
    from langorch.domain.runs import TimelineEvent, TimelineEventType

    event = TimelineEvent(
        seq=7,
        at=datetime(2026, 11, 27, tzinfo=UTC),
        type=TimelineEventType.run_continued,
        segment=4,
        detail={"from": "run-1", "to": "run-1-c1", "events": 37},
    )

    # When the CLI renders it
    line = event_line(event)

    # Then it names the new execution and where the history stood
    assert line is not None
    assert "continued" in line and "in execution run-1-c1 (history at 37 events)" in line
