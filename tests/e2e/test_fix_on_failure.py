"""A person fixes a failed step on the local stack (issue 28 item 4, seed 000 verification 6).

``langorch dev`` in this process: a signed webhook starts a run whose step fails; instead of
failing, the run parks on an approval whose email lands in the outbox; its link's page shows
the error and the step's input; the person retries with the input corrected, and the run
resumes in the emulator's Step Functions and succeeds. Nothing inside langorch is replaced.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from langorch.composition.bootstrap import build_container
from langorch.composition.container import Container
from langorch.domain.runs import TimelineEventType
from langorch.local.stack import LocalStack, free_port, start_local_stack
from tests.e2e.test_walkthrough import (
    APPROVER,
    decide,
    deliver,
    email_for,
    request,
    run_in,
    wait_for,
)

DEFINITIONS = """
workflows:
  - plan_id: e2e_unit_price
    triggers: [{type: webhook}]
    approvers: [approver@example.com]
    memory: false
    inputs_schema:
      properties: {total: {type: number}, quantity: {type: integer}}
      required: [total, quantity]
    steps:
      - step_id: divide
        kind: transform
        transform: {unit_price: "total / quantity"}
        on_error: ask
      - step_id: label
        kind: transform
        depends_on: [divide]
        transform: {label: "'unit price: ' ~ unit_price"}
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """`langorch dev` in this process, with the workflow registered."""
    from langorch.app.trigger_sync import register_and_sync

    home = tmp_path_factory.mktemp("fix") / ".langorch"
    running = start_local_stack(home=home, port=free_port(), examples=None)
    definitions = home / "fix.yaml"
    definitions.write_text(DEFINITIONS)
    register_and_sync([definitions], build_container(running.settings))
    yield running
    running.stop()


@pytest.fixture
def container(stack: LocalStack) -> Container:
    return build_container(stack.settings)


def test_a_failed_step_fixed_by_a_person_on_its_emailed_page_lets_the_run_succeed(
    stack: LocalStack, container: Container
):
    # Given a run whose `divide` step fails (quantity 0)
    status, answer = deliver(stack, container, "e2e_unit_price", {"total": 90, "quantity": 0})
    assert status == 202, answer
    run_id = answer["run_id"]

    # When it has run: it waits for a person instead of failing, and their email says why
    wait_for("the run to ask", lambda: run_in(container, run_id, "waiting_approval"))
    mail = email_for(stack, run_id, container)
    assert mail["subject"].startswith("Fix needed: ")
    assert "division by zero" in mail["text"]

    # And the emailed page shows the error, the step's input and the three choices
    status, page = request(mail["link"])
    assert status == 200
    assert b"division by zero" in page and b'name="edit.input.quantity"' in page
    buttons = re.findall(rb'<button[^>]*name="decision"\s+value="(\w+)"', page)
    assert buttons == [b"retry", b"skip", b"fail"]

    # When the person retries with the quantity corrected
    status, said = decide(
        mail["link"], "retry", stack.settings.approval_form_dwell_seconds, **{"input.quantity": "3"}
    )
    assert status == 200 and "You retried the step" in said

    # Then the run resumes, runs the step again with it, and succeeds
    run = wait_for("the run to succeed", lambda: run_in(container, run_id, "succeeded"))
    assert run.outputs["unit_price"] == 30.0 and run.outputs["label"] == "unit price: 30.0"
    # And the timeline says who chose the retry, and where
    [decided] = [
        e
        for e in container.runs.get_timeline(run_id)
        if e.type is TimelineEventType.approval_decided
    ]
    assert decided.actor == APPROVER
    assert decided.detail["fix"] == {"choice": "retry", "via": "link"}
