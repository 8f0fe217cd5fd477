"""The replay gate serves what people and memory gave the recorded run: an approval's edits
are applied again, and the memory a run read is the memory its replay reads — the lunch order
(seed 000): the first run asks for a preference (the approver types it in), the second reads it
from memory and orders without asking."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from langorch.app.definitions import register_files, seed_builtins
from langorch.app.runs import StartRun, drive, start_run
from langorch.app.segment_record import SegmentResult
from langorch.app.workflow_tests import answer_for
from langorch.composition.embedded import EmbeddedContainer
from langorch.config import Settings
from langorch.domain.workflow_tests import Decision
from langorch.local.replay import ReplayReport, replay

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "lunch_order"
INPUT = {"delivery_address": "1 Main St"}
CHOICE = {"restaurant": "Sushi Go", "items_to_order": ["Salmon roll", "Miso soup"]}


def _fill_in_the_preference(request: dict[str, Any]) -> dict[str, Any]:
    return answer_for(request, Decision(decision="approved", edits=CHOICE))


@pytest.fixture
def source(tmp_path: Path) -> EmbeddedContainer:
    """A stack's stores holding lunch_order (version 1) and a candidate (version 2) whose
    approval only words its message differently."""
    settings = Settings(
        region="us-east-1",
        local_home=str(tmp_path / "stack"),
        offline_script=str(EXAMPLE / "offline.yaml"),
    )
    container = EmbeddedContainer(settings)
    container.ensure_resources()
    seed_builtins(container.definitions)
    register_files(container.definitions, [EXAMPLE / "definitions.yaml"])
    candidate = (EXAMPLE / "definitions.yaml").read_text(encoding="utf-8")
    candidate = candidate.replace("Fill in a restaurant", "Type a restaurant")
    (tmp_path / "candidate.yaml").write_text(candidate, encoding="utf-8")
    register_files(container.definitions, [tmp_path / "candidate.yaml"], activate=False)
    return container


def _record(source: EmbeddedContainer) -> SegmentResult:
    run, _ = start_run(StartRun("lunch_order", input=INPUT, version=1), source)
    return drive(run.run_id, source, on_approval=_fill_in_the_preference)


def _replay(source: EmbeddedContainer, run: SegmentResult) -> ReplayReport:
    return replay(source, "lunch_order", 2, [source.runs.get_run(run.run_id)])


def test_an_approvals_edits_are_applied_again_in_its_replay(source: EmbeddedContainer) -> None:
    # Given a recorded first run: no preference, so the approver typed one in and approved
    first = _record(source)
    assert first.status == "succeeded" and first.outputs["restaurant"] == "Sushi Go"
    # When it is replayed on the candidate
    report = _replay(source, first)
    # Then the recorded decision is served with its edits: the same path, the same outputs,
    # every model call answered from the record
    [run] = report.runs
    assert (run.status, run.path_changed, run.outputs_changed) == ("succeeded", False, [])
    assert run.unrecorded == []


def test_a_replay_reads_the_memory_its_recorded_run_read(source: EmbeddedContainer) -> None:
    # Given a first run that saved the preference, and a second one that read it from memory
    # and ordered without asking anyone
    _record(source)
    second = _record(source)
    assert second.status == "succeeded" and second.outputs["restaurant"] == "Sushi Go"
    # When the second run is replayed on the candidate (in a scratch store, memory empty)
    report = _replay(source, second)
    # Then it reads what the recorded run read: it asks no one and orders the same lunch
    [run] = report.runs
    assert (run.path_changed, run.routing_changed, run.outputs_changed) == (False, False, [])
    assert run.unrecorded == []
