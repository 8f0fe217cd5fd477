"""Shared set-up for the trigger tests: a moto account with a run state machine and workflows."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
from standardwebhooks import Webhook

import langorch
from langorch.app.definitions import register_workflow
from langorch.app.triggers import WebhookRequest
from langorch.composition.container import Container
from langorch.config import Settings
from langorch.domain.loading import load_text
from langorch.llm import LLMRegistry
from tests.support.events import load_event as load_event  # re-exported: the trigger tests

REGION = "us-east-1"

NOW_TS = 1_795_000_005
"""The clock of every test container: 5 s after the recorded deliveries were signed."""
NOW = datetime.fromtimestamp(NOW_TS, UTC)
SECRET = "whsec_bGFuZ29yY2gtaW50ZWdyYXRpb24tdGVzdC1zZWNyZXQ="
"""The secret the recorded webhook fixtures are signed with (Standard Webhooks: ``whsec_`` +
base64 of the key, here ``b"langorch-integration-test-secret"``)."""
TRIGGER_FN = "arn:aws:lambda:us-east-1:123456789012:function:langorch-trigger"
SCHEDULER_ROLE = "arn:aws:iam::123456789012:role/langorch-scheduler"

WORKFLOWS = """
workflows:
  - plan_id: invoices
    memory: false
    triggers: [{type: webhook, input: {source: billing}}]
    inputs_schema:
      properties: {amount: {type: number}, note: {type: string}}
      required: [amount]
    steps:
      - {step_id: total, kind: transform, transform: {total: "amount"}}
  - plan_id: manual_only
    memory: false
    triggers: [{type: manual}]
    steps:
      - {step_id: noop, kind: transform, transform: {x: "1"}}
  - plan_id: json_drop
    memory: false
    triggers: [{type: s3, prefix: invoices/, suffix: .json, input: {format: json}}]
    steps:
      - {step_id: noop, kind: transform, transform: {x: "1"}}
  - plan_id: csv_drop
    memory: false
    triggers: [{type: s3, prefix: invoices/, suffix: .csv}]
    steps:
      - {step_id: noop, kind: transform, transform: {x: "1"}}
  - plan_id: elsewhere_drop
    memory: false
    triggers: [{type: s3, bucket: elsewhere, prefix: invoices/}]
    steps:
      - {step_id: noop, kind: transform, transform: {x: "1"}}
  - plan_id: nightly
    memory: false
    triggers:
      - type: schedule
        schedule: {cron_expression: "0 17 * * 1-5", timezone: Europe/Paris}
        input: {mode: full}
    steps:
      - {step_id: noop, kind: transform, transform: {x: "1"}}
"""


def create_state_machine() -> str:
    """The package's ASL in moto, with dummy function ARNs (executions are created, not run)."""
    text = (Path(langorch.__file__).parent / "statemachine.asl.json").read_text()
    for variable in ("RunSegmentFunctionArn", "RequestApprovalFunctionArn"):
        text = text.replace(
            "${" + variable + "}", f"arn:aws:lambda:{REGION}:123456789012:function:{variable}"
        )
    client = boto3.client("stepfunctions", region_name=REGION)
    response = client.create_state_machine(
        name="langorch-runs",
        definition=text,
        roleArn="arn:aws:iam::123456789012:role/langorch-runs",
    )
    return str(response["stateMachineArn"])


def make_deps(**settings: Any) -> Container:
    """A container on moto (inside ``mock_aws``) with the test workflows and webhook secret."""
    arn = create_state_machine()
    container = Container(
        Settings(
            **{
                "state_machine_arn": arn,
                "trigger_function_arn": TRIGGER_FN,
                "scheduler_role_arn": SCHEDULER_ROLE,
                **settings,
            }
        ),
        clock=lambda: NOW,
        llm=LLMRegistry(default_provider="offline"),
    )
    container.ensure_resources()
    for plan in load_text(WORKFLOWS, source="triggers.yaml", fmt="yaml").workflows:
        register_workflow(container.definitions, plan)
    container.secrets.put_json("langorch/webhooks/invoices", {"current": SECRET})
    return container


def executions(deps: Container) -> list[dict[str, Any]]:
    """Every execution of the run state machine."""
    client = deps.client("stepfunctions")
    found: list[dict[str, Any]] = client.list_executions(
        stateMachineArn=deps.settings.state_machine_arn
    )["executions"]
    return found


def all_runs(deps: Container) -> list[Any]:
    """Every run record, of any workflow."""
    return deps.runs.list_runs(limit=1000)


def signed(
    body: bytes | str,
    *,
    workflow_id: str = "invoices",
    delivery: str = "dlv-1",
    timestamp: int = NOW_TS,
    secret: str = SECRET,
    content_type: str = "application/json",
) -> WebhookRequest:
    """A delivery signed as a sender would sign it: with the official Standard Webhooks library."""
    text = body.decode() if isinstance(body, bytes) else body
    when = datetime.fromtimestamp(timestamp, UTC)
    headers = {
        "webhook-id": delivery,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": Webhook(secret).sign(delivery, when, text),
        "Content-Type": content_type,
    }
    raw = text.encode()
    return WebhookRequest(workflow_id=workflow_id, headers=headers, body=raw)
