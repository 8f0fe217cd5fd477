"""Webhooks start runs: signed the Standard Webhooks way, within the window, once per delivery id
(``webhook-id``), and never on a 4xx.

On fakes (``tests/fakes``); the moto-backed wiring is in ``tests/integration/test_trigger_handler``.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from langorch.app.trigger_sync import rotate_webhook_secret
from langorch.app.triggers import WebhookRequest
from langorch.domain.webhooks import SIGNATURE_HEADER, format_secret, standard_secret
from tests.fakes import Fakes
from tests.integration.triggers_support import NOW_TS, SECRET, signed
from tests.unit.triggers_support import all_runs, executions, make_deps, webhook_answer

BODY = '{"amount": 42, "note": "ok"}'
OTHER_SECRET = format_secret(b"not-the-workflow-secret")
ROTATED = format_secret(b"the-rotated-secret")


@pytest.fixture
def deps() -> Fakes:
    return make_deps()


def test_a_signed_delivery_starts_one_run_and_its_execution(deps: Fakes):
    # Given a signed delivery for a workflow with a webhook trigger
    request = signed(BODY, delivery="dlv-1")

    # When it arrives
    status, body = webhook_answer(request, deps)

    # Then it is accepted with the new run's id, and the run's execution is named by it
    assert status == 202
    assert body["created"] is True
    run = deps.runs.get_run(body["run_id"])
    assert run.trigger.type == "webhook"
    assert run.input == {"source": "billing", "amount": 42, "note": "ok"}
    assert [e["name"] for e in executions(deps)] == [body["run_id"]]


def test_the_run_records_the_delivery_but_never_the_signature(deps: Fakes):
    # Given a signed delivery
    request = signed(BODY, delivery="dlv-audit")
    signature = request.headers[SIGNATURE_HEADER].partition(",")[2]
    assert signature

    # When it starts a run
    _, body = webhook_answer(request, deps)

    # Then the trigger detail names the delivery and the signature is nowhere in the record
    run = deps.runs.get_run(body["run_id"])
    assert run.trigger.detail["delivery_id"] == "dlv-audit"
    assert signature not in run.model_dump_json()


def test_a_duplicate_delivery_returns_the_same_run_and_starts_nothing(deps: Fakes):
    # Given a delivery that was accepted
    _, first = webhook_answer(signed(BODY, delivery="dlv-dup"), deps)

    # When the sender retries it (same delivery id, signed again a little later)
    status, second = webhook_answer(signed(BODY, delivery="dlv-dup", timestamp=NOW_TS + 3), deps)

    # Then the answer is the same run, not created, and there is one run and one execution
    assert status == 202
    assert second == {"run_id": first["run_id"], "created": False}
    assert len(all_runs(deps)) == 1
    assert len(executions(deps)) == 1


def _bad_signature() -> WebhookRequest:
    return signed(BODY, secret=OTHER_SECRET)


def _stale() -> WebhookRequest:
    return signed(BODY, timestamp=NOW_TS - 301)


def _from_the_future() -> WebhookRequest:
    return signed(BODY, timestamp=NOW_TS + 301)


def _unsigned() -> WebhookRequest:
    request = signed(BODY)
    headers = {k: v for k, v in request.headers.items() if k != SIGNATURE_HEADER}
    return WebhookRequest(request.workflow_id, headers, request.body)


def _old_headers() -> WebhookRequest:
    # A sender that still signs the pre-Standard-Webhooks way.
    headers = {
        "Content-Type": "application/json",
        "X-Langorch-Delivery": "dlv-1",
        "X-Langorch-Timestamp": str(NOW_TS),
        "X-Langorch-Signature": "v1=" + "0" * 64,
    }
    return WebhookRequest("invoices", headers, BODY.encode())


def _tampered() -> WebhookRequest:
    request = signed(BODY)
    return WebhookRequest(request.workflow_id, request.headers, BODY.replace("42", "4200").encode())


def _unknown_workflow() -> WebhookRequest:
    # Signed with another workflow's secret: no secret of "nope" verifies it.
    return signed(BODY, workflow_id="nope")


def _no_webhook_trigger() -> WebhookRequest:
    return signed(BODY, workflow_id="manual_only")


def _oversized() -> WebhookRequest:
    return signed(json.dumps({"amount": 1, "pad": "x" * 300_000}))


def _not_json() -> WebhookRequest:
    return signed("amount=42")


def _wrong_media_type() -> WebhookRequest:
    return signed(BODY, content_type="text/plain")


def _invalid_input() -> WebhookRequest:
    return signed('{"amount": "lots"}')


def _not_an_object() -> WebhookRequest:
    return signed("[1, 2, 3]")


@pytest.mark.parametrize(
    ("make", "status"),
    [
        (_bad_signature, 401),
        (_stale, 401),
        (_from_the_future, 401),
        (_unsigned, 401),
        (_old_headers, 401),
        (_tampered, 401),
        (_unknown_workflow, 401),
        (_no_webhook_trigger, 401),
        (_oversized, 413),
        (_not_json, 415),
        (_wrong_media_type, 415),
        (_invalid_input, 422),
        (_not_an_object, 422),
    ],
)
def test_a_refused_delivery_gets_its_4xx_and_starts_nothing(
    deps: Fakes, make: Callable[[], WebhookRequest], status: int
):
    # Given a delivery that fails one check
    request = make()

    # When it arrives
    got, body = webhook_answer(request, deps)

    # Then it gets that check's status with a JSON error, and no run or execution exists
    assert got == status
    assert isinstance(body["error"], str) and body["error"]
    assert all_runs(deps) == []
    assert executions(deps) == []


def test_invalid_input_is_answered_with_the_field_paths(deps: Fakes):
    # Given a delivery whose input breaks the inputs schema in two places
    request = signed('{"note": 7}')

    # When it arrives
    status, body = webhook_answer(request, deps)

    # Then the 422 names each field
    assert status == 422
    assert {p["path"] for p in body["problems"]} == {"input.amount", "input.note"}


@pytest.mark.parametrize("signing", ["unsigned", "signed with a guessed secret"])
def test_an_unknown_workflow_answers_exactly_as_a_real_one(deps: Fakes, signing: str):
    # Given a prober's delivery, sent to a real workflow id and to an unknown one
    def probe(workflow_id: str) -> WebhookRequest:
        request = signed(BODY, workflow_id=workflow_id, secret=OTHER_SECRET)
        if signing == "unsigned":
            headers = {k: v for k, v in request.headers.items() if k != SIGNATURE_HEADER}
            request = WebhookRequest(workflow_id, headers, request.body)
        return request

    # When both arrive
    real = webhook_answer(probe("invoices"), deps)
    unknown = webhook_answer(probe("payroll"), deps)

    # Then both get the same 401 and the same words (before: 404 "no workflow 'payroll'")
    assert unknown == real
    assert unknown[0] == 401


def test_a_workflow_is_named_missing_only_to_a_delivery_signed_with_its_secret(deps: Fakes):
    # Given a secret left for workflow "retired", whose workflow is no longer stored
    retired = format_secret(b"the-retired-workflow-secret")
    deps.secrets.put_json("langorch/webhooks/retired", {"current": retired})

    # When a delivery signed with it arrives, and one signed with another secret
    signed_right = webhook_answer(signed(BODY, workflow_id="retired", secret=retired), deps)
    signed_wrong = webhook_answer(signed(BODY, workflow_id="retired", secret=OTHER_SECRET), deps)

    # Then the signed sender is told clearly that there is no such workflow; the other is not
    assert signed_right[0] == 404 and "no workflow 'retired'" in signed_right[1]["error"]
    assert signed_wrong[0] == 401
    assert all_runs(deps) == []


def test_checks_run_in_order_size_before_media_type_before_workflow(deps: Fakes):
    # Given an oversized, non-JSON delivery for an unknown workflow
    request = signed("x" * 300_000, workflow_id="nope", content_type="text/plain")

    # When it arrives
    status, _ = webhook_answer(request, deps)

    # Then the size is what is reported
    assert status == 413


def test_after_rotation_both_the_new_and_the_previous_secret_verify(deps: Fakes):
    # Given a sender using the current secret (the trigger has it cached)
    assert webhook_answer(signed(BODY, delivery="before"), deps)[0] == 202

    # When the secret is rotated
    new = rotate_webhook_secret("invoices", deps, new_secret=lambda: ROTATED)

    # Then the new secret verifies at once, and the previous one still does
    assert new == ROTATED
    assert webhook_answer(signed(BODY, delivery="new", secret=new), deps)[0] == 202
    assert webhook_answer(signed(BODY, delivery="old", secret=SECRET), deps)[0] == 202
    assert deps.secrets.get_json("langorch/webhooks/invoices", fresh=True) == {
        "current": ROTATED,
        "previous": SECRET,
    }


def test_a_secret_rotated_twice_no_longer_accepts_the_first(deps: Fakes):
    # Given two rotations
    rotate_webhook_secret("invoices", deps, new_secret=lambda: format_secret(b"two"))
    rotate_webhook_secret("invoices", deps, new_secret=lambda: format_secret(b"three"))

    # When the original secret signs a delivery to a trigger function that reads the secret
    # now (a new sandbox; a warm one may use its cached copy for up to five minutes)
    sandbox = deps.another_process()
    status, _ = webhook_answer(signed(BODY, delivery="ancient", secret=SECRET), sandbox)

    # Then it is refused
    assert status == 401


def test_a_webhook_workflow_without_a_secret_is_refused_with_how_to_fix_it(deps: Fakes):
    # Given a workflow with a webhook trigger whose secret was never created
    deps.secrets.delete("langorch/webhooks/invoices")

    # When a delivery arrives
    status, body = webhook_answer(signed(BODY), deps)

    # Then it is a 401 that says how to create the secret
    assert status == 401
    assert "rotate-secret" in body["error"]


def test_an_old_sender_is_told_the_endpoint_now_speaks_standard_webhooks(deps: Fakes):
    # Given a sender still sending the X-Langorch-* headers
    request = _old_headers()

    # When its delivery arrives
    status, body = webhook_answer(request, deps)

    # Then the 401 says which headers to send instead
    assert status == 401
    assert "webhook-signature" in body["error"] and "Standard Webhooks" in body["error"]


def test_a_secret_stored_before_standard_webhooks_keeps_working_until_rotated(deps: Fakes):
    # Given a running stack whose stored secret predates Standard Webhooks (no whsec_ prefix)
    legacy = "pre-standard-webhooks_token_urlsafe"
    deps.secrets.put_json("langorch/webhooks/invoices", {"current": legacy})
    sandbox = deps.another_process()

    # When a sender signs with its whsec_ form (the secret's text as the key)
    status, _ = webhook_answer(
        signed(BODY, delivery="legacy", secret=standard_secret(legacy)), sandbox
    )

    # Then it is accepted; after a rotation the new secret works and the legacy one still does
    assert status == 202
    new = rotate_webhook_secret("invoices", sandbox)
    assert new.startswith("whsec_")
    assert webhook_answer(signed(BODY, delivery="new", secret=new), sandbox)[0] == 202
    assert (
        webhook_answer(signed(BODY, delivery="legacy-2", secret=standard_secret(legacy)), sandbox)[
            0
        ]
        == 202
    )
