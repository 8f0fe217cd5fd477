"""``ApprovalWait`` is emitted once, when a request decides: the dashboard's series is real."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.test_approvals import (  # noqa: F401 - fixtures used by name
    Parked,
    Stack,
    callback,
    stack,
)
from tests.unit.approvals_support import ALICE
from tests.unit.approvals_support import call as _call
from tests.unit.approvals_support import event as _event
from tests.unit.approvals_support import open_and_decide as _open_and_decide


def _metric_lines(out: str, name: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in out.splitlines() if '"_aws"' in line]
    return [line for line in lines if name in line]


@pytest.fixture
def approved_by_alice(
    stack: Stack,  # noqa: F811 - the imported fixture
    callback: Any,  # noqa: F811 - the imported fixture
    capsys: pytest.CaptureFixture[str],
) -> tuple[Parked, str]:
    """A parked approval that alice opened and approved, and what the decision printed."""
    parked = stack.park()
    capsys.readouterr()
    _open_and_decide(callback, parked.links[ALICE], "approved")
    return parked, capsys.readouterr().out


def test_a_decision_emits_how_long_the_approval_waited_and_a_revisit_does_not(
    approved_by_alice: tuple[Parked, str],
    callback: Any,  # noqa: F811 - the imported fixture
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given a parked approval that alice approves
    parked, out = approved_by_alice
    # Then one ApprovalWait in seconds, with the dimensions the dashboard asks for
    (wait,) = _metric_lines(out, "ApprovalWait")
    directive = wait["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "langorch"
    assert directive["Dimensions"] == [["service"]]
    assert {"Name": "ApprovalWait", "Unit": "Seconds"} in directive["Metrics"]
    value = wait["ApprovalWait"]
    values = value if isinstance(value, list) else [value]
    assert len(values) == 1 and values[0] >= 0
    # And a later visit to the decided approval emits none
    _call(callback, _event(parked.links[ALICE], method="POST", form={"nonce": "x"}))
    assert _metric_lines(capsys.readouterr().out, "ApprovalWait") == []


def test_a_decision_emits_its_quality_figures_per_policy(
    stack: Stack,  # noqa: F811 - the imported fixture
    approved_by_alice: tuple[Parked, str],
) -> None:
    # Given a parked approval that alice opens and approves
    parked, out = approved_by_alice
    # Then time to decide, rubber stamp and approved, each once, by policy (workflow/step)
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None
    policy = f"{approval.workflow_id}/{approval.step_id}"
    for name, unit in (
        ("ApprovalDecideSeconds", "Seconds"),
        ("ApprovalRubberStamp", "Count"),
        ("ApprovalApproved", "Count"),
    ):
        (line,) = _metric_lines(out, name)
        directive = line["_aws"]["CloudWatchMetrics"][0]
        assert directive["Dimensions"] == [["service", "policy"]], name
        assert {"Name": name, "Unit": unit} in directive["Metrics"]
        assert line["policy"] == policy
    # And approved is 1; opened and decided at once by the test, the decision is a rubber stamp
    assert _metric_lines(out, "ApprovalApproved")[0]["ApprovalApproved"] in (1.0, [1.0])
    assert _metric_lines(out, "ApprovalRubberStamp")[0]["ApprovalRubberStamp"] in (1.0, [1.0])
