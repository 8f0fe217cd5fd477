"""``langorch events send`` end to end on the embedded stack: the local bus matches the event
against every event trigger, hands the trigger use-case the envelope a rule would, and the run
goes through the state machine; the CLI refuses bad input and says when nothing matched."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from langorch.cli.main import main
from tests.support.definitions import workflow
from tests.support.homes import local_home
from tests.support.pipeline import Pipeline, pipelines

ORDERS = workflow(
    "big_orders",
    triggers=[
        {
            "type": "event",
            "pattern": {"source": ["shop.orders"], "detail": {"total": [{"numeric": [">=", 100]}]}},
        }
    ],
).steps("""
      - {step_id: tag, kind: transform, transform: {tagged: "order_id"}}
""")


@pytest.fixture
def pipeline(tmp_path: Path) -> Iterator[Pipeline]:
    with pipelines(tmp_path) as make:
        yield make()


def test_a_matching_event_runs_the_workflow_to_the_end(pipeline: Pipeline):
    # Given a workflow triggered by orders of 100 or more
    pipeline.register(ORDERS)

    # When an order of 250 is put on the default bus
    put = pipeline.container.events.put(
        "default", "shop.orders", "Order Placed", {"order_id": "o-1", "total": 250}
    )

    # Then it reached the workflow, whose run went through the state machine with the detail
    assert put.delivered_to == ["big_orders"]
    (run,) = pipeline.container.runs.list_runs(limit=10)
    assert pipeline.finished(run.run_id)["status"] == "SUCCEEDED"
    assert pipeline.run(run.run_id).outputs["tagged"] == "o-1"
    assert run.trigger.detail["event_id"] == put.event_id


def test_an_event_no_pattern_matches_starts_no_run(pipeline: Pipeline):
    # Given the same workflow
    pipeline.register(ORDERS)

    # When an order of 20 is put
    put = pipeline.container.events.put(
        "default", "shop.orders", "Order Placed", {"order_id": "o-2", "total": 20}
    )

    # Then it reached no workflow and no run exists
    assert put.delivered_to == []
    assert pipeline.container.runs.list_runs(limit=10) == []


def test_events_send_says_when_nothing_matches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a local home with no event trigger
    home = tmp_path / ".langorch"
    local_home(home)

    # When an event is sent
    code = main(
        [
            "events",
            "send",
            "--home",
            str(home),
            "--source",
            "shop.orders",
            "--detail-type",
            "Order Placed",
            "--detail",
            '{"total": 5}',
            "--json",
        ]
    )

    # Then it was put, with its id, and reached no workflow
    assert code == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["bus"] == "default"
    assert answer["event_id"]
    assert answer["delivered_to"] == []


@pytest.mark.parametrize(("detail", "said"), [("[1]", "must be a JSON object"), ("{", "--detail")])
def test_events_send_refuses_a_detail_that_is_not_a_json_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], detail: str, said: str
) -> None:
    # Given a local home
    home = tmp_path / ".langorch"
    local_home(home)

    # When the detail is not a JSON object
    code = main(
        [
            "events",
            "send",
            "--home",
            str(home),
            "--source",
            "s",
            "--detail-type",
            "t",
            "--detail",
            detail,
        ]
    )

    # Then it is a usage error naming the flag, and nothing is put
    assert code != 0
    assert said in capsys.readouterr().err
