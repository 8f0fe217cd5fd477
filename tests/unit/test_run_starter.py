"""Who started a run, recorded for separation of duties (issue 13): a signed webhook's sender
field, or the CLI's ``--started-by``; on fakes, and the CLI's refusal of a bad address."""

from __future__ import annotations

import json

import pytest

from langorch.app.definitions import register_workflow
from langorch.domain.loading import load_text
from langorch.domain.lookup import InMemoryLookup
from langorch.domain.validation import check_workflow
from tests.fakes import Fakes
from tests.integration.triggers_support import SECRET, signed
from tests.unit.triggers_support import make_deps, webhook_answer

EXPENSES = """
workflows:
  - plan_id: expenses
    memory: false
    approvers: [ann@example.com, bob@example.com]
    triggers: [{type: webhook, sender_field: requested_by}]
    steps:
      - step_id: review
        kind: approval
        approval: {title: "Pay?", timeout_seconds: 60, separation_of_duties: true}
        branches: {approved: done, rejected: done, timed_out: done}
      - {step_id: done, kind: transform, transform: {ok: "1"}}
"""


@pytest.fixture
def deps() -> Fakes:
    deps = make_deps()
    for plan in load_text(EXPENSES, source="expenses.yaml", fmt="yaml").workflows:
        register_workflow(deps.definitions, plan)
    deps.secrets.put_json("langorch/webhooks/expenses", {"current": SECRET})
    return deps


def _deliver(deps: Fakes, body: dict[str, object], delivery: str) -> dict[str, object]:
    status, answer = webhook_answer(
        signed(json.dumps(body), workflow_id="expenses", delivery=delivery), deps
    )
    assert status == 202, answer
    return dict(deps.runs.get_run(str(answer["run_id"])).trigger.detail)


def test_a_signed_deliverys_sender_field_is_recorded_as_who_started_the_run(deps: Fakes):
    # Given a webhook trigger naming its sender field (before: nothing recorded a starter, so
    # separation_of_duties never applied to a real run)
    detail = _deliver(deps, {"requested_by": "ann@example.com", "amount": 5}, "d-1")

    # Then the run's trigger names her as its starter, beside the delivery's own facts
    assert detail["started_by"] == "ann@example.com"
    assert detail["delivery_id"] == "d-1"


@pytest.mark.parametrize(
    "body", [{"amount": 5}, {"requested_by": "not an address"}, {"requested_by": ["x@y.z"]}]
)
def test_a_missing_or_unusable_sender_records_no_starter(deps: Fakes, body: dict[str, object]):
    assert "started_by" not in _deliver(deps, body, f"d-{len(json.dumps(body))}")


def test_sender_field_is_for_webhooks_and_not_empty() -> None:
    text = EXPENSES.replace(
        "triggers: [{type: webhook, sender_field: requested_by}]",
        "triggers: [{type: manual, sender_field: requested_by}, "
        "{type: webhook, sender_field: ' '}]",
    )
    (plan,) = load_text(text, source="x.yaml", fmt="yaml").workflows
    found = check_workflow(plan, InMemoryLookup([], [plan]), tools=None, providers=None)
    paths = {p.path for p in found.errors}
    assert {"triggers[0].sender_field", "triggers[1].sender_field"} <= paths
