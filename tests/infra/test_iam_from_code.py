"""Each function's role allows exactly the AWS calls its code can make: nothing missing, nothing
extra. The calls are derived from the source (``tests/infra/aws_calls.py``), so a new adapter
call without a grant — or a grant no code uses — fails here, not in a deployed run.
"""

from __future__ import annotations

import pytest

from tests.infra.aws_calls import REPO, Call, function_calls
from tests.infra.conftest import Synth
from tests.infra.helpers import actions_on, function_role, role_statements

HANDLERS = {
    "trigger": "trigger",
    "run-segment": "run_segment",
    "request-approval": "request_approval",
    "approval-callback": "approval_callback",
}
TABLES = {
    "definitions_table": "definitions",
    "runs_table": "runs",
    "checkpoints_table": "checkpoints",
    "memory_table": "memory",
}
NOT_FROM_CODE = {
    # Lambda writes the function's logs and active tracing sends its segments.
    "logs:CreateLogStream",
    "logs:PutLogEvents",
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "xray:GetSamplingRules",
    "xray:GetSamplingTargets",
}
STARTED_WITH_THE_STATE_MACHINE = {"trigger": {"states:StartExecution"}}
PASSED_TO_THE_SCHEDULER = {
    # CreateSchedule/UpdateSchedule hand the Scheduler its role (approvals' wake-ups): IAM
    # authorizes that as iam:PassRole, which no client call names.
    name: {"iam:PassRole"}
    for name in ("trigger", "request-approval", "approval-callback")
}
LAMBDA_ON_THE_FUNCTIONS_BEHALF = {
    # The trigger's asynchronous invocations that fail every attempt go to its DLQ: Lambda
    # sends them with the function's role (an on-failure destination), not our code.
    "trigger": {"sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"},
}


def _calls(name: str) -> set[Call]:
    return function_calls(REPO / "functions" / HANDLERS[name] / "handler.py")


def _granted(synth: Synth, name: str) -> dict[str, set[str]]:
    function = synth.stack.functions.all[name]
    role = function_role(synth.resources, synth.logical_id(function))
    return actions_on(role_statements(synth.resources, role))


def test_the_derivation_sees_the_calls_the_code_is_known_to_make() -> None:
    # A guard on the analysis itself: if it stopped following the code, every set would
    # shrink together and the equality tests below could pass on nothing.
    trigger = {a for c in _calls("trigger") for a in c.actions}
    assert {"states:StartExecution", "dynamodb:PutItem", "secretsmanager:GetSecretValue"} <= trigger
    runner = {(a, c.table) for c in _calls("run-segment") for a in c.actions}
    assert ("dynamodb:UpdateItem", "runs_table") in runner  # the lease
    assert ("dynamodb:BatchWriteItem", "checkpoints_table") in runner  # LangGraph's saver
    assert ("s3:PutObject", None) in runner  # checkpoint offload
    assert ("bedrock:InvokeModel", None) in runner
    callback = {a for c in _calls("approval-callback") for a in c.actions}
    assert "states:SendTaskSuccess" in callback
    assert "states:SendTaskFailure" not in callback
    assert "ses:SendEmail" in {a for c in _calls("request-approval") for a in c.actions}


@pytest.mark.parametrize("name", list(HANDLERS))
def test_role_allows_exactly_the_calls_the_code_makes(synth: Synth, name: str) -> None:
    # Given the calls derived from the handler's code and the role CDK synthesized
    needed = {a for c in _calls(name) for a in c.actions}
    needed |= STARTED_WITH_THE_STATE_MACHINE.get(name, set())
    needed |= PASSED_TO_THE_SCHEDULER.get(name, set())
    granted = set(_granted(synth, name)) - NOT_FROM_CODE
    granted -= LAMBDA_ON_THE_FUNCTIONS_BEHALF.get(name, set())
    # Then every call is allowed, and nothing else is (Bedrock's first-use Marketplace
    # actions are only granted when product ids are configured; not in this stack)
    assert sorted(needed - granted) == [], "calls without a grant"
    assert sorted(granted - needed) == [], "grants no code uses"


@pytest.mark.parametrize("name", list(HANDLERS))
def test_each_table_allows_exactly_the_calls_made_on_it(synth: Synth, name: str) -> None:
    # Given the DynamoDB calls per table and the role's actions per table ARN
    needed: dict[str, set[str]] = {}
    for call in _calls(name):
        if call.service == "dynamodb":
            assert call.table is not None, call
            needed.setdefault(TABLES[call.table], set()).update(call.actions)
    granted: dict[str, set[str]] = {}
    for action, resources in _granted(synth, name).items():
        for table in TABLES.values():
            arn = f"<{synth.logical_id(getattr(synth.stack.tables, table))}.Arn>"
            if arn in resources:
                granted.setdefault(table, set()).add(action)
    # Then each table gets exactly what is called on it
    assert granted == needed
