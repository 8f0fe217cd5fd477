"""run_segment through the container on moto: the DynamoDB runs table, checkpointer and
definitions, two processes sharing only AWS.

The use-case's logic is proven on fakes in ``tests/unit/test_engine.py`` and
``tests/unit/test_runs_use_cases.py``; this is its wiring to the real adapters.
"""

from __future__ import annotations

from langorch.app.runs import RunSegment, StartRun, run_segment, start_run
from langorch.domain.runs import RunStatus, TimelineEventType
from tests.workflows import BOSS_APPROVES_40, GATED_APPROVAL

from .conftest import MakeContainer, register_text

APPROVAL = GATED_APPROVAL


def test_a_run_parked_in_one_process_is_resumed_by_another_on_dynamodb(
    make_container: MakeContainer,
) -> None:
    # Given a run parked at an approval by one process
    first_process = make_container()
    register_text(first_process, APPROVAL)
    run, _ = start_run(StartRun("gated", input={"amount": 21}), first_process)
    parked = run_segment(RunSegment(run.run_id), first_process)
    assert parked.status == "waiting_approval"

    # When a new process (new saver, newly compiled graph; only DynamoDB shared) resumes it
    second_process = make_container()
    done = run_segment(
        RunSegment(run.run_id, resume=BOSS_APPROVES_40),
        second_process,
    )

    # Then the run finishes from the stored checkpoint, and the record and timeline say so
    assert (done.status, done.outputs["paid"]) == ("succeeded", 40)
    assert second_process.runs.get_run(run.run_id).status is RunStatus.succeeded
    types = [e.type for e in second_process.runs.get_timeline(run.run_id)]
    assert TimelineEventType.approval_decided in types
    assert types[-1] is TimelineEventType.run_finished
