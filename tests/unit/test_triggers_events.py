"""Event triggers: an EventBridge event whose pattern matches starts one run per event id.

On fakes; the handler's routing is in ``tests/unit/test_trigger_handler.py`` and the whole path
through ``langorch events send`` and the local bus in ``tests/integration/test_cli_events.py``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from langorch.app.definitions import register_workflow
from langorch.app.triggers import handle_event
from langorch.domain.loading import load_text
from langorch.domain.lookup import InMemoryLookup
from langorch.domain.triggers import EventDelivered, event_envelope, event_kind
from langorch.domain.validation import validate_workflow
from tests.fakes import Fakes
from tests.unit.triggers_support import all_runs, make_deps

FIXTURE = Path(__file__).parents[1] / "fixtures" / "events" / "eventbridge_order_placed.json"

ORDERS = """
workflows:
  - plan_id: big_orders
    memory: false
    triggers:
      - type: event
        pattern:
          source: [shop.orders]
          detail-type: [Order Placed]
          detail: {total: [{numeric: [">=", 100]}]}
        input: {channel: eventbridge}
    steps:
      - {step_id: noop, kind: transform, transform: {x: "1"}}
  - plan_id: audit_all
    memory: false
    triggers:
      - {type: event, bus: audit, event_input: event, pattern: {source: [{prefix: shop.}]}}
    steps:
      - {step_id: noop, kind: transform, transform: {x: "1"}}
"""


def _order(**detail: Any) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(FIXTURE.read_text())
    event["detail"].update(detail)
    return event


@pytest.fixture
def deps() -> Fakes:
    deps = make_deps()
    for plan in load_text(ORDERS, source="orders.yaml", fmt="yaml").workflows:
        register_workflow(deps.definitions, plan)
    return deps


def test_a_matching_event_starts_one_run_even_when_delivered_twice(deps: Fakes):
    # Given the rule's envelope of an order over 100 on the default bus
    envelope = event_envelope("big_orders", "default", _order(total=250))

    # When EventBridge delivers it twice (at least once)
    first = handle_event(EventDelivered.from_lambda_event(envelope), deps)
    again = handle_event(EventDelivered.from_lambda_event(copy.deepcopy(envelope)), deps)

    # Then one run started, with the detail over the trigger's input, and the repeat found it
    runs = all_runs(deps)
    assert [r.workflow_id for r in runs] == ["big_orders"]
    assert runs[0].input["channel"] == "eventbridge"
    assert runs[0].input["order_id"] == "o-1"
    assert runs[0].trigger.type == "event"
    assert runs[0].trigger.detail["event_id"] == "6a7e8feb-b491-4cf7-a9f1-bf3703467718"
    assert [r.created for r in first.started] == [True]
    assert [(r.run_id, r.created) for r in again.started] == [(runs[0].run_id, False)]


def test_an_event_the_pattern_does_not_match_starts_nothing(deps: Fakes):
    # Given a bare EventBridge event of an order under 100
    event = EventDelivered.from_lambda_event(_order(total=20))

    # When it is handled
    outcome = handle_event(event, deps)

    # Then no workflow matched and no run started
    assert outcome.started == []
    assert all_runs(deps) == []


def test_an_event_on_another_bus_starts_only_the_workflows_listening_there(deps: Fakes):
    # Given an order put on the audit bus
    event = EventDelivered(event=_order(total=250), bus="audit")

    # When it is handled
    handle_event(event, deps)

    # Then only the audit workflow ran, with the whole event as its input
    runs = all_runs(deps)
    assert [r.workflow_id for r in runs] == ["audit_all"]
    assert runs[0].input["source"] == "shop.orders"
    assert runs[0].input["detail"]["total"] == 250


def test_the_trigger_function_recognises_the_envelope_and_bare_eventbridge_events():
    # Given an event trigger's envelope and a bare EventBridge event
    bare = _order()

    # When their shapes are told apart
    # Then both are events (an S3 Object Created stays s3)
    assert event_kind(event_envelope("big_orders", "default", bare)) == "event"
    assert event_kind(bare) == "event"
    s3 = {**bare, "source": "aws.s3", "detail-type": "Object Created"}
    assert event_kind(s3) == "s3"


def test_an_event_trigger_without_a_valid_pattern_is_refused_with_its_path():
    # Given a workflow whose event trigger's pattern holds a bare string and a bad bus
    text = """
workflows:
  - plan_id: bad
    triggers: [{type: event, bus: "no spaces", pattern: {source: shop.orders}}]
    steps: [{step_id: noop, kind: transform, transform: {x: "1"}}]
"""
    plan = load_text(text, source="bad.yaml", fmt="yaml").workflows[0]

    # When it is validated
    problems = validate_workflow(plan, InMemoryLookup(), tools=None, providers=None)

    # Then each problem names its path
    paths = {p.path for p in problems}
    assert {"triggers[0].pattern.source", "triggers[0].bus"} <= paths
