"""Each function's role allows exactly the AWS calls its code can make: nothing missing, nothing
extra. The calls are derived from the source (``tests/infra/aws_calls.py``), so a new adapter
call without a grant — or a grant no code uses — fails here, not in a deployed run.
"""

from __future__ import annotations

import pytest

from langorch.adapters.dynamodb.approvals._items import AUDIT_PARTITION_PREFIX
from tests.infra.aws_calls import REPO, Call, function_calls, handler_uses, wrapped_uses
from tests.infra.conftest import Synth
from tests.infra.helpers import actions_on, denials, function_role, render, role_statements

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


def _denied(synth: Synth, name: str) -> list[dict[str, object]]:
    function = synth.stack.functions.all[name]
    role = function_role(synth.resources, synth.logical_id(function))
    return denials(role_statements(synth.resources, role))


def _reads_audit(name: str) -> bool:
    uses = wrapped_uses(handler_uses(REPO / "functions" / HANDLERS[name] / "handler.py"))
    return ("approvals", "audit") in uses


def test_the_derivation_sees_who_appends_and_who_reads_the_audit_trail() -> None:
    # A guard on the analysis the audit test below relies on
    appends = {
        name
        for name, handler in HANDLERS.items()
        if ("approvals", "append_audit")
        in wrapped_uses(handler_uses(REPO / "functions" / handler / "handler.py"))
    }
    assert appends == set(HANDLERS)
    assert {name for name in HANDLERS if _reads_audit(name)} == {
        "request-approval",
        "approval-callback",
        "trigger",  # its timers post reminders and escalations into the Slack threads
    }


@pytest.mark.parametrize("name", list(HANDLERS))
def test_audit_lines_are_append_only_and_unreadable_by_roles_whose_code_never_reads_them(
    synth: Synth, name: str
) -> None:
    # Given the role's Deny statements and whether its code reads an approval's audit trail
    runs = f"<{synth.logical_id(synth.stack.tables.runs)}.Arn>"
    reads = {"dynamodb:GetItem", "dynamodb:Query", "dynamodb:BatchGetItem"}
    writes = {"dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"}
    expected = writes if _reads_audit(name) else writes | reads
    # Then one statement denies exactly those on the runs table's audit partitions (PutItem,
    # the append, stays allowed)
    (deny,) = _denied(synth, name)
    assert deny["Action"] == sorted(expected)
    assert render(deny["Resource"]) == runs
    assert deny["Condition"] == {
        "ForAnyValue:StringLike": {"dynamodb:LeadingKeys": [f"{AUDIT_PARTITION_PREFIX}*"]}
    }
    assert "dynamodb:PutItem" not in deny["Action"]


def test_send_task_success_is_held_only_by_roles_whose_code_sends_it(synth: Synth) -> None:
    # Task tokens name no state machine, so the grant is on "*"; what keeps it contained is
    # that no role holds it without code that calls it
    for name in HANDLERS:
        sends = any("states:SendTaskSuccess" in c.actions for c in _calls(name))
        assert ("states:SendTaskSuccess" in _granted(synth, name)) == sends, name
