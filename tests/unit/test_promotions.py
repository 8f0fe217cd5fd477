"""Promoting a workflow version (``app.promotions``) and reading a replay gate
(``domain.promotions``), on the in-memory definitions store."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from langorch.app.promotions import PromoteWorkflow, promote_workflow
from langorch.domain.definitions import PlanStep, TaskPlan
from langorch.domain.errors import InputValidationError, NotFoundError
from langorch.domain.promotions import Gate, GateFailedError, read_gate
from tests.fakes import InMemoryDefinitions
from tests.unit.conftest import MakeFakes

NOW = datetime(2026, 11, 27, 12, tzinfo=UTC)


class _Deps:
    def __init__(self) -> None:
        self.definitions = InMemoryDefinitions()
        self.clock = lambda: NOW
        self.synced: list[int] = []

    def sync(self, plan: TaskPlan) -> Any:
        self.synced.append(plan.version)
        return None


@pytest.fixture
def deps() -> _Deps:
    """Version 1 of ``digest`` active, version 2 a draft."""
    deps = _Deps()
    for text in ("one", "two"):
        plan = TaskPlan(plan_id="digest", description=text, steps=[PlanStep(step_id="s")])
        deps.definitions.put_workflow(plan, activate=text == "one")
    return deps


def _gate(*, passed: bool) -> Gate:
    return Gate("replay.json", runs=20, failures=0 if passed else 2, passed=passed)


def test_a_promotion_activates_the_version_and_syncs_its_triggers(deps: _Deps) -> None:
    # Given a draft version 2 and a gate that passed
    cmd = PromoteWorkflow("digest", 2, "ana", gate=_gate(passed=True))
    # When it is promoted
    done = promote_workflow(cmd, deps, sync=deps.sync)
    # Then version 2 is active, recorded with who, when and the gate, and its triggers synced
    active = deps.definitions.get_workflow("digest")
    assert active is not None and active.version == 2
    assert done.promotion is not None
    assert (done.promotion.promoted_by, done.promotion.promoted_at) == ("ana", NOW)
    assert deps.synced == [2]


def test_a_failed_gate_refuses_and_changes_nothing(deps: _Deps) -> None:
    # Given a gate that failed
    cmd = PromoteWorkflow("digest", 2, "ana", gate=_gate(passed=False))
    # When version 2 is promoted without --force
    with pytest.raises(GateFailedError, match=r"20 runs, 2 failing.*FAILED"):
        promote_workflow(cmd, deps, sync=deps.sync)
    # Then version 1 stays active and nothing is recorded or synced
    active = deps.definitions.get_workflow("digest")
    assert active is not None and active.version == 1
    assert (deps.definitions.promotions("digest"), deps.synced) == ([], [])


def test_forcing_past_a_failed_gate_is_recorded_as_forced(deps: _Deps) -> None:
    # Given a gate that failed
    cmd = PromoteWorkflow("digest", 2, "ana", gate=_gate(passed=False), force=True)
    # When version 2 is promoted with --force
    done = promote_workflow(cmd, deps, sync=deps.sync)
    # Then it is active and the record says forced
    assert done.promotion is not None and done.promotion.forced


def test_promoting_the_active_version_changes_nothing(deps: _Deps) -> None:
    # Given version 1 active
    # When version 1 is promoted
    done = promote_workflow(PromoteWorkflow("digest", 1, "ana"), deps, sync=deps.sync)
    # Then no promotion is recorded and no trigger synced
    assert done.promotion is None
    assert (deps.definitions.promotions("digest"), deps.synced) == ([], [])


def test_a_file_that_is_not_a_replay_report_names_every_missing_field() -> None:
    # Given a JSON object with none of a report's fields
    # When it is read as the gate of digest@2
    with pytest.raises(InputValidationError) as raised:
        read_gate({"hello": 1}, source="x.json", workflow_id="digest", version=2)
    # Then each missing field is a problem at its path, with how to write a report
    paths = [p.path for p in raised.value.problems]
    assert paths == ["workflow", "candidate_version", "summary.runs", "failures", "passed"]
    assert (
        "langorch replay --workflow digest --candidate-version 2" in raised.value.problems[0].hint
    )


def test_a_run_of_a_workflow_stored_only_as_drafts_says_how_to_activate_one(
    make_container: MakeFakes,
) -> None:
    from langorch.app.runs import StartRun, start_run

    # Given a workflow whose only version is a draft
    container = make_container()
    plan = TaskPlan(plan_id="digest", steps=[PlanStep(step_id="s", kind="transform")])
    container.definitions.put_workflow(plan, activate=False)
    # When a run of it is started
    with pytest.raises(NotFoundError, match="no active version, only drafts") as raised:
        start_run(StartRun("digest"), container)
    # Then the error says how to activate one
    assert "langorch workflows promote digest --version N" in str(raised.value)
