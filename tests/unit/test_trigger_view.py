"""``langorch triggers show``'s use-case on fakes: a workflow's triggers and flow control, and
what its recent starts became (started, queued behind a key, dropped and why), counted."""

from __future__ import annotations

from langorch.app.runs import StartRun, launch_run
from langorch.app.trigger_view import show_triggers
from tests.fakes import Fakes
from tests.fakes.approvals import InMemoryApprovals
from tests.integration.conftest import register_text
from tests.support.definitions import workflow

FLOW = workflow(
    "hook",
    concurrency={"limit": 1, "key": "{{ customer_id }}"},
    rate_limit={"limit": 3, "period": "1m", "key": "{{ customer_id }}"},
    throttle={"limit": 9, "period": "1m"},
    triggers=[{"type": "webhook"}],
    inputs={"customer_id": "string"},
).steps("""
      - {step_id: work, kind: transform, transform: {done: "1"}}
""")

PACED = workflow(
    "paced", throttle={"limit": 1, "period": "1m"}, triggers=[{"type": "webhook"}]
).steps("""
      - {step_id: work, kind: transform, transform: {done: "1"}}
""")


def _registered(text: str) -> Fakes:
    """Fakes (with an approvals store) holding the workflow ``text`` defines."""
    deps = Fakes()
    register_text(deps, text)  # type: ignore[arg-type]
    deps.approvals = InMemoryApprovals()  # type: ignore[attr-defined]
    return deps


def test_the_view_counts_started_queued_and_dropped_starts_and_shows_the_keys() -> None:
    # Given a workflow with concurrency 1 and a rate limit of 3 per minute per customer
    deps = _registered(FLOW)
    # When 5 webhook deliveries for customer a arrive at once
    for _ in range(5):
        launch_run(StartRun("hook", input={"customer_id": "a"}, trigger="webhook"), deps)
    # Then the view says 1 running, 2 queued behind the key, 2 dropped by the rate limit
    view = show_triggers("hook", deps)
    assert view.by_trigger == {"webhook": {"cancelled": 2, "queued": 3}}
    assert view.dropped == {"rate limit: 3 per 1m": 2}
    keys = {k.resource: (k.limit, k.held, k.waiting) for k in view.keys}
    assert keys == {
        "concurrency:hook:a": (1, 1, 2),
        "rate:hook:a": (3, 3, 0),
        "throttle:hook:": (9, 3, 0),
    }
    # And the flow control is listed as written, with what is not enforced yet said so
    assert view.flow["rate_limit"] == {
        "spec": {"key": "{{ customer_id }}", "limit": 3, "period": "1m"},
        "enforced": True,
    }
    assert view.flow["throttle"]["enforced"] is True
    assert view.triggers == [{"type": "webhook"}]


def test_the_view_counts_the_starts_a_throttle_delayed_and_shows_its_key() -> None:
    # Given a workflow throttled to 1 start per minute
    deps = _registered(PACED)
    # When 3 webhook deliveries arrive at once
    for _ in range(3):
        launch_run(StartRun("paced", trigger="webhook"), deps)
    # Then the view counts 2 delayed (none dropped) and the key's one slot reserved
    view = show_triggers("paced", deps)
    assert view.delayed == {"throttle": 2} and view.dropped == {}
    assert [(k.resource, k.limit, k.held) for k in view.keys] == [("throttle:paced:", 1, 1)]


DIGEST = workflow("digest", debounce={"period": "30s"}).steps("""
      - {step_id: work, kind: transform, transform: {done: "1"}}
""")


def test_the_view_counts_debounced_starts_per_rule_not_as_drops() -> None:
    # Given a debounced workflow
    deps = _registered(DIGEST)
    # When 20 starts arrive within its period
    for _ in range(20):
        launch_run(StartRun("digest", trigger="webhook"), deps)
        deps.clock.advance(0.25)
    # Then the 19 replaced starts are counted under debounce, once, not as 19 drops
    view = show_triggers("digest", deps)
    assert (view.merged, view.dropped) == ({"debounce": 19}, {})
